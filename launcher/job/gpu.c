/* GPU samples into the job model: see gpu.h. */
#include "gpu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "util/util.h"

const char *gpu_throttle_names(unsigned long long mask, char *buf, size_t cap)
{
    static const struct { unsigned long long bit; const char *name; } names[] = {
        { GPU_THR_HW_THERMAL, "thermal (hardware)" }, { GPU_THR_SW_THERMAL, "thermal (software)" },
        { GPU_THR_HW_POWER_BRAKE, "power brake (hardware)" }, { GPU_THR_HW_SLOWDOWN, "hardware slowdown" },
        { GPU_THR_SW_POWER_CAP, "power cap" },
    };
    size_t o = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (mask & names[k].bit) {
            int w = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", names[k].name);
            if (w < 0 || (size_t)w >= cap - o) break;
            o += (size_t)w;
        }
    return buf;
}

const char *gpu_xid_meaning(int xid)
{
    switch (xid) {
    case 13: return "graphics engine exception (often an out-of-range access in a kernel)";
    case 31: return "GPU memory page fault (often an illegal address in a kernel)";
    case 43: return "GPU stopped processing";
    case 45: return "preemptive cleanup after an earlier error";
    case 48: return "double-bit ECC error";
    case 61: case 62: return "internal micro-controller error";
    case 63: case 64: return "ECC page retirement or row remapping event";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: case 120: return "GSP firmware error";
    default: return NULL;
    }
}

/* The rank on node whose process group holds the pid (its pid is its group's id). */
static int rank_of_group(const struct job *j, int node, long pgid)
{
    const struct node_info *ni = &j->nodes[node];
    for (int r = ni->first_rank; r < ni->first_rank + ni->n_ranks; r++)
        if (j->ranks[r].pid > 0 && j->ranks[r].pid == pgid) return r;
    return -1;
}

/* The GPU a rank should use when NVML lists none of its processes (yet): the LOCAL_RANK-th
 * entry of CUDA_VISIBLE_DEVICES (an index, or a GPU UUID or its prefix), else the
 * LOCAL_RANK-th GPU of the node; -1 when there is none. */
static int visible_gpu(const struct node_gpus *ng, int local_rank)
{
    if (!ng->visible) return local_rank < ng->n ? ng->g[local_rank].index : -1;
    const char *p = ng->visible;
    for (int k = 0; *p; k++) {
        size_t len = strcspn(p, ",");
        if (k == local_rank) {
            char e[64];
            snprintf(e, sizeof e, "%.*s", (int)(len < sizeof e ? len : sizeof e - 1), p);
            if (e[0] >= '0' && e[0] <= '9') {
                long v = strtol(e, NULL, 10); /* saturates where atoi would overflow */
                return v <= 4096 ? (int)v : -1;
            }
            for (int i = 0; i < ng->n; i++)
                if (e[0] && strncmp(ng->g[i].uuid, e, strlen(e)) == 0) return ng->g[i].index;
            return -1;
        }
        p += len + (p[len] == ',');
    }
    return -1;
}

/* Ranks of the node whose GPU NVML's process list did not give: by local rank (visible_gpu),
 * unless another rank's processes are on that GPU. */
static void map_by_local_rank(struct job *j, int node)
{
    struct node_gpus *ng = &j->nodes[node].gpus;
    const struct node_info *ni = &j->nodes[node];
    for (int r = ni->first_rank; r < ni->first_rank + ni->n_ranks; r++) {
        bool by_pid = false;
        for (int i = 0; i < ng->n; i++) by_pid |= ng->g[i].rank == r;
        if (by_pid) continue;
        int want = visible_gpu(ng, j->ranks[r].local_rank);
        for (int i = 0; i < ng->n; i++)
            if (ng->g[i].index == want && ng->g[i].rank < 0) {
                ng->g[i].rank = r;
                j->ranks[r].gpu = want;
            }
    }
}

