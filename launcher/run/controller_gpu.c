/* GPU telemetry from the agents (agent/agent_nvml.c): the gpu_watch request once a node's agent
 * said hello, and its gpu samples into the job model (job/gpu.c). A node without NVML (no
 * driver: a CPU node) stays silent; one whose NVML fails is named in an event. */
#include "controller_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/gpu.h"
#include "job/plan.h"
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
        .exports = &c->exports, .cli_env = c->o.check.env, .n_cli_env = c->o.check.n_env,
        .host = c->o.local ? NULL : &c->hl->hosts[i],
    };
    const char *v = plan_user_value(&in, "CUDA_VISIBLE_DEVICES");
    if (!v) v = agent_value;
    free(ng->visible);
    ng->visible = v ? xstrdup(v) : NULL;
}

void ctl_on_gpu_watch(struct controller *c, size_t i, const cJSON *m)
{
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    set_visible(c, i, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "cuda_visible_devices")));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok")) || !e) return;
    if (strncmp(e, "no NVML on this node", 20) == 0) return;   /* no driver: no GPU to watch */
    job_event_add(c->job, EV_INFO, -1, (int)i, "no GPU telemetry from %s: %s", c->job->nodes[i].name, e);
}

static double num_or_nan(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void ctl_on_gpu(struct controller *c, size_t i, const cJSON *m)
{
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
        d->index = cJSON_IsNumber(v) ? v->valueint : k - 1;
        snprintf(d->name, sizeof d->name, "%s", name ? name : "");
        const char *uuid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "uuid"));
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid ? uuid : "");
        d->util = num_or_nan(o, "util");
        d->mem_util = num_or_nan(o, "mem_util");
        d->mem_used_mib = num_or_nan(o, "mem_used_mib");
        d->mem_total_mib = num_or_nan(o, "mem_total_mib");
        d->power_w = num_or_nan(o, "power_w");
        d->power_limit_w = num_or_nan(o, "power_limit_w");
        d->temp_c = num_or_nan(o, "temp_c");
        d->sm_mhz = num_or_nan(o, "sm_mhz");
        v = cJSON_GetObjectItemCaseSensitive(o, "throttle");
        if ((d->has_throttle = cJSON_IsNumber(v))) d->throttle = (unsigned long long)v->valuedouble;
        v = cJSON_GetObjectItemCaseSensitive(o, "ecc_uncorrected");
        if ((d->has_ecc = cJSON_IsNumber(v))) d->ecc = (unsigned long long)v->valuedouble;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(o, "pids")) {
            if (d->n_pids == GPU_PIDS) break;
            d->pids[d->n_pids][0] = (long)cJSON_GetNumberValue(cJSON_GetArrayItem(p, 0));
            d->pids[d->n_pids][1] = (long)cJSON_GetNumberValue(cJSON_GetArrayItem(p, 1));
            d->n_pids++;
        }
    }
    k = 0;
    cJSON_ArrayForEach(x, xs) {
        if (k == nx) break;
        xids[k][0] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(x, 0));
        xids[k][1] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(x, 1));
        k++;
    }
    job_gpu_sample(c->job, (int)i, g, n, (const int (*)[2])xids, k);
    free(g);
    free(xids);
}
