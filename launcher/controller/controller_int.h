/* Internals of the controller shared by its files, which are in layers (docs/architecture.md,
 * "The controller's layers"; tests/it_rooms.sh reads the layers from the built objects): a
 * file calls only files of the layers below its own, never one above or beside, so that each
 * can be read knowing only what is under it. From the top (a blank line between layers):
 *
 *   controller_run.c      the loop and its timers, construction, the front end's events
 *
 *   controller_act.c      the actions a front end or a signal asks for (a person's decisions:
 *   controller_adopt.c    stop, restart, quit); a run taken over (--adopt): how it starts
 *
 *   controller.c          the progress step, once per loop pass: the only place that decides
 *                         to stop, restart, exclude or finish, from what the handlers found;
 *                         launching, stopping, restarting, ending
 *
 *   controller_agent.c    the agents' messages: one table, each message to its handler
 *
 *   controller_link.c     handlers of a node's link: heard, silent, unreachable, reconnected,
 *                         lost (recorded, not acted on)
 *
 *   controller_check.c    the preflight as the first phase (its step is the progress step's
 *   controller_stacks.c   part while CHECKING); stack dumps and the hang collection (its
 *   controller_gpu.c      verdict goes back to the progress step); GPU telemetry; the ranks'
 *   controller_exits.c    exits, held and applied in order
 *
 *   controller_spare.c    the job's shape: the rank map, the nodes' roles, excluding (--nnodes)
 *
 *   controller_msg.c      what every handler shares: numbers in messages, the stop noted
 *   controller_record.c   the run's record (adopt.json)
 *   controller_node.c     the node plumbing: send, request, connect, release, spawn
 *   controller_metrics.c  --metrics: the OpenMetrics endpoint, reading the model
 *   notify.c              --notify: the events told to the user's commands (notify.h), an
 *                         observer the loop drives; it knows nothing of the controller
 *
 *   notify_opts.c         --notify's options; one --notify command running (notify_proc.h)
 *   notify_proc.c
 *
 * Handlers record facts in the job model (and in struct cnode); where a fact calls for a stop
 * they note it (ctl_note_stop) and the progress step acts on it in the same loop pass. Other
 * modules use controller.h. */
#ifndef DDPTOP_CONTROLLER_INT_H
#define DDPTOP_CONTROLLER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "check/preflight.h"
#include "controller.h"
#include "job/hang.h"
#include "job/job_state.h"
#include "job/metrics_parse.h"
#include "job/plan.h"
#include "job/rank_report.h"
#include "record/run_files.h"
#include "ssh/transport.h"
#include "ssh/transport_kind.h"
#include "wire/client.h"

struct evloop;        /* util/evloop.h */
struct evloop_watch;

#define PING_EVERY_MS     1000
#define SLURM_KILLWAIT_MS 30000   /* Slurm's default KillWait: SIGTERM to SIGKILL of a job */
#define WATCHDOG_MS       5000    /* --agent-grace 0: the agent kills its ranks without a request for this long */
#define TICK_EVERY_MS     1000    /* hang detector, log flush and index, acknowledgements */
#define EXIT_HOLD_MS      300     /* a failure waits this long for earlier exits of its node */
#define SILENT_AFTER_MS   5000    /* a node with ranks and no message for this long is silent */
#define LOOP_GAP_MS       2000    /* the loop did not run for this long: the controller stalled */
#define LINK_CHECK_MS     250     /* how often silence and reconnects are looked at */
/* The log writer's queue: past HIGH the agents' lines wait in their transports (which then stop
 * reading: the agents spool), below LOW they flow again. */
#define WRITER_HIGH       (256u << 20)
#define WRITER_LOW        (64u << 20)

