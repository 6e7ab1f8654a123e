/* fakecuda's runtime API: devices (FAKECUDA_DEVICES of them, default 1, filtered by
 * CUDA_VISIBLE_DEVICES as the driver does), fenced device memory, streams and events.
 *
 * Memory: each cudaMalloc is its own mapping whose last byte is followed by a PROT_NONE page,
 * so a kernel that writes past the end of a buffer faults. Outside kernels, copies and the
 * fake libraries the mappings are PROT_NONE too, so host code that reads a device pointer
 * faults as it does on a real GPU. FAKECUDA_PROTECT=0 turns the second fence off.
 *
 * Streams run kernels and copies at once, in the order they are queued; an operation that
 * cannot finish yet (an NCCL all-reduce waiting for its peers) stays pending, and work queued
 * behind it on the same stream waits for it (the host blocks, which keeps the order). Events
 * complete when everything queued on their stream before them has. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <set>

#include "fake_internal.h"

static void vsay(const char *fmt, va_list ap, const char *tail)
{
    fprintf(stderr, "fakecuda: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "%s\n", tail);
}

void fake_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, "");
    va_end(ap);
}

void fake_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, " (a test double for a GPU: tests/fakecuda)");
    va_end(ap);
    abort();
}

double fake_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- errors and devices ----------------------------------------------------------------- */

static cudaError_t last_error = cudaSuccess;
static int current_device = 0;

void fake_set_error(cudaError_t e) { last_error = e; }
int fake_current_device(void) { return current_device; }

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorUnsupportedPtxVersion: return "cudaErrorUnsupportedPtxVersion";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorUnsupportedPtxVersion: return "the provided PTX was compiled with an "
                                                "unsupported toolchain";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution "
                                                 "on the device";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

/* FAKECUDA_DEVICES devices, of which CUDA_VISIBLE_DEVICES keeps the listed ones up to the
 * first entry that is not a valid index (the driver's rule). */
static int visible_devices(void)
{
    const char *s = getenv("FAKECUDA_DEVICES");
    int have = s && *s ? atoi(s) : 1;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) return have;
    int n = 0;
    const char *p = cvd;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= have) break;
        n++;
        p = end;
        while (*p == ' ') p++;
        if (*p != ',') break;
        p++;
    }
    return n;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = visible_devices();
    return *n > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev >= visible_devices()) return fail(cudaErrorInvalidDevice);
    current_device = dev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    *dev = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev)
{
    if (dev < 0 || dev >= visible_devices()) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "fakecuda device %d (the CPU)", dev);
    const char *cc = getenv("FAKECUDA_CC");   /* "9.0" unless a test wants an older GPU */
    prop->major = 9;
    if (cc && sscanf(cc, "%d.%d", &prop->major, &prop->minor) < 1) prop->major = 9;
    prop->totalGlobalMem = (size_t)80 << 30;
    prop->multiProcessorCount = 132;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    *least = 0;
    *greatest = -5;
    return cudaSuccess;
}

/* ---- memory ------------------------------------------------------------------------------ */

struct alloc {
    char *map;          /* the mapping: data pages, then one guard page */
    size_t map_len;     /* without the guard page */
    size_t bytes;
};
static std::map<char *, alloc> allocs;   /* by user pointer */
static std::set<void *> host_allocs;
static int mem_open_depth;
static int protect = -1;

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void set_access(const alloc &a, bool open)
{
    if (a.map_len && mprotect(a.map, a.map_len, open ? PROT_READ | PROT_WRITE : PROT_NONE))
        fake_die("mprotect: %s", strerror(errno));
}

void fake_mem_open(void)
{
    if (mem_open_depth++ == 0 && protect)
        for (auto &kv : allocs) set_access(kv.second, true);
}

void fake_mem_close(void)
{
    if (--mem_open_depth == 0 && protect)
        for (auto &kv : allocs) set_access(kv.second, false);
}

