/* The job model: everything the controller knows about a run, its nodes and its ranks. The
 * controller and the protocol decoder write it; the hang detector reads and marks it; the
 * views (tui/) and the headless printer only read it. The model does no I/O: what is to be
 * kept on disk (every byte a rank printed, each event, GPU samples) it hands to its sink
 * (struct job_sink, below), which the controller points at the run's files (record/
 * run_files.h, written by the log writer's thread), so no line is lost even when the screen
 * cannot keep up, and no disk ever holds up the controller's loop; memory stays bounded by
 * the per-rank rings (log_ring.h, series.h). */
#ifndef DDPTOP_JOB_H
#define DDPTOP_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log_ring.h"
#include "series.h"

struct host;
struct job;

/* --log-dir when none is given (relative to the current directory): where `ddptop run`
 * writes runs and `ddptop ls` and `ddptop logs` look for them. */
#define JOB_LOG_ROOT_DEFAULT "ddptop-logs"

enum job_state {
    JOB_CHECKING,     /* preflight running */
    JOB_CHECK_FAILED, /* preflight refused; waiting for the user (launch anyway / quit) */
    JOB_LAUNCHING,    /* agents connecting, ranks being spawned */
    JOB_RUNNING,
    JOB_STALLED,      /* running, but at least one rank stalled */
    JOB_FAILED,       /* ended: a failure past the allowed restarts */
    JOB_RESTARTING,   /* stopping the attempt before the next one */
    JOB_STOPPING,     /* stopped by the user (K, q, Ctrl-C) */
    JOB_STOPPED,
    JOB_DONE,         /* every rank exited 0 */
    JOB_FAILING,      /* a rank failed or a node was lost: the others are being stopped */
};

enum rank_state {
    RANK_PENDING,     /* not spawned yet in this attempt */
    RANK_RUNNING,
    RANK_STALLED,     /* alive, step not advancing for --hang-timeout */
    RANK_EXITED,      /* exit code 0 */
    RANK_FAILED,      /* non-zero exit or killed by a signal not sent by us */
    RANK_STOPPED,     /* ended by us (job failure elsewhere, restart, user stop) */
    RANK_LOST,        /* its node was lost: state unknown */
};

enum node_state {
    NODE_CONNECTING,
    NODE_READY,       /* agent up */
    NODE_RUNNING,     /* ranks spawned */
    NODE_LOST,        /* heartbeats stopped or the connection dropped */
    NODE_FAILED,      /* could not connect / start the agent */
    NODE_DONE,        /* its ranks ended and the agent was told to exit */
};

/* A node's part in the present attempt (--nnodes, docs/run.md "Spare nodes"): without
 * --nnodes every node is active. */
enum node_role {
    NODE_ACTIVE,      /* runs ranks in this attempt (first_rank, n_ranks; node_rank) */
    NODE_SPARE,       /* known to the run, takes the place of an excluded node */
    NODE_EXCLUDED,    /* failed through its own fault: never used again in this run (why) */
};

/* How the controller hears from a node whose agent holds ranks (docs/run.md "When the
 * controller loses a node"). Apart from node_state: a RUNNING node may be silent. */
enum node_link {
    LINK_UP,          /* its messages arrive */
    LINK_SILENT,      /* nothing for a while: its ranks are unknown, not failed */
    LINK_UNREACHABLE, /* its connection ended or was given up: reconnecting */
};

enum log_stream { LOG_STDOUT = 0, LOG_STDERR = 1, LOG_SYSTEM = 2 /* ddptop's own notes */ };

/* Default bounds of the in-memory history per rank (log lines and text bytes, oldest dropped;
 * metric points). job_new scales them down for large jobs: min(default, the job's budget /
 * ranks), the budget 1M lines, 128 MiB of text and 1M points, with at least 500 lines, 64 KiB
 * and 512 points per rank (docs/logs.md); the log files on disk are never bounded. */