/* One node as the controller drives it (the model's view is job->nodes[i]). */
struct cnode {
    struct transport *t;      /* NULL until launched; replaced after it was lost */
    struct wire_client cl;    /* request ids and who waits for each answer */
    bool queued;              /* created, waiting for a --fanout slot */
    bool hello;               /* the agent greeted: requests may flow */
    bool lost;                /* given up (lost, failed): a fresh agent before the next spawn */
    bool released;            /* told to exit at the job's end: a fresh agent for a restart */
    int64_t last_msg_ms;      /* mono_ms of its last message: the agents' grace runs from here */
    int64_t quiet_from_ms;    /* the same, moved on by the controller's own stalls: silence */
    int64_t hello_deadline_ms;
    /* The link of an agent that holds ranks (controller_link.c). */
    bool holds_ranks;         /* a spawn went to this agent: it waits for us (its grace) */
    bool bridge;              /* t is a bridge to that agent (ddptop-agent --attach) */
    bool attach_sent;         /* the bridge was told which agent */
    bool away;                /* unreachable: t is a reconnect attempt, or none */
    int64_t next_try_ms;      /* the next reconnect attempt (while away and t is NULL) */
    int64_t try_ms;           /* when the present (or last) attempt began */
    int tries;                /* reconnect attempts since it went away */
    int resume_id;            /* the resume in flight; 0 none */
    char *gone;               /* a bridge said the agent is gone: why */
    bool no_reconnect;        /* the agent said it cannot be reached again (no socket) */
    bool watchdog_fired;      /* --agent-grace 0: its agent said its watchdog ended it */
    int spawn_id;             /* the request of this attempt; 0: not sent */
    bool spawn_due;           /* its spawn waits its turn (ctl_spawn_due), spawn_id still 0 */
    bool spawn_answered;
    int stop_id;              /* the stop request in flight; 0: none */
    bool stopped;             /* answered the stop (or lost) */
    char *trace_prefix;       /* where its ranks dump NCCL's flight recorder (plan_trace_prefix) */
    int gpu_count;            /* from the preflight, -1 unknown */
    cJSON **exits;            /* exit messages held back to be ordered by the agent's clock */
    size_t n_exits;
    int64_t hold_until_ms;    /* when the held exits are applied; 0: none held */
    char *fault;              /* --nnodes: it failed this attempt through its own fault (why) */
    unsigned bad_numbers;     /* numbers out of range in its messages (ctl_bad_number) */
    struct evloop_watch *ew[TRANSPORT_POLLFDS_MAX]; /* its transport's fds in the event loop (transport_pollfds) */
};

/* Per rank, what the model does not keep: the previous CPU sample for cpu_pct, and the last
 * sequence number acknowledged to its agent. */
struct crank {
    double cpu_s;
    int64_t cpu_mono_ns;
    uint64_t acked, acked_base;
    bool gap_said;            /* a gap in its numbers was reported (once) */
};

enum after_stop { AFTER_END, AFTER_RESTART, AFTER_QUIT };

/* Why the job must stop, as a handler found it (ctl_note_stop): the progress step stops the
 * job for the first one noted since its last pass, as the root cause keeps the first failure. */
enum stop_cause {
    STOP_NONE,
    STOP_FAILURE,     /* a rank failed, or a node with ranks was lost: restarts if attempts remain */
    STOP_SCHEDULER,   /* the scheduler is ending the job (Slurm's SIGTERM): no restart */
};

