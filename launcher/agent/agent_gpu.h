/* GPU and CUDA facts for the agent: the GPU inventory (nvidia-smi, else /proc/driver/nvidia),
 * and the NCCL and CUDA runtime library versions found with dlopen, never linked, so the agent
 * runs on nodes without CUDA. */
#ifndef DDPTOP_AGENT_GPU_H
#define DDPTOP_AGENT_GPU_H

#include <cJSON.h>

struct agent_probe;

/* Fills the two nvidia-smi probes (the --query-gpu list and the plain banner that carries
 * "CUDA Version: X") for agent_exec_run_all, so they run alongside the facts' other probes. */
void agent_gpu_probes(struct agent_probe *query, struct agent_probe *banner);

/* {"count":N,"model":..,"names":[..],"driver":..,"cuda_driver":..,"source":"nvidia-smi"|"proc"}
 * or {"count":0,"source":"none"}; "error" says why nvidia-smi was not usable when it failed.
 * query/banner: the finished probes, or NULL when nvidia-smi is not on PATH. */
cJSON *agent_gpu_facts(const struct agent_probe *query, const struct agent_probe *banner);

/* "2.19.3" and the library's path, or NULL. cuda_home: where else to look (may be NULL). */
char *agent_gpu_nccl_version(const char *cuda_home, char **path_out);
/* "12.4" from libcudart's cudaRuntimeGetVersion, else CUDA_HOME's version.json/version.txt. */
char *agent_gpu_cudart_version(const char *cuda_home);

/* Pure parsers, exported for tests. */
/* From nvidia-smi's outputs (query_status as agent_exec_capture returns; banner may be NULL);
 * NULL with *error set when the query gave no GPU. cuda_driver falls back to libcuda. */
cJSON *agent_gpu_parse_nvsmi(int query_status, const char *query_out, const char *banner_out,
                             char **error);
/* From a /proc/driver/nvidia tree under root ("/proc/driver/nvidia"); NULL when it has no GPU. */
cJSON *agent_gpu_from_proc(const char *root);
/* A CUDA version number (12040) as "12.4"; NULL for <= 0. */
char *agent_gpu_cuda_version_str(int v);
/* An ncclGetVersion code (21903 or, before 2.9, 2708) as "2.19.3". */
char *agent_gpu_nccl_version_str(int code);

#endif