#define JOB_LOG_MAX_LINES   10000
#define JOB_LOG_MAX_BYTES   (4u * 1024 * 1024)
#define JOB_SERIES_MAX      4096
#define JOB_EVENTS_MAX      4096
/* job_metric_add's step when the line carried none: the model infers it (docs/logs.md). */
#define JOB_STEP_UNKNOWN    (-1L)

struct rank_info {
    int rank, local_rank, node;
    enum rank_state state;
    int pid;                  /* 0: not running */
    int gpu;                  /* NVML index of the GPU it uses on its node (job/gpu.c); -1 */
    int exit_code;            /* valid when exited */
    int term_signal;          /* 0 when not killed by a signal */
    int oom_kills;            /* the kernel's OOM kills in the rank's cgroup while it ran (the
                               * delta of memory.events oom_kill, read by its agent and carried
                               * by the exit message); -1 unknown */
    char proc_state;          /* /proc state R S D T Z, '?' unknown */
    double cpu_pct;           /* from the agent's per-second status; < 0 unknown */
    int64_t last_output_ms;   /* mono_ms() here when its last line arrived; 0 none yet */
    int64_t step_changed_ms;  /* mono_ms() when its step last advanced (or it started) */
    bool has_step, has_loss;
    long step;
    double loss, step_ms, tokens_per_s;   /* NAN when unknown */
    bool straggler;           /* set by the detector */
    struct metric_series series;
    struct log_ring log;
    char *partial_text;       /* not used by the model; reserved for decoders */
    /* The agent's numbering of its messages about this rank (controller/controller_agent.c): the
     * last one taken, and the base added to it for the log writer (a new agent starts from 1
     * again; the base keeps the numbers the log index records rising). */
    uint64_t seq, seq_base;
    /* Kept by the model and the hang detector (per attempt). */
    long loss_lines;          /* metric lines seen this attempt (step inference) */
    bool step_explicit;       /* a metric line with a step was seen this attempt */
    long stalled_step;        /* the step when it was marked stalled */
    bool stalled_has_step;
    int64_t straggler_since_ms; /* when the straggler condition started holding; 0 none */
    /* Kept by the health rules (job/health.c, per attempt). */
    unsigned char loss_bad;   /* enum loss_bad (series.h) of its last loss */
    long nan_step;            /* the step its loss last became NaN or inf; -1 none */
    long spike_step;          /* the step of its last spike (--loss-spike); -1 none */
    unsigned char nan_bad;    /* what its loss became at nan_step (enum loss_bad) */
    bool in_nan;              /* its loss is NaN or inf now (one event an episode) */
    bool spiking;             /* its loss is above the spike rule now (one event an episode) */
};

/* A GPU as its node's last sample had it (job/gpu.c keeps these). */
#define GPU_HIST 60           /* utilisation samples kept per GPU */
#define GPU_PIDS 16

struct gpu_info {
    int index;                /* NVML's index on its node */
    char name[64];
    char uuid[64];            /* "GPU-..."; "" unknown */
    double util, mem_util;    /* percent; NAN when the sample lacked it */
    double mem_used_mib, mem_total_mib, power_w, power_limit_w, temp_c, sm_mhz;
    bool has_throttle, has_ecc;
    unsigned long long throttle, ecc;
    int n_pids;
    long pids[GPU_PIDS][2];   /* process id, its process group */
    int rank;                 /* the job's rank using it (set by job/gpu.c); -1 none */
    uint8_t hist[GPU_HIST];   /* utilisation, oldest first, hist_n of them */
    int hist_n;
    unsigned long xids;       /* XIDs its node reported for it since the run began (carried
                               * from sample to sample like hist; the OpenMetrics counter) */
    int last_xid;             /* the latest one's number; 0 none */
};

