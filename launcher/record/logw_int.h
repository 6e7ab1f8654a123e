/* The log writer's insides (logw.h), shared by logw.c (the thread, rank logs, the index),
 * logw_record.c (events.jsonl and gpu.jsonl, what was lost and why, the space reserve) and
 * logw_adopt.c (the index read back, logs cut back for a takeover). Not for use outside those
 * files. */
#ifndef DDPTOP_LOGW_INT_H
#define DDPTOP_LOGW_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "logw.h"
#include "util/util.h"

#define RANK_BUF (64 * 1024)
/* A rank's buffer starts this small: 8,192 ranks at a line a second each touched a page of a
 * 64 KiB buffer, 40 MiB of the controller's memory in the writer's arena (issue 32). */
#define RANK_BUF_MIN 1024
/* With a kicking loop (logw_kick), rank bytes queued past this wake the thread at once. */
#define LOGW_WAKE_BYTES (1024 * 1024)
#define FREE_STALL_S 30
/* The hold (logw_hold.c): a rank's buffer of small pieces is written once it is this old, at
 * the next sync (a second apart while the hold is on), unless it fills first. */
#define LOGW_HOLD_MS 4000
/* ... taken while the ranks send this many pieces a second or more, and fewer bytes than this. */
#define LOGW_HOLD_MIN_PIECES 1024
#define LOGW_HOLD_MAX_BYTES (2u << 20)
/* ... and nobody read the attempt's logs for this long. */
#define LOGW_HOLD_READ_MS 10000
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
    size_t len, cap;          /* cap: RANK_BUF_MIN, doubled up to RANK_BUF as the rank needs */
    uint64_t buf_seq, buf_base;
    int buf_attempt;
    /* what is written (not only buffered): what the next index says */
    int w_attempt;
    uint64_t w_seq, w_base, w_bytes;
    bool unsynced;            /* written since its last fdatasync */
    dev_t dev;                /* the file system it is on (one syncfs covers its ranks) */
    int64_t held_ms;          /* when the buffer's first byte came (the pass's clock) */
    bool eager;               /* in logw.eager */
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
    int64_t now;              /* mono_ms() at the start of the pass */
    /* the hold (logw_hold.c) */
    int ino_fd, ino_wd;       /* inotify on attempt-N/ (-1: none, nothing is held) */
    bool hold, busy;          /* holding now; the last window was a trickle of many pieces */
    int64_t read_until_ms;    /* someone read the logs: no hold until then */
    int64_t win_start_ms;
    uint64_t win_pieces, win_bytes;
    /* ranks whose first bytes of the attempt wait: the next idle pass writes them, hold or
     * not (a rank has started: its file says so at once) */
    size_t *eager, n_eager;
    atomic_uint_fast64_t rank_writes; /* write(2)s into rank logs (logw_rank_writes) */
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

/* logw_hold.c: the inotify watch is made in logw_new's thread (init) and by the thread (watch,
 * tick); piece counts a rank piece; tick (once a pass) decides w->hold; due says whether a
 * rank's buffer goes to its file at this sync. */
void logw_hold_init(struct logw *w);
void logw_hold_done(struct logw *w);
void logw_hold_watch(struct logw *w, const char *attempt_dir);
void logw_hold_piece(struct logw *w, size_t len);
void logw_hold_tick(struct logw *w, int64_t now);
bool logw_hold_due(const struct logw *w, const struct wrank *r, int64_t now);

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