struct controller {
    struct run_opts o;
    const struct hostlist *hl;
    struct frontend fe;
    struct job *job;
    struct run_files *files;    /* the run's files (job->sink); NULL: in memory only (check) */
    struct cnode *nodes;
    struct crank *ranks;
    size_t n;
    enum after_stop after;
    enum job_state stop_state;  /* the job's state when the stop completes without restart */
    bool auto_restart;          /* the stop was for a failure: restart if attempts remain */
    bool quit;
    bool interactive;           /* the front end has input: stay at the end until quit */
    int signals;                /* termination signals received */
    struct evloop *el;          /* util/evloop.h: the signals, the front end's input, the agents */
    struct evloop_watch *in_w;  /* the front end's input */
    short *rev;                 /* per node: what poll() said of its fds this pass */
    char token[33];
    char *log_root;             /* --log-dir made absolute */
    char *workdir;
    char *agent_path, *train_path;
    char **user_argv;           /* CMD (NULL: the default command) */
    struct env_list exports;
    struct metrics_parser *metrics;
    struct hang_opts hang;
    struct preflight *pf;       /* the preflight (NULL: --no-check, local, or not begun) */
    int check_exit;             /* check-only: the report's exit code */
    int64_t next_ping_ms, next_tick_ms, next_link_ms, stop_deadline_ms;
    uint64_t durable_gen;     /* logw_durable_gen at the last ping (its acknowledgements) */
    uint64_t in_since_sync;   /* bytes from the nodes since the last sync of the logs was asked */
    uint64_t sync_gen;        /* logw_durable_gen when it was asked (a flood sync waits for it) */
    int64_t sync_ms;          /* when it was asked */
    size_t ev_head_seen, ev_count_seen;
    uint64_t drawn_generation;
    int64_t fe_due_ms;
    bool more_lines;            /* a node has lines left unread: poll without waiting */
    size_t pump_from;           /* the node the next pass reads first (a pass cut short) */
    size_t spawns_due;          /* nodes whose spawn waits its turn (ctl_spawn_more) */
    size_t spawn_next;          /* the node ctl_spawn_more looks at first */
    size_t spawn_pass_nodes;    /* the tests' DDPTOP_TEST_SPAWN_PASS_NODES: at most this many a pass */
    bool starts_pending;        /* ctl_start_queued stopped for this pass with starts left to do */
    int64_t in_win_ms;          /* what the nodes sent lately (loop_once's coalescing): the */
    uint64_t in_win_bytes, in_prev_bytes; /* window's start, its bytes, the window before's */
    bool transport_noticed;     /* how the agents start was said in an event (once per run) */
    bool omp_noticed;           /* the OMP_NUM_THREADS=1 default was announced (once a run) */
    bool stop_for_hang;         /* the stop in progress is --on-hang's */
    int stop_for_health;        /* ... or --on-nan's or --on-spike's (enum health_kind; 0 not) */
    enum stop_cause stop_noted; /* what the handlers found since the last progress step */
    int64_t last_pass_ms;       /* the end of the loop's last pass */
    int64_t last_woke_ms;       /* its start (poll's return): a long pass is the controller's own stall */
    int64_t stall_ms;           /* the last such stall: how long, and when it ended */
    int64_t stall_end_ms;
    int64_t stall_said_ms;      /* when a stall was last said as an event */
    bool writer_full;           /* the log writer's queue is past WRITER_HIGH: lines wait */
    bool abandon;               /* leaving the run to its agents (they wait; ddptop attach) */
    bool allocation_released;   /* --salloc's allocation was given back at the job's end */
    char **start_env;           /* the environment and directory we started in (the record's) */
    size_t n_start_env;
    char *start_cwd;
    int record_state;           /* the job state adopt.json says; -1 before it is first written */
    struct run_record *adopt;   /* --adopt: the record of the run taken over */
    struct ctl_stacks *stacks;  /* stack dumps in flight and the hang action (controller_stacks.c) */
    struct http_serve *om_serve; /* --metrics (controller_metrics.c); NULL without */
    struct notify *notify;      /* --notify (notify.h); NULL: none */
    struct strbuf line_in;      /* the agent line being decoded (ctl_agent_lines), reused */
    char *unesc;                /* fast_out's decoded text, reused (a malloc and free per message */
    size_t unesc_cap;           /* of up to 64 KiB was a tenth of the loop's CPU when streaming) */
};

/* ---- controller_run.c: the loop, construction ----------------------------------------------- */

/* (controller.h: controller_new, controller_run, ...) */

/* ---- controller_act.c: what a person or a signal asks (controller.h: controller_act) ---------- */

/* The signals the run answers, caught through the loop's self-pipe (-1: no pipe); restored at
 * the end. */
int ctl_signals_install(struct controller *c);
void ctl_signals_restore(struct controller *c);

/* ---- controller_adopt.c: a run taken over (--adopt) ------------------------------------------ */

int ctl_adopt_read(struct controller *c, char *err, size_t errlen);
/* The run as its record and files left it: every node unreachable (a bridge follows), and a
 * stop under way goes on. */
void ctl_adopt_begin(struct controller *c);

/* ---- controller.c: the progress step and the phases it drives -------------------------------- */

/* Once per loop pass, after the nodes' lines and the timers: acts on the stop the handlers
 * noted, then moves the job's phase on (the preflight, connecting, running, stopping) and the
 * hang collection, deciding to stop, restart, exclude or finish. */
void ctl_progress(struct controller *c);
/* Sends stop to every node; the job is `during` until every node answered, then `after_state`
 * unless it restarts (after == AFTER_RESTART, or auto_restart with attempts left). */
void ctl_begin_stop(struct controller *c, enum job_state during, enum job_state after_state,
                    enum after_stop after, bool auto_restart);
/* A rank failed or a node was lost while the job runs: FAILING, restarting if attempts remain. */
void ctl_rank_failed_begin_stop(struct controller *c);
/* Connects (or reconnects) the agents, then spawns the attempt's ranks. */
void ctl_launch_begin(struct controller *c);
/* attempt + 1 and launch again (why: for the event). */
void ctl_restart(struct controller *c, const char *why);
/* The job ended in state st (DONE, FAILED, STOPPED): its agents and --salloc's allocation are
 * let go; the loop leaves unless interactive. */
