/* Shared by the files of the agent's ranks side: agent_ranks.c (the ranks, their output and
 * back-pressure, status, exits, teardown), agent_ranks_spawn.c (starting ranks under their
 * keepers, in batches), agent_ranks_msg.c (the messages about one rank), agent_ranks_link.c
 * (the link to the controller: watchdog, grace, resume) and agent_ranks_ops.c (the request
 * handlers). Their functions are ranks_* (the whole side) and rank_* (one rank). Not for other
 * modules: they use agent_ranks.h. */
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
struct rank_spawn;

/* What is done with rank output (agent_ranks.c, OUT_HIGH). */
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
    struct rank_spawn *spawn;      /* the spawn request not yet answered; no exit/status until then */
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

/* Every rank the agent holds (running, or ended and not yet reported and reaped). */
struct agent_rank *ranks_all(void);
/* The rank of that number that has not had its exit event (NULL: none): an ended rank whose
 * keeper is still being reaped may share its number with the next attempt's. */
struct agent_rank *rank_find(int rank);
/* A new rank that is still starting (keeper forked, rank_pid -1; see agent_ranks_spawn.c). Takes
 * over k (its fds become watches) and error_file. */
struct agent_rank *rank_add_starting(int rank, int attempt, const struct keeper *k, char *error_file,
                                       int error_file_ours, int64_t spawn_wall_ns,
                                       struct rank_spawn *sp, int64_t start_deadline_ms);
/* A line "ddptop-agent: text" on the rank's stderr, where the person reading its log looks. */
void rank_say(struct agent_rank *r, const char *text);
/* The rank could not start: why goes out as a line on its stderr and into spawned; its exit
 * (after spawned) has code 127. */
void rank_start_failed(struct agent_rank *r, const char *why);
/* The spawn side (agent_ranks_spawn.c): a starting rank resolved (started or failed); the
 * batches of keepers still to fork; when the next batch is due (0 none); teardown. */
void ranks_spawn_resolved(struct rank_spawn *sp);
/* A starting rank's first keeper message (STARTED or FAILED), and its start time limit. */
void ranks_spawn_first_msg(struct agent_rank *r, const struct keeper_msg *m);
void ranks_spawn_check_timeout(struct agent_rank *r, int64_t now_ms);
void ranks_spawn_pump(void);
int64_t ranks_spawn_deadline(void);
void ranks_spawn_done(void);
/* A stop: the ranks of pending spawns not forked yet are killed as soon as they start. */
void ranks_spawn_doom(void);
/* Sends the exit of a rank whose spawn was answered, once it is due (may free r). */
void rank_announce(struct agent_rank *r);
/* Signals the rank's process group unless its end is known already; 0 when sent. */
int rank_signal(struct agent_rank *r, int sig, int by_us);
/* CONT+TERM (sig SIGTERM) or sig to every rank still running; returns how many. */
int ranks_kill_all(int sig);
/* Slurm sent the agents' step SIGTERM: the ranks have it; Slurm SIGKILLs after its KillWait. */
int ranks_slurm_terminated(void);
/* How long the ranks may take after Slurm's SIGTERM (Slurm's default KillWait). */
#define SLURM_TERM_GRACE_MS 30000
/* Whether a rank has not had its exit event yet, or its keeper is not reaped yet (it still
 * holds the rank's slot on this node). */
int ranks_unfinished(void);
/* Starts the once-a-second status messages (the first run request does). */
void ranks_heartbeat_start(void);

/* The link to the controller (agent_ranks_link.c): what a spawn sets (watchdog_ms and the
 * grace: 0 ends the agent when the controller is gone, as before; the spool's bound; the run
 * and node the bridge's socket is named after), the bound, the next deadline, and the check
 * that ends the agent when the watchdog or the grace ran out (1: it is quitting). */
void ranks_link_init(struct agent *ag);
int ranks_link_config(const cJSON *req, const cJSON *id);
size_t ranks_spool_max(void);
int64_t ranks_link_deadline(void);
int ranks_link_check(int64_t now_ms, int live);
/* A ping's "ack" ({"RANK": seq, ...}): the controller has those. */
void ranks_link_ack(const cJSON *req);
/* Answers {"ev":"stopped","id":id} once every rank has had its exit event, SIGKILLing those
 * still running at kill_at_ms. */
void ranks_stop_wait(const cJSON *id, int64_t kill_at_ms);
/* Recomputes the run timer's deadline after a change. */
void ranks_schedule(void);
/* Messages (agent_ranks_msg.c): the exit message, a rank's status entry, the step of a metrics
 * line ({"event":"step",...,"step":N}) remembered for status, mono_ns as a JSON integer. */
cJSON *ranks_exit_msg(const struct agent_rank *r, const char *error_text);
/* The rank's error file made readable (at most 64 KiB), or NULL when it has none or it was not
 * written; one that is not a regular file of ours is ignored with a line on the rank's stderr
 * naming it. malloc'd. Called before its exit message, which carries the text. */
char *ranks_error_file_text(struct agent_rank *r);
cJSON *ranks_status_entry(const struct agent_rank *r, int64_t now_ms);
void ranks_note_step(struct agent_rank *r, const char *data, size_t len);
void ranks_add_mono_ns(cJSON *msg, int64_t ns);
/* "SIGSEGV" for 11 and so on; NULL when unknown. The table is the protocol's
 * (wire/signals.h); this name stays for agent_ranks.c. */
static inline const char *ranks_signal_name(int signo) { return signals_name(signo); }

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
