/* Shared by the files of the agent's ranks side, in layers (each calls only those below it):
 *   agent_ranks_ops.c    the request handlers (spawn, signal, stop, stacks, ping, resume)
 *   agent_ranks.c        the ranks and the one owner of each rank's life: starting (the spawn
 *                        requests forked in batches and answered), started or failed, ended and
 *                        reported; status, the timer, teardown and signals
 *   agent_ranks_out.c    what the ranks print, as "out" messages, with back-pressure and drops
 *   agent_ranks_spawn.c  a spawn request checked whole, and one rank's keeper forked: a handle
 *   agent_ranks_msg.c    the messages about one rank (exit, status entry, hello entry)
 *   agent_ranks_link.c   the link to the controller: watchdog, grace, spool bound, acks
 * tests/it_rooms.sh holds them to it (no call cycle of four files or more in launcher/agent/).
 * Their functions are ranks_* (the whole side) and rank_* (one rank). Not for other modules:
 * they use agent_ranks.h. */
#ifndef DDPTOP_AGENT_RANKS_INT_H
#define DDPTOP_AGENT_RANKS_INT_H

#include <limits.h>
#include <stdint.h>

#include "agent.h"
#include "agent_keeper.h"
#include "agent_oom.h"
#include "agent_stream.h"
#include "wire/json_num.h"
#include "wire/signals.h"

struct agent_rank;
struct spawn_req;

/* What is done with rank output (agent_ranks_out.c, OUT_HIGH). */
enum out_mode { OUT_READ, OUT_PAUSE, OUT_DROP };

struct rank_stream {
    struct agent_rank *r;
    char name;              /* 'o' stdout, 'e' stderr */
    int fd;                 /* read end (the watch holds -1 instead while output is paused
                             * or the stream rests) */
    struct agent_watch *w;  /* NULL once the stream reached end of file */
    struct stream_buf buf;
    int64_t rest_until;     /* mono_ms: not read before then (STREAM_REST_MS); 0 when awake */
};

struct agent_rank {
    int rank, attempt;
    struct keeper k;
    struct rank_stream st[2];
    struct agent_watch *status_w; /* keeper messages; NULL once the keeper closed them */
    int have_status;              /* the rank's end is known (wait_status or keeper_died) */
    int wait_status;
    int keeper_died;              /* the keeper went away without reporting a status */
    int keeper_reaped;
    double exit_cpu_s;
    int64_t exit_ns;              /* mono_ns() when the end became known */
    int by_us;                    /* it ended after (and by) a stopping signal of the agent's */
    uint64_t sig_mask;            /* bit N: the agent sent it signal N while it lived */
    int64_t sig_ns;               /* mono_ns() of the first stopping signal sent; 0 none */
    int64_t dead_ns;              /* the keeper's mono_ns() when it saw the rank dead; 0 unknown */
    int starting;                 /* its keeper has not reported the exec yet (rank_pid is -1) */
    int64_t start_deadline_ms;    /* give up on the start then */
    int doomed;                   /* a stopping signal came while starting: kill it once started */
    char *start_error;            /* why it could not start (then the exit has code 127) */
    struct spawn_req *spawn;      /* the spawn request not yet answered; no exit/status until then */
    int exit_sent;
    char *error_file;             /* TORCHELASTIC_ERROR_FILE, or NULL */
    int error_file_ours;          /* the agent chose it (and removes it) */
    int64_t spawn_wall_ns;
    int64_t last_out_ms;          /* mono_ms() of its last output; 0 none yet */
    long long step;
    int have_step;
    uint64_t dropped_lines;       /* output dropped while the spool was full, not yet said */
    uint64_t dropped_bytes;
    struct rank_cgroup cg;        /* its cgroup's OOM kill count (agent_oom.h) */
    struct agent_rank *next;
};

/* ---- agent_ranks.c: the ranks and each one's life ---- */

/* Every rank the agent holds (running, or ended and not yet reported and reaped). */
struct agent_rank *ranks_all(void);
/* The rank of that number that has not had its exit event (NULL: none): an ended rank whose
 * keeper is still being reaped may share its number with the next attempt's. */
struct agent_rank *rank_find(int rank);
/* A checked spawn request (taken over): its ranks are forked a batch per loop pass, each
 * starts or fails, and "spawned" answers it once every one did; then their exits may go. */
void ranks_spawn_begin(struct spawn_req *q);
/* Signals the rank's process group unless its end is known already; 0 when sent. */
int rank_signal(struct agent_rank *r, int sig, int by_us);
/* CONT+TERM (sig SIGTERM) or sig to every rank still running, and the ranks of spawns not
 * forked yet are killed as soon as they start; returns how many. */
