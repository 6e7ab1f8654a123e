/* Chunks for the outbox's messages (agent_outslab.h). */
#include "agent_outslab.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/util.h"

struct outslab_chunk {
    struct outslab_chunk *next;     /* in the spare list */
    size_t used;                    /* bytes cut, this header included */
    size_t live;                    /* messages not yet freed */
};

#define HDR ((sizeof(struct outslab_chunk) + 15) & ~(size_t)15)

/* A chunk aligned to its size, so that the kernel can back it with one huge page: twice the
 * size mapped, the ends cut off. NULL when the kernel gives none (malloc then). */
static struct outslab_chunk *chunk_map(struct outslab *s)
{
    size_t sz = OUTSLAB_CHUNK;
    char *p = mmap(NULL, 2 * sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)p + sz - 1) & ~(uintptr_t)(sz - 1);
    size_t head = a - (uintptr_t)p;
    if (head) munmap(p, head);
    if (sz - head) munmap((char *)a + sz, sz - head);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)a, sz, MADV_HUGEPAGE);   /* a hint: without it, 4 KiB pages */
#endif
    s->mapped += sz;
    s->maps++;
    struct outslab_chunk *c = (struct outslab_chunk *)a;
    c->next = NULL;
    c->used = HDR;
    c->live = 0;
    return c;
}

static void chunk_unmap(struct outslab *s, struct outslab_chunk *c)
{
    munmap(c, OUTSLAB_CHUNK);
    s->mapped -= OUTSLAB_CHUNK;
}

/* An empty chunk: kept for reuse while there is room, else given back. */
static void chunk_release(struct outslab *s, struct outslab_chunk *c)
{
    if (s->n_spare >= OUTSLAB_SPARE_MAX) {
        chunk_unmap(s, c);
        return;
    }
    c->used = HDR;
    c->next = s->spare;
    s->spare = c;
    s->n_spare++;
}

void *outslab_alloc(struct outslab *s, size_t n, struct outslab_chunk **chunk)
{
    n = (n + 15) & ~(size_t)15;
    *chunk = NULL;
    if (n > OUTSLAB_BIG) return xmalloc(n);
    if (s->cur && s->cur->live == 0) s->cur->used = HDR;   /* all freed: start it again */
    if (!s->cur || s->cur->used + n > OUTSLAB_CHUNK) {
        /* the full chunk goes when its last message does (outslab_free) */
        if (s->cur && s->cur->live == 0) chunk_release(s, s->cur);
        if (s->spare) {
            s->cur = s->spare;
            s->spare = s->cur->next;
            s->n_spare--;
            if (s->n_spare < s->spare_low) s->spare_low = s->n_spare;
        } else {
            s->cur = chunk_map(s);
        }
        if (!s->cur) return xmalloc(n);
    }
    void *p = (char *)s->cur + s->cur->used;
    s->cur->used += n;
    s->cur->live++;
    *chunk = s->cur;
    return p;
}

void outslab_free(struct outslab *s, void *p, struct outslab_chunk *c)
{
    if (!c) {
        free(p);
        return;
    }
    if (--c->live == 0 && c != s->cur) chunk_release(s, c);
}

void outslab_trim(struct outslab *s)
{
    int idle = s->spare_low < s->n_spare ? s->spare_low : s->n_spare;
    while (idle-- > 0 && s->n_spare > OUTSLAB_SPARE_KEEP) {
        struct outslab_chunk *c = s->spare;
        s->spare = c->next;
        s->n_spare--;
        chunk_unmap(s, c);
    }
    s->spare_low = s->n_spare;
}

void outslab_done(struct outslab *s)
{
    if (s->cur) chunk_unmap(s, s->cur);
    while (s->spare) {
        struct outslab_chunk *c = s->spare;
        s->spare = c->next;
        chunk_unmap(s, c);
    }
    s->cur = NULL;
    s->n_spare = 0;
}
