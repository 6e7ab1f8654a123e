/* fakecuda's kernel launches: every thread of a block is a fiber (ucontext) that runs until it
 * reaches __syncthreads, a warp shuffle or its end; the scheduler then releases a barrier once
 * every thread that must reach it has. Threads run in index order between barriers (reversed
 * with FAKECUDA_REVERSE=1), so a missing __syncthreads shows as a wrong result: a thread reads
 * shared memory that a later thread has not written yet. A barrier that can never be released
 * (a divergent __syncthreads, a shuffle with lanes that have exited) stops the program with
 * the kernel's name.
 *
 * Fibers are persistent: slot i is entered once with makecontext/setcontext and then runs
 * thread i of block after block; switches are _setjmp/_longjmp, which save no signal mask, so
 * a switch costs no system call. Even so, each launch runs its first block with fibers and,
 * when that block met no barrier at all (an elementwise kernel), the other blocks as plain
 * calls; a barrier met in such a block stops the program, naming the kernel. */
#undef _FORTIFY_SOURCE   /* its longjmp check refuses a jump to another stack */
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <vector>

#include "fake_internal.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

enum fiber_state { F_RUN, F_BLOCK, F_WARP, F_DONE };

struct fiber {
    jmp_buf jb;        /* where the fiber stopped */
    ucontext_t uc;     /* only to enter it the first time */
    char *stack;
    bool started;
    fiber_state st;
    uint3 tid;
};

#define STACK_BYTES (64 * 1024)

static std::vector<fiber> fibers;
static jmp_buf sched_jb;
static int cur = -1;                 /* the fiber running, -1 outside fibers */
static unsigned n_threads;
static bool saw_barrier;             /* in this block */
static const char *kernel_name;
static void (*run_thunk)(void *);
static void *run_ctx;
static std::vector<unsigned char> warp_mail;   /* 32 slots of 8 bytes per warp */

cudaError_t fake_launch_check(const char *kernel, dim3 g, dim3 b, size_t smem, cudaStream_t s)
{
    (void)kernel;
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || !threads || threads > 1024 || b.x > 1024 || b.y > 1024 ||
        b.z > 64 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535 || smem > 48 * 1024) {
        fake_set_error(cudaErrorInvalidConfiguration);
        return cudaErrorInvalidConfiguration;
    }
    cudaStream_t st = fake_stream(s);
    if (!st) {
        fake_set_error(cudaErrorInvalidResourceHandle);
        return cudaErrorInvalidResourceHandle;
    }
    fake_stream_drain(st);
    return cudaSuccess;
}

static void to_scheduler(int me)
{
    if (!_setjmp(fibers[me].jb)) _longjmp(sched_jb, 1);
}

/* A slot's life: run the thread it is given, report done, wait for the next one. */
static void fiber_loop(void)
{
    const int me = cur;
    for (;;) {
        run_thunk(run_ctx);
        fibers[me].st = F_DONE;
        to_scheduler(me);
    }
}

static void resume(unsigned i)
{
    cur = (int)i;
    threadIdx = fibers[i].tid;
    if (_setjmp(sched_jb)) return;   /* the fiber stopped at a barrier or finished */
    fiber &f = fibers[i];
    if (f.started) _longjmp(f.jb, 1);
    f.started = true;
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack + 4096;
    f.uc.uc_stack.ss_size = STACK_BYTES;
    f.uc.uc_link = NULL;
    makecontext(&f.uc, fiber_loop, 0);
    setcontext(&f.uc);
    fake_die("setcontext failed: %s", strerror(errno));
}