static void describe(const struct job *j, int node, const struct gpu_info *g, char *buf, size_t cap)
{
    if (g->rank >= 0) snprintf(buf, cap, "GPU %d on %s (rank %d)", g->index, j->nodes[node].name, g->rank);
    else snprintf(buf, cap, "GPU %d on %s", g->index, j->nodes[node].name);
}

static void events_for(struct job *j, int node, const struct gpu_info *old, const struct gpu_info *g)
{
    char who[160], names[160];
    unsigned long long was = old && old->has_throttle ? old->throttle & GPU_THR_PROBLEMS : 0;
    unsigned long long now = g->has_throttle ? g->throttle & GPU_THR_PROBLEMS : 0;
    describe(j, node, g, who, sizeof who);
    if (now & ~was)
        job_event_add(j, EV_GPU, g->rank, node, "%s throttling: %s", who,
                      gpu_throttle_names(now, names, sizeof names));
    else if (was && !now)
        job_event_add(j, EV_GPU, g->rank, node, "%s stopped throttling (was: %s)", who,
                      gpu_throttle_names(was, names, sizeof names));
    unsigned long long ecc_was = old && old->has_ecc ? old->ecc : 0;
    if (g->has_ecc && g->ecc > ecc_was)
        job_event_add(j, EV_GPU, g->rank, node, "%s: %llu new uncorrectable ECC error%s (%llu since the "
                      "driver loaded); the GPU may need a reset", who, g->ecc - ecc_was,
                      g->ecc - ecc_was == 1 ? "" : "s", g->ecc);
}

static void json_num(struct strbuf *sb, const char *key, double v)
{
    if (!isnan(v)) strbuf_addf(sb, ",\"%s\":%.6g", key, v);
}

/* Whether a rank of the node runs (started, not yet ended) in this attempt. */
static bool node_running(const struct job *j, int node)
{
    const struct node_info *ni = &j->nodes[node];
    for (int r = ni->first_rank; r < ni->first_rank + ni->n_ranks && (size_t)r < j->n_ranks; r++)
        if ((j->ranks[r].state == RANK_RUNNING || j->ranks[r].state == RANK_STALLED) && j->ranks[r].pid)
            return true;
    return false;
}

/* Whether the node's latest sample is due in gpu.jsonl: the first, one GPU_KEEP_MS after the
 * last kept, and the first GPU_BUSY_AFTER_MS after its ranks were first seen running this
 * attempt (the first sample of a run is taken before they start: idle). */
static bool sample_due(struct job *j, int node, int64_t now)
{
    struct node_gpus *ng = &j->nodes[node].gpus;
    if (ng->busy_attempt != j->attempt) {
        ng->busy_attempt = j->attempt;
        ng->busy_since_ms = 0;
        ng->busy_kept = false;
    }
    bool busy = false;
    if (node_running(j, node)) {
        if (!ng->busy_since_ms) ng->busy_since_ms = now;
        busy = !ng->busy_kept && now - ng->busy_since_ms >= GPU_BUSY_AFTER_MS;
    }
    if (busy) ng->busy_kept = true;
    return busy || !ng->kept_ms || now - ng->kept_ms >= GPU_KEEP_MS;
}

/* One line per node per GPU_KEEP_MS (and see sample_due): what `ddptop view` and scripts read
 * back. */
