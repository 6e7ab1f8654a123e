/* The measured preflight's verdicts (check_bench.h): each node against the median of the
 * others, so that nothing depends on knowing what the network or the GPUs should do.
 *
 * - A node's bandwidth is the median of the transfers it took part in (sending or receiving):
 *   a slow node makes all of its own slow and only a third of each neighbour's, so a median
 *   below --bench-min-ratio x the median of all transfers names the node, not its peers.
 *   A slow transfer between two nodes that are fine otherwise is a slow link, named on both.
 * - Round trips: a node whose median is above 3x the median of all, and 1 ms above it (a
 *   loopback's tenths of a millisecond are noise), is named with both.
 * - CPU memory bandwidth against the median of the nodes; each GPU's figures against the
 *   median of the GPUs of the same name (an A100 among H100s is compared with nobody but is
 *   the parity check's finding). */
#include "check_bench.h"
#include "check_bench_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"
#include "util/util.h"
#include "wire/json_num.h"

#define RTT_FACTOR 3.0
#define RTT_FLOOR_US 1000.0
#define MAX_WORDS 3

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double check_bench_median(double *v, size_t n)
{
    if (!n) return -1;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

char *check_bench_agent_text(const cJSON *v)
{
    const char *s = cJSON_GetStringValue(v);
    if (!s) return NULL;
    char *out = xstrndup(s, strnlen(s, 200));
    for (char *q = out; *q; q++)
        if (*q < 0x20 || *q > 0x7e) *q = '?';
    return out;
}

void check_bench_fmt(char *buf, size_t n, double v)
{
    snprintf(buf, n, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3f", v);
}

cJSON *check_bench_num(double v)
{
    return v >= 0 ? cJSON_CreateNumber(round(v * 1000) / 1000) : cJSON_CreateNull();
}

void check_bench_say(struct check_bench_verdict *v, enum check_status st, const char *hint, const char *fmt_, ...)
{
    va_list ap;
    char line[400];
    va_start(ap, fmt_);
    vsnprintf(line, sizeof line, fmt_, ap);
    va_end(ap);
    if (st > v->st) {
        v->st = st;
        v->hint = hint;
    }
    if (v->n_words >= MAX_WORDS) {
        v->more++;
        return;
    }
    if (v->words.len) strbuf_adds(&v->words, "; ");
    strbuf_adds(&v->words, line);
    v->n_words++;
}

static const char *const HINT_SLOW = "a slow link on this node: check its NIC's speed and errors (ethtool, ip -s link), its "
                                     "cable and switch port; or leave the node out (--nnodes with spares does)";
static const char *const HINT_LINK = "the path between these two nodes is slow while both are fine elsewhere: check the "
                                     "switch ports and cables between them";
static const char *const HINT_RTT = "a long path to this node (a far switch, a shaper, congestion, an overloaded node): "
                                    "check its route and NIC";
static const char *const HINT_XFER = "check that nothing blocks these nodes' ephemeral ports (a firewall) and that the "
                                     "node is not overloaded";
static const char *const HINT_GPU = "check the GPU's clocks and throttling (nvidia-smi -q -d PERFORMANCE,CLOCK), its PCIe "
                                    "link (nvidia-smi -q -d PCIE) and its health (dcgmi diag -r 1), or drain the node";
static const char *const HINT_NOGPU = "install the NVIDIA driver and a CUDA runtime there (nvidia-smi must work), or "
                                      "keep the node out of GPU jobs";
static const char *const HINT_MEM = "check the node's memory configuration (channels populated, NUMA) and what else runs there";

struct eval {
    const struct check_bench *b;
    const struct check_bench_xfer *x;
    size_t nx, n;
    int rounds;
    const bool *took;
    const struct check_bench_host *host;
    const char *const *names;
    double ratio;
    double med_gbps, med_rtt, med_mem;
    double *node_gbps, *node_rtt;
    bool *slow, *far;    /* named for its bandwidth, for its round trips */
    struct check_bench_nccl_eval *nccl;
};

/* The median of node i's transfers (their bandwidth, or their round trip) with peers not in
 * skip; -1 when it has none. */
static double node_median(const struct check_bench_attr *a, size_t i, const bool *skip)
{
    double *v = xcalloc(a->nx ? a->nx : 1, sizeof *v), med;
    size_t m = 0;
    for (size_t k = 0; k < a->nx; k++) {
        const struct check_bench_xfer *x = &a->x[k];
        if ((x->src != i && x->dst != i) || x->error || x->gbps < 0) continue;
        size_t peer = x->src == i ? x->dst : x->src;
        if (skip && skip[peer]) continue;
        if (a->rtt && x->rtt_us < 0) continue;
        v[m++] = a->rtt ? x->rtt_us : x->gbps;
    }
    med = check_bench_median(v, m);
    free(v);
    return med;
}

/* Names the nodes that are the common factor of their slow (or long) transfers: the worst node
 * first, then the others again without its transfers, until none is out of line. A slow node's
 * neighbours have a third to half of their transfers slow: without this, in a small cluster
 * they would be named with it. fig[i] gets each node's figure, flag[i] whether it was named.
 * The NCCL pairs are bisected the same way (check_bench_nccl_eval.c). */
void check_bench_attribute(const struct check_bench_attr *a, double *fig, bool *flag)
{
    for (;;) {
        size_t worst = a->n;
        double wv = 0;
        for (size_t i = 0; i < a->n; i++) {
            if (!a->took[i] || flag[i]) continue;
            double m = node_median(a, i, flag);
            bool out = a->rtt ? a->med >= 0 && m > RTT_FACTOR * a->med && m > a->med + RTT_FLOOR_US
                              : a->med > 0 && m >= 0 && m < a->ratio * a->med;
            if (out && (worst == a->n || (a->rtt ? m > wv : m < wv))) {
                worst = i;
                wv = m;
            }
        }
        if (worst == a->n) break;
        flag[worst] = true;
        fig[worst] = wv;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (!a->took[i] || flag[i]) continue;
        fig[i] = node_median(a, i, flag);
        if (fig[i] < 0) fig[i] = node_median(a, i, NULL); /* all its peers were named */
    }
}

static void node_figures(struct eval *e)
{
    double *all = xcalloc(e->nx ? e->nx : 1, sizeof *all), *rtt = xcalloc(e->nx ? e->nx : 1, sizeof *rtt);
    double *mem = xcalloc(e->n ? e->n : 1, sizeof *mem);
    size_t na = 0, nr = 0, nm = 0;
    for (size_t k = 0; k < e->nx; k++) {
        if (e->x[k].error || e->x[k].gbps < 0) continue;
        all[na++] = e->x[k].gbps;
        if (e->x[k].rtt_us >= 0) rtt[nr++] = e->x[k].rtt_us;
    }
    e->med_gbps = check_bench_median(all, na);
    e->med_rtt = check_bench_median(rtt, nr);
    for (size_t i = 0; i < e->n; i++) {
        e->node_gbps[i] = e->node_rtt[i] = -1;
        if (e->took[i] && e->host[i].cpu_mem_gbs >= 0) mem[nm++] = e->host[i].cpu_mem_gbs;
    }
    struct check_bench_attr bw = {.x = e->x, .nx = e->nx, .n = e->n, .took = e->took, .ratio = e->ratio,
                                  .med = e->med_gbps};
    struct check_bench_attr rt = bw;
    rt.rtt = true;
    rt.med = e->med_rtt;
    check_bench_attribute(&bw, e->node_gbps, e->slow);
    check_bench_attribute(&rt, e->node_rtt, e->far);
    e->med_mem = check_bench_median(mem, nm);
    free(all);
    free(rtt);
    free(mem);
}

static void net_verdict(struct eval *e, size_t i, struct check_bench_verdict *v, cJSON *links)
{
    char a[32], b[32];
    size_t n_x = 0, n_ok = 0;
    const struct check_bench_xfer *first_bad = NULL;
    for (size_t k = 0; k < e->nx; k++) {
        const struct check_bench_xfer *x = &e->x[k];
        if (x->src != i && x->dst != i) continue;
        n_x++;
        if (!x->error) n_ok++;
        else if (!first_bad || x->round < first_bad->round) first_bad = x; /* the first to go wrong */
    }
    if (!n_x) return;
    if (!n_ok) {
        check_bench_say(v, CHECK_FAIL, HINT_XFER, "no transfer to or from it went through (%s %s: %s)",
            first_bad->src == i ? "to" : "from", e->names[first_bad->src == i ? first_bad->dst : first_bad->src],
            first_bad->error);
        return;
    }
    if (e->slow[i]) {
        check_bench_fmt(a, sizeof a, e->node_gbps[i]);
        check_bench_fmt(b, sizeof b, e->med_gbps);
        check_bench_say(v, CHECK_FAIL, HINT_SLOW, "%s Gb/s to and from its peers, median %s Gb/s", a, b);
    }
    if (e->far[i]) {
        check_bench_fmt(a, sizeof a, e->node_rtt[i] / 1000);
        check_bench_fmt(b, sizeof b, e->med_rtt / 1000);
        check_bench_say(v, CHECK_WARN, HINT_RTT, "%s ms round trip to its peers, median %s ms", a, b);
    }
    for (size_t k = 0; k < e->nx; k++) {
        const struct check_bench_xfer *x = &e->x[k];
        if (x->src != i && x->dst != i) continue;
        size_t peer = x->src == i ? x->dst : x->src;
        if (x->error) {
            check_bench_say(v, CHECK_WARN, HINT_XFER, "transfer %s %s failed: %s", x->src == i ? "to" : "from", e->names[peer],
                x->error);
        } else if (!e->slow[i] && !e->slow[peer] && e->med_gbps > 0 && x->gbps < e->ratio * e->med_gbps) {
            check_bench_fmt(a, sizeof a, x->gbps);
            check_bench_fmt(b, sizeof b, e->med_gbps);
            check_bench_say(v, CHECK_WARN, HINT_LINK, "slow link %s %s: %s Gb/s, median %s Gb/s", x->src == i ? "to" : "from",
                e->names[peer], a, b);
            if (x->src == i) {
                cJSON *l = cJSON_CreateObject();
                cJSON_AddStringToObject(l, "from", e->names[x->src]);
                cJSON_AddStringToObject(l, "to", e->names[x->dst]);
                cJSON_AddItemToObject(l, "gbps", check_bench_num(x->gbps));
                cJSON_AddItemToArray(links, l);
            }
        }
    }
}

/* ---- GPUs ---------------------------------------------------------------------------------- */

static const char *const gpu_metric[] = {"tf32_tflops", "bf16_tflops", "d2d_gbs", "h2d_gbs"};
static const char *const gpu_label[] = {"tf32", "bf16", "device copy", "host copy"};
static const char *const gpu_unit[] = {"TFLOP/s", "TFLOP/s", "GB/s", "GB/s"};
#define GPU_METRICS 4

static const char *gpu_name(const cJSON *g)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "name"));
    return s && *s && strlen(s) < 128 ? s : "GPU";
}