static void fibers_reserve(unsigned n)
{
    while (fibers.size() < n) {
        fiber f;
        memset(&f, 0, sizeof f);
        /* a guard page below each stack: an overflow faults instead of corrupting */
        f.stack = (char *)mmap(NULL, STACK_BYTES + 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (f.stack == MAP_FAILED) fake_die("no memory for a fiber stack: %s", strerror(errno));
        mprotect(f.stack, 4096, PROT_NONE);
        fibers.push_back(f);
    }
}

static uint3 thread_of(unsigned linear)
{
    uint3 t;
    t.x = linear % blockDim.x;
    t.y = linear / blockDim.x % blockDim.y;
    t.z = linear / (blockDim.x * blockDim.y);
    return t;
}

static void yield_at(fiber_state st)
{
    if (cur < 0)
        fake_die("kernel %s reached a barrier or shuffle in block (%u,%u,%u), but its first "
                 "block met none, so the launch went on without fibers: fakecuda cannot run a "
                 "kernel whose blocks differ in that way", kernel_name, blockIdx.x, blockIdx.y,
                 blockIdx.z);
    saw_barrier = true;
    fibers[cur].st = st;
    to_scheduler(cur);
}

void __syncthreads(void) { yield_at(F_BLOCK); }
void fake_warp_barrier(void) { yield_at(F_WARP); }
void __syncwarp(unsigned mask) { (void)mask; yield_at(F_WARP); }

unsigned char *fake_warp_slots(unsigned mask, unsigned *lane, unsigned *lanes)
{
    if (cur < 0) yield_at(F_WARP);   /* dies with the reason */
    unsigned w = (unsigned)cur / 32;
    *lane = (unsigned)cur % 32;
    *lanes = n_threads - 32 * w < 32 ? n_threads - 32 * w : 32;
    unsigned need = *lanes == 32 ? 0xffffffffu : (1u << *lanes) - 1;
    if ((mask & need) != need)
        fake_die("kernel %s shuffles with mask 0x%08x in a warp of %u lanes: partial masks are "
                 "not emulated", kernel_name, mask, *lanes);
    return &warp_mail[(size_t)w * 256];
}

/* Releases the barriers that every thread concerned has reached; false if none could be. */
static bool release(void)
{
    bool any = false;
    for (unsigned w = 0; 32 * w < n_threads; w++) {
        unsigned lo = 32 * w, hi = lo + 32 < n_threads ? lo + 32 : n_threads;
        unsigned at_warp = 0, done = 0;
        for (unsigned i = lo; i < hi; i++) {
            at_warp += fibers[i].st == F_WARP;
            done += fibers[i].st == F_DONE;
        }
        if (!at_warp) continue;
        if (at_warp + done != hi - lo)
            continue;   /* others of the warp are at __syncthreads: judged below */
        if (done)
            fake_die("kernel %s, block (%u,%u,%u): %u lanes of warp %u wait at a shuffle while "
                     "%u lanes have exited (undefined on a GPU)", kernel_name, blockIdx.x,
                     blockIdx.y, blockIdx.z, at_warp, w, done);
        for (unsigned i = lo; i < hi; i++) fibers[i].st = F_RUN;
        any = true;
    }
    if (any) return true;
    unsigned at_block = 0, done = 0;
    for (unsigned i = 0; i < n_threads; i++) {
        at_block += fibers[i].st == F_BLOCK;
        done += fibers[i].st == F_DONE;
    }
    if (!at_block || at_block + done != n_threads) return false;
    for (unsigned i = 0; i < n_threads; i++)
        if (fibers[i].st == F_BLOCK) fibers[i].st = F_RUN;
    return true;
}

/* Every __shared__ variable of the program (cuda_runtime.h); weak: a program may have none. */
extern char __start_fakecuda_shared[] __attribute__((weak));
extern char __stop_fakecuda_shared[] __attribute__((weak));

static void run_block_fibers(bool reverse)
{
    char *lo = __start_fakecuda_shared, *hi = __stop_fakecuda_shared;
    if (lo != hi) memset(lo, 0xff, (size_t)(hi - lo));
    fibers_reserve(n_threads);
    for (unsigned i = 0; i < n_threads; i++) {
        fibers[i].st = F_RUN;
        fibers[i].tid = thread_of(i);
    }
    for (;;) {
        for (unsigned k = 0; k < n_threads; k++) {
            unsigned i = reverse ? n_threads - 1 - k : k;
            if (fibers[i].st == F_RUN) resume(i);
        }
        cur = -1;
        unsigned done = 0;
        for (unsigned i = 0; i < n_threads; i++) done += fibers[i].st == F_DONE;
        if (done == n_threads) return;
        if (!release()) {
            unsigned at_block = 0, at_warp = 0;
            for (unsigned i = 0; i < n_threads; i++) {
                at_block += fibers[i].st == F_BLOCK;
                at_warp += fibers[i].st == F_WARP;
            }
            fake_die("kernel %s deadlocks in block (%u,%u,%u): %u threads at __syncthreads, %u "
                     "at a warp shuffle, %u exited (a barrier some threads never reach)",
                     kernel_name, blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp, done);
        }
    }
}

void fake_run_grid(const char *kernel, dim3 g, dim3 b, void (*thunk)(void *), void *ctx)
{
    const char *rev = getenv("FAKECUDA_REVERSE");
    bool reverse = rev && *rev && strcmp(rev, "0");
    kernel_name = kernel;
    run_thunk = thunk;
    run_ctx = ctx;
    gridDim = g;
    blockDim = b;
    n_threads = b.x * b.y * b.z;
    warp_mail.assign((size_t)(n_threads + 31) / 32 * 256, 0);
    unsigned long long n_blocks = (unsigned long long)g.x * g.y * g.z;
    bool fibered = true;
    fake_mem_open();
    for (unsigned long long k = 0; k < n_blocks; k++) {
        unsigned long long q = reverse ? n_blocks - 1 - k : k;
        blockIdx.x = (unsigned)(q % g.x);
        blockIdx.y = (unsigned)(q / g.x % g.y);
        blockIdx.z = (unsigned)(q / ((unsigned long long)g.x * g.y));
        if (fibered) {
            saw_barrier = false;
            run_block_fibers(reverse);
            fibered = saw_barrier;
            continue;
        }
        for (unsigned t = 0; t < n_threads; t++) {
            threadIdx = thread_of(reverse ? n_threads - 1 - t : t);
            thunk(ctx);
        }
    }
    fake_mem_close();
}