static void keep_sample(struct job *j, int node, bool force)
{
    struct node_gpus *ng = &j->nodes[node].gpus;
    int64_t now = mono_ms();
    char when[48];
    if (!j->sink || j->gpu_file_off) return;
    if (!sample_due(j, node, now) && !force) {
        ng->pending = true;
        return;
    }
    ng->pending = false;
    struct strbuf sb;
    strbuf_init(&sb);
    util_iso_time(ng->sample_wall_ns ? ng->sample_wall_ns : wall_ns(), when, sizeof when);
    /* host names are checked when the hostfile is read: letters, digits, '.', '-', '_' */
    strbuf_addf(&sb, "{\"time\":\"%s\",\"attempt\":%d,\"host\":\"%s\",\"gpus\":[", when, j->attempt,
                j->nodes[node].name);
    for (int i = 0; i < ng->n; i++) {
        const struct gpu_info *g = &ng->g[i];
        strbuf_addf(&sb, "%s{\"index\":%d", i ? "," : "", g->index);
        if (g->rank >= 0) strbuf_addf(&sb, ",\"rank\":%d", g->rank);
        json_num(&sb, "util", g->util);
        json_num(&sb, "mem_used_mib", g->mem_used_mib);
        json_num(&sb, "mem_total_mib", g->mem_total_mib);
        json_num(&sb, "power_w", g->power_w);
        json_num(&sb, "temp_c", g->temp_c);
        json_num(&sb, "sm_mhz", g->sm_mhz);
        if (g->has_throttle) strbuf_addf(&sb, ",\"throttle\":%llu", g->throttle);
        if (g->has_ecc) strbuf_addf(&sb, ",\"ecc_uncorrected\":%llu", g->ecc);
        strbuf_adds(&sb, "}");
    }
    strbuf_adds(&sb, "]}");
    if (j->gpu_file_bytes + sb.len > GPU_FILE_MAX) {
        j->gpu_file_off = true;
        job_event_add(j, EV_INFO, -1, -1, "%s/gpu.jsonl reached %llu MiB: GPU samples are no longer kept "
                      "(the live view goes on)", j->log_dir, GPU_FILE_MAX >> 20);
    } else {
        j->sink->gpu(j->sink->ctx, sb.buf, sb.len);
        j->gpu_file_bytes += sb.len + 1;
    }
    ng->kept_ms = now;
    strbuf_done(&sb);
}

/* g's utilisation history: prev's (the same GPU in the node's last sample), then g's own. */
static void history_add(struct gpu_info *g, const struct gpu_info *prev)
{
    if (prev) {
        memcpy(g->hist, prev->hist, sizeof g->hist);
        g->hist_n = prev->hist_n;
        g->xids = prev->xids;
        g->last_xid = prev->last_xid;
    }
    if (!isnan(g->util)) {
        if (g->hist_n == GPU_HIST) memmove(g->hist, g->hist + 1, GPU_HIST - 1);
        else g->hist_n++;
        g->hist[g->hist_n - 1] = (uint8_t)(g->util < 0 ? 0 : g->util > 100 ? 100 : g->util);
    }
}

/* The GPU with NVML index `index` in a node's table, or NULL. */
static const struct gpu_info *gpu_by_index(const struct gpu_info *g, int n, int index)
{
    for (int i = 0; i < n; i++)
        if (g[i].index == index) return &g[i];
    return NULL;
}

/* A node's new GPU table, each GPU's history carried on from the same GPU in the old one;
 * fix_rank sets each entry's rank. The old table is returned for the caller to free. */
static struct gpu_info *gpu_table_replace(struct job *j, int node, const struct gpu_info *gpus, int n,
                                          int *n_old, void (*fix_rank)(const struct job *, int, struct gpu_info *))
{
    struct node_gpus *ng = &j->nodes[node].gpus;
    struct gpu_info *old = ng->g;
    *n_old = ng->n;
    ng->g = xcalloc(n ? (size_t)n : 1, sizeof *ng->g);
    ng->n = n;
    for (int i = 0; i < n; i++) {
        struct gpu_info *g = &ng->g[i];
        *g = gpus[i];
        fix_rank(j, node, g);
        history_add(g, gpu_by_index(old, *n_old, g->index));
        if (g->rank >= 0) j->ranks[g->rank].gpu = g->index;
    }
    return old;
}

/* Live: the rank whose process group holds the GPU (the rest by map_by_local_rank). */
static void rank_from_processes(const struct job *j, int node, struct gpu_info *g)
{
    g->rank = -1;
    for (int k = 0; k < g->n_pids && g->rank < 0; k++) g->rank = rank_of_group(j, node, g->pids[k][1]);
}

