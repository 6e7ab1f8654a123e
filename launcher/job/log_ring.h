/* A rank's last log lines in memory (job.h's rank_info.log): a ring bounded by lines and by
 * text bytes, the oldest dropped first. The whole log is on disk (record/); this is what the
 * views and the root cause read. Pure memory: no I/O. */
#ifndef DDPTOP_LOG_RING_H
#define DDPTOP_LOG_RING_H

#include <stddef.h>
#include <stdint.h>

/* Flags of a log line. */
#define LOG_LINE_PARTIAL 0x1   /* flushed without a newline (200 ms idle, or \r progress) */
#define LOG_LINE_SPLIT   0x2   /* a piece of a line longer than 64 KiB; more follows */
#define LOG_LINE_TRUNCATED 0x4 /* set by the model: only the first max_bytes are kept in memory
                                  (the log file has the whole line) */
#define LOG_LINE_NCCL    0x8   /* set by the model: one of NCCL's INFO/TRACE lines (job/nccl.h),
                                  which the dashboard's log pane folds away by default */

struct log_line {
    uint64_t seq;             /* per rank, from 1, across attempts */
    int64_t wall_ns;          /* when the controller received it (for people) */
    uint8_t stream;           /* enum log_stream */
    uint8_t flags;
    int attempt;
    uint32_t len;
    char *text;               /* raw bytes as the rank wrote them (not NUL-safe: use len) */
};

/* The last lines of one rank kept in memory (the whole log is on disk). */
struct log_ring {
    struct log_line *lines;
    size_t cap, head, count;  /* lines[(head + i) % cap] for i in [0, count) is oldest..newest */
    size_t bytes, max_bytes;  /* text bytes held; oldest lines dropped above max_bytes */
    uint64_t total;           /* lines ever appended */
    size_t nccl;              /* lines held with LOG_LINE_NCCL */
    size_t max_lines;         /* cap grows on demand up to this */
    char *spare;              /* the text of the line dropped last, for the next line's */
    size_t spare_room;        /* bytes it has room for at least (its line's length and NUL) */
};

/* New bounds (0 counts as 1): lines over them are dropped at once, oldest first. */
void log_ring_set_limits(struct log_ring *r, size_t max_lines, size_t max_bytes);
/* Takes line (and its text, which must have room for a NUL at max_bytes): a line longer than
 * max_bytes keeps its head only and is marked LOG_LINE_TRUNCATED. */
void log_ring_push(struct log_ring *r, struct log_line *line);
/* Room for a line's text of n bytes and its NUL, for log_ring_push: the dropped line's buffer
 * again when there is one. A full ring drops a line for every line pushed: with ranks printing
 * hundreds of thousands of lines a second, a malloc and a free for each was a tenth of the
 * controller's CPU. */
char *log_ring_text_buf(struct log_ring *r, size_t n);
void log_ring_free(struct log_ring *r);
/* i-th oldest (0) .. newest (count-1); NULL out of range. */
const struct log_line *log_ring_at(const struct log_ring *r, size_t i);

#endif
