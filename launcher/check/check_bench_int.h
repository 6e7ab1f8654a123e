/* What the measured preflight's files share among themselves (check_bench.c,
 * check_bench_eval.c, check_bench_nccl.c, check_bench_nccl_eval.c, check_bench_dcgmi.c): the words of a verdict,
 * figures as people read them, and the bisection that names the common factor of slow pairs. */
#ifndef DDPTOP_CHECK_BENCH_INT_H
#define DDPTOP_CHECK_BENCH_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "check_bench.h"
#include "check_report.h"
#include "util/util.h"

/* One node's findings, worst first when said: at most 3 said, the rest counted. */
struct check_bench_verdict {
    enum check_status st;
    const char *hint;
    struct strbuf words;
    int n_words, more;
};
void check_bench_say(struct check_bench_verdict *v, enum check_status st, const char *hint, const char *fmt_, ...)
    __attribute__((format(printf, 4, 5)));

/* The median of v[0..n) (sorted in place); -1 when n == 0. */
double check_bench_median(double *v, size_t n);
/* Text from an agent for a message: printable ASCII, at most 200 bytes; NULL when v is no string. */
char *check_bench_agent_text(const cJSON *v);
/* "9.41", "0.052", "123.5": three figures for people, the same for every host. */
void check_bench_fmt(char *buf, size_t n, double v);
/* A figure rounded to 3 decimals, null when < 0 (not measured). */
cJSON *check_bench_num(double v);

/* Pairs of nodes with a figure each (x[k].gbps, or rtt_us when rtt; error: none), over n nodes
 * of which took[i] take part; med is the median of all the pairs. */
struct check_bench_attr {
    const struct check_bench_xfer *x;
    size_t nx, n;
    const bool *took;
    double ratio, med;
    bool rtt;       /* long round trips (above 3x the median and 1 ms) rather than low figures */
};
/* Names the nodes that are the common factor of the pairs out of line: flag[i], with fig[i]
 * the node's median over its pairs (every node that takes part gets its figure). */
void check_bench_attribute(const struct check_bench_attr *a, double *fig, bool *flag);

/* The bench's dcgmi diag (check_bench_dcgmi.c): asked of every node alive at the start with
 * tag; deadline is the stage's end (its own time is added); node i's answer, or ours for it. */
struct check_bench_dcgmi;
struct check_bench_dcgmi *check_bench_dcgmi_new(size_t n);
void check_bench_dcgmi_free(struct check_bench_dcgmi *d);
void check_bench_dcgmi_start(struct check_bench_dcgmi *d, const struct check_bench_io *io, int tag,
                             const bool *alive, int64_t deadline);
void check_bench_dcgmi_message(struct check_bench_dcgmi *d, size_t i, const struct wire_msg *m);
void check_bench_dcgmi_fail(struct check_bench_dcgmi *d, size_t i, const char *why);
void check_bench_dcgmi_step(struct check_bench_dcgmi *d, int64_t now);
bool check_bench_dcgmi_over(const struct check_bench_dcgmi *d);
int64_t check_bench_dcgmi_deadline(const struct check_bench_dcgmi *d);
const cJSON *check_bench_dcgmi_answer(const struct check_bench_dcgmi *d, size_t i);

/* The verdicts' NCCL part for node i (check_bench_nccl_eval.c): its findings said into v, its
 * figures in f ("nccl"); the words a passing node adds; the report's "nccl" document. */
struct check_bench_nccl_eval;
struct check_bench_nccl_eval *check_bench_nccl_eval_new(const struct check_bench_nccl *nc, const bool *took,
                                                        double ratio);
void check_bench_nccl_eval_node(const struct check_bench_nccl_eval *ev, size_t i, const char *const *names,
                                struct check_bench_verdict *v, cJSON *f);
/* The words a passing node adds ("NCCL all-reduce 4 nodes x 2 GPUs: busbw 9.41 GB/s, ..."). */
void check_bench_nccl_eval_pass(const struct check_bench_nccl_eval *ev, size_t i, struct strbuf *sb);
cJSON *check_bench_nccl_eval_doc(const struct check_bench_nccl_eval *ev, const char *const *names);
void check_bench_nccl_eval_free(struct check_bench_nccl_eval *ev);

#endif