int ranks_kill_all(int sig);
/* Slurm sent the agents' step SIGTERM: the ranks have it; Slurm SIGKILLs after its KillWait
 * (ranks_slurm_sigterm: it did, now). */
int ranks_slurm_terminated(void);
void ranks_slurm_sigterm(void);
/* How long the ranks may take after Slurm's SIGTERM (Slurm's default KillWait). */
#define SLURM_TERM_GRACE_MS 30000
/* Whether a rank has not had its exit event yet, or its keeper is not reaped yet (it still
 * holds the rank's slot on this node). */
int ranks_unfinished(void);
/* Starts the once-a-second status messages (the first run request does). */
void ranks_heartbeat_start(void);
/* The status heartbeat now, after the pong, unless one went lately (agent_ranks.c). */
void ranks_status_with_ping(void);
/* Answers {"ev":"stopped","id":id} once every rank has had its exit event, SIGKILLing those
 * still running at kill_at_ms. */
void ranks_stop_wait(const cJSON *id, int64_t kill_at_ms);
/* Recomputes the run timer's deadline after a change. */
void ranks_schedule(void);
/* The run timer and the quit hook, before agent_run. */
void ranks_init(struct agent *ag);
/* The agent is quitting: every rank is being stopped (its signals no longer matter). */
int ranks_quitting(void);
/* After agent_run: stops every rank still running, reaps every keeper (bounded) and frees
 * what the ranks side holds. */
void ranks_teardown(struct agent *ag);

/* ---- agent_ranks_out.c: what the ranks print ---- */

void ranks_out_init(struct agent *ag);
void ranks_out_done(void);
/* Reading rank output, paused (back-pressure) or dropping it (see OUT_HIGH). */
enum out_mode ranks_out_mode(void);
/* The mode the link and the spool call for now; on a change every stream of list (the ranks,
 * linked by next) follows: what a stream holds goes before dropping, the drops are said once
 * reading again. */
void ranks_out_apply_mode(struct agent_rank *list);
/* Whether output is read while more waits than the link or the spool should hold: time to
 * apply the mode again. */
int ranks_out_over(void);
/* What one read of s's pipe brought (n > 0): out messages, or counted while dropping. */
void ranks_out_take(struct rank_stream *s, const char *buf, size_t n);
/* s's partial line waited long enough (or must go now): it goes as it is. */
void ranks_out_flush(struct rank_stream *s);
/* s ended (or is given up): what it holds goes, its watch and pipe are closed. */
void ranks_out_close(struct rank_stream *s);
/* When the mode is to be looked at again (0: not before something else happens). */
int64_t ranks_out_deadline(int64_t now_ms);
/* The fd s's watch polls: none while output is paused or the stream rests. */
void ranks_out_watch_fd(struct rank_stream *s);
/* A line that says what r's output lost to a full spool, once there is room again. */
void ranks_out_say_dropped(struct agent_rank *r);
/* A line "ddptop-agent: text" on the rank's stderr, where the person reading its log looks
 * (rank_say_at: for an event of mono_ns ns). */
void rank_say(struct agent_rank *r, const char *text);
void rank_say_at(struct agent_rank *r, const char *text, int64_t ns);

/* ---- agent_ranks_spawn.c: the spawn request and one rank's keeper ---- */

/* How long a rank's keeper has to report the exec, before the rank is given up. */
#define SPAWN_START_TIMEOUT_MS 10000
/* SPAWN_START_TIMEOUT_MS, or the benches' DDPTOP_TEST_RANK_START_MS (never set it elsewhere):
 * 1,024 simulated nodes' 17,408 processes starting on one core of the scale bed take longer
 * (tests/bench/scale.sh, BENCH_SCALE_NICE). */
int ranks_start_timeout_ms(void);

/* What became of one rank of a spawn request. */
struct spawn_slot {
    struct agent_rank *r;     /* the rank its keeper became; NULL when refused or not forked yet */
    char *error;              /* refused before a keeper started: "still running", fork */
    int pid;                  /* the running rank's pid for "still running" */
};

/* A spawn request, checked whole (a bad one starts nothing), and what became of its ranks
 * until it is answered. */
struct spawn_req {
    cJSON *id;                /* copy of the request's id, or NULL */
    cJSON *ranks;             /* copy of the request's ranks */
    const cJSON **ro;         /* each rank's object in ranks, in request order */
    struct spawn_slot *slot;  /* each rank's, in request order */
    int n;
    int next;                 /* the next rank to fork (agent_ranks.c forks them in batches) */
    int doomed;               /* a stop came: ranks forked from now on are killed once started */
    char **argv;
    char *workdir;
    int attempt;
    char *torch;              /* the node's torch version (env_old_torch), asked once a request */
    int torch_asked;
    struct spawn_req *next_q; /* the next request not answered yet (agent_ranks.c's queue) */
};
/* The request's argv, workdir, attempt and ranks (each with its env), or NULL after sending
 * the error. */
