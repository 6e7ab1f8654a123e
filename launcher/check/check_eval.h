/* Verdicts of `ddptop check` from what the agents reported: pure functions from facts,
 * clock samples and connection results to check results, testable without a network. */
#ifndef DDPTOP_CHECK_EVAL_H
#define DDPTOP_CHECK_EVAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "check_report.h"
#include "clock_est.h"

/* The most GPUs a node's facts may say it has (and its largest GPU index + 1); a number in the
 * facts that is not a whole number in its range (wire/json_num.h) counts as unknown. */
#define CHECK_GPUS_MAX 1024

/* What the evaluation knows of one node. */
struct check_node_info {
    const char *name;
    const cJSON *facts;          /* the agent's facts answer; NULL: none (unreachable) */
    const char *ifname_spec;     /* NCCL_SOCKET_IFNAME in force on the node, or NULL */
    bool loopback;               /* its address is loopback (the node is this machine) */
    int slots;                   /* hostfile slots=, 0: not given */
};

/* One connection attempt of the tcp check. */
struct check_tcp_result {
    size_t src, dst;             /* node indexes */
    int port;
    bool rendezvous;             /* to the first node's --master-port */
    bool done;                   /* answered (false: the agent never said) */
    bool ok;
    const char *error;
    double ms;
};

void check_eval_clock(struct check_result *res, const struct clock_sample *s, size_t n, int max_skew_ms);
void check_eval_gpu(struct check_result *res, const cJSON *facts, int slots);
/* Parity over the nodes that have facts; others get skip. cmd_given: compare cmd_sha256. */
void check_eval_env(struct check_report *r, const struct check_node_info *nodes, size_t n, bool cmd_given);
void check_eval_nccl(struct check_report *r, const struct check_node_info *nodes, size_t n);
/* listen_err[i]: why node i could not listen on its ephemeral port (NULL: it did);
 * master_err: why node 0 could not listen on the master port (NULL: it did);
 * tested[i]: node i took part in the tcp check. */
void check_eval_tcp(struct check_report *r, const struct check_node_info *nodes, size_t n,
                    const bool *tested, const char *const *listen_err, const char *master_err,
                    int master_port, const struct check_tcp_result *res, size_t n_res);
/* The failed connections of res grouped by cause (unknown host, refused, no route, no answer,
 * ...) and by node sets (check_tcp_group.c): raises st[i] to warn or fail and appends the
 * findings that concern node i to msg[i] ("; " between them), the same text on every node a
 * finding concerns. */
void check_tcp_group(const struct check_node_info *nodes, size_t n, const struct check_tcp_result *res,
                     size_t n_res, enum check_status *st, struct strbuf *msg);

#endif
