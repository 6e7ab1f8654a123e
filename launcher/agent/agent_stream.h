/* A rank's output stream as the agent forwards it: raw bytes in, "out" blocks out, each one
 * message: all the whole lines one read completed (up to 64 KiB of them, newlines kept), or one
 * piece of a line: a 64 KiB piece of a longer line, or a partial line that waited 200 ms. Plus
 * the text checks the out messages need (UTF-8, JSON string). Pure functions, no I/O, so the
 * unit test drives them directly. docs/protocol.md, "Run requests", says what the controller
 * sees. */
#ifndef DDPTOP_AGENT_STREAM_H
#define DDPTOP_AGENT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define STREAM_PIECE_MAX 65536 /* longest piece of one line; a block of whole lines holds at
                                  * most this much and one newline more */
#define STREAM_PARTIAL_MS 200  /* a line with no newline yet is sent after waiting this long */

#define STREAM_PARTIAL 0x1     /* "p": no newline ended this piece (yet) */
#define STREAM_SPLIT 0x2       /* "s": a piece of a longer line; more of it follows */

struct stream_buf {
    struct strbuf buf;      /* bytes of the current line not sent yet */
    size_t scanned;         /* prefix of buf known to hold no '\n' */
    int64_t first_ms;       /* mono_ms() when the oldest byte in buf arrived; 0 when empty */
};

/* Called for each block: flags 0, data holds one or more whole lines, each ending with its
 * '\n'; or one piece of a line (no '\n' in it), flags STREAM_SPLIT or STREAM_PARTIAL. */
typedef void (*stream_piece_fn)(void *ctx, const char *data, size_t len, int flags);

void stream_init(struct stream_buf *s);
void stream_done(struct stream_buf *s);
/* Takes n bytes the rank wrote at now_ms; emits the lines they complete (as few blocks as the
 * 64 KiB bound allows) and every 64 KiB piece of a line that grew longer. */
void stream_feed(struct stream_buf *s, const char *data, size_t n, int64_t now_ms,
                 stream_piece_fn fn, void *ctx);
/* Emits what is buffered as one partial piece (nothing when empty): at EOF, or when
 * stream_deadline has passed. */
void stream_flush(struct stream_buf *s, stream_piece_fn fn, void *ctx);
/* Starts the buffered partial line's 200 ms wait again from now_ms: after a pause of the
 * agent's own (back-pressure), during which the rest of the line may have reached the pipe. */
void stream_rewait(struct stream_buf *s, int64_t now_ms);
/* When the buffered partial line is due (mono_ms clock), or 0 when nothing is buffered. */
int64_t stream_deadline(const struct stream_buf *s);

/* Whether s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF) with
 * no NUL byte: such text can travel as a JSON string and come back byte for byte. */
int stream_utf8_valid(const char *s, size_t n);
/* Appends s[0..n) as a quoted JSON string when it passes stream_utf8_valid, and returns 1;
 * returns 0 with sb as it was when it does not. One pass for both: rank output is framed
 * here, every byte of it. */
int stream_json_text(struct strbuf *sb, const char *s, size_t n);
/* Appends s[0..n) with each byte that is not part of valid UTF-8, and each NUL, replaced by
 * '?': for text from other programs (gdb, /proc) that must be a JSON string. */
void stream_sanitize(struct strbuf *sb, const char *s, size_t n);

#endif
