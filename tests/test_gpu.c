/* Unit tests for launcher/job/gpu.c: NVML samples into the job model. A GPU is mapped to the
 * rank whose pid is the process group of a process on it; throttling is told when it starts
 * (its reasons named) and when it stops, idle and clock-setting reasons are not; new
 * uncorrectable ECC errors and XIDs (with their meaning) are events; the utilisation history
 * is kept across samples and bounded; stall and straggler events get a note about the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/gpu.h"
#include "job/job.h"
#include "job/rank_report.h"
#include "tap.h"
#include "util/util.h"

static char err[512];

static struct job *two_ranks(void)
{
    const char *names[] = { "gpu1" };
    int per_node[] = { 2 };
    struct job *j = job_new("t", NULL, 0, names, NULL, per_node, 1, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) printf("# %s\n", err);
    if (j) {
        job_rank_started(j, 0, 500);
        job_rank_started(j, 1, 501);
    }
    return j;
}

static struct gpu_info gpu(int index, double util, unsigned long long throttle, unsigned long long ecc, long pgid)
{
    struct gpu_info g = { .index = index, .util = util, .mem_util = NAN, .mem_used_mib = 100,
                          .mem_total_mib = 1000, .power_w = 100, .power_limit_w = 300, .temp_c = 50,
                          .sm_mhz = 1500, .has_throttle = true, .throttle = throttle, .has_ecc = true,
                          .ecc = ecc, .rank = -1 };
    if (pgid) {
        g.pids[0][0] = pgid + 7;   /* a child of the rank: its group is the rank's pid */
        g.pids[0][1] = pgid;
        g.n_pids = 1;
    }
    return g;
}

/* Events are a ring; these tests add fewer than it holds. */
static size_t n_events(const struct job *j) { return j->ev_count; }
static const struct job_event *event(const struct job *j, size_t i) { return job_event_at(j, i); }
static const char *last_event(const struct job *j) { return j->ev_count ? event(j, j->ev_count - 1)->text : ""; }

static void test_rank_mapping_and_throttle(void)
{
    struct job *j = two_ranks();
    if (!j) return;
    struct gpu_info s[2] = { gpu(0, 95, 0, 0, 500), gpu(1, 90, 0x1 | 0x2, 0, 501) };
    size_t e0 = n_events(j);
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(j->ranks[0].gpu, 0);
    CHECK_INT(j->ranks[1].gpu, 1);
    CHECK_INT(j->nodes[0].gpus.g[1].rank, 1);
    CHECK_INT(n_events(j), e0);                    /* idle and clock settings: no event */
    s[1].throttle = GPU_THR_HW_THERMAL | GPU_THR_SW_POWER_CAP;
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(n_events(j), e0 + 1);
    CHECK_STR(last_event(j), "GPU 1 on gpu1 (rank 1) throttling: thermal (hardware), power cap");
    CHECK_INT(event(j, j->ev_count - 1)->kind, EV_GPU);
    job_gpu_sample(j, 0, s, 2, NULL, 0);           /* still throttling: told once */
    CHECK_INT(n_events(j), e0 + 1);
    s[1].throttle = 0;
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_STR(last_event(j), "GPU 1 on gpu1 (rank 1) stopped throttling (was: thermal (hardware), power cap)");
    job_free(j);
}

static void test_ecc_and_xid(void)
{
    struct job *j = two_ranks();
    if (!j) return;
    struct gpu_info s[1] = { gpu(0, 10, 0, 0, 0) };
    int xids[2][2] = { { 0, 79 }, { 0, 4242 } };
    job_gpu_sample(j, 0, s, 1, NULL, 0);
    s[0].ecc = 3;
    size_t e0 = n_events(j);
    job_gpu_sample(j, 0, s, 1, (const int (*)[2])xids, 2);
    CHECK_INT(n_events(j), e0 + 3);
    /* no process listed: GPU 0 is local rank 0's by the fallback */
    CHECK_STR(event(j, e0)->text, "GPU 0 on gpu1 (rank 0): 3 new uncorrectable ECC errors (3 since the driver "
                                  "loaded); the GPU may need a reset");
    CHECK_STR(event(j, e0 + 1)->text, "GPU 0 on gpu1 (rank 0): XID 79 (GPU has fallen off the bus)");
    CHECK_STR(event(j, e0 + 2)->text, "GPU 0 on gpu1 (rank 0): XID 4242");
    job_gpu_sample(j, 0, s, 1, NULL, 0);           /* the same count again: nothing new */
    CHECK_INT(n_events(j), e0 + 3);
    job_free(j);
}

