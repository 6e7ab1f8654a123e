/* Memory for the outbox's messages (agent_outbox.c): 2 MiB chunks, each asked to be backed by
 * a transparent huge page, that messages are cut from in order and that go back whole when
 * their last message is freed. In a flood the agent holds every message until the
 * controller's acknowledgement (about a second), so glibc's heap kept growing into fresh
 * 4 KiB pages: a page fault per 4 KiB, 5% of the agent's share of the log path's profile.
 * Bounded: empty chunks are kept for reuse, up to OUTSLAB_SPARE_MAX (64 MiB) while a flood
 * keeps using them, and past OUTSLAB_SPARE_KEEP (8 MiB) only those that outslab_trim (about
 * once a second) saw used since its last call: a flood that frees a second's output at each
 * acknowledgement cuts the next second's from the same chunks instead of zeroing fresh huge
 * pages and giving them back (4% of the log path's samples); the spares never exceed what was
 * held at once a moment before. A message too large for a chunk comes from malloc. Not
 * thread-safe (the agent's loop only). */
#ifndef DDPTOP_AGENT_OUTSLAB_H
#define DDPTOP_AGENT_OUTSLAB_H

#include <stddef.h>

#define OUTSLAB_CHUNK (2u << 20)
#define OUTSLAB_BIG (OUTSLAB_CHUNK / 4)   /* larger: malloc */
#define OUTSLAB_SPARE_KEEP 4    /* kept however long they wait */
#define OUTSLAB_SPARE_MAX 32     /* kept while reused */

struct outslab_chunk;

struct outslab {
    struct outslab_chunk *cur;      /* where the next message is cut from */
    struct outslab_chunk *spare;    /* empty chunks kept for reuse, up to OUTSLAB_SPARE_MAX */
    int n_spare;
    int spare_low;                  /* fewest spares since the last outslab_trim */
    size_t mapped;                  /* bytes of chunks mapped now (for the tests) */
    size_t maps;                    /* chunks mapped so far (for the tests) */
};

/* n bytes, 16-aligned; *chunk says where they came from (NULL: malloc), for outslab_free. */
void *outslab_alloc(struct outslab *s, size_t n, struct outslab_chunk **chunk);
void outslab_free(struct outslab *s, void *p, struct outslab_chunk *chunk);
/* Gives back the spares past OUTSLAB_SPARE_KEEP that no allocation needed since the last
 * call: call it about once a second. */
void outslab_trim(struct outslab *s);
/* Unmaps the chunks kept; every message must have been freed. */
void outslab_done(struct outslab *s);

#endif