static bool gpu_value(const cJSON *g, int m, double *v)
{
    return json_real_in(cJSON_GetObjectItemCaseSensitive(g, gpu_metric[m]), 0, 1e6, v);
}

/* The median of metric m over every GPU named name, and how many there are. */
static double gpu_median(const struct eval *e, const char *name, int m, size_t *count)
{
    size_t cap = 16, k = 0;
    double *v = xcalloc(cap, sizeof *v), x, med;
    for (size_t i = 0; i < e->n; i++) {
        const cJSON *g;
        if (!e->took[i]) continue;
        cJSON_ArrayForEach(g, e->host[i].gpus) {
            if (strcmp(gpu_name(g), name) != 0 || !gpu_value(g, m, &x)) continue;
            if (k == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
            v[k++] = x;
        }
    }
    *count = k;
    med = check_bench_median(v, k);
    free(v);
    return med;
}

static bool any_gpus(const struct eval *e)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->took[i] && cJSON_GetArraySize(e->host[i].gpus) > 0) return true;
    return false;
}

static void gpu_verdict(struct eval *e, size_t i, struct check_bench_verdict *v, cJSON *gpus_out, cJSON *medians)
{
    const struct check_bench_host *h = &e->host[i];
    const cJSON *g;
    char a[32], b[32];
    if (h->error) check_bench_say(v, CHECK_WARN, NULL, "its memory and GPUs were not measured: %s", h->error);
    if (!h->asked) {
        check_bench_say(v, CHECK_WARN, NULL, "its memory and GPUs were not measured: it stopped answering");
        return;
    }
    if (!cJSON_GetArraySize(h->gpus)) {
        if (any_gpus(e) && !h->error)
            check_bench_say(v, CHECK_WARN, HINT_NOGPU, "no GPU measured here (%s) while other nodes have some",
                h->gpu_error ? h->gpu_error : "none found");
        return;
    }
    cJSON_ArrayForEach(g, h->gpus) {
        cJSON *copy = cJSON_Duplicate(g, 1), *slow = cJSON_AddArrayToObject(copy, "slow");
        int idx;
        const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "error"));
        if (!json_int_in_i(cJSON_GetObjectItemCaseSensitive(g, "index"), 0, CHECK_GPUS_MAX, &idx)) idx = -1;
        if (err) {
            char *safe = xstrndup(err, strnlen(err, 160));
            for (char *q = safe; *q; q++)
                if (*q < 0x20 || *q > 0x7e) *q = '?';
            check_bench_say(v, CHECK_FAIL, HINT_GPU, "GPU %d: %s", idx, safe);
            free(safe);
        }
        /* one finding a GPU: every figure of it below the ratio, each with its median */
        struct strbuf low;
        size_t peers = 0;
        strbuf_init(&low);
        for (int m = 0; m < GPU_METRICS; m++) {
            double x, med;
            size_t cnt;
            if (!gpu_value(g, m, &x)) continue;
            med = gpu_median(e, gpu_name(g), m, &cnt);
            if (!cJSON_GetObjectItemCaseSensitive(medians, gpu_name(g)))
                cJSON_AddObjectToObject(medians, gpu_name(g));
            cJSON *mo = cJSON_GetObjectItemCaseSensitive(medians, gpu_name(g));
            if (!cJSON_GetObjectItemCaseSensitive(mo, gpu_metric[m]))
                cJSON_AddItemToObject(mo, gpu_metric[m], check_bench_num(med));
            if (cnt >= 2 && med > 0 && x < e->ratio * med) {
                check_bench_fmt(a, sizeof a, x);
                check_bench_fmt(b, sizeof b, med);
                strbuf_addf(&low, "%s%s %s %s (median %s)", low.len ? ", " : "", gpu_label[m], a, gpu_unit[m], b);
                cJSON_AddItemToArray(slow, cJSON_CreateString(gpu_metric[m]));
                peers = cnt;
            }
        }
        if (low.len)
            check_bench_say(v, CHECK_FAIL, HINT_GPU, "GPU %d: %s; of %zu %s", idx, low.buf, peers, gpu_name(g));
        strbuf_done(&low);
        cJSON_AddItemToArray(gpus_out, copy);
    }
}

