/* The NVML sampler: see agent_nvml.h. Types and numbers are NVML's ABI as nvml.h declares them
 * (stable across drivers for the calls used here); only the handful needed are written out, so
 * the agent builds without the CUDA toolkit. */
#include "agent_nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

typedef int nvml_ret;
typedef void *nvml_dev;
typedef void *nvml_set;
struct nvml_util { unsigned int gpu, memory; };
struct nvml_mem { unsigned long long total, free, used; };
struct nvml_proc { unsigned int pid; unsigned long long used; unsigned int gi, ci; };
struct nvml_event { nvml_dev dev; unsigned long long type, data; unsigned int gi, ci; };

#define NVML_OK 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_MEMORY_ERROR_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_EVENT_XID 0x8ull
#define NVML_MAX_GPUS 64
#define NVML_MAX_PROCS 64
#define GPU_WATCH_MIN_MS 100

struct nvml_api {
    void *lib;
    nvml_ret (*init)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*driver_version)(char *, unsigned int);
    nvml_ret (*count)(unsigned int *);
    nvml_ret (*handle)(unsigned int, nvml_dev *);
    nvml_ret (*name)(nvml_dev, char *, unsigned int);
    nvml_ret (*uuid)(nvml_dev, char *, unsigned int);
    nvml_ret (*util)(nvml_dev, struct nvml_util *);
    nvml_ret (*mem)(nvml_dev, struct nvml_mem *);
    nvml_ret (*power)(nvml_dev, unsigned int *);
    nvml_ret (*power_limit)(nvml_dev, unsigned int *);
    nvml_ret (*temp)(nvml_dev, int, unsigned int *);
    nvml_ret (*clock)(nvml_dev, int, unsigned int *);
    nvml_ret (*throttle)(nvml_dev, unsigned long long *);
    nvml_ret (*ecc)(nvml_dev, int, int, unsigned long long *);
    nvml_ret (*procs)(nvml_dev, unsigned int *, struct nvml_proc *);
    nvml_ret (*set_create)(nvml_set *);
    nvml_ret (*register_events)(nvml_dev, unsigned long long, nvml_set);
    nvml_ret (*set_wait)(nvml_set, struct nvml_event *, unsigned int);
    nvml_ret (*shutdown)(void);
    nvml_ret (*retired_pending)(nvml_dev, int *);
    nvml_ret (*persistence)(nvml_dev, int *);
    nvml_ret (*mig)(nvml_dev, unsigned int *, unsigned int *);
    nvml_ret (*cc)(nvml_dev, int *, int *);
};

struct sampler {
    struct nvml_api api;
    nvml_dev devs[NVML_MAX_GPUS];
    unsigned int n;
    nvml_set events;          /* NULL: XIDs not available (sampled on a timer only) */
    int interval_ms;
    int fd;                   /* write end of the pipe the loop reads */
    atomic_int stop;
};

static struct {
    struct sampler *s;        /* the running sampler, owned by its thread once started */
    struct agent_watch *w;    /* the pipe's read end */
    struct strbuf in;         /* a line not complete yet */
} watch;

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    return p || !b ? p : dlsym(lib, b);
}

/* Loads NVML and initialises it; NULL and err on failure ("no NVML: ..." when the library is
 * absent: no driver on this node). */
