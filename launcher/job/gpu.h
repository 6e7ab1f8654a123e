/* The job's GPUs: each node's latest NVML sample (agent/agent_nvml.c sends one a second), which
 * rank uses which GPU, a short utilisation history, and the events a person watching wants
 * told: a GPU that starts or stops throttling (the reasons named), an XID (its number and
 * meaning), new uncorrectable ECC errors. docs/gpu.md, "Telemetry". */
#ifndef DDPTOP_JOB_GPU_H
#define DDPTOP_JOB_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job;
struct gpu_info;

/* Throttle ("clocks event") reasons as NVML's bit mask has them. */
#define GPU_THR_SW_POWER_CAP    0x4ull
#define GPU_THR_HW_SLOWDOWN     0x8ull
#define GPU_THR_SW_THERMAL      0x20ull
#define GPU_THR_HW_THERMAL      0x40ull
#define GPU_THR_HW_POWER_BRAKE  0x80ull
/* The reasons that slow a working GPU down (idle, application clocks, sync boost and display
 * clock settings are not problems). */
#define GPU_THR_PROBLEMS (GPU_THR_SW_POWER_CAP | GPU_THR_HW_SLOWDOWN | GPU_THR_SW_THERMAL | \
                          GPU_THR_HW_THERMAL | GPU_THR_HW_POWER_BRAKE)

/* gpu.jsonl in the run's log directory keeps a node's sample every GPU_KEEP_MS (docs/logs.md),
 * up to GPU_FILE_MAX bytes: a week of 16 nodes x 8 GPUs fits. Besides: the first sample
 * GPU_BUSY_AFTER_MS or more after the node's ranks were first seen running in an attempt, and
 * the node's last sample when the run ends (job_gpu_flush), so that a run shorter than
 * GPU_KEEP_MS records its GPUs at work, not only idle before the ranks started. */
#define GPU_KEEP_MS 10000
#define GPU_BUSY_AFTER_MS 1000
#define GPU_FILE_MAX (256ull << 20)

/* Takes one node's sample (gpus[0..n), each with its pids) and its XIDs (gpu index, xid):
 * keeps the history, maps GPUs to ranks (a process whose group is a rank's pid on that node),
 * adds the events, and keeps a line in gpu.jsonl when one is due. */
void job_gpu_sample(struct job *j, int node, const struct gpu_info *gpus, int n, const int (*xids)[2],
                    int n_xids);

/* Keeps each node's latest sample in gpu.jsonl where it is not there yet: whoever ends the run
 * calls it before job_event_end (the final record). */
void job_gpu_flush(struct job *j);

/* A sample read back from gpu.jsonl (`ddptop view`): each GPU's rank as the file gave it
 * (-1: none), the history kept as for a live sample; no events (events.jsonl has them) and
 * nothing written. */
void job_gpu_restore(struct job *j, int node, const struct gpu_info *gpus, int n);

/* The named reasons in a throttle mask ("thermal (hardware), power cap"), into buf. */
const char *gpu_throttle_names(unsigned long long mask, char *buf, size_t cap);
/* What an XID means, in a few words ("GPU has fallen off the bus"), or NULL when unknown. */
const char *gpu_xid_meaning(int xid);

/* The rank's GPU in its node's last sample, or NULL (none known). */
const struct gpu_info *job_rank_gpu(const struct job *j, int rank);

/* What a stall or straggler event adds about the rank's GPU ("; its GPU 1 is busy (98%): stuck
 * in a kernel or a collective"; "; its GPU 1 is throttling: thermal (hardware)"), or "" when
 * its GPU is not known or says nothing. Into buf. */
const char *job_gpu_stall_note(const struct job *j, int rank, char *buf, size_t cap);
const char *job_gpu_straggler_note(const struct job *j, int rank, char *buf, size_t cap);

#endif