static const char *const HINT_DCGMI = "run `dcgmi diag -r 1` on the node for the details (a driver, "
                                      "persistence mode or a GPU's health), fix it or drain the node";

/* --bench-dcgmi: DCGM's own verdict, said as DCGM says it; not installed is no finding. */
static void dcgmi_verdict(const cJSON *d, struct check_bench_verdict *v, cJSON *f)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status"));
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error"));
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(d, "failed"), *t;
    if (!d || !st) {
        cJSON_AddNullToObject(f, "dcgmi");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(f, "dcgmi"), *list = cJSON_AddArrayToObject(o, "failed");
    struct strbuf sb;
    strbuf_init(&sb);
    cJSON_AddStringToObject(o, "status", strcmp(st, "pass") == 0 || strcmp(st, "fail") == 0 ||
                                         strcmp(st, "not installed") == 0 ? st : "error");
    cJSON_ArrayForEach(t, failed) {
        const char *name = cJSON_GetStringValue(t);
        if (!name || cJSON_GetArraySize(list) >= 16) continue;
        char *safe = xstrndup(name, strnlen(name, 200));
        for (char *q = safe; *q; q++)
            if (*q < 0x20 || *q > 0x7e) *q = '?';
        cJSON_AddItemToArray(list, cJSON_CreateString(safe));
        strbuf_addf(&sb, "%s%s", sb.len ? ", " : "", safe);
        free(safe);
    }
    if (err) {
        char *safe = xstrndup(err, strnlen(err, 200));
        for (char *q = safe; *q; q++)
            if (*q < 0x20 || *q > 0x7e) *q = '?';
        cJSON_AddStringToObject(o, "error", safe);
        if (strcmp(st, "fail") != 0) check_bench_say(v, CHECK_WARN, HINT_DCGMI, "dcgmi diag -r 1: %s", safe);
        free(safe);
    } else {
        cJSON_AddNullToObject(o, "error");
    }
    if (strcmp(st, "fail") == 0)
        check_bench_say(v, CHECK_FAIL, HINT_DCGMI, "dcgmi diag -r 1 failed: %s", sb.len ? sb.buf : "(no test named)");
    strbuf_done(&sb);
}