static void test_history(void)
{
    struct job *j = two_ranks();
    if (!j) return;
    for (int k = 0; k < GPU_HIST + 5; k++) {
        struct gpu_info s[1] = { gpu(0, k % 101, 0, 0, 0) };
        job_gpu_sample(j, 0, s, 1, NULL, 0);
    }
    const struct gpu_info *g = &j->nodes[0].gpus.g[0];
    CHECK_INT(g->hist_n, GPU_HIST);
    CHECK_INT(g->hist[GPU_HIST - 1], (GPU_HIST + 4) % 101);
    CHECK_INT(g->hist[0], 5);
    struct gpu_info s[1] = { gpu(0, NAN, 0, 0, 0) };   /* a sample without utilisation */
    job_gpu_sample(j, 0, s, 1, NULL, 0);
    CHECK_INT(j->nodes[0].gpus.g[0].hist_n, GPU_HIST);
    job_free(j);
}

/* No process of a rank on any GPU yet: the LOCAL_RANK-th entry of CUDA_VISIBLE_DEVICES (an
 * index or a UUID prefix), else the LOCAL_RANK-th GPU; a rank's processes on a GPU win. */
static void test_local_rank_fallback(void)
{
    struct job *j = two_ranks();
    if (!j) return;
    struct gpu_info s[2] = { gpu(0, 10, 0, 0, 0), gpu(1, 20, 0, 0, 0) };
    snprintf(s[0].uuid, sizeof s[0].uuid, "GPU-aaaa-0000");
    snprintf(s[1].uuid, sizeof s[1].uuid, "GPU-bbbb-1111");
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(j->ranks[0].gpu, 0);                 /* no CUDA_VISIBLE_DEVICES: in order */
    CHECK_INT(j->ranks[1].gpu, 1);
    j->nodes[0].gpus.visible = xstrdup("1,0");
    j->ranks[0].gpu = j->ranks[1].gpu = -1;
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(j->ranks[0].gpu, 1);
    CHECK_INT(j->ranks[1].gpu, 0);
    free(j->nodes[0].gpus.visible);
    j->nodes[0].gpus.visible = xstrdup("GPU-bbbb,GPU-aaaa-0000");
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(j->ranks[0].gpu, 1);
    CHECK_INT(j->nodes[0].gpus.g[0].rank, 1);
    s[0] = gpu(0, 10, 0, 0, 500);                  /* rank 0's process shows up on GPU 0 */
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_INT(j->ranks[0].gpu, 0);
    CHECK_INT(j->nodes[0].gpus.g[0].rank, 0);
    /* rank 1's entry is GPU 0, where rank 0's processes are: no GPU for rank 1 by the fallback */
    CHECK_INT(j->nodes[0].gpus.g[1].rank, -1);
    job_free(j);
}

static void test_notes(void)
{
    struct job *j = two_ranks();
    char buf[200];
    if (!j) return;
    CHECK_STR(job_gpu_stall_note(j, 0, buf, sizeof buf), "");     /* no sample yet */
    struct gpu_info s[2] = { gpu(0, 99, 0, 0, 500), gpu(1, 3, GPU_THR_HW_SLOWDOWN, 0, 501) };
    job_gpu_sample(j, 0, s, 2, NULL, 0);
    CHECK_STR(job_gpu_stall_note(j, 0, buf, sizeof buf),
              "; its GPU 0 is busy (99%): stuck in a kernel or a collective");
    CHECK_STR(job_gpu_stall_note(j, 1, buf, sizeof buf),
              "; its GPU 1 is idle (3%): stuck on the host side (data loading, Python, a lock, I/O)");
    CHECK_STR(job_gpu_straggler_note(j, 1, buf, sizeof buf), "; its GPU 1 is throttling: hardware slowdown");
    CHECK_STR(job_gpu_straggler_note(j, 0, buf, sizeof buf), "");
    job_free(j);
}

int main(void)
{
    RUN(test_rank_mapping_and_throttle);
    RUN(test_ecc_and_xid);
    RUN(test_history);
    RUN(test_local_rank_fallback);
    RUN(test_notes);
    return tap_done();
}