struct node_gpus {
    int n;
    struct gpu_info *g;
    bool seen;                /* a sample came */
    int64_t kept_ms;          /* mono_ms() of its last line in gpu.jsonl; 0 none */
    int64_t sample_wall_ns;   /* when the latest sample came (wall clock, its line's time) */
    bool pending;             /* the latest sample is not in gpu.jsonl (job_gpu_flush keeps it) */
    int busy_attempt;         /* the attempt busy_since_ms and busy_kept are of */
    int64_t busy_since_ms;    /* mono_ms() of the first sample with a rank of the node running */
    bool busy_kept;           /* a line was kept GPU_BUSY_AFTER_MS after that (this attempt) */
    char *visible;            /* CUDA_VISIBLE_DEVICES the node's ranks get; NULL: unset */
};

struct node_info {
    const struct host *host;  /* NULL for the local (embedded) node */
    char *name;               /* hostfile name, or "localhost" */
    enum node_state state;
    int first_rank, n_ranks;  /* n_ranks 0 when not active */
    enum node_role role;
    int node_rank;            /* NODE_RANK among the active nodes; -1 when not active */
    int want_ranks;           /* the ranks it runs when active (plan_ranks_per_node) */
    char *excluded;           /* NODE_EXCLUDED: why ("lost (agent killed by signal 9)") */
    int excluded_attempt;     /* the attempt it was excluded after (-1: the preflight) */
    int64_t last_heartbeat_ms;
    enum node_link link;
    int64_t link_since_wall_ns; /* when link last changed (wall clock, for people) */
    int64_t last_seen_wall_ns;  /* its last message (wall clock): "unknown since" */
    char *error;              /* why it failed or was lost; NULL */
    struct node_gpus gpus;    /* its GPUs' latest sample (job/gpu.h) */
    char *addr;               /* the address its agent was reached at (job_node_address); NULL */
};

enum job_event_kind {
    EV_LAUNCH, EV_EXIT, EV_FAILURE, EV_ROOT_CAUSE, EV_STALL, EV_STRAGGLER, EV_NODE_LOST,
    EV_RESTART, EV_STOP, EV_DONE, EV_INFO,
    EV_RESUME,                /* a stalled rank's step moved again */
    EV_STACKS,                /* --on-hang: every rank's stacks were saved (where, and the files) */
    EV_GPU,                   /* a GPU throttles or stops, an XID, ECC errors (job/gpu.c) */
    EV_END,                   /* the run ended: its state and exit status (job_event_end) */
    EV_SIGNAL,                /* a scheduler's warning signal (SIGUSR1/2) reached the ranks */
    EV_NCCL,                  /* NCCL's odd ones out and grouped WARNs (job/nccl_odd.c) */
    EV_NAN,                   /* a rank's loss became NaN or inf (job/health.c) */
    EV_SPIKE,                 /* a rank's loss jumped above --loss-spike's rule (job/health.c) */
};
/* How many kinds (not in the enum, so that switches over it stay exhaustive): a new kind goes
 * last and moves this with it. */
#define EV_KINDS (EV_SPIKE + 1)

/* How a run ended, or where it stands, as `ddptop ls` shows it and the `end` event of
 * events.jsonl records it (the names are run_state_name's; docs/logs.md). */
enum run_state {
    RUN_UNKNOWN,      /* events.jsonl unreadable or corrupt, or too old to tell */
    RUN_RUNNING,      /* its controller is alive and recorded no end */
    RUN_SUCCEEDED,    /* every rank exited 0 */
    RUN_FAILED,       /* a failure past the allowed restarts, or the preflight refused */
    RUN_STOPPED,      /* stopped on purpose (the dashboard's stop or quit) */
    RUN_INTERRUPTED,  /* ended by a signal (Ctrl-C, SIGTERM, SIGHUP), or its controller died */
    RUN_ORPHANED,     /* its controller died and its agents still wait for one (ddptop attach) */
};

struct job_event {
    enum job_event_kind kind;
    int64_t wall_ns;
    int attempt;
    int rank;                 /* -1: none */
    int node;                 /* -1: none */
    char *text;               /* one line for people */
};