bool fake_dev_span(const void *p, size_t bytes)
{
    char *c = (char *)p;
    auto it = allocs.upper_bound(c);
    if (it == allocs.begin()) return false;
    --it;
    return c >= it->first && bytes <= it->second.bytes &&
           (size_t)(c - it->first) <= it->second.bytes - bytes;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (protect < 0) {
        const char *s = getenv("FAKECUDA_PROTECT");
        protect = !(s && !strcmp(s, "0"));
    }
    size_t pg = page_size();
    size_t rounded = (bytes + 7) & ~(size_t)7;   /* 8-byte aligned: a double fits */
    size_t map_len = (rounded + pg - 1) / pg * pg;
    char *map = (char *)mmap(NULL, map_len + pg, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
    if (mprotect(map + map_len, pg, PROT_NONE)) fake_die("mprotect: %s", strerror(errno));
    char *user = map + map_len - rounded;
    alloc a = { map, map_len, bytes };
    allocs[user] = a;
    if (mem_open_depth == 0 && protect) set_access(a, false);
    *p = user;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    auto it = allocs.find((char *)p);
    if (it == allocs.end()) return fail(cudaErrorInvalidValue);
    munmap(it->second.map, it->second.map_len + page_size());
    allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    host_allocs.insert(*p);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    if (!host_allocs.erase(p)) return fail(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

/* The direction must match the pointers, as with a real GPU, where a host address handed as
 * device memory (or the other way) is an error or a fault. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    if (!(s = fake_stream(s))) return fail(cudaErrorInvalidResourceHandle);
    bool dst_dev = fake_dev_span(dst, bytes), src_dev = fake_dev_span(src, bytes);
    bool ok = kind == cudaMemcpyHostToDevice ? dst_dev && !src_dev
            : kind == cudaMemcpyDeviceToHost ? src_dev && !dst_dev
            : kind == cudaMemcpyDeviceToDevice ? src_dev && dst_dev
            : kind == cudaMemcpyHostToHost ? !src_dev && !dst_dev
            : true;
    if (!ok) {
        fake_say("cudaMemcpy of %zu bytes, kind %d: %s %p is%s inside a device allocation, "
                 "%s %p is%s", bytes, (int)kind, "dst", dst, dst_dev ? "" : " not", "src", src,
                 src_dev ? "" : " not");
        return fail(cudaErrorInvalidValue);
    }
    fake_stream_drain(s);
    fake_mem_open();
    memmove(dst, src, bytes);
    fake_mem_close();
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, bytes, kind, 0);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    if (!(s = fake_stream(s))) return fail(cudaErrorInvalidResourceHandle);
    if (!fake_dev_span(p, bytes)) {
        fake_say("cudaMemset of %zu bytes at %p: not inside a device allocation", bytes, p);
        return fail(cudaErrorInvalidValue);
    }
    fake_stream_drain(s);
    fake_mem_open();
    memset(p, v, bytes);
    fake_mem_close();
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t bytes) { return cudaMemsetAsync(p, v, bytes, 0); }

/* ---- streams and events ------------------------------------------------------------------ */

struct CUstream_st {
    std::deque<fake_op> pending;
    unsigned long long issued, completed;   /* pending operations queued and finished */
};
struct CUevent_st {
    cudaStream_t s;
    unsigned long long target;   /* done when s->completed reaches it */
    bool recorded, timing, have_time;
    double t;
};

static CUstream_st default_stream;
static std::set<cudaStream_t> streams = { &default_stream };
static std::set<cudaEvent_t> events;

cudaStream_t fake_stream(cudaStream_t s)
{
    if (!s) return &default_stream;
    return streams.count(s) ? s : NULL;
}

void fake_stream_push(cudaStream_t s, fake_op op)
{
    s->pending.push_back(op);
    s->issued++;
}

void fake_stream_progress(cudaStream_t s)
{
    while (!s->pending.empty() && s->pending.front().poll(s->pending.front().ctx)) {
        s->pending.pop_front();
        s->completed++;
    }
}

void fake_stream_drain(cudaStream_t s)
{
    for (fake_stream_progress(s); !s->pending.empty(); fake_stream_progress(s))
        usleep(100);
}

void fake_stream_drop_owner(const void *owner)
{
    for (cudaStream_t s : streams)
        for (auto it = s->pending.begin(); it != s->pending.end();) {
            if (it->owner == owner) {
                it->drop(it->ctx);
                it = s->pending.erase(it);
                s->completed++;
            } else {
                ++it;
            }
        }
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
    (void)flags, (void)priority;
    *s = new CUstream_st();
    streams.insert(*s);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    return cudaStreamCreateWithPriority(s, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithPriority(s, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || !streams.count(s)) return fail(cudaErrorInvalidResourceHandle);
    fake_stream_drain(s);   /* as CUDA: queued work still finishes */
    streams.erase(s);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (!(s = fake_stream(s))) return fail(cudaErrorInvalidResourceHandle);
    fake_stream_drain(s);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    for (cudaStream_t s : streams) fake_stream_drain(s);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new CUevent_st();
    (*e)->timing = !(flags & cudaEventDisableTiming);
    events.insert(*e);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!events.erase(e)) return fail(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}

static bool event_done(cudaEvent_t e)
{
    if (!e->recorded) return true;
    if (!streams.count(e->s)) return true;   /* its stream was destroyed, so drained */
    fake_stream_progress(e->s);
    if (e->s->completed < e->target) return false;
    if (!e->have_time) {
        e->t = fake_now();
        e->have_time = true;
    }
    return true;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!events.count(e) || !(s = fake_stream(s))) return fail(cudaErrorInvalidResourceHandle);
    e->s = s;
    e->target = s->issued;
    e->recorded = true;
    e->have_time = false;
    event_done(e);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    return event_done(e) ? cudaSuccess : cudaErrorNotReady;   /* not an error: not sticky */
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    while (!event_done(e)) usleep(100);
    return cudaSuccess;
}

/* The GPU would make later work on s wait for e; here work runs when it is queued, so the
 * host waits instead. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    if (!events.count(e) || !fake_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    while (!event_done(e)) usleep(100);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!events.count(start) || !events.count(end)) return fail(cudaErrorInvalidResourceHandle);
    if (!start->timing || !end->timing || !start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle);
    if (!event_done(start) || !event_done(end)) return cudaErrorNotReady;
    *ms = (float)((end->t - start->t) * 1e3);
    return cudaSuccess;
}
