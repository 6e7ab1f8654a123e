/* The controller of `ddptop run` and the dashboard: one event loop (util/evloop.h) over the
 * agents' transports (ssh/transport_kind.h: SSH, a Slurm step, ..., or a local child without
 * hosts), the front end's input, the
 * signals and timers. It runs the preflight, launches every rank through the agents, decodes their lines
 * into the job model (job.h), detects failures, hangs and lost nodes, stops and restarts the
 * job. The front end (tui/: the dashboard or the headless line printer) plugs in through
 * struct frontend; the controller never draws and never blocks. */
#ifndef DDPTOP_CONTROLLER_H
#define DDPTOP_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check/node_opts.h"
#include "check/check_report.h"
#include "hosts/hostfile.h"
#include "job/hang.h"
#include "job/health.h"
#include "job/job.h"
#include "notify.h"
#include "ssh/ssh_conn.h"

struct run_opts {
    struct node_opts nodes;      /* how the nodes are reached and checked, what runs there
                                  * (check/node_opts.h: shared with `ddptop check`) */
    int nproc_per_node;          /* 0: hostfile slots, else 1; -1: "gpu" (the node's GPU count) */
    int max_restarts;
    int nnodes_min, nnodes_max;  /* --nnodes MIN:MAX (0: absent, every node runs ranks) */
    const char *log_dir;         /* default ./ddptop-logs */
    unsigned log_mode;           /* --log-mode: of the run's files (0: LOG_MODE_DEFAULT, 0600) */
    const char *run_id;          /* NULL: generated */
    const char **export_regex;   /* --export REGEX (controller variables to forward) */
    size_t n_export;
    const char *workdir;         /* NULL: the current directory's path */
    int hang_timeout_s;          /* default 300, 0 off */
    enum hang_action on_hang;    /* --on-hang, default stacks */
    int gpu_interval_ms;         /* NVML sampling on every node; default 1000, 0 off */
    int term_timeout_s;          /* default 10 */
    int agent_grace_s;           /* how long agents keep the ranks without us (default 600, 0: none) */
    int node_timeout_s;          /* silent this long: unreachable, reconnect (default 30) */
    int agent_spool_mb;          /* each agent's spool while we are away (default 256) */
    const char *metrics_addr;    /* --metrics [ADDR:]PORT: the OpenMetrics endpoint; NULL none */
    bool hup_detaches;           /* SIGHUP leaves the run to its agents (a session's dashboard) */
    bool adopt;                  /* --adopt: take over --run-id's run (ddptop attach), no launch */
    char *const *argv;           /* `ddptop run`'s arguments as given (the run's record keeps them) */
    int argc;
    int straggler_steps;         /* default 3 */
    const char *loss_regex;      /* NULL: the default (loss followed by : = or space, a number) */
    /* The training health rules (job/health.h, docs/run.md "Training health"). */
    enum health_action on_nan;   /* --on-nan, default stop */
    enum health_action on_spike; /* --on-spike, default none */
    double loss_spike;           /* --loss-spike X: above X times the median; 0 off */
    int loss_spike_window;       /* --loss-spike X:N (default HEALTH_SPIKE_WINDOW) */
    struct notify_opts notify;   /* --notify, --notify-on, --notify-timeout (notify.h) */
    bool headless;
    bool detach;                 /* --detach: the dashboard in a session, no terminal attached (tui/) */
    bool no_fold;                /* --no-fold: lines of several ranks not folded into one (tui/) */
    bool no_check;
    bool check_only;             /* `ddptop check`: the preflight, then end (no job on disk) */
    int verbose;
};

void run_opts_init(struct run_opts *o);
void run_opts_done(struct run_opts *o);

/* What a front end can ask for (keys map to these in tui/). */
enum action {
    ACT_NONE,
    ACT_LAUNCH_ANYWAY,   /* after a refused preflight */
    ACT_RESTART,         /* restart the whole job; ranks resume from their snapshots */
    ACT_STOP,            /* stop every rank (the job stays on screen) */
    ACT_QUIT,            /* stop every rank, then leave the loop */
    ACT_STACKS,          /* capture the stacks of action_rank */
};

struct controller;

/* The front end: called from the controller's loop, never blocking. */
struct frontend {
    void *ctx;
    /* An fd the loop polls for input (the terminal), or -1. */
    int (*input_fd)(void *ctx);
    /* Input is ready on input_fd: read it and act (controller_act). */
    void (*on_input)(void *ctx, struct controller *c);
    /* The model changed or a timer ticked; draw if due (the front end limits its frame rate).
     * Returns the ms until it wants another call (e.g. a pending frame), or -1. */
    int (*on_tick)(void *ctx, const struct job *j);
    /* One new log line of a rank (headless prints it as "[r3 node2] text"). */
    void (*on_line)(void *ctx, const struct job *j, int rank, const struct log_line *line);
    /* A new event (headless prints it). */
    void (*on_event)(void *ctx, const struct job *j, const struct job_event *ev);
    /* The terminal was resized (SIGWINCH through the self-pipe). */
    void (*on_resize)(void *ctx);
    /* The preflight report: once complete, and as rows fill in when the front end has input
     * (the dashboard shows it while the preflight runs and while CHECK_FAILED). */
    void (*on_check)(void *ctx, const struct check_report *r);
    /* Every change of the report while the preflight runs, interactive or not (`ddptop
     * check` draws its live table or progress line from it). */
    void (*on_check_progress)(void *ctx, const struct check_report *r);
    /* The stacks captured for a rank (ACT_STACKS), as text lines. */
    void (*on_stacks)(void *ctx, const struct job *j, int rank, const char *text);
};

/* hl NULL: no hosts, one agent on this machine (the kind of transport is o->nodes.transport's).
 * Returns NULL with err filled on a configuration error. */
struct controller *controller_new(const struct run_opts *o, const struct hostlist *hl,
                                  const struct frontend *fe, char *err, size_t errlen);
void controller_free(struct controller *c);

/* Runs the loop until the job ended (done, failed past its restarts, stopped and quit).
 * Returns the exit code: 0 every rank succeeded; 1 the job failed; 3 the preflight refused.
 * check_only: the report's (0 nothing failed, 1 a check failed; 130 when stopped before). */
int controller_run(struct controller *c);

/* From the front end: restart, stop, quit, stacks of a rank. */
void controller_act(struct controller *c, enum action a, int rank);

const struct job *controller_job(const struct controller *c);
/* The preflight's report (live while it runs, final after), or NULL without a preflight. */
const struct check_report *controller_check_report(const struct controller *c);

#endif