/* What failed first, for the events, the screen and events.jsonl (set by root_cause.h). */
struct root_cause {
    bool set;
    int rank, node, attempt;
    int exit_code, term_signal;
    bool hang;                /* the attempt hung (--on-hang): no exit code, no signal */
    char *summary;            /* "rank 3 on gpu2 killed by SIGSEGV" */
    char **last_lines;        /* up to 20 of its last output lines (raw bytes) */
    size_t n_last_lines;
    char *error_file;         /* TORCHELASTIC_ERROR_FILE contents (PyTorch @record), or NULL */
    /* Its class (failure_class.h), decided once: at the first failure the class waits
     * (pending) for the attempt's other ranks to end or ROOT_CAUSE_SETTLE_MS, whichever is
     * first, since their lines (a watchdog's, a peer's reset) may come after the failure. */
    bool pending;
    int64_t pending_since_ms; /* mono_ms() when root_cause_tick first saw it pending; 0 */
    int failure;              /* enum failure_class; 0 (FAILURE_NONE) until classified */
    char *evidence;           /* the line that proved it (raw bytes, bounded), or NULL */
    int evidence_rank;        /* the rank that printed it; -1 */
    char *detail;             /* "rank 3 is 3 collectives behind (...)", or NULL */
    const char *fix;          /* one line (static); NULL */
    int *lagging;             /* the ranks that fell behind (collective timeout, hang) */
    size_t n_lagging;
    /* A health rule stopped the attempt (--on-nan, --on-spike; job/health.h): which (enum
     * health_kind; 0 none), the first rank's step and how many ranks followed within
     * HEALTH_FOLLOW_STEPS (counted when it settles). No exit code, no signal. */
    int health;
    long health_step;
    int health_followers;
};

/* Where the model hands what is to be kept on disk: the run's files (record/run_files.c sets
 * it when the run has a directory); the model itself never touches a disk. Each hook is
 * called at the moment the model changes, in the model's order. */
struct job_sink {
    void *ctx;
    /* Attempt n begins (job_attempt_begin): its rank logs are opened. */
    void (*attempt)(void *ctx, int attempt);
    /* A piece of rank's log of attempt: data, then a newline when newline. seq is the agent's
     * number of the message that carried it (0: none) and base the rank's seq_base; data NULL
     * and len 0: a numbered message that writes nothing was taken (job_log_mark). */
    void (*log)(void *ctx, int rank, int attempt, uint64_t seq, uint64_t base, const char *data,
                size_t len, bool newline);
    /* An event was added (job_event_add): for events.jsonl, with the job as it is now. */
    void (*event)(void *ctx, const struct job *j, const struct job_event *ev);
    /* A GPU sample line for gpu.jsonl (job/gpu.c; no newline). */
    void (*gpu)(void *ctx, const char *line, size_t len);
    /* The run's last lines follow (job_event_end, before its `end` event). */
    void (*ending)(void *ctx);
    /* The attempt's NCCL account changed (job/nccl.h): its JSON for attempt-N/nccl.json. May be NULL. */
    void (*nccl)(void *ctx, int attempt, const char *json, size_t len);
};

/* The training health rules (job/health.h, docs/run.md "Training health"): the controller sets
 * the rules from --on-nan, --on-spike and --loss-spike; the rest is the present attempt's. */
struct job_health {
    int on_nan, on_spike;     /* enum health_action: what a rule asks of the progress step */
    double spike_factor;      /* --loss-spike X: above X times the median; 0 off */
    int spike_window;         /* ... of its last N losses; 0: HEALTH_SPIKE_WINDOW */
    /* The open incident of each kind (the first rank's episode: its event), per attempt. */
    int nan_rank, spike_rank; /* -1 none */
    long nan_step, spike_step;
    int asks;                 /* enum health_action a rule asks for, set with the root cause and
                               * taken by the progress step (health_take); 0 none */
};

