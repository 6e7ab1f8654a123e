/* The run's files on disk (docs/logs.md), written by a thread of their own: each rank's log
 * (attempt-N/rank-R.log, exactly the bytes it printed), events.jsonl, gpu.jsonl, and the log
 * index that says how much of each rank's log is on disk. The controller's loop hands bytes
 * over and never waits on the disk: a log directory on a stalled NFS server stalls no
 * heartbeat. What is queued is bounded by the caller (logw_backlog).
 *
 * Every rank's bytes come with the agent's sequence number of the message that carried them
 * and the base the controller adds to it (a new agent starts again from 1; see
 * controller/controller_agent.c). The index (LOG_INDEX_FILE, one line per rank: attempt, seq, base,
 * bytes of that attempt's file) is replaced every logw_sync, after the bytes it counts were
 * written; logw_durable gives what the last index holds, which is what the controller
 * acknowledges to the agents. A controller that re-adopts the run (`ddptop attach`) cuts each
 * log back to the index and asks the agents for the rest: nothing lost, nothing twice. */
#ifndef DDPTOP_LOGW_H
#define DDPTOP_LOGW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOG_INDEX_FILE "log-index"
/* Written when something given to the writer could not be written (docs/logs.md): first
 * line the reason ("disk full"), second what was lost. `ddptop ls` reads it. */
#define LOG_INCOMPLETE_FILE "incomplete"
/* Room held on the log directory's filesystem for the record's last lines (logw_int.h). */
#define LOG_RESERVE_FILE "reserve"
/* Files the run makes are 0600 and its directories 0700 unless --log-mode says otherwise. */
#define LOG_MODE_DEFAULT 0600u

/* What could not be written, so far. */
struct logw_loss {
    char reason[64];          /* "": nothing lost; "disk full", or the error's text */
    char first[320];          /* the first failure: which file and why */
    uint64_t events;          /* events.jsonl lines lost */
    uint64_t log_bytes;       /* rank log bytes lost */
    uint64_t gpu_lines;       /* gpu.jsonl lines lost */
    size_t events_held;       /* events.jsonl lines waiting in memory for room */
};

struct logw;

/* Opens (appends to) run_dir/events.jsonl now; the rest is made by the thread. NULL with err
 * filled when events.jsonl cannot be opened. */
struct logw *logw_new(const char *run_dir, size_t n_ranks, char *err, size_t errlen);
/* Writes what is queued (waiting at most while the disk makes progress, and never more than
 * 30 s without any), writes the index, closes everything. */
void logw_free(struct logw *w);

/* Attempt n begins: attempt-N/ and its rank logs are opened (appended to). */
void logw_attempt(struct logw *w, int attempt);
/* A piece of rank's log (attempt's file): data, then a newline when newline. seq (0: none, a
 * note of ddptop's own) and base as above. */
void logw_rank(struct logw *w, int rank, int attempt, uint64_t seq, uint64_t base, const void *data,
               size_t len, bool newline);
/* One line (a '\n' is added) of events.jsonl or gpu.jsonl. */
void logw_events(struct logw *w, const char *line, size_t len);
void logw_gpu(struct logw *w, const char *line, size_t len);
/* Buffered bytes go to disk and the index is replaced (asynchronously); when nothing changed
 * its time is touched (`ddptop ls` tells from it when the controller was last alive). Bytes the
 * hold keeps (logw_hold.c: thousands of ranks trickling, nobody reading) go once they are
 * LOGW_HOLD_MS old; the index counts only what went. */
void logw_sync(struct logw *w);
/* The loop's pass is over: rank bytes queued since are handed to the thread now. A caller that
 * calls this after each pass (the controller) lets logw_rank leave the thread asleep until
 * then (or until 1 MiB waits); one that never calls it wakes the thread with every piece. */
void logw_kick(struct logw *w);
/* The chunk pool between the loop and the thread (logw_pool.c): bytes held for reuse (at most
 * 2 MiB) and how many chunks were reused. For tests and the profile. */
void logw_pool_stats(struct logw *w, size_t *held_bytes, uint64_t *reused);
/* write(2)s into the rank logs so far (the hold joins a rank's lines into fewer: logw_int.h).
 * For tests and the profile. */
uint64_t logw_rank_writes(const struct logw *w);
/* run_dir/name becomes data (a private file, 0600, replaced by rename: readers see the old or
 * the new one whole). */
void logw_replace(struct logw *w, const char *name, const char *data, size_t len);

/* Waits (at most timeout_ms) until everything queued so far was written (held bytes too) and
 * the index replaced: for tests, the run's end, and a controller handing the run over. true
 * when it was. */
bool logw_drain(struct logw *w, int timeout_ms);
/* Bytes queued and not yet written. */
size_t logw_backlog(const struct logw *w);
/* What the last index holds for rank: its seq and base (0, 0: nothing). */
void logw_durable(const struct logw *w, int rank, uint64_t *seq, uint64_t *base);
/* Goes up each time the durable marks move (a sync that wrote its index): the controller
 * acknowledges right then, not at its next ping, so that agents hold a second less output. */
uint64_t logw_durable_gen(const struct logw *w);
/* Files made from now on get file_mode (and directories it with x where r is: 0640 -> 0750);
 * the open ones are changed to it. Before logw_attempt, so that no log is made otherwise. */
void logw_set_mode(struct logw *w, unsigned file_mode);
/* The record's last lines follow (the run's end): when something was lost for want of room,
 * the reserve is spent on the events held in memory and on what follows. */
void logw_ending(struct logw *w);
/* true when something given to the writer did not reach the disk; *out says what and why. */
bool logw_loss(const struct logw *w, struct logw_loss *out);
/* A run directory's LOG_INCOMPLETE_FILE: true when it is there, its first line (bounded, the
 * newline cut) in reason and its second in detail ("" when missing). */
bool logw_read_incomplete(const char *run_dir, char *reason, size_t reason_len, char *detail, size_t detail_len);
/* The mode of a directory that holds files of file_mode: x where r is (0600 -> 0700). */
unsigned log_mode_dir(unsigned file_mode);
/* --log-mode: "private" (0600), "group" (0640) or an octal file mode that the owner can read
 * and write and nobody else can write or run (0600, 0604, 0640, 0644). 0, or -1. */
int log_mode_parse(const char *s, unsigned *mode);

/* The next write error not yet reported (one per file and kind of error; malloc'd), or NULL. */
char *logw_take_error(struct logw *w);

/* What an index says of one rank. */
struct logw_mark {
    int attempt;          /* -1: the rank has no entry */
    uint64_t seq, base;
    uint64_t bytes;       /* of attempt-<attempt>/rank-R.log */
};
/* Reads run_dir's index into marks[0..n_ranks) (attempt -1 where there is none). 0, or -1
 * when there is no index. */
int logw_read_index(const char *run_dir, struct logw_mark *marks, size_t n_ranks);
/* Re-adoption: cuts each rank's logs back to what marks say was on disk (the attempt named
 * to its bytes; later attempts up to last_attempt to nothing), so that what the agents send
 * again follows without a gap or a repeat, and seeds the durable marks with them. Before
 * logw_attempt and before any rank's bytes are pushed: the thread has not touched the ranks
 * yet, and its taking of the first chunk under the mutex orders these writes before its reads. */
void logw_cut_back(struct logw *w, const struct logw_mark *marks, int last_attempt);

#endif
