/* Shared between agent_run.c (ranks, output, status, exits, teardown) and agent_run_ops.c (the
 * request handlers). Not for other modules: they use agent_run.h. */
#ifndef DDPTOP_AGENT_RUN_INT_H
#define DDPTOP_AGENT_RUN_INT_H

#include <stdint.h>

#include "agent.h"
#include "agent_keeper.h"
#include "agent_stream.h"

struct run_rank;

struct rank_stream {
    struct run_rank *r;
    char name;              /* 'o' stdout, 'e' stderr */
    int fd;                 /* read end (the watch holds -1 instead while output is paused) */
    struct agent_watch *w;  /* NULL once the stream reached end of file */
    struct stream_buf buf;
};

struct run_rank {
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
    int by_us;                    /* the agent sent it a stopping signal */
    int exit_sent;
    char *error_file;             /* TORCHELASTIC_ERROR_FILE, or NULL */
    int error_file_ours;          /* the agent chose it (and removes it) */
    int64_t spawn_wall_ns;
    int64_t last_out_ms;          /* mono_ms() of its last output; 0 none yet */
    long long step;
    int have_step;
    struct run_rank *next;
};

/* Every rank the agent holds (running, or ended and not yet reported and reaped). */
struct run_rank *run_ranks(void);
struct run_rank *run_rank_find(int rank);
/* Takes over k (its fds become watches) and error_file. */
struct run_rank *run_rank_add(int rank, int attempt, const struct keeper *k, char *error_file,
                              int error_file_ours, int64_t spawn_wall_ns);
/* Signals the rank's process group unless its end is known already; 0 when sent. */
int run_rank_signal(struct run_rank *r, int sig, int by_us);
/* CONT+TERM (sig SIGTERM) or sig to every rank still running; returns how many. */
int run_kill_all(int sig);
/* Whether a rank has not had its exit event yet. */
int run_unfinished(void);
/* Starts the once-a-second status messages (the first run request does). */
void run_heartbeat_start(void);
void run_set_watchdog(long ms);
/* Answers {"ev":"stopped","id":id} once every rank has had its exit event, SIGKILLing those
 * still running at kill_at_ms. */
void run_stop_wait(const cJSON *id, int64_t kill_at_ms);
/* Recomputes the run timer's deadline after a change. */
void run_schedule(void);
/* Messages (agent_run_msg.c): the exit message, a rank's status entry, the step of a metrics
 * line ({"event":"step",...,"step":N}) remembered for status, mono_ns as a JSON integer. */
cJSON *run_exit_msg(const struct run_rank *r);
cJSON *run_status_entry(const struct run_rank *r, int64_t now_ms);
void run_note_step(struct run_rank *r, const char *data, size_t len);
void run_add_mono_ns(cJSON *msg, int64_t ns);
/* "SIGSEGV" for 11 and so on; NULL when unknown. */
const char *run_signal_name(int signo);
/* The signal called name ("TERM" or "SIGTERM") among those a request may send; 0 when none. */
int run_signal_parse(const char *name);

#endif
