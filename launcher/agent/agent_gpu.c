/* The agent's GPU and CUDA facts: see agent_gpu.h. Libraries are loaded with dlopen and left
 * loaded (unloading CUDA libraries is known to crash at exit); nothing here initialises a GPU. */
#include "agent_gpu.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_exec.h"
#include "util/util.h"

#define NVSMI_TIMEOUT_MS 5000

char *agent_gpu_cuda_version_str(int v)
{
    if (v <= 0) return NULL;
    return xasprintf("%d.%d", v / 1000, (v % 1000) / 10);
}

char *agent_gpu_nccl_version_str(int code)
{
    if (code <= 0) return NULL;
    /* NCCL 2.9 changed the encoding from major*1000+minor*100+patch to major*10000+minor*100+patch. */
    if (code >= 10000) return xasprintf("%d.%d.%d", code / 10000, (code % 10000) / 100, code % 100);
    return xasprintf("%d.%d.%d", code / 1000, (code % 1000) / 100, code % 100);
}

/* dlopen the first of the candidates that loads and has sym; returns the symbol. */
static void *dl_find(const char *const *names, int n, const char *sym)
{
    for (int i = 0; i < n; i++) {
        if (!names[i]) continue;
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
        if (!h) continue;
        void *f = dlsym(h, sym);
        if (f) return f;
        dlclose(h);
    }
    return NULL;
}

char *agent_gpu_nccl_version(const char *cuda_home, char **path_out)
{
    char *c1 = cuda_home ? xasprintf("%s/lib64/libnccl.so.2", cuda_home) : NULL;
    char *c2 = cuda_home ? xasprintf("%s/lib/libnccl.so.2", cuda_home) : NULL;
    const char *names[] = { "libnccl.so.2", c1, c2, "/usr/local/cuda/lib64/libnccl.so.2",
                            "/usr/local/cuda/lib/libnccl.so.2" };
    int (*get)(int *) = NULL;
    char *ver = NULL;
    *(void **)&get = dl_find(names, 5, "ncclGetVersion");
    free(c1);
    free(c2);
    int code = 0;
    if (get && get(&code) == 0) ver = agent_gpu_nccl_version_str(code);
    if (ver && path_out) {
        Dl_info info;
        if (dladdr(*(void **)&get, &info) && info.dli_fname) *path_out = xstrdup(info.dli_fname);
    }
    return ver;
}

/* CUDA_HOME/version.json ("cuda_cudart" or "cuda" version) or the older version.txt. */
static char *cudart_from_files(const char *cuda_home)
{
    char *path = xasprintf("%s/version.json", cuda_home);
    FILE *f = fopen(path, "re");
    char *ver = NULL;
    free(path);
    if (f) {
        char buf[65536];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        cJSON *j = cJSON_Parse(buf);
        const char *keys[] = { "cuda_cudart", "cuda" };
        for (int i = 0; i < 2 && !ver; i++) {
            cJSON *o = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
            cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
            int maj, min;
            if (cJSON_IsString(v) && sscanf(v->valuestring, "%d.%d", &maj, &min) == 2)
                ver = xasprintf("%d.%d", maj, min);
        }
        cJSON_Delete(j);
        if (ver) return ver;
    }
    path = xasprintf("%s/version.txt", cuda_home);
    f = fopen(path, "re");
    free(path);
    if (f) {
        int maj, min;
        if (fscanf(f, "CUDA Version %d.%d", &maj, &min) == 2) ver = xasprintf("%d.%d", maj, min);
        fclose(f);
    }
    return ver;
}

