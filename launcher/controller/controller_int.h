/* Internals of the controller shared by its files (declared below under the file that defines
 * them): controller_run.c (construction, the job's shape, the loop and its timers, the actions,
 * the front end's draw), controller.c (the requests to a node, connecting the agents,
 * launching, stopping, restarting, ending; run_opts' init and done), controller_check.c (the
 * preflight as the first phase), controller_stacks.c (stack dumps, the hang action),
 * controller_link.c (silent and unreachable nodes, reconnects, acknowledgements),
 * controller_agent.c (the agents' lines into the job model), controller_adopt.c (the run's
 * record, taking a run over), controller_gpu.c (GPU telemetry). Other modules use
 * controller.h. */
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
    int tries;                /* reconnect attempts since it went away */
    int resume_id;            /* the resume in flight; 0 none */
    char *gone;               /* a bridge said the agent is gone: why */
    bool no_reconnect;        /* the agent said it cannot be reached again (no socket) */
    bool watchdog_fired;      /* --agent-grace 0: its agent said its watchdog ended it */
    int spawn_id;             /* the request of this attempt; 0: not sent */
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
    int64_t in_win_ms;          /* what the nodes sent lately (loop_once's coalescing): the */
    uint64_t in_win_bytes, in_prev_bytes; /* window's start, its bytes, the window before's */
    bool transport_noticed;     /* how the agents start was said in an event (once per run) */
    bool omp_noticed;           /* the OMP_NUM_THREADS=1 default was announced (once a run) */
    bool stop_for_hang;         /* the stop in progress is --on-hang's */
    int64_t last_pass_ms;       /* the loop's last pass: a long gap is the controller's own stall */
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
    struct strbuf line_in;      /* the agent line being decoded (ctl_agent_lines), reused */
    char *unesc;                /* fast_out's decoded text, reused (a malloc and free per message */
    size_t unesc_cap;           /* of up to 64 KiB was a tenth of the loop's CPU when streaming) */
};

/* controller.c */
void ctl_send(struct controller *c, size_t node, cJSON *msg);   /* takes msg */
/* What the run's kind of transport opens nodes with (ssh/transport_kind.h); stderr_path: where
 * the agents' own stderr goes (the caller's). */
struct transport_env ctl_transport_env(const struct controller *c, const char *stderr_path);
/* New transports for the nodes in need (need[i]), through the run's kind of transport
 * (ssh/transport_kind.h), replacing what they had: agents, or with bridge bridges to their
 * waiting agents. Nothing is started. */
void ctl_open_nodes(struct controller *c, const bool *need, bool bridge);
/* The spawn request of node i for the present attempt (its id in *id). */
cJSON *ctl_spawn_request(struct controller *c, size_t node, int *id);
/* A new request {"op":op,"id":*id} to node's agent, its answer tagged tag (wire/client.h). */
cJSON *ctl_request(struct controller *c, size_t node, const char *op, int tag, int *id);
/* Greeted, not lost: requests can be sent. */
bool ctl_node_usable(const struct cnode *nd);
void ctl_events_flush(struct controller *c);                     /* new events -> front end */
void ctl_node_lost(struct controller *c, size_t node, const char *why);
/* Asks node's agent to stop its ranks (SIGTERM, SIGKILL after --term-timeout). */
void ctl_send_stop(struct controller *c, size_t node);
/* The same, the root cause told whole by summary (NULL: "node N lost: why"). */
void ctl_node_lost_as(struct controller *c, size_t node, const char *why, const char *summary);
void ctl_rank_failed_begin_stop(struct controller *c);
void ctl_check_progress(struct controller *c);
/* The job ended in state st (DONE, FAILED, STOPPED): its agents and --salloc's allocation are
 * let go; the loop leaves unless interactive. */
void ctl_finish(struct controller *c, enum job_state st);
/* Tells every agent to exit and closes its transport; with abandon (or for a node still
 * unreachable) the agents are left waiting for a controller instead. */
void ctl_release_all(struct controller *c, bool abandon);
/* One agent no longer needed (a spare after the preflight, a node out of the active set, or
 * all of them at the end): told to exit, its transport closed; connected afresh if needed. */
void ctl_release_node(struct controller *c, size_t i);
/* The `end` event of the job's present state (DONE, FAILED, STOPPED, CHECK_FAILED) for
 * `ddptop ls`: a stop that a signal asked for is an interruption. */
void ctl_record_end(struct controller *c);
/* Connects (or reconnects) the agents, then spawns the attempt's ranks. */
void ctl_launch_begin(struct controller *c);
/* How long a node's agent may take to greet once its transport is up: --timeout, and what its
 * kind adds (a Slurm step's creation: srun --immediate waits up to 60 s for it). */
int64_t ctl_hello_timeout_ms(const struct controller *c);
/* Creates the transports of nodes that have none or lost theirs, and starts as many as
 * --fanout allows; start_queued starts more as others finish connecting. */
