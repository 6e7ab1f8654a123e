/* ddptop's families of OpenMetrics (openmetrics.h), in the order docs/integrations.md lists
 * them: the job, its ranks, its GPUs, its nodes. Each family's samples are together, as the
 * format requires. A value the model does not know (no loss yet, a GPU sample without power)
 * is left out rather than written as 0 or NaN: a graph then shows a gap, not a false value.
 *
 * Cost: every sample's labels are made once per exposition (a rank's run, rank and node) and
 * copied for each of its families, and whole numbers skip snprintf (om_text.c); 8,192 ranks on
 * 1,024 nodes of 8 GPUs are about 115,000 lines (docs/performance.md). */
#include "openmetrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "job/failure_line.h"
#include "job/gpu.h"
#include "om_text.h"

/* The labels every sample of a rank, a node or a GPU's node carries, made once: item i's are
 * text[off[i] .. off[i + 1]). */
struct labels {
    struct strbuf text;
    size_t *off;
};

struct expo {
    const struct job *j;
    int64_t now_ms;
    struct strbuf *out;
    struct labels job, nodes, ranks;
};

/* A state's name as a label value: lower case, words joined by '_' ("CHECK FAILED":
 * "check_failed"). */
static void state_value(struct strbuf *sb, const char *name)
{
    for (const char *p = name; *p; p++) {
        char ch = *p == ' ' ? '_' : *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        strbuf_add(sb, &ch, 1);
    }
}

static void labels_init(struct labels *l, size_t n)
{
    strbuf_init(&l->text);
    l->off = xcalloc(n + 1, sizeof *l->off);
}

static void labels_done(struct labels *l)
{
    strbuf_done(&l->text);
    free(l->off);
}

static void labels_end(struct labels *l, size_t i)
{
    l->off[i + 1] = l->text.len;
}

/* run="R" once; then each node's run="R",node="N" and each rank's run="R",rank="K",node="N",
 * from the node names escaped once (names). */
static void make_labels(struct expo *e)
{
    const struct job *j = e->j;
    struct labels names;
    labels_init(&names, j->n_nodes);
    for (size_t i = 0; i < j->n_nodes; i++) {
        om_label_value(&names.text, j->nodes[i].name ? j->nodes[i].name : "");
        labels_end(&names, i);
    }
    labels_init(&e->job, 1);
    strbuf_adds(&e->job.text, "run=\"");
    om_label_value(&e->job.text, j->run_id ? j->run_id : "");
    strbuf_add(&e->job.text, "\"", 1);
    labels_end(&e->job, 0);
    labels_init(&e->nodes, j->n_nodes);
    for (size_t i = 0; i < j->n_nodes; i++) {
        strbuf_add(&e->nodes.text, e->job.text.buf, e->job.text.len);
        strbuf_adds(&e->nodes.text, ",node=\"");
        strbuf_add(&e->nodes.text, names.text.buf + names.off[i], names.off[i + 1] - names.off[i]);
        strbuf_add(&e->nodes.text, "\"", 1);
        labels_end(&e->nodes, i);
    }
    labels_init(&e->ranks, j->n_ranks);
    for (size_t r = 0; r < j->n_ranks; r++) {
        size_t nd = (size_t)j->ranks[r].node;
        strbuf_add(&e->ranks.text, e->job.text.buf, e->job.text.len);
        strbuf_adds(&e->ranks.text, ",rank=\"");
        om_int(&e->ranks.text, (long long)r);
        strbuf_adds(&e->ranks.text, "\",node=\"");
        if (nd < j->n_nodes) strbuf_add(&e->ranks.text, names.text.buf + names.off[nd], names.off[nd + 1] - names.off[nd]);
        strbuf_add(&e->ranks.text, "\"", 1);
        labels_end(&e->ranks, r);
    }
    labels_done(&names);
}

/* One sample: NAME{LABELS[,EXTRA]} VALUE. */
static void sample(struct expo *e, const char *name, const struct labels *l, size_t i, const char *extra,
                   double v)
{
    struct strbuf *o = e->out;
    strbuf_adds(o, name);
    strbuf_add(o, "{", 1);
    strbuf_add(o, l->text.buf + l->off[i], l->off[i + 1] - l->off[i]);
    if (extra) strbuf_adds(o, extra);
    strbuf_add(o, "} ", 2);
    om_number(o, v);
    strbuf_add(o, "\n", 1);
}