static int api_load(struct nvml_api *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        snprintf(err, errlen, "no NVML on this node: %s", dlerror());
        return -1;
    }
    *(void **)&a->init = sym(a->lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&a->error_string = sym(a->lib, "nvmlErrorString", NULL);
    *(void **)&a->driver_version = sym(a->lib, "nvmlSystemGetDriverVersion", NULL);
    *(void **)&a->count = sym(a->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&a->handle = sym(a->lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&a->name = sym(a->lib, "nvmlDeviceGetName", NULL);
    *(void **)&a->uuid = sym(a->lib, "nvmlDeviceGetUUID", NULL);
    *(void **)&a->util = sym(a->lib, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&a->mem = sym(a->lib, "nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&a->power = sym(a->lib, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&a->power_limit = sym(a->lib, "nvmlDeviceGetEnforcedPowerLimit", NULL);
    *(void **)&a->temp = sym(a->lib, "nvmlDeviceGetTemperature", NULL);
    *(void **)&a->clock = sym(a->lib, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&a->throttle = sym(a->lib, "nvmlDeviceGetCurrentClocksEventReasons",
                                 "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&a->ecc = sym(a->lib, "nvmlDeviceGetTotalEccErrors", NULL);
    *(void **)&a->procs = sym(a->lib, "nvmlDeviceGetComputeRunningProcesses_v2", NULL);
    *(void **)&a->set_create = sym(a->lib, "nvmlEventSetCreate", NULL);
    *(void **)&a->register_events = sym(a->lib, "nvmlDeviceRegisterEvents", NULL);
    *(void **)&a->set_wait = sym(a->lib, "nvmlEventSetWait_v2", "nvmlEventSetWait");
    *(void **)&a->shutdown = sym(a->lib, "nvmlShutdown", NULL);
    *(void **)&a->retired_pending = sym(a->lib, "nvmlDeviceGetRetiredPagesPendingStatus", NULL);
    *(void **)&a->persistence = sym(a->lib, "nvmlDeviceGetPersistenceMode", NULL);
    *(void **)&a->mig = sym(a->lib, "nvmlDeviceGetMigMode", NULL);
    *(void **)&a->cc = sym(a->lib, "nvmlDeviceGetCudaComputeCapability", NULL);
    if (!a->init || !a->count || !a->handle) {
        snprintf(err, errlen, "NVML (libnvidia-ml.so.1) lacks nvmlInit or the device calls");
        dlclose(a->lib);
        return -1;
    }
    nvml_ret r = a->init();
    if (r != NVML_OK) {
        snprintf(err, errlen, "nvmlInit failed: %s (error %d; is the NVIDIA driver loaded and "
                 "the same version as its library?)", a->error_string ? a->error_string(r) : "?", r);
        dlclose(a->lib);
        return -1;
    }
    return 0;
}

/* A process's group (/proc/PID/stat field 5): the controller maps it to a rank, whose process
 * group every process it starts belongs to. */
static long proc_pgid(unsigned int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    long pgid = -1;
    if (p && sscanf(p + 1, " %*c %*d %ld", &pgid) != 1) pgid = -1;
    return pgid;
}

static void add_gpu(struct sampler *s, unsigned int i, struct strbuf *sb)
{
    struct nvml_api *a = &s->api;
    nvml_dev d = s->devs[i];
    char text[96];
    struct nvml_util u;
    struct nvml_mem m;
    unsigned int v;
    unsigned long long ull;
    strbuf_addf(sb, "%s{\"index\":%u", i ? "," : "", i);
    if (a->name && a->name(d, text, sizeof text) == NVML_OK) {
        strbuf_adds(sb, ",\"name\":");
        struct strbuf clean;
        strbuf_init(&clean);
        for (const char *p = text; *p; p++) /* plain ASCII printable: a JSON string as it is */
            strbuf_add(&clean, *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\' ? p : "?", 1);
        strbuf_addf(sb, "\"%s\"", clean.buf ? clean.buf : "");
        strbuf_done(&clean);
    }
    if (a->uuid && a->uuid(d, text, sizeof text) == NVML_OK && strspn(text, "GPUMIG-0123456789abcdefABCDEF") == strlen(text))
        strbuf_addf(sb, ",\"uuid\":\"%s\"", text);
    if (a->util && a->util(d, &u) == NVML_OK) strbuf_addf(sb, ",\"util\":%u,\"mem_util\":%u", u.gpu, u.memory);
    if (a->mem && a->mem(d, &m) == NVML_OK)
        strbuf_addf(sb, ",\"mem_used_mib\":%llu,\"mem_total_mib\":%llu", m.used >> 20, m.total >> 20);
    if (a->power && a->power(d, &v) == NVML_OK) strbuf_addf(sb, ",\"power_w\":%.1f", v / 1000.0);
    if (a->power_limit && a->power_limit(d, &v) == NVML_OK) strbuf_addf(sb, ",\"power_limit_w\":%.1f", v / 1000.0);
    if (a->temp && a->temp(d, NVML_TEMPERATURE_GPU, &v) == NVML_OK) strbuf_addf(sb, ",\"temp_c\":%u", v);
    if (a->clock && a->clock(d, NVML_CLOCK_SM, &v) == NVML_OK) strbuf_addf(sb, ",\"sm_mhz\":%u", v);
    if (a->throttle && a->throttle(d, &ull) == NVML_OK) strbuf_addf(sb, ",\"throttle\":%llu", ull);
    if (a->ecc && a->ecc(d, NVML_MEMORY_ERROR_UNCORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_OK)
        strbuf_addf(sb, ",\"ecc_uncorrected\":%llu", ull);
    if (a->procs) {
        struct nvml_proc p[NVML_MAX_PROCS];
        unsigned int np = NVML_MAX_PROCS;
        if (a->procs(d, &np, p) == NVML_OK) {
            strbuf_adds(sb, ",\"pids\":[");
            for (unsigned int k = 0; k < np && k < NVML_MAX_PROCS; k++)
                strbuf_addf(sb, "%s[%u,%ld,%llu]", k ? "," : "", p[k].pid, proc_pgid(p[k].pid), p[k].used >> 20);
            strbuf_adds(sb, "]");
        }
    }
    strbuf_adds(sb, "}");
}

/* The sampler's thread: a sample every interval; XIDs as they come, in the next sample's
 * "xids" (the wait for them is the pause between samples). */
static void *sampler_main(void *arg)
{
    struct sampler *s = arg;
    struct strbuf sb, xids;
    strbuf_init(&sb);
    strbuf_init(&xids);
    int64_t next = mono_ms();
    while (!atomic_load(&s->stop)) {
        int64_t now = mono_ms();
        if (now < next) {
            struct nvml_event ev;
            if (s->events && s->api.set_wait(s->events, &ev, (unsigned int)(next - now)) == NVML_OK) {
                if (ev.type & NVML_EVENT_XID) {
                    long gpu = -1;
                    for (unsigned int i = 0; i < s->n; i++)
                        if (s->devs[i] == ev.dev) gpu = (long)i;
                    strbuf_addf(&xids, "%s[%ld,%llu]", xids.len ? "," : "", gpu, ev.data);
                }
                continue;
            }
            if (!s->events) usleep((useconds_t)(next - now) * 1000);
            continue;
        }
        next = now + s->interval_ms;
        strbuf_reset(&sb);
        strbuf_addf(&sb, "{\"ev\":\"%s\",\"mono_ns\":%lld,\"gpus\":[", WIRE_EV_GPU, (long long)mono_ns());
        for (unsigned int i = 0; i < s->n; i++) add_gpu(s, i, &sb);
        strbuf_addf(&sb, "],\"xids\":[%s]}\n", xids.buf ? xids.buf : "");
        strbuf_reset(&xids);
        if (util_write_all(s->fd, sb.buf, sb.len) < 0) break;   /* the loop closed its end */
    }
    close(s->fd);
    dlclose(s->api.lib);
    strbuf_done(&sb);
    strbuf_done(&xids);
    free(s);
    return NULL;
}

/* The loop's side: whole lines from the sampler go out as they are. */
static void watch_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    char buf[16384];
    if (!revents) return;
    ssize_t n = read(w->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {               /* the sampler ended */
        agent_watch_del(ag, w);
        watch.w = NULL;
        watch.s = NULL;
        strbuf_reset(&watch.in);
        return;
    }
    strbuf_add(&watch.in, buf, (size_t)n);
    size_t off = 0;
    char *line;
    while ((line = strbuf_take_line(&watch.in, &off)) != NULL) {
        agent_send_line(ag, line, strlen(line));
        free(line);
    }
    if (off) strbuf_consume(&watch.in, off);
}

static void watch_stop(struct agent *ag)
{
    if (watch.s) atomic_store(&watch.s->stop, 1);   /* its write then fails, or it sees stop */
    if (watch.w) agent_watch_del(ag, watch.w);      /* closes our end */
    watch.w = NULL;
    watch.s = NULL;
    strbuf_reset(&watch.in);
}

void agent_nvml_watch_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *iv = cJSON_GetObjectItemCaseSensitive(req, "interval_ms");
    int interval = 1000;
    if (iv && !json_int_in_i(iv, 0, 3600000, &interval)) interval = -1;   /* 2.5, 1e300: refused */
    char err[300], driver[96] = "";
    cJSON *msg;
    if (interval != 0 && (interval < GPU_WATCH_MIN_MS || interval > 3600000)) {
        agent_send_error(ag, id, "gpu_watch: \"interval_ms\" must be 0 (stop) or %d to 3600000",
                         GPU_WATCH_MIN_MS);
        return;
    }
    watch_stop(ag);
    msg = agent_reply_new(WIRE_EV_GPU_WATCH, id);
    if (interval == 0) {
        cJSON_AddTrueToObject(msg, "ok");
        agent_send(ag, msg);
        return;
    }
    struct sampler *s = xcalloc(1, sizeof *s);
    int fds[2];
    pthread_t th;
    if (api_load(&s->api, err, sizeof err) != 0) goto fail;
    if (s->api.driver_version) s->api.driver_version(driver, sizeof driver);
    if (s->api.count(&s->n) != NVML_OK) s->n = 0;
    if (s->n > NVML_MAX_GPUS) s->n = NVML_MAX_GPUS;
    for (unsigned int i = 0; i < s->n; i++)
        if (s->api.handle(i, &s->devs[i]) != NVML_OK) s->devs[i] = NULL;
    if (s->api.set_create && s->api.register_events && s->api.set_wait &&
        s->api.set_create(&s->events) == NVML_OK) {
        for (unsigned int i = 0; i < s->n; i++)
            if (s->devs[i]) s->api.register_events(s->devs[i], NVML_EVENT_XID, s->events);
    } else {
        s->events = NULL;
    }
    s->interval_ms = interval;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(err, sizeof err, "gpu_watch: pipe: %s", strerror(errno));
        dlclose(s->api.lib);
        goto fail;
    }
    s->fd = fds[1];
    if (pthread_create(&th, NULL, sampler_main, s) != 0) {
        snprintf(err, sizeof err, "gpu_watch: cannot start the sampling thread");
        close(fds[0]);
        close(fds[1]);
        dlclose(s->api.lib);
        goto fail;
    }
    pthread_detach(th);
    fd_set_nonblock(fds[0]);
    watch.s = s;
    watch.w = agent_watch_add(ag, fds[0], POLLIN, watch_ready, NULL, NULL);
    cJSON_AddTrueToObject(msg, "ok");
    cJSON_AddNumberToObject(msg, "gpus", s->n);
    /* the ranks inherit it unless the spawn request sets it: the controller's fallback map */
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd) cJSON_AddStringToObject(msg, "cuda_visible_devices", cvd);
    if (driver[0]) cJSON_AddStringToObject(msg, "driver", driver);
    agent_send(ag, msg);
    return;
fail:
    free(s);
    cJSON_AddFalseToObject(msg, "ok");
    cJSON_AddStringToObject(msg, "error", err);
    agent_send(ag, msg);
}

cJSON *agent_nvml_health(void)
{
    struct nvml_api a;
    char err[300], text[96];
    unsigned int n = 0;
    cJSON *o = cJSON_CreateObject();
    if (api_load(&a, err, sizeof err) != 0) {
        if (strncmp(err, "no NVML on this node", 20) == 0) {   /* no driver: nothing to say */
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddStringToObject(o, "error", err);
        return o;
    }
    if (a.driver_version && a.driver_version(text, sizeof text) == NVML_OK) cJSON_AddStringToObject(o, "driver", text);
    if (a.count(&n) != NVML_OK) n = 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "gpus");
    for (unsigned int i = 0; i < n && i < NVML_MAX_GPUS; i++) {
        nvml_dev d;
        int v;
        unsigned int cur, pend;
        unsigned long long ull;
        if (a.handle(i, &d) != NVML_OK) continue;
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "index", i);
        if (a.name && a.name(d, text, sizeof text) == NVML_OK) cJSON_AddStringToObject(g, "name", text);
        if (a.ecc && a.ecc(d, NVML_MEMORY_ERROR_UNCORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_OK)
            cJSON_AddNumberToObject(g, "ecc_uncorrected", (double)ull);
        if (a.retired_pending && a.retired_pending(d, &v) == NVML_OK) cJSON_AddBoolToObject(g, "retired_pending", v != 0);
        if (a.persistence && a.persistence(d, &v) == NVML_OK) cJSON_AddBoolToObject(g, "persistence", v != 0);
        if (a.mig && a.mig(d, &cur, &pend) == NVML_OK) cJSON_AddBoolToObject(g, "mig", cur != 0);
        if (a.throttle && a.throttle(d, &ull) == NVML_OK) cJSON_AddNumberToObject(g, "throttle", (double)ull);
        struct nvml_mem m;
        if (a.mem && a.mem(d, &m) == NVML_OK && m.total) cJSON_AddNumberToObject(g, "memory_mib", (double)(m.total >> 20));
        int major, minor;
        if (a.cc && a.cc(d, &major, &minor) == NVML_OK && major > 0 && major < 100 && minor >= 0 && minor < 100) {
            snprintf(text, sizeof text, "%d.%d", major, minor);
            cJSON_AddStringToObject(g, "compute_capability", text);
        }
        cJSON_AddItemToArray(arr, g);
    }
    if (a.shutdown) a.shutdown();
    dlclose(a.lib);
    return o;
}