void ctl_connect_nodes(struct controller *c);
void ctl_start_queued(struct controller *c);
/* Sends stop to every node; the job is `during` until every node answered, then `after_state`
 * unless it restarts (after == AFTER_RESTART, or auto_restart with attempts left). */
void ctl_begin_stop(struct controller *c, enum job_state during, enum job_state after_state,
                    enum after_stop after, bool auto_restart);
/* attempt + 1 and launch again (why: for the event). */
void ctl_restart(struct controller *c, const char *why);

/* controller_run.c */
void ctl_draw(struct controller *c);
/* The job of this run's shape; gpu_counts (per node, -1 unknown) for --nproc-per-node gpu. */
struct job *ctl_make_job(struct controller *c, const int *gpu_counts, char *err, size_t errlen);

/* controller_check.c: the preflight as the first phase, on the run's own connections. */
void ctl_check_begin(struct controller *c);
void ctl_check_progress_phase(struct controller *c);
/* Node i's agent greeted: the preflight's checks begin there. */
void ctl_check_node_up(struct controller *c, size_t node, const cJSON *hello);
/* Node i is gone during the preflight (never connected, or its agent went away). */
void ctl_check_node_down(struct controller *c, size_t node, const char *why, const char *hint);
int64_t ctl_check_deadline_ms(const struct controller *c);

/* controller_stacks.c: stack dumps (the dashboard's and --on-hang's) and the hang action. */
void ctl_stacks_user(struct controller *c, int rank);      /* the front end's ACT_STACKS */
/* hang_check found a new stall: the attempt's first one starts --on-hang's action. */
void ctl_hang_stalled(struct controller *c);
/* An answer (stacks, list, read, or an error) to one of its requests: true when it was one. */
bool ctl_stacks_answer(struct controller *c, size_t node, int id, const char *ev, const cJSON *m);
/* The node's connection is replaced: its requests in flight are given up. */
void ctl_stacks_node_reset(struct controller *c, size_t node);
/* Deadlines, the next dumps, and the end of a hang collection (every loop pass). */
void ctl_stacks_progress(struct controller *c);
void ctl_stacks_free(struct controller *c);

/* controller_link.c: the links of agents that hold ranks (docs/run.md "When the controller
 * loses a node"): silence, reconnects through a bridge, catching up, acknowledgements, the
 * controller's own stalls. */
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
/* The acknowledgements for a ping to node ("ack" member), from what the log index holds. */
void ctl_link_ack(struct controller *c, size_t node, cJSON *ping);
/* The loop did not run for gap_ms: said, and held (below). */
void ctl_link_stalled(struct controller *c, int64_t gap_ms);
/* held_ms were the controller's own (a stall, a log writer that was behind): the nodes'
 * silence, their greeting deadlines and a stop's deadline do not count them. */
void ctl_link_hold(struct controller *c, int64_t held_ms);
/* A fresh agent greeted on node: its numbering starts again (the bases move on). */
void ctl_link_fresh_agent(struct controller *c, size_t node);

/* controller_agent.c: every line a node's agent sent since the last call. */
void ctl_agent_lines(struct controller *c, size_t node);
/* Applies (flush) or drops the node's held exit messages. */
void ctl_exits_release(struct controller *c, size_t node, bool apply);
/* Numbers in node's messages (wire/json_num.h). ctl_int: member key of message m (an ev
 * message) as a whole number in [lo, hi]; dflt when absent or null (quietly: agents leave
 * members out) and when it is anything else, which ctl_bad_number says. ctl_bad_number: one
 * event "node N: EV message: KEY V out of range; ignored", for the first CTL_BAD_NUMBERS_SAID
 * of a node, so a hostile agent cannot flood the events. */
#define CTL_BAD_NUMBERS_SAID 5
long long ctl_int(struct controller *c, size_t node, const char *ev, const cJSON *m, const char *key, long long lo,
                  long long hi, long long dflt);
void ctl_bad_number(struct controller *c, size_t node, const char *ev, const char *key, const cJSON *v);

/* controller_adopt.c: the run's record, and taking a run over (--adopt). */
void ctl_start_snapshot(struct controller *c);
void ctl_record_write(struct controller *c);
int ctl_adopt_read(struct controller *c, char *err, size_t errlen);
void ctl_adopt_begin(struct controller *c);

/* controller_spare.c: spare nodes (--nnodes). */
bool ctl_spare_on(const struct controller *c);                 /* --nnodes given (a run) */
bool ctl_node_active(const struct controller *c, size_t node); /* runs ranks this attempt */
size_t ctl_active_count(const struct controller *c);
size_t ctl_first_active(const struct controller *c);           /* MASTER_ADDR's node */
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

/* GPU telemetry (controller_gpu.c). */
void ctl_gpu_watch(struct controller *c, size_t i);
void ctl_on_gpu_watch(struct controller *c, size_t i, const cJSON *m);
void ctl_on_gpu(struct controller *c, size_t i, const cJSON *m);

#endif