void ctl_finish(struct controller *c, enum job_state st);
/* The `end` event of the job's present state (DONE, FAILED, STOPPED, CHECK_FAILED) for
 * `ddptop ls`: a stop that a signal asked for is an interruption. */
void ctl_record_end(struct controller *c);

/* ---- controller_agent.c: the agents' messages ---------------------------------------------- */

/* Every line a node's agent sent since the last call, each through the message table. */
void ctl_agent_lines(struct controller *c, size_t node);

/* ---- controller_link.c: the links of agents that hold ranks, lost nodes ---------------------- */

/* docs/run.md "When the controller loses a node": silence, reconnects through a bridge,
 * catching up, acknowledgements, the controller's own stalls. */
bool ctl_link_applies(const struct controller *c, size_t node);
void ctl_link_heard(struct controller *c, size_t node);
void ctl_link_check(struct controller *c, int64_t now);
/* The node is lost for good, why told as what happened (the controller's own stall first). */
void ctl_link_lost(struct controller *c, size_t node, const char *why);
/* Its transport ended: reconnect, or (agent_gone) the node is lost. */
void ctl_link_ended(struct controller *c, size_t node, const char *why, bool agent_gone);
void ctl_link_bridge(struct controller *c, size_t node);
void ctl_link_resumed(struct controller *c, size_t node, const cJSON *hello);
void ctl_link_resume_answer(struct controller *c, size_t node, const cJSON *m);
/* A bridge said the agent is gone (final: nothing listens where it would, or it died holding
 * the link): the node is lost. Not final: that bridge failed; another will try. */
void ctl_link_gone(struct controller *c, size_t node, const char *why, bool final);
/* The acknowledgements for a ping to node, from what the log index holds: the "ack" member
 * (`,"ack":{"RANK":seq,...}`) appended to the ping's text, or nothing when none moved. */
void ctl_link_ack(struct controller *c, size_t node, struct strbuf *ping);
/* The loop did not run for gap_ms: said, and held (below). */
void ctl_link_stalled(struct controller *c, int64_t gap_ms);
/* held_ms were the controller's own (a stall, a log writer that was behind): the nodes'
 * silence, their greeting deadlines and a stop's deadline do not count them. */
void ctl_link_hold(struct controller *c, int64_t held_ms);
/* A fresh agent greeted on node: its numbering starts again (the bases move on). */
void ctl_link_fresh_agent(struct controller *c, size_t node);
/* Records node as lost: its ranks (LOST), its transport closed, the event, the root cause
 * (summary: told whole; NULL: "node N lost: why"), its fault (--nnodes), or the preflight's
 * row while CHECKING. What follows is the progress step's: a stop is noted when the job runs;
 * while it launches the progress step sees the active node lost. */
void ctl_node_lost_as(struct controller *c, size_t node, const char *why, const char *summary);
void ctl_node_lost(struct controller *c, size_t node, const char *why);

/* ---- controller_check.c: the preflight as the first phase ------------------------------------ */

void ctl_check_begin(struct controller *c);
/* The preflight's part of the progress step: its deadlines and requests; true once every node
 * is done (the report is final, shown, and `ddptop check`'s exit code set). */
bool ctl_check_step(struct controller *c);
/* After it was done, for a run: the rank map by the GPUs found, NCCL's expectations; returns
 * whether ssh, env or tcp failed on a node (the launch is refused, unless spares make up). */
bool ctl_check_settle(struct controller *c);
/* The preflight's event: how many hosts pass, warn and fail, and whether the launch is refused. */
void ctl_check_say(struct controller *c, bool refused);
/* Node i's agent greeted: the preflight's checks begin there. */
void ctl_check_node_up(struct controller *c, size_t node, const cJSON *hello);
/* Node i is gone during the preflight (never connected, or its agent went away). */
void ctl_check_node_down(struct controller *c, size_t node, const char *why, const char *hint);
int64_t ctl_check_deadline_ms(const struct controller *c);

/* ---- controller_stacks.c: stack dumps (the dashboard's and --on-hang's), the hang collection - */

