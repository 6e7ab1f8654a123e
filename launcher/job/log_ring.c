/* A rank's last log lines in memory (log_ring.h). */
#include "log_ring.h"

#include <stdlib.h>

#include "util/util.h"

/* Index of the i-th oldest line (i < cap): head + i wraps at most once, so no division (three
 * per line kept, in a flood of hundreds of thousands of lines a second). */
static size_t slot(const struct log_ring *r, size_t i)
{
    size_t k = r->head + i;
    return k >= r->cap ? k - r->cap : k;
}

static void log_ring_drop_oldest(struct log_ring *r)
{
    struct log_line *l = &r->lines[r->head];
    r->bytes -= l->len;
    if (l->flags & LOG_LINE_NCCL) r->nccl--;
    if (r->spare) free(r->spare);   /* mostly taken by log_ring_text_buf already */
    r->spare = l->text;
    r->spare_room = (size_t)l->len + 1;
    l->text = NULL;
    if (++r->head == r->cap) r->head = 0;
    r->count--;
}

/* Re-lays the ring out from index 0 in an array of new_cap (>= count). */
static void log_ring_realloc(struct log_ring *r, size_t new_cap)
{
    struct log_line *n = xcalloc(new_cap, sizeof *n);
    for (size_t i = 0; i < r->count; i++) n[i] = r->lines[(r->head + i) % r->cap];
    free(r->lines);
    r->lines = n;
    r->cap = new_cap;
    r->head = 0;
}

void log_ring_set_limits(struct log_ring *r, size_t max_lines, size_t max_bytes)
{
    r->max_lines = max_lines ? max_lines : 1;
    r->max_bytes = max_bytes ? max_bytes : 1;
    while (r->count && (r->count > r->max_lines || r->bytes > r->max_bytes))
        log_ring_drop_oldest(r);
    if (r->cap > r->max_lines) log_ring_realloc(r, r->max_lines);
}

void log_ring_push(struct log_ring *r, struct log_line *line)
{
    if (line->len > r->max_bytes) {        /* one huge line: keep its head only */
        line->len = (uint32_t)r->max_bytes;
        line->text[line->len] = '\0';
        line->flags |= LOG_LINE_TRUNCATED;
    }
    while (r->count && (r->count >= r->max_lines || r->bytes + line->len > r->max_bytes))
        log_ring_drop_oldest(r);
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        if (cap > r->max_lines) cap = r->max_lines;
        log_ring_realloc(r, cap);
    }
    r->lines[slot(r, r->count)] = *line;
    r->count++;
    r->bytes += line->len;
    if (line->flags & LOG_LINE_NCCL) r->nccl++;
    r->total++;
}

char *log_ring_text_buf(struct log_ring *r, size_t n)
{
    char *buf = r->spare;
    r->spare = NULL;
    /* lines of one rank are mostly alike in length: the buffer as it is, without a realloc
     * (a larger buffer kept for a shorter line holds no more than the ring once held) */
    if (buf && r->spare_room >= n + 1) return buf;
    return xrealloc(buf, n + 1);
}

void log_ring_free(struct log_ring *r)
{
    while (r->count) log_ring_drop_oldest(r);
    free(r->spare);
    r->spare = NULL;
    free(r->lines);
    r->lines = NULL;
    r->cap = r->head = 0;
}

const struct log_line *log_ring_at(const struct log_ring *r, size_t i)
{
    if (!r || i >= r->count) return NULL;
    return &r->lines[slot(r, i)];
}