char *agent_gpu_cudart_version(const char *cuda_home)
{
    const char *names[32];
    char *owned[32];
    int n = 0, nowned = 0;
    names[n++] = "libcudart.so";
    for (int major = 14; major >= 10; major--)
        names[n++] = owned[nowned++] = xasprintf("libcudart.so.%d", major);
    const char *dirs[] = { cuda_home, "/usr/local/cuda" };
    for (int d = 0; d < 2; d++) {
        if (!dirs[d]) continue;
        char *pat = xasprintf("%s/lib64/libcudart.so*", dirs[d]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc && n < 32 && nowned < 32; i++)
                names[n++] = owned[nowned++] = xstrdup(g.gl_pathv[i]);
            globfree(&g);
        }
        free(pat);
    }
    int (*get)(int *) = NULL;
    *(void **)&get = dl_find(names, n, "cudaRuntimeGetVersion");
    for (int i = 0; i < nowned; i++) free(owned[i]);
    int v = 0;
    if (get && get(&v) == 0 && v > 0) return agent_gpu_cuda_version_str(v);
    for (int d = 0; d < 2; d++) {
        char *ver = dirs[d] ? cudart_from_files(dirs[d]) : NULL;
        if (ver) return ver;
    }
    return NULL;
}

/* The CUDA version the driver supports, from libcuda (needs no cuInit). */
static char *cuda_driver_from_lib(void)
{
    const char *names[] = { "libcuda.so.1", "libcuda.so" };
    int (*get)(int *) = NULL;
    *(void **)&get = dl_find(names, 2, "cuDriverGetVersion");
    int v = 0;
    if (get && get(&v) == 0) return agent_gpu_cuda_version_str(v);
    return NULL;
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
    if (v && v[0]) cJSON_AddStringToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

/* model: the name when all GPUs agree, else the distinct names joined by ", ". */
static void add_model(cJSON *gpu, cJSON *names)
{
    struct strbuf sb;
    strbuf_init(&sb);
    cJSON *a, *b;
    cJSON_ArrayForEach(a, names) {
        int seen = 0;
        cJSON_ArrayForEach(b, names) {
            if (b == a) break;
            if (strcmp(a->valuestring, b->valuestring) == 0) seen = 1;
        }
        if (seen) continue;
        if (sb.len) strbuf_adds(&sb, ", ");
        strbuf_adds(&sb, a->valuestring);
    }
    add_str_or_null(gpu, "model", sb.buf);
    strbuf_done(&sb);
}

static char *const nvsmi_query_argv[] = { "nvidia-smi", "--query-gpu=name,driver_version",
                                          "--format=csv,noheader", NULL };
static char *const nvsmi_banner_argv[] = { "nvidia-smi", NULL };

void agent_gpu_probes(struct agent_probe *query, struct agent_probe *banner)
{
    *query = (struct agent_probe){ .argv = nvsmi_query_argv, .timeout_ms = NVSMI_TIMEOUT_MS,
                                   .merge_stderr = 1 };
    *banner = (struct agent_probe){ .argv = nvsmi_banner_argv, .timeout_ms = NVSMI_TIMEOUT_MS };
}

/* "NVIDIA H100 80GB HBM3, 550.54.15" per GPU, and the banner's "CUDA Version: 12.4". */
cJSON *agent_gpu_parse_nvsmi(int query_status, const char *query_out, const char *banner_out,
                             char **error)
{
    char *text = xstrdup(query_out ? query_out : "");
    if (query_status != 0) {
        text[strcspn(text, "\n")] = '\0'; /* its first line says why */
        char *first = agent_exec_clean(text);
        if (query_status < 0) *error = xasprintf("nvidia-smi: timed out after %d ms", NVSMI_TIMEOUT_MS);
        else *error = xasprintf("nvidia-smi: exit status %d%s%.200s", query_status,
                                *first ? ": " : "", first);
        free(text);
        return NULL;
    }
    cJSON *names = cJSON_CreateArray();
    char *driver = NULL, *save = NULL;
    int count = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *comma = strrchr(line, ',');
        if (!comma) continue;
        *comma = '\0';
        char *name = agent_exec_clean(line), *drv = agent_exec_clean(comma + 1);
        if (!*name) continue;
        cJSON_AddItemToArray(names, cJSON_CreateString(name));
        if (!driver && *drv) driver = xstrdup(drv);
        count++;
    }
    free(text);
    if (!count) {
        *error = xstrdup("nvidia-smi: listed no GPU");
        cJSON_Delete(names);
        free(driver);
        return NULL;
    }
    cJSON *gpu = cJSON_CreateObject();
    cJSON_AddNumberToObject(gpu, "count", count);
    add_model(gpu, names);
    cJSON_AddItemToObject(gpu, "names", names);
    add_str_or_null(gpu, "driver", driver);
    free(driver);

    char *cuda = NULL;
    const char *p = banner_out ? strstr(banner_out, "CUDA Version:") : NULL;
    if (p) {
        p += strlen("CUDA Version:");
        while (*p == ' ') p++;
        size_t n = strspn(p, "0123456789.");
        if (n) cuda = xstrndup(p, n);
    }
    if (!cuda) cuda = cuda_driver_from_lib();
    add_str_or_null(gpu, "cuda_driver", cuda);
    free(cuda);
    cJSON_AddStringToObject(gpu, "source", "nvidia-smi");
    return gpu;
}

