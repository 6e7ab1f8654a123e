/* GPU telemetry from the agents (agent/agent_nvml.c): the gpu_watch request once a node's agent
 * said hello, and its gpu samples into the job model (job/gpu.c). A node without NVML (no
 * driver: a CPU node) stays silent; one whose NVML fails is named in an event. An XID or new
 * uncorrectable ECC errors are recorded as the node's fault (--nnodes), which the progress
 * step excludes before the next attempt. */
#include "controller_int.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/gpu.h"
#include "job/plan.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

void ctl_gpu_watch(struct controller *c, size_t i)
{
    if (c->o.check_only || c->o.gpu_interval_ms <= 0) return;
    cJSON *m = ctl_request(c, i, WIRE_OP_GPU_WATCH, WIRE_TAG_NONE, NULL);
    cJSON_AddNumberToObject(m, "interval_ms", c->o.gpu_interval_ms);
    ctl_send(c, i, m);
}

/* CUDA_VISIBLE_DEVICES as the node's ranks get it: what the user gives them (--export, --env,
 * a hostfile key: plan_user_value, as the spawn request has it), else the agent's own. */
static void set_visible(struct controller *c, size_t i, const char *agent_value)
{
    struct node_gpus *ng = &c->job->nodes[i].gpus;
    struct rank_env_in in = {
        .exports = &c->exports, .cli_env = c->o.nodes.env, .n_cli_env = c->o.nodes.n_env,
        .host = c->hl ? &c->hl->hosts[i] : NULL,
    };
    const char *v = plan_user_value(&in, "CUDA_VISIBLE_DEVICES");
    if (!v) v = agent_value;
    free(ng->visible);
    ng->visible = v ? xstrdup(v) : NULL;
}

void ctl_on_gpu_watch(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    set_visible(c, i, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "cuda_visible_devices")));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok")) || !e) return;
    if (strncmp(e, "no NVML on this node", 20) == 0) return;   /* no driver: no GPU to watch */
    job_event_add(c->job, EV_INFO, -1, (int)i, "no GPU telemetry from %s: %s", c->job->nodes[i].name, e);
}

/* What NVML can say, with room: a sample outside it is not a measurement (said, then NAN). */
static const struct gpu_range { const char *key; double hi; size_t off; } gpu_ranges[] = {
    {"util", 100, offsetof(struct gpu_info, util)},
    {"mem_util", 100, offsetof(struct gpu_info, mem_util)},
    {"mem_used_mib", 1 << 30, offsetof(struct gpu_info, mem_used_mib)},       /* 1 PiB */
    {"mem_total_mib", 1 << 30, offsetof(struct gpu_info, mem_total_mib)},
    {"power_w", 1e6, offsetof(struct gpu_info, power_w)},
    {"power_limit_w", 1e6, offsetof(struct gpu_info, power_limit_w)},
    {"temp_c", 1000, offsetof(struct gpu_info, temp_c)},
    {"sm_mhz", 1e6, offsetof(struct gpu_info, sm_mhz)},
};

static void gpu_numbers(struct controller *c, size_t i, const cJSON *o, struct gpu_info *d)
{
    for (size_t k = 0; k < sizeof gpu_ranges / sizeof *gpu_ranges; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, gpu_ranges[k].key);
        double *out = (double *)((char *)d + gpu_ranges[k].off);
        *out = NAN;
        if (v && !cJSON_IsNull(v) && !json_real_in(v, 0, gpu_ranges[k].hi, out))
            ctl_bad_number(c, i, WIRE_EV_GPU, gpu_ranges[k].key, v);
    }
    long long x;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "throttle");
    /* NVML's reasons are bits below 2^53 (0x1ff today) */
    if ((d->has_throttle = json_int_in(v, 0, JSON_EXACT_MAX, &x))) d->throttle = (unsigned long long)x;
    else if (v) ctl_bad_number(c, i, WIRE_EV_GPU, "throttle", v);
    v = cJSON_GetObjectItemCaseSensitive(o, "ecc_uncorrected");
    if ((d->has_ecc = json_int_in(v, 0, JSON_EXACT_MAX, &x))) d->ecc = (unsigned long long)x;
    else if (v) ctl_bad_number(c, i, WIRE_EV_GPU, "ecc_uncorrected", v);
}

