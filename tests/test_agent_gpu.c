/* The agent's GPU/CUDA fact parsers: nvidia-smi output (one GPU, mixed GPUs, failures), a
 * /proc/driver/nvidia tree written to a temporary directory, and the version encodings of
 * ncclGetVersion and cudaRuntimeGetVersion. */
#include "agent/agent_gpu.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

static const char *banner =
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n";

static void test_nvsmi_eight_gpus(void)
{
    char *err = NULL;
    const char *q = "NVIDIA H100 80GB HBM3, 550.54.15\n"
                    "NVIDIA H100 80GB HBM3, 550.54.15\n"
                    "NVIDIA H100 80GB HBM3, 550.54.15\n"
                    "NVIDIA H100 80GB HBM3, 550.54.15\n";
    cJSON *g = agent_gpu_parse_nvsmi(0, q, banner, &err);
    CHECK(g != NULL);
    CHECK(err == NULL);
    CHECK_INT(num(g, "count"), 4);
    CHECK_STR(str(g, "model"), "NVIDIA H100 80GB HBM3");
    CHECK_STR(str(g, "driver"), "550.54.15");
    CHECK_STR(str(g, "cuda_driver"), "12.4");
    CHECK_STR(str(g, "source"), "nvidia-smi");
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(g, "names")), 4);
    cJSON_Delete(g);
}

static void test_nvsmi_mixed_models(void)
{
    char *err = NULL;
    cJSON *g = agent_gpu_parse_nvsmi(0, "NVIDIA A100-SXM4-40GB, 535.1\r\nTesla T4, 535.1\r\n"
                                        "NVIDIA A100-SXM4-40GB, 535.1\n", banner, &err);
    CHECK(g != NULL);
    CHECK_INT(num(g, "count"), 3);
    CHECK_STR(str(g, "model"), "NVIDIA A100-SXM4-40GB, Tesla T4");
    CHECK_STR(str(g, "driver"), "535.1");
    cJSON_Delete(g);
    free(err);
}

static void test_nvsmi_failures(void)
{
    char *err = NULL;
    cJSON *g = agent_gpu_parse_nvsmi(9, "NVIDIA-SMI has failed because it couldn't communicate with "
                                        "the NVIDIA driver.\nMore text\n", NULL, &err);
    CHECK(g == NULL);
    CHECK_STR(err, "nvidia-smi: exit status 9: NVIDIA-SMI has failed because it couldn't "
                   "communicate with the NVIDIA driver.");
    free(err);
    err = NULL;
    g = agent_gpu_parse_nvsmi(-1, "", NULL, &err);
    CHECK(g == NULL);
    CHECK(err && strstr(err, "timed out"));
    free(err);
    err = NULL;
    g = agent_gpu_parse_nvsmi(0, "No devices were found\n", NULL, &err);
    CHECK(g == NULL);
    CHECK_STR(err, "nvidia-smi: listed no GPU");
    free(err);
}

/* Remote bytes never reach a terminal raw: control characters become '?'. */
static void test_nvsmi_sanitized(void)
{
    char *err = NULL;
    cJSON *g = agent_gpu_parse_nvsmi(0, "Evil\x1b[2JGPU, 1.2\n", NULL, &err);
    CHECK(g != NULL);
    CHECK_STR(str(g, "model"), "Evil?[2JGPU");
    cJSON_Delete(g);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_proc_tree(void)
{
    char root[] = "/tmp/ddptop-test-gpu-XXXXXX";
    char path[256];
    CHECK(mkdtemp(root) != NULL);
    CHECK(agent_gpu_from_proc(root) == NULL); /* no gpus/ directory: not a GPU node */
    snprintf(path, sizeof path, "%s/gpus", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gpus/0000:17:00.0", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gpus/0000:17:00.0/information", root);
    write_file(path, "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\n");
    snprintf(path, sizeof path, "%s/gpus/0000:2a:00.0", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gpus/0000:2a:00.0/information", root);
    write_file(path, "Model: \t\t NVIDIA H100 80GB HBM3\n");
    snprintf(path, sizeof path, "%s/version", root);
    write_file(path, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release "
                     "Build  (dvs-builder@U16-T02-35-3)  Tue Mar  5 22:15:33 UTC 2024\n"
                     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
    cJSON *g = agent_gpu_from_proc(root);
    CHECK(g != NULL);
    CHECK_INT(num(g, "count"), 2);
    CHECK_STR(str(g, "model"), "NVIDIA H100 80GB HBM3");
    CHECK_STR(str(g, "driver"), "550.54.15");
    CHECK_STR(str(g, "source"), "proc");
    cJSON_Delete(g);
    /* The proprietary module's wording. */
    write_file(path, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 "
                     "18:56:32 UTC 2023\n");
    g = agent_gpu_from_proc(root);
    CHECK_STR(str(g, "driver"), "535.129.03");
    cJSON_Delete(g);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK_INT(system(cmd), 0);
}

static void test_version_encodings(void)
{
    char *s;
    CHECK_STR(s = agent_gpu_nccl_version_str(21903), "2.19.3");
    free(s);
    CHECK_STR(s = agent_gpu_nccl_version_str(22809), "2.28.9");
    free(s);
    CHECK_STR(s = agent_gpu_nccl_version_str(2708), "2.7.8"); /* before NCCL 2.9 */
    free(s);
    CHECK(agent_gpu_nccl_version_str(0) == NULL);
    CHECK_STR(s = agent_gpu_cuda_version_str(12040), "12.4");
    free(s);
    CHECK_STR(s = agent_gpu_cuda_version_str(13000), "13.0");
    free(s);
    CHECK_STR(s = agent_gpu_cuda_version_str(11080), "11.8");
    free(s);
    CHECK(agent_gpu_cuda_version_str(0) == NULL);
}

int main(void)
{
    RUN(test_nvsmi_eight_gpus);
    RUN(test_nvsmi_mixed_models);
    RUN(test_nvsmi_failures);
    RUN(test_nvsmi_sanitized);
    RUN(test_proc_tree);
    RUN(test_version_encodings);
    return tap_done();
}