/* The words of a node that passes: its figures, in the same shape on every node so that a
 * folded report says them once (numbers as ranges). */
static void pass_words(const struct eval *e, size_t i, struct strbuf *sb)
{
    char a[32], b[32];
    size_t peers = 0;
    for (size_t k = 0; k < e->nx; k++) peers += e->x[k].src == i;
    if (e->node_gbps[i] >= 0) {
        check_bench_fmt(a, sizeof a, e->node_gbps[i]);
        check_bench_fmt(b, sizeof b, e->node_rtt[i] >= 0 ? e->node_rtt[i] / 1000 : 0);
        strbuf_addf(sb, "%s Gb/s to and from its peers, round trip %s ms", a, b);
    }
    if (e->host[i].cpu_mem_gbs >= 0) {
        check_bench_fmt(a, sizeof a, e->host[i].cpu_mem_gbs);
        strbuf_addf(sb, "%sCPU memory %s GB/s", sb->len ? "; " : "", a);
    }
    int n_gpus = cJSON_GetArraySize(e->host[i].gpus);
    if (n_gpus > 0) {
        double v[CHECK_GPUS_MAX], x;
        size_t k = 0;
        const cJSON *g;
        cJSON_ArrayForEach(g, e->host[i].gpus) if (gpu_value(g, 1, &x) || gpu_value(g, 0, &x)) v[k++] = x;
        check_bench_fmt(a, sizeof a, check_bench_median(v, k));
        strbuf_addf(sb, "%s%d GPUs, %s TFLOP/s each", sb->len ? "; " : "", n_gpus, k ? a : "?");
    }
    (void)peers;
    check_bench_nccl_eval_pass(e->nccl, i, sb);
    if (!sb->len) strbuf_adds(sb, "nothing to compare");
}