/* A sample with one more label, name="value" (a state, a class, a reason). */
static void sample_with(struct expo *e, const char *name, const struct labels *l, size_t i, const char *label,
                        const char *state_name, double v)
{
    struct strbuf *o = e->out;
    strbuf_adds(o, name);
    strbuf_add(o, "{", 1);
    strbuf_add(o, l->text.buf + l->off[i], l->off[i + 1] - l->off[i]);
    strbuf_add(o, ",", 1);
    strbuf_adds(o, label);
    strbuf_add(o, "=\"", 2);
    state_value(o, state_name);
    strbuf_add(o, "\"} ", 3);
    om_number(o, v);
    strbuf_add(o, "\n", 1);
}

/* ---- the job ----------------------------------------------------------------------------- */

static void job_families(struct expo *e)
{
    const struct job *j = e->j;
    static const enum job_state states[] = {
        JOB_CHECKING, JOB_CHECK_FAILED, JOB_LAUNCHING, JOB_RUNNING, JOB_STALLED, JOB_FAILING,
        JOB_RESTARTING, JOB_STOPPING, JOB_DONE, JOB_FAILED, JOB_STOPPED,
    };
    om_family(e->out, "ddptop_job_state", "gauge", NULL,
              "1 for the job's present state, 0 for the others");
    for (size_t k = 0; k < sizeof states / sizeof *states; k++)
        sample_with(e, "ddptop_job_state", &e->job, 0, "state", job_state_name(states[k]), j->state == states[k]);
    om_family(e->out, "ddptop_job_attempt", "gauge", NULL,
              "The present attempt, from 0 (the ranks' TORCHELASTIC_RESTART_COUNT)");
    sample(e, "ddptop_job_attempt", &e->job, 0, NULL, j->attempt);
    om_family(e->out, "ddptop_job_restarts", "counter", NULL, "Restarts of the whole job since the run began");
    sample(e, "ddptop_job_restarts_total", &e->job, 0, NULL, j->attempt);
    om_family(e->out, "ddptop_job_max_restarts", "gauge", NULL, "Restarts allowed after a failure (--max-restarts)");
    sample(e, "ddptop_job_max_restarts", &e->job, 0, NULL, j->max_restarts);
    om_family(e->out, "ddptop_job_world_size", "gauge", NULL, "Ranks in the present attempt (WORLD_SIZE)");
    sample(e, "ddptop_job_world_size", &e->job, 0, NULL, j->world_size);

    size_t by_state[RANK_LOST + 1] = {0};
    for (size_t r = 0; r < j->n_ranks; r++)
        if ((unsigned)j->ranks[r].state <= RANK_LOST) by_state[j->ranks[r].state]++;
    om_family(e->out, "ddptop_job_ranks", "gauge", NULL, "Ranks in each state");
    for (int s = RANK_PENDING; s <= RANK_LOST; s++)
        sample_with(e, "ddptop_job_ranks", &e->job, 0, "state", rank_state_name((enum rank_state)s),
                    (double)by_state[s]);

    /* the root cause's class once it is decided (root_cause.h: it waits for the other ranks'
     * lines first); every class 0 before that and while nothing failed */
    om_family(e->out, "ddptop_job_root_cause", "gauge", NULL,
              "1 for the class of the attempt's root cause (docs/failures.md), 0 for the others");
    for (int c = FAILURE_NONE + 1; c < FAILURE_CLASSES; c++)
        sample_with(e, "ddptop_job_root_cause", &e->job, 0, "class", failure_class_name((enum failure_class)c),
                    j->cause.set && j->cause.failure == c);
    om_family(e->out, "ddptop_job_root_cause_rank", "gauge", NULL,
              "The rank that failed (or hung) first in the attempt; absent while none did");
    if (j->cause.set && j->cause.rank >= 0) sample(e, "ddptop_job_root_cause_rank", &e->job, 0, NULL, j->cause.rank);
}

/* ---- the ranks --------------------------------------------------------------------------- */

enum rank_value { RV_STEP, RV_LOSS, RV_STEP_SECONDS, RV_OUTPUT_AGE };

/* The value of one of a rank's gauges, false when the model does not know it. */
static bool rank_value(const struct expo *e, const struct rank_info *r, enum rank_value what, double *v)
{
    switch (what) {
    case RV_STEP:
        *v = (double)r->step;
        return r->has_step;
    case RV_LOSS:
        *v = r->loss;
        return r->has_loss && !isnan(r->loss);
    case RV_STEP_SECONDS:
        *v = r->step_ms / 1000.0;
        return !isnan(r->step_ms);
    case RV_OUTPUT_AGE:
        *v = (double)(e->now_ms - r->last_output_ms) / 1000.0;
        if (*v < 0) *v = 0;
        return r->last_output_ms > 0;
    }
    return false;
}

