/* The bounded line reader (line_reader.h). The front that was handed out is dropped only when
 * n bytes more would not fit in the buffer as it is, and then only once it is at least half
 * the buffer (else the buffer grows), so a line costs amortised O(1) per byte however large
 * the backlog, and a reader that keeps a piece of a line between reads moves it once per
 * buffer's worth of reads, not once a read: moving the rest down after each line taken past
 * the half, or before each read, copied every byte of a flood once more (3% of the
 * controller, issue 32 part 3). A line that line_reader_next handed out by pointer stays put
 * until the next call. */
#include "line_reader.h"

#include <string.h>

void line_reader_init(struct line_reader *r, size_t max_line)
{
    strbuf_init(&r->data);
    r->off = 0;
    r->max_line = max_line;
    r->skip = false;
}

void line_reader_done(struct line_reader *r)
{
    strbuf_done(&r->data);
    r->off = 0;
    r->skip = false;
}

void line_reader_reset(struct line_reader *r)
{
    strbuf_reset(&r->data);
    r->off = 0;
    r->skip = false;
}

/* Makes room for n bytes more: drops what was handed out when they would not fit and that
 * pays (see the banner); the buffer grows otherwise. */
static void make_room(struct line_reader *r, size_t n)
{
    if (r->off && r->off == r->data.len) {
        strbuf_reset(&r->data);     /* everything handed out: nothing to move */
        r->off = 0;
    } else if (r->off && r->data.len + n + 1 > r->data.cap && r->off > r->data.len / 2) {
        strbuf_consume(&r->data, r->off);
        r->off = 0;
    }
    strbuf_reserve(&r->data, n);
}

/* After a line was taken: everything handed out costs nothing to drop. */
static void drop_if_all_taken(struct line_reader *r)
{
    if (r->off && r->off == r->data.len) {
        strbuf_reset(&r->data);
        r->off = 0;
    }
}

void line_reader_add(struct line_reader *r, const void *p, size_t n)
{
    make_room(r, n);
    strbuf_add(&r->data, p, n);
}

char *line_reader_space(struct line_reader *r, size_t n)
{
    make_room(r, n);
    return r->data.buf + r->data.len;
}

void line_reader_wrote(struct line_reader *r, size_t n)
{
    r->data.len += n;
    r->data.buf[r->data.len] = '\0';
}

/* The '\n' that ends the line at off, looked for in at most `within` bytes; NULL: none. */
static char *line_end(const struct line_reader *r, size_t within)
{
    size_t left = line_reader_pending(r);
    if (within > left) within = left;
    return within ? memchr(r->data.buf + r->off, '\n', within) : NULL;
}

enum line_got line_reader_next(struct line_reader *r, char **p, size_t *n)
{
    char *nl;
    drop_if_all_taken(r);
    while (r->skip) {
        nl = line_end(r, line_reader_pending(r));
        if (!nl) {
            r->off = r->data.len; /* the middle of a line too long: nothing of it is kept */
            return LINE_NONE;
        }
        r->off = (size_t)(nl - r->data.buf) + 1;
        r->skip = false;
    }
    *p = r->data.buf + r->off;
    nl = line_end(r, r->max_line + 1);
    if (nl) {
        *n = (size_t)(nl - *p);
        *nl = '\0';
        r->off += *n + 1;
        return LINE_WHOLE;
    }
    if (line_reader_pending(r) <= r->max_line) return LINE_NONE;
    /* longer than any line may be: its head is handed out, the rest dropped up to its end */
    *n = r->max_line;
    r->off += r->max_line;
    r->skip = true;
    (*p)[*n] = '\0'; /* a byte of the dropped rest: see line_reader.h */
    return LINE_LONG;
}

bool line_reader_overlong(const struct line_reader *r)
{
    return !r->skip && line_reader_pending(r) > r->max_line && !line_end(r, r->max_line + 1);
}

/* The whole line at off (without its '\n'), unless skipping or too long; *n its length. */
static const char *whole_line(const struct line_reader *r, size_t *n)
{
    const char *nl = r->skip ? NULL : line_end(r, r->max_line + 1);
    if (!nl) return NULL;
    *n = (size_t)(nl - (r->data.buf + r->off));
    return r->data.buf + r->off;
}

bool line_reader_ready(const struct line_reader *r)
{
    size_t n;
    return whole_line(r, &n) != NULL;
}

char *line_reader_take(struct line_reader *r)
{
    size_t n;
    const char *p = whole_line(r, &n);
    if (!p) return NULL;
    char *line = xstrndup(p, n);
    r->off += n + 1;
    drop_if_all_taken(r);
    return line;
}

bool line_reader_next_into(struct line_reader *r, struct strbuf *out)
{
    size_t n;
    const char *p = whole_line(r, &n);
    if (!p) return false;
    strbuf_reset(out);
    strbuf_add(out, p, n);
    r->off += n + 1;
    drop_if_all_taken(r);
    return true;
}

bool line_reader_peek(const struct line_reader *r, struct strbuf *out)
{
    size_t n;
    const char *p = whole_line(r, &n);
    if (!p) return false;
    strbuf_reset(out);
    strbuf_add(out, p, n);
    return true;
}