void ctl_stacks_user(struct controller *c, int rank);      /* the front end's ACT_STACKS */
/* hang_check found a new stall: the attempt's first one starts --on-hang's collection. */
void ctl_hang_stalled(struct controller *c);
/* An answer (stacks, list, read, or an error) to one of its requests: true when it was one. */
bool ctl_stacks_answer(struct controller *c, size_t node, int id, const char *ev, const cJSON *m);
/* The node's connection is replaced: its requests in flight are given up. */
void ctl_stacks_node_reset(struct controller *c, size_t node);
/* What the hang collection found once it ended: the job goes on, or (its event said so and
 * the hang is the root cause) must stop, restarting or not (--on-hang restart or stop). */
enum hang_verdict { HANG_GOES_ON, HANG_STOP, HANG_RESTART };
/* Deadlines, the next dumps, and the end of a hang collection (every progress step). */
enum hang_verdict ctl_stacks_progress(struct controller *c);
void ctl_stacks_free(struct controller *c);

/* ---- controller_gpu.c: GPU telemetry --------------------------------------------------------- */

void ctl_gpu_watch(struct controller *c, size_t i);
/* Handlers of the gpu_watch answer and the gpu samples (the message table's). */
void ctl_on_gpu_watch(struct controller *c, size_t i, struct wire_msg *m);
void ctl_on_gpu(struct controller *c, size_t i, struct wire_msg *m);

/* ---- controller_exits.c: the ranks' exits ---------------------------------------------------- */

/* An exit message of node's agent (not yet applied), taken over: a failure holds it and the
 * node's other exits for EXIT_HOLD_MS, so that they are applied in the agent's order. */
void ctl_exits_hold(struct controller *c, size_t node, cJSON *exit_msg);
/* Applies (in the agent's order) or drops the node's held exit messages. */
void ctl_exits_release(struct controller *c, size_t node, bool apply);

/* ---- controller_spare.c: the job's shape and spare nodes (--nnodes) --------------------------- */

/* The job of this run's shape; gpu_counts (per node, -1 unknown) for --nproc-per-node gpu. */
struct job *ctl_make_job(struct controller *c, const int *gpu_counts, char *err, size_t errlen);
bool ctl_spare_on(const struct controller *c);                 /* --nnodes given (a run) */
/* The first roles: the first MAX nodes active, the rest spares. */
void ctl_spare_init(struct controller *c);
/* Node failed through its own fault (lost, agent gone, XID/ECC): excluded before the next
 * attempt. Only the first why of an attempt is kept; nothing without --nnodes. */
void ctl_spare_fault(struct controller *c, size_t node, const char *why);
void ctl_spare_faults_clear(struct controller *c);
/* Excludes the nodes with a fault, spares take their places (events, Slurm's drain hint).
 * false: fewer than MIN are left; the root cause says so and the job must end. */
bool ctl_spare_replace(struct controller *c);
/* After the preflight: nodes whose ssh, env or tcp failed are excluded; false with *refused
 * when fewer than MIN good ones are left. The spares' agents are let go. */
bool ctl_spare_after_check(struct controller *c, const struct check_report *r, bool *refused);

/* ---- controller_msg.c: what every handler shares --------------------------------------------- */

/* Numbers in node's messages (wire/json_num.h). ctl_int: member key of message m (an ev
 * message) as a whole number in [lo, hi]; dflt when absent or null (quietly: agents leave
 * members out) and when it is anything else, which ctl_bad_number says. ctl_bad_number: one
 * event "node N: EV message: KEY V out of range; ignored", for the first CTL_BAD_NUMBERS_SAID
 * of a node, so a hostile agent cannot flood the events. */
#define CTL_BAD_NUMBERS_SAID 5
long long ctl_int(struct controller *c, size_t node, const char *ev, const cJSON *m, const char *key, long long lo,
                  long long hi, long long dflt);
void ctl_bad_number(struct controller *c, size_t node, const char *ev, const char *key, const cJSON *v);
/* The members every rank message has: its rank (-1: absent or bad), its message number q (0:
 * none; below 2^53, so a double holds it exactly) and the attempt it belongs to (key "a" or
 * "attempt"; absent: dflt). A bad q or attempt is -1 and -2: the message is dropped, since
 * taking it would take its number (or put it in another attempt's log). */
int ctl_msg_rank(struct controller *c, size_t node, const char *ev, const cJSON *m);
long long ctl_msg_seq(struct controller *c, size_t node, const char *ev, const cJSON *m);
int ctl_msg_attempt(struct controller *c, size_t node, const char *ev, const cJSON *m, const char *key, int dflt);
/* rank is one of node's ranks. */
bool ctl_rank_on_node(const struct controller *c, size_t node, int rank);
/* The job runs and no stop was noted since the last progress step: what a handler that would
 * have the job stop asks first (after a noted stop the job is as good as stopping). */