static void rank_families(struct expo *e)
{
    static const struct {
        const char *name, *unit, *help;
        enum rank_value what;
    } fams[] = {
        {"ddptop_rank_step", NULL, "The rank's last training step reported", RV_STEP},
        {"ddptop_rank_loss", NULL, "The rank's last loss reported", RV_LOSS},
        {"ddptop_rank_step_seconds", "seconds", "The rank's last step time reported", RV_STEP_SECONDS},
        {"ddptop_rank_last_output_age_seconds", "seconds", "Time since the rank's last output line arrived",
         RV_OUTPUT_AGE},
    };
    const struct job *j = e->j;
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        om_family(e->out, fams[f].name, "gauge", fams[f].unit, fams[f].help);
        for (size_t r = 0; r < j->n_ranks; r++) {
            double v;
            if (rank_value(e, &j->ranks[r], fams[f].what, &v)) sample(e, fams[f].name, &e->ranks, r, NULL, v);
        }
    }
    /* one series per rank, its state a label: 7 series each (a state set) would be 57,344
     * lines for 8,192 ranks; ddptop_job_ranks counts them by state */
    om_family(e->out, "ddptop_rank_state", "gauge", NULL, "1, with the rank's present state as a label");
    for (size_t r = 0; r < j->n_ranks; r++)
        sample_with(e, "ddptop_rank_state", &e->ranks, r, "state", rank_state_name(j->ranks[r].state), 1);
}

/* ---- the GPUs ---------------------------------------------------------------------------- */

enum gpu_value {
    GV_UTIL, GV_MEM_USED, GV_MEM_TOTAL, GV_POWER, GV_POWER_LIMIT, GV_TEMP, GV_THROTTLED, GV_XIDS, GV_LAST_XID,
};

static bool gpu_value(const struct gpu_info *g, enum gpu_value what, double *v)
{
    *v = NAN;
    switch (what) {
    case GV_UTIL: *v = g->util / 100.0; break;
    case GV_MEM_USED: *v = g->mem_used_mib * 1048576.0; break;
    case GV_MEM_TOTAL: *v = g->mem_total_mib * 1048576.0; break;
    case GV_POWER: *v = g->power_w; break;
    case GV_POWER_LIMIT: *v = g->power_limit_w; break;
    case GV_TEMP: *v = g->temp_c; break;
    case GV_THROTTLED:
        *v = (g->throttle & GPU_THR_PROBLEMS) != 0;
        return g->has_throttle;
    case GV_XIDS: *v = (double)g->xids; return true;
    case GV_LAST_XID: *v = g->last_xid; return g->last_xid != 0;
    }
    return !isnan(*v);
}

/* NAME{run,node,gpu[,EXTRA]} VALUE */
static void gpu_sample(struct expo *e, const char *name, size_t node, const struct gpu_info *g, const char *extra,
                       double v)
{
    struct strbuf *o = e->out;
    strbuf_adds(o, name);
    strbuf_add(o, "{", 1);
    strbuf_add(o, e->nodes.text.buf + e->nodes.off[node], e->nodes.off[node + 1] - e->nodes.off[node]);
    strbuf_add(o, ",gpu=\"", 6);
    om_int(o, g->index);
    strbuf_add(o, "\"", 1);
    if (extra) strbuf_adds(o, extra);
    strbuf_add(o, "} ", 2);
    om_number(o, v);
    strbuf_add(o, "\n", 1);
}

