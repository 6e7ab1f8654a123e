/* The one bounded reader of lines from another process: the bytes an agent, srun or a
 * direct connection sent go in as they come, whole lines come out. Every transport reads
 * through it (ssh/ssh_stream.c, ssh/transport_child.c, ssh/srun_step*.c), so the bounds of
 * wire/protocol.h are kept in one place: a line of at most max_line bytes is handed out; a
 * longer one is either refused where it stands (line_reader_overlong: the transport fails the
 * node, as the protocol says) or, read with line_reader_next, handed out cut to max_line while
 * the rest of it is dropped as it arrives. What is unread (line_reader_pending) is what a
 * transport holds against PROTOCOL_BACKLOG_MAX before it stops reading. No I/O here. */
#ifndef DDPTOP_LINE_READER_H
#define DDPTOP_LINE_READER_H

#include <stdbool.h>
#include <stddef.h>

#include "util/util.h"

struct line_reader {
    struct strbuf data;  /* bytes received; those before off were handed out */
    size_t off;
    size_t max_line;     /* the longest line handed out whole */
    bool skip;           /* the rest of a line longer than max_line is dropped up to its '\n' */
};

void line_reader_init(struct line_reader *r, size_t max_line);
void line_reader_done(struct line_reader *r);
/* Everything unread forgotten (a connection that ended, a step started again). */
void line_reader_reset(struct line_reader *r);

/* Bytes received and not handed out yet. */
static inline size_t line_reader_pending(const struct line_reader *r)
{
    return r->data.len - r->off;
}

/* Appends n bytes. */
void line_reader_add(struct line_reader *r, const void *p, size_t n);
/* Room for n more bytes at the end, for a read straight into it (no copy of a flood); then
 * line_reader_wrote says how many came. */
char *line_reader_space(struct line_reader *r, size_t n);
void line_reader_wrote(struct line_reader *r, size_t n);

enum line_got {
    LINE_NONE,   /* no whole line yet */
    LINE_WHOLE,  /* a line of at most max_line bytes */
    LINE_LONG,   /* a longer one: its first max_line bytes; the rest is dropped as it comes */
};
/* The next line at *p, *n bytes without its '\n', NUL-terminated in place: p[n] may be
 * written by the caller (a '\n' put back to log the line whole). Valid until the next call on
 * the reader. */
enum line_got line_reader_next(struct line_reader *r, char **p, size_t *n);

/* For a transport that refuses long lines: whether the unread bytes begin with a line longer
 * than max_line (its '\n' not within max_line + 1 bytes). Such a line is never handed out by
 * the two calls below. */
bool line_reader_overlong(const struct line_reader *r);
/* Whether a whole line waits. */
bool line_reader_ready(const struct line_reader *r);
/* The next whole line, malloc'd, or NULL. */
char *line_reader_take(struct line_reader *r);
/* The same into out (reset first, NUL-terminated): no allocation once out is large enough,
 * for the run's loop, which takes thousands of lines a second. false: none now. */
bool line_reader_next_into(struct line_reader *r, struct strbuf *out);
/* The first whole line without taking it (a probe's answer that may be the agent's hello),
 * NUL-terminated copy in out; false: none yet. */
bool line_reader_peek(const struct line_reader *r, struct strbuf *out);

#endif
