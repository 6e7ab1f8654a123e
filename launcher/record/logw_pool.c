/* The chunks between the loop and the log writer's thread, recycled (logw_int.h). The loop
 * made a chunk for every out message and the thread freed it: glibc then frees into the
 * loop's arena from another thread and consolidates (perf: about 15% of the controller's
 * samples in _int_free / malloc_consolidate while 8 ranks streamed). Here a processed chunk
 * of 2 KiB or more goes back to a free list of its size class (4 KiB to 128 KiB, powers of two
 * and a little) and the next
 * chunk of that class reuses it. The lists hold at most POOL_MAX_BYTES in all; past that, and
 * for a chunk too large for any class, plain malloc and free. */
#include "logw_int.h"

#include <stdlib.h>

#define POOL_MIN_SHIFT 12                    /* 4 KiB */
#define POOL_CLASSES LOGW_POOL_CLASSES       /* 4, 8, 16, 32, 64, 128 KiB */
/* A little over the power of two: an out message holds up to 64 KiB of lines and one newline
 * more (docs/protocol.md), and should fit the 64 KiB class. */
#define POOL_SLACK 256
#define POOL_MAX_BYTES (2u << 20)

/* The class whose chunks hold n bytes of data, -1 when none does. */
static size_t class_cap(int k)
{
    return ((size_t)1 << (POOL_MIN_SHIFT + k)) + POOL_SLACK;
}

/* Small pieces (a line or a few: most messages of a job of many ranks at a line a second)
 * are malloc'ed as they are: a 4 KiB chunk for each of them would multiply the memory of a
 * backlog by 30 (8,192 ranks: 511 MiB instead of 126), and their frees never trigger glibc's
 * consolidation, which only large frees do. */
#define POOL_SMALL 2048

static int pool_class(size_t n)
{
    if (n < POOL_SMALL) return -1;
    for (int k = 0; k < POOL_CLASSES; k++)
        if (n <= class_cap(k)) return k;
    return -1;
}

struct chunk *logw_chunk_get(struct logw *w, size_t n)
{
    int k = pool_class(n);
    struct chunk *c = NULL;
    if (k >= 0) {
        pthread_mutex_lock(&w->pool_mu);
        c = w->pool[k];
        if (c) {
            w->pool[k] = c->next;
            w->pool_bytes -= c->cap;
            w->pool_reused++;
        }
        pthread_mutex_unlock(&w->pool_mu);
        if (!c) {
            size_t cap = class_cap(k);
            c = xmalloc(sizeof *c + cap);
            c->cap = cap;
        }
    } else {
        c = xmalloc(sizeof *c + n);
        c->cap = n;
    }
    c->next = NULL;
    return c;
}

void logw_chunk_put(struct logw *w, struct chunk *c)
{
    int k = pool_class(c->cap);
    if (k >= 0 && c->cap == class_cap(k)) {
        pthread_mutex_lock(&w->pool_mu);
        if (w->pool_bytes + c->cap <= POOL_MAX_BYTES) {
            c->next = w->pool[k];
            w->pool[k] = c;
            w->pool_bytes += c->cap;
            c = NULL;
        }
        pthread_mutex_unlock(&w->pool_mu);
    }
    free(c);
}

void logw_pool_free(struct logw *w)
{
    for (int k = 0; k < POOL_CLASSES; k++)
        while (w->pool[k]) {
            struct chunk *c = w->pool[k];
            w->pool[k] = c->next;
            free(c);
        }
    w->pool_bytes = 0;
}

void logw_pool_stats(struct logw *w, size_t *held_bytes, uint64_t *reused)
{
    pthread_mutex_lock(&w->pool_mu);
    if (held_bytes) *held_bytes = w->pool_bytes;
    if (reused) *reused = w->pool_reused;
    pthread_mutex_unlock(&w->pool_mu);
}