/* The first two members of an array, whole numbers in [-1, hi_a] and [-1, hi_b] (-1: the agent
 * could not tell); false (said) when they are not. */
static bool gpu_pair(struct controller *c, size_t i, const char *what, const cJSON *p, long long hi_a,
                     long long hi_b, long long out[2])
{
    const cJSON *a = cJSON_GetArrayItem(p, 0), *b = cJSON_GetArrayItem(p, 1);
    bool ok_a = json_int_in(a, -1, hi_a, &out[0]);
    if (ok_a && json_int_in(b, -1, hi_b, &out[1])) return true;
    ctl_bad_number(c, i, WIRE_EV_GPU, what, ok_a ? b : a);
    return false;
}

/* NVML's indexes on one node (a node has at most a few dozen GPUs). */
#define GPU_INDEX_MAX 1023

void ctl_on_gpu(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(m, "gpus"), *xs = cJSON_GetObjectItemCaseSensitive(m, "xids");
    int n = cJSON_GetArraySize(gpus), nx = cJSON_GetArraySize(xs), k = 0;
    struct gpu_info *g = xcalloc(n ? (size_t)n : 1, sizeof *g);
    int (*xids)[2] = xcalloc(nx ? (size_t)nx : 1, sizeof *xids);
    const cJSON *o, *x;
    if (n > 64) n = 64;
    cJSON_ArrayForEach(o, gpus) {
        if (k == n) break;
        struct gpu_info *d = &g[k++];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "index"), *p;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
        d->index = k - 1;
        if (v && !json_int_in_i(v, 0, GPU_INDEX_MAX, &d->index)) {
            ctl_bad_number(c, i, WIRE_EV_GPU, "index", v);
            k--;          /* a GPU without a usable index is left out */
            continue;
        }
        snprintf(d->name, sizeof d->name, "%s", name ? name : "");
        const char *uuid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "uuid"));
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid ? uuid : "");
        gpu_numbers(c, i, o, d);
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(o, "pids")) {
            long long pp[2];
            if (d->n_pids == GPU_PIDS) break;
            /* [pid, its process group (-1: unknown), MiB] */
            if (!gpu_pair(c, i, "pids", p, INT_MAX, INT_MAX, pp)) continue;
            d->pids[d->n_pids][0] = (long)pp[0];
            d->pids[d->n_pids][1] = (long)pp[1];
            d->n_pids++;
        }
    }
    n = k;
    k = 0;
    cJSON_ArrayForEach(x, xs) {
        long long xx[2];
        if (k == nx) break;
        /* [GPU index (-1: unknown), XID]: XIDs are numbered below 1,000 today; room for more */
        if (!gpu_pair(c, i, "xid", x, GPU_INDEX_MAX, INT_MAX, xx)) continue;
        xids[k][0] = (int)xx[0];
        xids[k][1] = (int)xx[1];
        k++;
    }
    /* --nnodes: an XID or new uncorrectable ECC errors make the node's fault (docs/run.md) */
    const struct node_gpus *ng = &c->job->nodes[i].gpus;
    unsigned long long ecc_was = 0, ecc_now = 0;
    for (int q = 0; ng->seen && q < ng->n; q++) ecc_was += ng->g[q].has_ecc ? ng->g[q].ecc : 0;
    for (int q = 0; ng->seen && q < n; q++) ecc_now += g[q].has_ecc ? g[q].ecc : 0;
    job_gpu_sample(c->job, (int)i, g, n, (const int (*)[2])xids, k);
    if (k > 0) {
        const char *mean = gpu_xid_meaning(xids[0][1]);
        char *why = xasprintf("GPU %d XID %d%s%s%s", xids[0][0], xids[0][1], mean ? " (" : "", mean ? mean : "", mean ? ")" : "");
        ctl_spare_fault(c, i, why);
        free(why);
    } else if (ecc_now > ecc_was) {
        char *why = xasprintf("GPU: %llu new uncorrectable ECC error%s", ecc_now - ecc_was, ecc_now - ecc_was == 1 ? "" : "s");
        ctl_spare_fault(c, i, why);
        free(why);
    }
    free(g);
    free(xids);
}