struct spawn_req *spawn_req_parse(struct agent *ag, const cJSON *req, const cJSON *id);
void spawn_req_free(struct spawn_req *q);
/* The number of the request's i-th rank. */
int spawn_req_rank(const struct spawn_req *q, int i);

/* What spawn_fork returns for a rank whose keeper it forked, for the ranks side to take over:
 * the keeper (the rank not started yet: rank_pid -1), the rank's error file, and lines for the
 * rank's stderr (NULL: none). */
struct rank_handle {
    struct keeper k;
    char *error_file;         /* TORCHELASTIC_ERROR_FILE, or NULL */
    int error_file_ours;      /* chosen here, in the agent's private directory */
    int64_t spawn_wall_ns;
    char *say[2];
};
/* Forks the keeper of the request's i-th rank: 0 with h filled, or -1 with the error in its
 * slot (nothing started). */
int spawn_fork(struct spawn_req *q, int i, struct rank_handle *h);
/* The request's i-th rank is refused: it is still running here, as pid. */
void spawn_refuse(struct spawn_req *q, int i, int pid);
/* Whether every rank of the request was forked (or refused) and none is still starting. */
int spawn_req_resolved(const struct spawn_req *q);
/* The answer: {"ev":"spawned","id":ID,"ranks":[{"rank":R,"pid":P} or {"rank":R,"error":E}]}. */
cJSON *spawn_req_answer(const struct spawn_req *q);
/* What spawn_fork prepared for every rank (the flight recorder's directories) is let go. */
void spawn_done(void);

/* ---- agent_ranks_msg.c: messages about one rank ---- */

/* The exit message, a rank's status entry, the step of a metrics line
 * ({"event":"step",...,"step":N}) remembered for status, mono_ns as a JSON integer. */
cJSON *ranks_exit_msg(const struct agent_rank *r, const char *error_text);
/* The rank's error file made readable (at most 64 KiB), or NULL when it has none or it was not
 * written; one that is not a regular file of ours is ignored, and *say gets the line for the
 * rank's stderr naming it (malloc'd; else NULL). Called before its exit message, which carries
 * the text. */
char *ranks_error_file_text(const struct agent_rank *r, char **say);
cJSON *ranks_status_entry(const struct agent_rank *r, int64_t now_ms);
/* The rank in a resumed hello: number, attempt, pid, alive, starting. */
cJSON *ranks_hello_entry(const struct agent_rank *r);
void ranks_note_step(struct agent_rank *r, const char *data, size_t len);
void ranks_add_mono_ns(cJSON *msg, int64_t ns);
/* "SIGSEGV" for 11 and so on; NULL when unknown. The table is the protocol's
 * (wire/signals.h); this name stays for agent_ranks.c. */
static inline const char *ranks_signal_name(int signo) { return signals_name(signo); }

/* ---- agent_ranks_link.c: the link to the controller ---- */

/* What a spawn sets (watchdog_ms and the grace: 0 ends the agent when the controller is gone,
 * as before; the spool's bound; the run and node the bridge's socket is named after), the
 * bound, the next deadline, and the check that ends the agent when the watchdog or the grace
 * ran out (1: it is quitting). */
void ranks_link_init(struct agent *ag);
int ranks_link_config(const cJSON *req, const cJSON *id);
size_t ranks_spool_max(void);
int64_t ranks_link_deadline(void);
int ranks_link_check(int64_t now_ms, int live);
/* The link ended: whether the agent goes on without one (it has a grace, and holds something
 * a controller wants: holds, or messages not acknowledged); from then on it is away. */
int ranks_link_away(int holds);
/* A new link's hello gets what the link side knows (away_ms, grace_ms, spool_bytes); the
 * agent is no longer away. */
void ranks_link_hello(cJSON *m);
/* A ping's "ack" ({"RANK": seq, ...}): the controller has those. */
void ranks_link_ack(const cJSON *req);

static inline int ranks_is_int_in(const cJSON *v, long long lo, long long hi)
{
    long long x;
    return json_int_in(v, lo, hi, &x);
}

/* A rank number that ranks_is_int_in(v, 0, INT_MAX) took; -1 for anything else. */
static inline int rank_number(const cJSON *v)
{
    int x;
    return json_int_in_i(v, 0, INT_MAX, &x) ? x : -1;
}

#endif
