/* The log writer's insides (logw.h), shared by logw.c (the thread, rank logs, the index),
 * logw_record.c (events.jsonl and gpu.jsonl, what was lost and why, the space reserve) and
 * logw_adopt.c (the index read back, logs cut back for a takeover). Not for use outside those
 * files. */
#ifndef DDPTOP_LOGW_INT_H
#define DDPTOP_LOGW_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "logw.h"
#include "util/util.h"

#define RANK_BUF (64 * 1024)
/* With a kicking loop (logw_kick), rank bytes queued past this wake the thread at once. */
#define LOGW_WAKE_BYTES (1024 * 1024)
#define FREE_STALL_S 30
/* Held on the log directory's filesystem from the start, spent when a write fails for want
 * of room: half at once, for the note that the record is incomplete, the rest for the run's
 * last events (its end) and index. */
#define RESERVE_BYTES (64 * 1024)
/* events.jsonl lines kept in memory while the disk is full, written once there is room
 * (or the reserve is spent on them at the end); more are counted as lost. */
#define EV_HELD_MAX (1024 * 1024)

enum chunk_kind { CH_RANK, CH_EVENTS, CH_GPU, CH_ATTEMPT, CH_SYNC, CH_STOP, CH_REPLACE, CH_ENDING, CH_MODE };

struct chunk {
    struct chunk *next;
    enum chunk_kind kind;
    int rank, attempt;
    uint64_t seq, base;
    size_t len;
    size_t cap;               /* room for data (logw_pool.c) */
    char data[];
};

#define LOGW_POOL_CLASSES 6

struct wrank {
    int fd, attempt;          /* the open log (-1) and its attempt */
    uint64_t bytes;           /* its size */
    char *buf;
    size_t len;
    uint64_t buf_seq, buf_base;
    int buf_attempt;
    /* what is written (not only buffered): what the next index says */
    int w_attempt;
    uint64_t w_seq, w_base, w_bytes;
    bool unsynced;            /* written since its last fdatasync */
    dev_t dev;                /* the file system it is on (one syncfs covers its ranks) */
};

struct logw {
    char *dir;
    size_t n;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct chunk *head, *tail;
    size_t backlog;           /* bytes in chunks not yet processed */
    uint64_t progress;        /* chunks processed (logw_free's stall detector) */
    uint64_t pushed;          /* chunks queued */
    bool done;                /* the thread finished */
    bool kicked;              /* the loop calls logw_kick after each pass (logw.h) */
    bool wake_owed;           /* rank bytes queued without waking the thread: the kick wakes it */
    /* processed chunks for reuse (logw_pool.c), under pool_mu */
    pthread_mutex_t pool_mu;
    struct chunk *pool[LOGW_POOL_CLASSES];
    size_t pool_bytes;
    uint64_t pool_reused;
    /* the thread's own */
    int ev_fd, gpu_fd;
    bool gpu_tried;
    int attempt;
    struct wrank *r;
    bool dirty;
    mode_t file_mode;         /* of every file it makes (--log-mode; 0600) */
    uint64_t ev_size;         /* events.jsonl's size: whole lines only */
    struct strbuf ev_held;    /* lines that found no room yet, oldest first */
    size_t ev_held_lines;
    int reserve_fd;           /* LOG_RESERVE_FILE, -1 none */
    bool ending;              /* the reserve is spent on the record's last lines */
    /* under mu: what the last index holds, errors to report, what was lost */
    uint64_t *dur_seq, *dur_base;
    uint64_t dur_gen;         /* how many times the marks moved */
    struct strbuf errors;     /* '\n'-separated */
    unsigned reported;        /* bit per kind of file already reported */
    struct logw_loss loss;
};

enum { REP_RANK = 1, REP_EVENTS = 2, REP_GPU = 4, REP_INDEX = 8, REP_DIR = 16, REP_REPLACE = 32 };

/* A chunk with room for n bytes of data (from the pool when one fits), and its return. */
struct chunk *logw_chunk_get(struct logw *w, size_t n);
void logw_chunk_put(struct logw *w, struct chunk *c);
void logw_pool_free(struct logw *w);

void logw_report(struct logw *w, unsigned kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int logw_open_append(const struct logw *w, const char *path);
/* DIR/attempt-N/rank-R.log (malloc'd). */
char *logw_rank_path(const struct logw *w, int attempt, size_t rank);

/* logw_record.c */
/* Something given to the writer did not reach the disk (err: the write's errno): the run is
 * marked incomplete (LOG_INCOMPLETE_FILE, with half the reserve) the first time. */
void record_lost(struct logw *w, int err, const char *what, uint64_t log_bytes, uint64_t gpu_lines);
void record_reserve_open(struct logw *w);
void record_events(struct logw *w, const char *line, size_t len);
void record_retry(struct logw *w);
void record_ending(struct logw *w);
void record_close(struct logw *w);

#endif