/* Replayed: the file's rank, when it is one of this node's. */
static void rank_from_file(const struct job *j, int node, struct gpu_info *g)
{
    const struct node_info *ni = &j->nodes[node];
    if (g->rank < ni->first_rank || g->rank >= ni->first_rank + ni->n_ranks) g->rank = -1;
}

void job_gpu_sample(struct job *j, int node, const struct gpu_info *gpus, int n, const int (*xids)[2],
                    int n_xids)
{
    if (node < 0 || (size_t)node >= j->n_nodes || n < 0) return;
    struct node_gpus *ng = &j->nodes[node].gpus;
    int n_old;
    struct gpu_info *old = gpu_table_replace(j, node, gpus, n, &n_old, rank_from_processes);
    map_by_local_rank(j, node);
    for (int i = 0; i < n; i++)
        events_for(j, node, ng->seen ? gpu_by_index(old, n_old, ng->g[i].index) : NULL, &ng->g[i]);
    for (int x = 0; x < n_xids; x++) {
        char who[160];
        struct gpu_info *g = NULL;
        for (int i = 0; i < n && !g; i++)
            if (ng->g[i].index == xids[x][0]) g = &ng->g[i];
        struct gpu_info unknown = { .index = xids[x][0], .rank = -1 };
        if (g) {   /* counted for the OpenMetrics endpoint (docs/integrations.md) */
            g->xids++;
            g->last_xid = xids[x][1];
        }
        describe(j, node, g ? g : &unknown, who, sizeof who);
        const char *m = gpu_xid_meaning(xids[x][1]);
        job_event_add(j, EV_GPU, g ? g->rank : -1, node, "%s: XID %d%s%s%s", who, xids[x][1], m ? " (" : "",
                      m ? m : "", m ? ")" : "");
    }
    ng->seen = true;
    ng->sample_wall_ns = wall_ns();
    free(old);
    keep_sample(j, node, false);
    j->generation++;
}

void job_gpu_flush(struct job *j)
{
    for (size_t i = 0; i < j->n_nodes; i++)
        if (j->nodes[i].gpus.pending) keep_sample(j, (int)i, true);
}

void job_gpu_restore(struct job *j, int node, const struct gpu_info *gpus, int n)
{
    if (node < 0 || (size_t)node >= j->n_nodes || n < 0) return;
    int n_old;
    free(gpu_table_replace(j, node, gpus, n, &n_old, rank_from_file));
    j->nodes[node].gpus.seen = true;
    j->generation++;
}

const struct gpu_info *job_rank_gpu(const struct job *j, int rank)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks || j->ranks[rank].gpu < 0) return NULL;
    const struct node_gpus *ng = &j->nodes[j->ranks[rank].node].gpus;
    return gpu_by_index(ng->g, ng->n, j->ranks[rank].gpu);
}

const char *job_gpu_stall_note(const struct job *j, int rank, char *buf, size_t cap)
{
    const struct gpu_info *g = job_rank_gpu(j, rank);
    buf[0] = '\0';
    if (!g || isnan(g->util)) return buf;
    if (g->util >= 50)
        snprintf(buf, cap, "; its GPU %d is busy (%.0f%%): stuck in a kernel or a collective", g->index, g->util);
    else
        snprintf(buf, cap, "; its GPU %d is idle (%.0f%%): stuck on the host side (data loading, "
                 "Python, a lock, I/O)", g->index, g->util);
    return buf;
}

const char *job_gpu_straggler_note(const struct job *j, int rank, char *buf, size_t cap)
{
    const struct gpu_info *g = job_rank_gpu(j, rank);
    char names[160];
    buf[0] = '\0';
    if (g && g->has_throttle && (g->throttle & GPU_THR_PROBLEMS))
        snprintf(buf, cap, "; its GPU %d is throttling: %s", g->index,
                 gpu_throttle_names(g->throttle & GPU_THR_PROBLEMS, names, sizeof names));
    return buf;
}
