/* NCCL's own account of each rank, read from the INFO and WARN lines NCCL prints with
 * NCCL_DEBUG (docs/nccl.md): what a line of NCCL's debug output looks like, what the lines
 * say (nccl.c: version, bootstrap interface, network and devices, transports, init time,
 * WARNs; nccl_warn.c groups the WARNs), the odd ones out among the ranks (nccl_odd.c) said as
 * events when enough ranks reported (nccl_tick.c), and the account as JSON for
 * LOGDIR/RUN/attempt-N/nccl.json (nccl_json.c). Pure: no I/O; the job holds the model
 * (job->nccl), the controller and the replay of finished runs feed it lines. They call each
 * other one way: tick -> odd, json -> nccl -> warn, line (tests/it_rooms.sh). */
#ifndef DDPTOP_NCCL_H
#define DDPTOP_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_line.h"

struct job;
struct cJSON;

/* Bounds: every string from a node is cut to these (docs/nccl.md). */
#define NCCL_LINE_MAX    1024   /* bytes of one line looked at */
#define NCCL_WARN_KEEP   2      /* last WARN lines kept per rank */
#define NCCL_WARN_GROUPS 16     /* distinct WARN shapes kept per attempt */
#define NCCL_DECIDE_MS   10000  /* after the first rank's network line, decide without the rest */
#define NCCL_WARN_WAIT_MS 2000  /* a WARN shape is said this long after its first line */

enum nccl_transport { NCCL_TR_P2P = 1, NCCL_TR_SHM = 2, NCCL_TR_NET = 4, NCCL_TR_COLLNET = 8 };

struct nccl_rank {
    bool seen;                /* some NCCL line of this rank this attempt */
    char version[32];         /* "2.18.3+cuda12.2" */
    char boot_if[32];         /* "eth0" */
    char boot_addr[64];       /* "10.0.0.1<0>" */
    char net[40];             /* "IB", "Socket", a plugin's name ("AWS Libfabric"); "" unknown */
    char net_devs[160];       /* of the network in use: "mlx5_0:1/IB mlx5_1:1/RoCE" or "enp41s0f1:10.1.1.1<0>" */
    char ib_devs[160], sock_devs[160];   /* NET/IB's and NET/Socket's lists (older NCCL prints both) */
    bool net_said;            /* net is from "Using network": NCCL's own word */
    char oob[96];             /* NET/IB's out-of-band interface "eth0:10.0.0.1<0>" */
    char plugin[40];          /* "NET/Plugin: Loaded net plugin NAME" */
    bool ib_roce;             /* NET/IB's devices are all RoCE */
    unsigned transports;      /* enum nccl_transport bits, from the Channel lines */
    unsigned channels;        /* Channel lines seen */
    unsigned comms;           /* Init START lines (communicators begun) */
    char comm[24];            /* the first communicator's pointer ("0x5581...") */
    int nranks;               /* its size; 0 unknown */
    int64_t init_start_ns, init_done_ns;  /* wall clock of its Init START / COMPLETE; 0 none */
    bool init_complete;
    double init_total_s;      /* NCCL's own "Init timings ... total" (2.22+); < 0 none */
    unsigned warns;
    char warn_last[NCCL_WARN_KEEP][200];  /* newest last */
};

struct nccl_warn_group {
    char shape[160];          /* the message with each token holding a digit made "#" */
    char example[240];        /* its first line's message */
    unsigned count;
    int64_t first_ms;         /* mono ms of its first line (0: read back) */
    bool said;
    bool *nodes, *ranks;      /* which nodes and ranks printed it */
    char peers[4][48];        /* IB completion errors: their peers' addresses ("10.0.0.2"), the
                               * first 4; mapped to nodes when said (every bootstrap address known) */
};

struct nccl_job {
    int attempt;
    size_t n_ranks, n_nodes;
    struct nccl_rank *r;
    char **expect_ifs;        /* per node: the interfaces the preflight expects ("eth0,eth1"); NULL */
    int *expect_ib;           /* per node: active IB ports the preflight saw; -1 unknown */
    int64_t first_net_ms;     /* mono ms of the first rank's network or Init COMPLETE line */
    bool decided;             /* the odd ones out of this attempt were said */
    bool late;                /* a rank said its network after that: look again */
    uint32_t said[32];        /* the keys of the findings said (each once per attempt) */
    size_t n_said;
    bool quiet;               /* read back (ddptop view, logs): say nothing as events */
    struct nccl_warn_group warn[NCCL_WARN_GROUPS];
    size_t n_warn;
    unsigned warn_dropped;    /* WARNs of shapes past NCCL_WARN_GROUPS */
    bool dirty;               /* changed since nccl.json was last handed to the sink */
};