void check_bench_evaluate(const struct check_bench *b, struct check_report *r, const char *const *names)
{
    struct eval e = {.b = b, .names = names};
    cJSON *doc = cJSON_CreateObject(), *links, *medians;
    const struct node_opts *o = check_bench_opts(b);
    e.x = check_bench_xfers(b, &e.nx, &e.rounds);
    e.n = check_bench_nodes(b);
    e.took = check_bench_took_part(b);
    e.host = check_bench_hosts(b);
    e.ratio = o->bench_min_ratio > 0 ? o->bench_min_ratio : 0.5;
    e.node_gbps = xcalloc(e.n ? e.n : 1, sizeof *e.node_gbps);
    e.node_rtt = xcalloc(e.n ? e.n : 1, sizeof *e.node_rtt);
    e.slow = xcalloc(e.n ? e.n : 1, sizeof *e.slow);
    e.far = xcalloc(e.n ? e.n : 1, sizeof *e.far);
    node_figures(&e);
    e.nccl = check_bench_nccl_eval_new(check_bench_nccl_part(b), e.took, e.ratio);
    links = cJSON_CreateArray();
    medians = cJSON_CreateObject();
    for (size_t i = 0; i < e.n && i < r->n; i++) {
        struct check_result *res = &r->rows[i].checks[CHECK_BENCH];
        struct check_bench_verdict v = {.st = CHECK_PASS};
        cJSON *f, *out, *gpus;
        if (!e.took[i]) continue;
        strbuf_init(&v.words);
        f = check_result_fields(res);
        gpus = cJSON_CreateArray();
        net_verdict(&e, i, &v, links);
        if (e.med_mem > 0 && e.host[i].cpu_mem_gbs >= 0 && e.host[i].cpu_mem_gbs < e.ratio * e.med_mem) {
            char a[32], bb[32];
            check_bench_fmt(a, sizeof a, e.host[i].cpu_mem_gbs);
            check_bench_fmt(bb, sizeof bb, e.med_mem);
            check_bench_say(&v, CHECK_WARN, HINT_MEM, "CPU memory %s GB/s, median %s GB/s", a, bb);
        }
        gpu_verdict(&e, i, &v, gpus, medians);
        check_bench_nccl_eval_node(e.nccl, i, names, &v, f);
        dcgmi_verdict(check_bench_dcgmi(b, i), &v, f);
        if (v.st == CHECK_PASS) pass_words(&e, i, &v.words);
        else if (v.more) strbuf_addf(&v.words, "; and %d more (--json)", v.more);
        check_result_setf(res, v.st, v.st == CHECK_PASS ? NULL : v.hint ? v.hint : "see the figures in --json", "%s",
                          v.words.buf);
        cJSON_AddItemToObject(f, "gbps", check_bench_num(e.node_gbps[i]));
        cJSON_AddItemToObject(f, "rtt_ms", check_bench_num(e.node_rtt[i] >= 0 ? e.node_rtt[i] / 1000 : -1));
        cJSON_AddBoolToObject(f, "slow", e.slow[i]);
        out = cJSON_AddArrayToObject(f, "transfers");
        for (size_t k = 0; k < e.nx; k++) {
            const struct check_bench_xfer *x = &e.x[k];
            if (x->src != i) continue;
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "to", names[x->dst]);
            cJSON_AddItemToObject(t, "gbps", check_bench_num(x->error ? -1 : x->gbps));
            cJSON_AddItemToObject(t, "rtt_ms", check_bench_num(x->rtt_us >= 0 ? x->rtt_us / 1000 : -1));
            cJSON_AddItemToObject(t, "seconds", check_bench_num(x->seconds));
            cJSON_AddItemToObject(t, "bytes", check_bench_num(x->bytes));
            cJSON_AddNumberToObject(t, "round", x->round);
            if (x->error) cJSON_AddStringToObject(t, "error", x->error);
            else cJSON_AddNullToObject(t, "error");
            cJSON_AddItemToArray(out, t);
        }
        cJSON_AddItemToObject(f, "cpu_mem_gbs", check_bench_num(e.host[i].cpu_mem_gbs));
        cJSON_AddItemToObject(f, "gpus", gpus);
        if (e.host[i].gpu_error) cJSON_AddStringToObject(f, "gpu_error", e.host[i].gpu_error);
        else cJSON_AddNullToObject(f, "gpu_error");
        /* a node at another node's address is that machine: measured once, there */
        if (e.host[i].same_as >= 0) cJSON_AddStringToObject(f, "host_measured_on", names[e.host[i].same_as]);
        else cJSON_AddNullToObject(f, "host_measured_on");
        strbuf_done(&v.words);
    }
    cJSON_AddItemToObject(doc, "seconds", check_bench_num(o->bench_seconds > 0 ? o->bench_seconds : 1.0));
    cJSON_AddItemToObject(doc, "min_ratio", check_bench_num(e.ratio));
    cJSON_AddNumberToObject(doc, "rounds", e.rounds);
    cJSON_AddNumberToObject(doc, "transfers", (double)e.nx);
    cJSON_AddItemToObject(doc, "median_gbps", check_bench_num(e.med_gbps));
    cJSON_AddItemToObject(doc, "median_rtt_ms", check_bench_num(e.med_rtt >= 0 ? e.med_rtt / 1000 : -1));
    cJSON_AddItemToObject(doc, "median_cpu_mem_gbs", check_bench_num(e.med_mem));
    cJSON_AddItemToObject(doc, "slow_links", links);
    cJSON_AddItemToObject(doc, "gpu_medians", medians);
    cJSON_AddItemToObject(doc, "nccl", check_bench_nccl_eval_doc(e.nccl, names));
    check_bench_nccl_eval_free(e.nccl);
    cJSON_Delete(r->bench_doc);
    r->bench_doc = doc;
    r->bench = true;
    free(e.node_gbps);
    free(e.node_rtt);
    free(e.slow);
    free(e.far);
}