struct job {
    enum job_state state;
    char *run_id;
    char *log_dir;            /* LOGDIR/RUN_ID; NULL: in memory only */
    int attempt;              /* 0-based; TORCHELASTIC_RESTART_COUNT */
    int max_restarts;
    int world_size;
    int64_t started_ms;       /* mono_ms() at the start of the job */
    int64_t attempt_started_ms;
    int64_t ended_ms;         /* mono_ms() when the job reached an end state; 0 while it runs */
    struct node_info *nodes;
    size_t n_nodes;
    struct rank_info *ranks;  /* indexed by global rank */
    size_t n_ranks;
    struct job_event *events; /* ring of the newest events; all are in events.jsonl */
    size_t ev_cap, ev_head, ev_count;
    struct root_cause cause;
    const struct job_sink *sink; /* where the run's files are written (NULL: in memory only) */
    uint64_t gpu_file_bytes;
    bool gpu_file_off;        /* full (GPU_FILE_MAX): no more lines */
    uint64_t generation;      /* bumped on every change: views redraw when it moved */
    size_t log_max_lines, log_max_bytes, series_max;   /* per rank */
    enum run_state end_state; /* what job_event_end recorded */
    int end_exit_code;
    bool end_written;         /* the attempt's end event is in events.jsonl: it stays the last */
    bool nccl_debug_default;  /* ddptop set NCCL_DEBUG=INFO itself (the user set neither
                               * NCCL_DEBUG nor NCCL_DEBUG_SUBSYS): the lines it brings are ours,
                               * kept in the files and folded on screen (docs/run.md) */
    unsigned log_mode;        /* of the run's files (--log-mode; set by record/run_files.c) */
    /* the run's record or logs lost something (the writer's word, taken by run_files_flush): why
     * ("disk full", or the error), and what ("" while nothing was) */
    char incomplete[64];
    char incomplete_what[160];
    struct nccl_job *nccl;    /* NCCL's account of the ranks (job/nccl.h); NULL until first used;
                               * an attempt's account starts afresh at its first line */
    void (*nccl_free)(struct nccl_job *);   /* set with it: job_free calls it */
    struct job_health health; /* the training health rules and this attempt's incidents */
};

/* A new job of the given shape; ranks are numbered node by node in hostfile order
 * (node i's ranks follow node i-1's). log_root is --log-dir: the run's directory is
 * log_root/run_id (log_dir), made and written by record/run_files.h, not here; a NULL
 * log_root keeps log_dir NULL (`ddptop check`, `ddptop view`). The job starts with no sink
 * (in memory only). Returns NULL with err filled when run_id cannot name a directory. */
struct job *job_new(const char *run_id, const char *log_root, int max_restarts,
                    const char *const *node_names, const struct host *const *hosts,
                    const int *ranks_per_node, size_t n_nodes, char *err, size_t errlen);
void job_free(struct job *j);

/* Gives every node its role (roles[i]; NULL: all active) and recomputes the rank map over the
 * active nodes: their ranks contiguous in hostfile order, n_ranks and
 * world_size their sum. Ranks that still exist keep their history; a smaller world frees the
 * rest, a larger one adds fresh ranks. Call between attempts only. whys[i]: why an excluded node
 * is (NULL keeps the one it has), attempt: when. */
void job_set_roles(struct job *j, const enum node_role *roles, const char *const *whys, int attempt);
/* "active", "spare", "excluded" */
const char *node_role_name(enum node_role r);

/* Starts attempt j->attempt (resets per-attempt state; the sink opens attempt-N's logs). */
int job_attempt_begin(struct job *j, char *err, size_t errlen);

/* Appends one line of rank output: to its log (the sink; raw bytes, plus '\n' unless the line is
 * LOG_LINE_PARTIAL or LOG_LINE_SPLIT) and to its ring. LOG_SYSTEM lines go to the ring only. */
void job_log_append(struct job *j, int rank, enum log_stream stream, unsigned flags,
                    const char *text, size_t len);