/* The job's model, made (or resized to the job's ranks and nodes, and its account forgotten
 * when the job's attempt moved on: the preflight's expectations stay) on first use. Readers
 * (nccl_node_sum) show nothing of an account of an earlier attempt. */
struct nccl_job *nccl_get(struct job *j);
void nccl_free(struct nccl_job *n);

/* One line of rank's output (any line: those that are not NCCL's cost a scan of their first
 * 256 bytes). wall_ns: when it arrived (0: unknown, in a log read back). now_ms: mono_ms(). */
void nccl_feed_line(struct job *j, int rank, const char *text, size_t len, int64_t wall_ns, int64_t now_ms);

/* What the preflight expects of node i: the interfaces NCCL_SOCKET_IFNAME (or NCCL's default
 * rule) selects there, comma-joined ("eth0"; NULL unknown) and the active IB ports (-1 unknown). */
void nccl_expect(struct job *j, size_t node, const char *ifaces, int ib_ports);

/* The odd ones out, said (nccl_tick.c). nccl_tick decides when enough ranks reported (every
 * rank's network or Init COMPLETE line, or NCCL_DECIDE_MS after the first) and says each
 * finding once per attempt as an EV_NCCL event (a rank that reports later can add a new one: a
 * value not seen before); WARN shapes NCCL_WARN_WAIT_MS after their first line.
 * nccl_flush says what is still pending: whoever ends an attempt calls it first (the controller,
 * before a restart and before the run's end event; the events ring does not). Both hand
 * nccl.json to the sink when the account changed. */
void nccl_tick(struct job *j, int64_t now_ms);
void nccl_flush(struct job *j);
/* The findings as lines for people (nccl_odd.c), whether or not said yet (ddptop logs
 * --nccl): calls out for each; returns their count. */
size_t nccl_findings(const struct job *j, void (*out)(void *ctx, int node, const char *line), void *ctx);

/* The node's ranks summed up for a table (tui, ddptop logs --nccl): each field "" when no rank
 * said it, the ranks' value when they agree, "a|b" (the distinct values) when they differ. */
struct nccl_node_sum {
    int ranks_seen;           /* ranks with any NCCL line */
    char version[48], boot[96], net[48], devs[160], transports[24];
    double init_s;            /* the slowest rank's init time; < 0 unknown */
    unsigned warns;
};
void nccl_node_sum(const struct job *j, size_t node, struct nccl_node_sum *s);
/* "P2P SHM NET" from transport bits ("" none) into buf. */
const char *nccl_transports_str(unsigned bits, char *buf, size_t cap);
/* A rank's init time in seconds (Init START to COMPLETE as seen, else NCCL's own total); < 0 unknown. */
double nccl_rank_init_s(const struct nccl_rank *r);

/* A WARN line's message m (after "NCCL WARN ") into its shape's group (nccl_warn.c; nccl.c calls it). */
void nccl_warn_take(struct job *j, struct nccl_job *n, int rank, const char *m, size_t len, int64_t now_ms);

/* The findings one by one (nccl_odd.c, for nccl_findings and nccl_tick.c): out(ctx, node, key,
 * line) with node the odd node when there is one, else -1, and key what the finding is about
 * (its kind and values, not its ranks; 0 for a WARN group), so that it is said once however
 * its ranks grow. nccl_odd_ones: the facts that differ (their count); nccl_warn_line: one WARN
 * group. */
typedef void (*nccl_finding_fn)(void *ctx, int node, uint32_t key, const char *line);
size_t nccl_odd_ones(const struct job *j, nccl_finding_fn out, void *ctx);
void nccl_warn_line(const struct job *j, const struct nccl_warn_group *g, nccl_finding_fn out, void *ctx);

/* The account as JSON (nccl_json.c): {"version":1,"attempt":N,"ranks":[{...}...],
 * "findings":[...]} (docs/nccl.md); and back (a run read back: ddptop logs, ddptop view).
 * nccl_from_json returns false when the object is not one. */
struct cJSON *nccl_to_json(const struct job *j);
bool nccl_from_json(struct job *j, const struct cJSON *o);

#endif