static void gpu_families(struct expo *e)
{
    static const struct {
        const char *name, *type, *unit, *help;
        enum gpu_value what;
    } fams[] = {
        {"ddptop_gpu_utilization_ratio", "gauge", "ratio", "GPU busy time in NVML's last sample, 0 to 1", GV_UTIL},
        {"ddptop_gpu_memory_used_bytes", "gauge", "bytes", "GPU memory in use", GV_MEM_USED},
        {"ddptop_gpu_memory_total_bytes", "gauge", "bytes", "GPU memory in all", GV_MEM_TOTAL},
        {"ddptop_gpu_power_watts", "gauge", "watts", "GPU power draw", GV_POWER},
        {"ddptop_gpu_power_limit_watts", "gauge", "watts", "GPU power limit", GV_POWER_LIMIT},
        {"ddptop_gpu_temperature_celsius", "gauge", "celsius", "GPU temperature", GV_TEMP},
        {"ddptop_gpu_throttled", "gauge", NULL,
         "1 while the GPU is slowed by power or heat (the reasons: ddptop_gpu_throttle_reason)", GV_THROTTLED},
        {"ddptop_gpu_xid_errors", "counter", NULL, "XID errors the GPU reported since the run began", GV_XIDS},
        {"ddptop_gpu_last_xid", "gauge", NULL, "The number of the GPU's latest XID; absent while it had none",
         GV_LAST_XID},
    };
    const struct job *j = e->j;
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        bool counter = strcmp(fams[f].type, "counter") == 0;
        char sname[64];
        snprintf(sname, sizeof sname, "%s%s", fams[f].name, counter ? "_total" : "");
        om_family(e->out, fams[f].name, fams[f].type, fams[f].unit, fams[f].help);
        for (size_t n = 0; n < j->n_nodes; n++) {
            const struct node_gpus *ng = &j->nodes[n].gpus;
            for (int k = 0; ng->seen && k < ng->n; k++) {
                double v;
                if (gpu_value(&ng->g[k], fams[f].what, &v)) gpu_sample(e, sname, n, &ng->g[k], NULL, v);
            }
        }
    }
    /* only the reasons that hold, each a series of its own (5 at most per GPU): ddptop_gpu_throttled
     * is the one to graph or alert on */
    static const struct {
        unsigned long long bit;
        const char *label;
    } reasons[] = {
        {GPU_THR_SW_POWER_CAP, ",reason=\"sw_power_cap\""}, {GPU_THR_HW_SLOWDOWN, ",reason=\"hw_slowdown\""},
        {GPU_THR_SW_THERMAL, ",reason=\"sw_thermal\""},     {GPU_THR_HW_THERMAL, ",reason=\"hw_thermal\""},
        {GPU_THR_HW_POWER_BRAKE, ",reason=\"hw_power_brake\""},
    };
    om_family(e->out, "ddptop_gpu_throttle_reason", "gauge", NULL,
              "1 for each reason the GPU is slowed for now; absent when it is not");
    for (size_t n = 0; n < j->n_nodes; n++) {
        const struct node_gpus *ng = &j->nodes[n].gpus;
        for (int k = 0; ng->seen && k < ng->n; k++)
            for (size_t q = 0; ng->g[k].has_throttle && q < sizeof reasons / sizeof *reasons; q++)
                if (ng->g[k].throttle & reasons[q].bit)
                    gpu_sample(e, "ddptop_gpu_throttle_reason", n, &ng->g[k], reasons[q].label, 1);
    }
}

/* ---- the nodes --------------------------------------------------------------------------- */

static const char *link_name(enum node_link l)
{
    return l == LINK_UP ? "up" : l == LINK_SILENT ? "silent" : "unreachable";
}

static void node_families(struct expo *e)
{
    const struct job *j = e->j;
    om_family(e->out, "ddptop_node_link", "gauge", NULL,
              "1 for how the controller hears from the node now (up, silent, unreachable), 0 for the others");
    for (size_t n = 0; n < j->n_nodes; n++)
        for (int l = LINK_UP; l <= LINK_UNREACHABLE; l++)
            sample_with(e, "ddptop_node_link", &e->nodes, n, "link", link_name((enum node_link)l),
                        j->nodes[n].link == (enum node_link)l);
    om_family(e->out, "ddptop_node_state", "gauge", NULL, "1, with the node's present state as a label");
    for (size_t n = 0; n < j->n_nodes; n++)
        sample_with(e, "ddptop_node_state", &e->nodes, n, "state", node_state_name(j->nodes[n].state), 1);
}

void openmetrics_render(const struct job *j, int64_t now_ms, struct strbuf *out)
{
    struct expo e = {.j = j, .now_ms = now_ms, .out = out};
    make_labels(&e);
    /* about 100 bytes a line, 14 lines a rank with its GPU: one allocation for most runs */
    strbuf_reserve(out, 4096 + j->n_ranks * 1400);
    job_families(&e);
    rank_families(&e);
    gpu_families(&e);
    node_families(&e);
    om_eof(out);
    labels_done(&e.job);
    labels_done(&e.nodes);
    labels_done(&e.ranks);
}