static char *read_small(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) return NULL;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return xstrdup(buf);
}

/* /proc/driver/nvidia: "NVRM version: NVIDIA UNIX ... Kernel Module  550.54.15  ..." and one
 * directory per GPU under gpus/ whose "information" file has "Model: ...". */
cJSON *agent_gpu_from_proc(const char *root)
{
    char *gdir = xasprintf("%s/gpus", root);
    DIR *d = opendir(gdir);
    if (!d) {
        free(gdir);
        return NULL;
    }
    cJSON *names = cJSON_CreateArray();
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *path = xasprintf("%s/%s/information", gdir, de->d_name);
        char *info = read_small(path);
        free(path);
        char *m = info ? strstr(info, "Model:") : NULL;
        if (m) {
            m += strlen("Model:");
            m[strcspn(m, "\n")] = '\0';
            cJSON_AddItemToArray(names, cJSON_CreateString(agent_exec_clean(m)));
        }
        free(info);
        count++;
    }
    closedir(d);
    free(gdir);
    if (!count) {
        cJSON_Delete(names);
        return NULL;
    }
    cJSON *gpu = cJSON_CreateObject();
    cJSON_AddNumberToObject(gpu, "count", count);
    add_model(gpu, names);
    cJSON_AddItemToObject(gpu, "names", names);
    char *vpath = xasprintf("%s/version", root);
    char *ver = read_small(vpath), *driver = NULL;
    free(vpath);
    char *p = ver ? strstr(ver, "Kernel Module") : NULL;
    /* The version is the first token after "Kernel Module" that starts with a digit (the open
     * modules say "Kernel Module for x86_64  550.54.15"). */
    for (p = p ? p + strlen("Kernel Module") : NULL; p && *p && *p != '\n'; p++) {
        if (isdigit((unsigned char)*p) && (p[-1] == ' ' || p[-1] == '\t')) {
            size_t n = strspn(p, "0123456789.");
            if (n > 2 && p[n - 1] != '.' && strchr(p, '.') < p + n) {
                driver = xstrndup(p, n);
                break;
            }
        }
    }
    free(ver);
    add_str_or_null(gpu, "driver", driver);
    free(driver);
    char *cuda = cuda_driver_from_lib();
    add_str_or_null(gpu, "cuda_driver", cuda);
    free(cuda);
    cJSON_AddStringToObject(gpu, "source", "proc");
    return gpu;
}

cJSON *agent_gpu_facts(const struct agent_probe *query, const struct agent_probe *banner)
{
    char *error = NULL;
    cJSON *gpu = NULL;
    if (query)
        gpu = agent_gpu_parse_nvsmi(query->status, query->out.buf,
                                    banner && banner->status == 0 ? banner->out.buf : NULL, &error);
    if (!gpu) gpu = agent_gpu_from_proc("/proc/driver/nvidia");
    if (!gpu) {
        gpu = cJSON_CreateObject();
        cJSON_AddNumberToObject(gpu, "count", 0);
        cJSON_AddStringToObject(gpu, "source", "none");
    }
    if (error) cJSON_AddStringToObject(gpu, "error", error);
    free(error);
    return gpu;
}
