/* TEST DOUBLE of NVIDIA's NVML (libnvidia-ml.so.1), for the agent's GPU sampler where no GPU
 * and no driver exist (docs/gpu.md, "Without a GPU"). Built as build/fakenvml/libnvidia-ml.so.1;
 * a test puts that directory on LD_LIBRARY_PATH, and the agent's dlopen finds it as it would
 * find the driver's. It implements only the calls the sampler makes, with the real ABI (types
 * and numbers as nvml.h has them), and reads what to report from the file named by
 * FAKE_NVML_STATE, again on every call, so a test changes a GPU's state while the agent runs:
 *
 *   gpu INDEX KEY=VALUE ...   keys: name util mem_used mem_total (MiB) power limit (W) temp (C)
 *                             sm (MHz) throttle (the reasons bit mask) ecc (uncorrected, volatile)
 *                             retired_pending persistence mig (0 or 1; persistence defaults to 1)
 *                             cc (compute capability, "9.0"; none: not supported)
 *   pid INDEX PID             a compute process on GPU INDEX
 *   xid INDEX N               an XID event; each xid line is delivered once
 *   init_error CODE           nvmlInit fails with CODE
 *
 * Without FAKE_NVML_STATE, nvmlInit fails as a driver mismatch would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;
typedef struct fake_set *nvmlEventSet_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define MAX_GPUS 16
#define MAX_PIDS 32
#define MAX_XIDS 64

struct fake_dev {
    int present;
    char name[96];
    unsigned util, temp, sm;
    unsigned long long mem_used, mem_total, throttle, ecc;
    unsigned power_w, limit_w;
    int retired_pending, persistence, mig;
    int cc_major, cc_minor;
    unsigned pids[MAX_PIDS];
    int n_pids;
};
struct fake_set { int unused; };

static struct fake_dev devs[MAX_GPUS];
static int n_devs, init_error, inited;
static struct { int gpu, xid; } xids[MAX_XIDS];
static int n_xids, xids_delivered;
static struct fake_set the_set;

static void load_state(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[512];
    memset(devs, 0, sizeof devs);
    n_devs = 0;
    n_xids = 0;
    init_error = path ? 0 : NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        int idx, v;
        if (sscanf(line, "init_error %d", &v) == 1) {
            init_error = v;
        } else if (sscanf(line, "xid %d %d", &idx, &v) == 2 && n_xids < MAX_XIDS) {
            xids[n_xids].gpu = idx;
            xids[n_xids++].xid = v;
        } else if (sscanf(line, "pid %d %d", &idx, &v) == 2 && idx >= 0 && idx < MAX_GPUS) {
            if (devs[idx].n_pids < MAX_PIDS) devs[idx].pids[devs[idx].n_pids++] = (unsigned)v;
        } else if (sscanf(line, "gpu %d", &idx) == 1 && idx >= 0 && idx < MAX_GPUS) {
            struct fake_dev *d = &devs[idx];
            char *tok = strtok(line, " \t\n");
            d->present = 1;
            d->persistence = 1;
            snprintf(d->name, sizeof d->name, "Fake GPU");
            if (idx + 1 > n_devs) n_devs = idx + 1;
            while ((tok = strtok(NULL, " \t\n"))) {
                char *eq = strchr(tok, '=');
                if (!eq) continue;
                *eq++ = '\0';
                unsigned long long n = strtoull(eq, NULL, 0);
                if (!strcmp(tok, "name")) {
                    snprintf(d->name, sizeof d->name, "%s", eq);
                    for (char *p = d->name; *p; p++) if (*p == '_') *p = ' ';
                }
                else if (!strcmp(tok, "util")) d->util = (unsigned)n;
                else if (!strcmp(tok, "mem_used")) d->mem_used = n << 20;
                else if (!strcmp(tok, "mem_total")) d->mem_total = n << 20;
                else if (!strcmp(tok, "power")) d->power_w = (unsigned)n;
                else if (!strcmp(tok, "limit")) d->limit_w = (unsigned)n;
                else if (!strcmp(tok, "temp")) d->temp = (unsigned)n;
                else if (!strcmp(tok, "sm")) d->sm = (unsigned)n;
                else if (!strcmp(tok, "throttle")) d->throttle = n;
                else if (!strcmp(tok, "ecc")) d->ecc = n;
                else if (!strcmp(tok, "retired_pending")) d->retired_pending = (int)n;
                else if (!strcmp(tok, "persistence")) d->persistence = (int)n;
                else if (!strcmp(tok, "mig")) d->mig = (int)n;
                else if (!strcmp(tok, "cc")) sscanf(eq, "%d.%d", &d->cc_major, &d->cc_minor);
            }
        }
    }
    fclose(f);
}

static nvmlReturn_t dev_ok(nvmlDevice_t d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    load_state();
    return d && d >= devs && d < devs + MAX_GPUS && d->present ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlInit_v2(void)
{
    load_state();
    if (init_error) return init_error;
    inited = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown(void) { inited = 0; return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) { snprintf(v, n, "999.99-fake"); return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    load_state();
    *n = (unsigned)n_devs;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    load_state();
    if (i >= MAX_GPUS || !devs[i].present) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devs[i];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) snprintf(s, n, "%s", d->name);
    return r;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) snprintf(s, n, "GPU-fake-%04d", (int)(d - devs));
    return r;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) { u->gpu = d->util; u->memory = d->util / 2; }
    return r;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) { m->total = d->mem_total; m->used = d->mem_used; m->free = d->mem_total - d->mem_used; }
    return r;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *mw = d->power_w * 1000;
    return r;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *mw = d->limit_w * 1000;
    return r;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r && sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r) *t = d->temp;
    return r;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r && type != 1) return NVML_ERROR_INVALID_ARGUMENT; /* NVML_CLOCK_SM */
    if (!r) *mhz = d->sm;
    return r;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *m)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *m = d->throttle;
    return r;
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r && (type != 1 || counter != 0)) return NVML_ERROR_INVALID_ARGUMENT; /* uncorrected, volatile */
    if (!r) *n = d->ecc;
    return r;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_v2_t *p)
{
    nvmlReturn_t r = dev_ok(d);
    if (r) return r;
    if (*count < (unsigned)d->n_pids) {
        *count = (unsigned)d->n_pids;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < d->n_pids; i++)
        p[i] = (nvmlProcessInfo_v2_t){ .pid = d->pids[i], .usedGpuMemory = 1ull << 30 };
    *count = (unsigned)d->n_pids;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *s)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    *s = &the_set;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t s)
{
    (void)types;
    (void)s;
    return dev_ok(d);
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t s) { (void)s; return NVML_SUCCESS; }
/* Waits up to ms for the next undelivered xid line, re-reading the file every 20 ms. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t *data, unsigned int ms)
{
    (void)s;
    for (unsigned waited = 0;; waited += 20) {
        load_state();
        if (xids_delivered < n_xids) {
            int g = xids[xids_delivered].gpu;
            *data = (nvmlEventData_t){ .device = &devs[g >= 0 && g < MAX_GPUS ? g : 0], .eventType = 0x8,
                                       .eventData = (unsigned long long)xids[xids_delivered].xid };
            xids_delivered++;
            return NVML_SUCCESS;
        }
        if (waited >= ms) return NVML_ERROR_TIMEOUT;
        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000 }, NULL);
    }
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *pending = d->retired_pending;
    return r;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *mode = d->persistence;
    return r;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r) *current = *pending = (unsigned)d->mig;
    return r;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    nvmlReturn_t r = dev_ok(d);
    if (r) return r;
    if (!d->cc_major) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}