/* job_log_append's two halves, for a block of whole lines (docs/architecture.md, "One output
 * line"): the bytes to the log file of the attempt (newline: add a '\n' after them; this also
 * marks the rank's last output time), seq being the agent's number of the message that
 * carried them (0: none), then each line to the ring with job_log_keep, all with the one wall
 * clock reading (wall_ns()) taken for the block; job_log_keep returns the line as the ring
 * keeps it (NULL: a bad rank). A block from an agent goes through job_rank_output
 * (rank_report.h), which does both and the rest. */
void job_log_write(struct job *j, int rank, int attempt, uint64_t seq, const char *data, size_t len,
                   bool newline);
const struct log_line *job_log_keep(struct job *j, int rank, enum log_stream stream, unsigned flags,
                                    const char *text, size_t len, int64_t wall);
/* A hint in job_log_keep's flags (never stored in the line): the caller's block has no
 * " NCCL " (nccl_block_may_hold said no), so no line of it is one of NCCL's, and the line
 * need not be looked at again. */
#define JOB_KEEP_NOT_NCCL 0x100u
/* A numbered message of rank that writes nothing to its log (its exit) was taken: the log
 * index counts it once what came before is on disk, so that it is acknowledged too. */
void job_log_mark(struct job *j, int rank, int attempt, uint64_t seq);
/* Records a metric point (step, loss, step_ms, tokens/s; NAN for unknown). A loss that is not
 * finite is kept as +INFINITY with what it was (bad: enum loss_bad; job_metric_add tells inf
 * and -inf from the value, and NaN cannot be told from "no loss" there: metrics_parse.c uses
 * job_metric_add_as). */
void job_metric_add(struct job *j, int rank, long step, double loss, double step_ms,
                    double tokens_per_s);
void job_metric_add_as(struct job *j, int rank, long step, double loss, int bad, double step_ms,
                       double tokens_per_s);
/* Adds an event (also handed to the sink: one JSON line of events.jsonl with host and time). */
void job_event_add(struct job *j, enum job_event_kind kind, int rank, int node,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* An event read back from events.jsonl (`ddptop view`): into the ring with the time and
 * attempt it had, never written anywhere. */
void job_event_restore(struct job *j, enum job_event_kind kind, int64_t wall, int attempt,
                       int rank, int node, const char *text);

/* Records the end of the run: an `end` event with the state and ddptop's exit status, the
 * line `ddptop ls` decides a run's state from. Called once each time the job reaches an end
 * (a restart from the dashboard may follow, and a later end). What is still pending is said
 * first by the caller (root_cause_settle, nccl_flush): the end event stays the last. */
void job_event_end(struct job *j, enum run_state st, int exit_code);


/* Forgets the attempt's root cause (frees its strings; `set` false). job_attempt_begin does
 * it for each new attempt; root_cause.h sets it. */
void job_cause_clear(struct job *j);

/* Node `node`'s address as the controller reached it (the resolved address its connection
 * uses, the one MASTER_ADDR is taken from): how an address in a rank's line (a peer's reset)
 * finds its node when the hostfile names it by host name (failure_class.h). */
void job_node_address(struct job *j, size_t node, const char *addr);

/* The host name of a rank or node, for messages ("?" when out of range). */
const char *job_rank_host(const struct job *j, int rank);

/* Events: i-th oldest (0) .. newest (count-1); log_ring_at and metric_series_at are in
 * log_ring.h and series.h. */
const struct job_event *job_event_at(const struct job *j, size_t i);

const char *job_state_name(enum job_state s);     /* "RUNNING" */
const char *rank_state_name(enum rank_state s);   /* "running" */
const char *node_state_name(enum node_state s);
const char *job_event_kind_name(enum job_event_kind k);   /* "root_cause" (events.jsonl) */
const char *run_state_name(enum run_state s);     /* "succeeded" (events.jsonl, ddptop ls) */

#endif