bool ctl_stop_open(const struct controller *c);
/* A handler found that the job must stop: noted for the progress step when the stop is open
 * (the first reason of a pass wins). */
void ctl_note_stop(struct controller *c, enum stop_cause why);

/* ---- controller_record.c: the run's record ---------------------------------------------------- */

/* The environment and directory we started in, before anything changes them. */
void ctl_start_snapshot(struct controller *c);
/* adopt.json now (run_record.h): written when an attempt begins and when the job's state
 * changes. */
void ctl_record_write(struct controller *c);

/* ---- controller_metrics.c: the OpenMetrics endpoint (--metrics) ------------------------------ */

/* Listens where --metrics says (nothing without it); -1 with err filled when it cannot (a
 * configuration error, found before the run's directory is made). Then, once the run's files
 * are open, an event says where (ctl_metrics_announce). */
int ctl_metrics_open(struct controller *c, char *err, size_t errlen);
void ctl_metrics_announce(struct controller *c);
void ctl_metrics_close(struct controller *c);

/* ---- controller_node.c: the node plumbing ---------------------------------------------------- */

void ctl_send(struct controller *c, size_t node, cJSON *msg);   /* takes msg */
void ctl_send_line(struct controller *c, size_t node, const char *line); /* one JSON line, no '\n' */
/* A new request {"op":op,"id":*id} to node's agent, its answer tagged tag (wire/client.h). */
cJSON *ctl_request(struct controller *c, size_t node, const char *op, int tag, int *id);
/* Greeted, not lost: requests can be sent. */
bool ctl_node_usable(const struct cnode *nd);
bool ctl_node_active(const struct controller *c, size_t node); /* runs ranks this attempt */
size_t ctl_active_count(const struct controller *c);
size_t ctl_first_active(const struct controller *c);           /* MASTER_ADDR's node */
/* What the run's kind of transport opens nodes with (ssh/transport_kind.h); stderr_path: where
 * the agents' own stderr goes (the caller's). */
struct transport_env ctl_transport_env(const struct controller *c, const char *stderr_path);
/* New transports for the nodes in need (need[i]), through the run's kind of transport
 * (ssh/transport_kind.h), replacing what they had: agents, or with bridge bridges to their
 * waiting agents. Nothing is started. */
void ctl_open_nodes(struct controller *c, const bool *need, bool bridge);
/* Creates the transports of nodes that have none or lost theirs (renewed[i] set for each, when
 * not NULL: their requests in flight are gone), and starts as many as --fanout allows;
 * ctl_start_queued starts more as others finish connecting. */
void ctl_connect_nodes(struct controller *c, bool *renewed);
/* Starts queued transports, up to --fanout connecting at once, for a few ms a pass (the rest
 * next pass: starts_pending); called every pass while the nodes connect. */
void ctl_start_queued(struct controller *c);
/* How long a node's agent may take to greet once its transport is up: --timeout, and what its
 * kind adds (a Slurm step's creation: srun --immediate waits up to 60 s for it). */
int64_t ctl_hello_timeout_ms(const struct controller *c);
/* What the environment of node i's local rank k depends on. */
struct rank_env_in ctl_rank_env_in(const struct controller *c, size_t node, int k);
/* The spawn request of node i for the present attempt (its id in *id). */
cJSON *ctl_spawn_request(struct controller *c, size_t node, int *id);
/* Node i's spawn for the present attempt is due: ctl_spawn_more sends it in its turn, or
 * ctl_send before any other request to that node, whichever comes first. */
void ctl_spawn_due(struct controller *c, size_t node);
/* Sends due spawns, in node order, until budget_ms have passed; true while some remain (the
 * loop does not sleep then). */
bool ctl_spawn_more(struct controller *c, int64_t budget_ms);
/* Asks node's agent to stop its ranks (SIGTERM, SIGKILL after --term-timeout). */
void ctl_send_stop(struct controller *c, size_t node);
/* One agent no longer needed (a spare after the preflight, a node out of the active set, or
 * all of them at the end): told to exit, its transport closed; connected afresh if needed. */
void ctl_release_node(struct controller *c, size_t i);
/* Tells every agent to exit and closes its transport; with abandon (or for a node still
 * unreachable) the agents are left waiting for a controller instead. */
void ctl_release_all(struct controller *c, bool abandon);

#endif
