/* The agent's outbox and spool (agent_outbox.h). One list in the order messages were made;
 * `cursor` is the first entry not yet (wholly) written on the present link. Entries before it
 * are kept only while they are durable and not acknowledged, and are freed from the front, so
 * an unacknowledged message holds what was written after it until it goes (a second at most
 * while the controller is there: it acknowledges every second). */
#include "agent_outbox.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent_outslab.h"
#include "util/util.h"

#define WRITEV_MAX 64

struct entry {
    struct entry *next;
    struct outslab_chunk *chunk;   /* where its memory came from (agent_outslab.h) */
    size_t len;            /* bytes of data, its '\n' included */
    int rank;              /* durable: the rank; -1 plain */
    uint64_t seq;
    char data[];
};

struct slot {
    int rank;
    uint64_t next_seq;     /* the next number to give */
    uint64_t acked;        /* the controller has up to this */
};

struct outbox {
    struct entry *head, *tail;
    struct entry *cursor;  /* first entry not wholly written; NULL: all written */
    size_t cursor_off;     /* bytes of *cursor written */
    size_t bytes, unsent;  /* data held; data from the cursor on (less cursor_off) */
    struct strbuf urgent;
    size_t urgent_off;
    bool held;
    struct slot *slots;    /* sorted by rank */
    size_t n_slots, cap_slots;
    struct outslab slab;   /* the entries' memory */
};

struct outbox *outbox_new(void)
{
    struct outbox *ob = xcalloc(1, sizeof *ob);
    strbuf_init(&ob->urgent);
    return ob;
}

static void entry_free(struct outbox *ob, struct entry *e)
{
    outslab_free(&ob->slab, e, e->chunk);
}

static void entries_free(struct outbox *ob, struct entry *e)
{
    while (e) {
        struct entry *next = e->next;
        entry_free(ob, e);
        e = next;
    }
}

void outbox_free(struct outbox *ob)
{
    if (!ob) return;
    entries_free(ob, ob->head);
    outslab_done(&ob->slab);
    strbuf_done(&ob->urgent);
    free(ob->slots);
    free(ob);
}

/* The slot of rank, made when missing. */
static struct slot *slot_of(struct outbox *ob, int rank)
{
    size_t lo = 0, hi = ob->n_slots;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ob->slots[mid].rank < rank) lo = mid + 1;
        else hi = mid;
    }
    if (lo < ob->n_slots && ob->slots[lo].rank == rank) return &ob->slots[lo];
    if (ob->n_slots == ob->cap_slots) {
        ob->cap_slots = ob->cap_slots ? ob->cap_slots * 2 : 16;
        ob->slots = xrealloc(ob->slots, ob->cap_slots * sizeof *ob->slots);
    }
    memmove(&ob->slots[lo + 1], &ob->slots[lo], (ob->n_slots - lo) * sizeof *ob->slots);
    ob->n_slots++;
    ob->slots[lo] = (struct slot){ .rank = rank, .next_seq = 1 };
    return &ob->slots[lo];
}

static const struct slot *slot_find(const struct outbox *ob, int rank)
{
    size_t lo = 0, hi = ob->n_slots;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ob->slots[mid].rank < rank) lo = mid + 1;
        else hi = mid;
    }
    return lo < ob->n_slots && ob->slots[lo].rank == rank ? &ob->slots[lo] : NULL;
}

static void append(struct outbox *ob, int rank, uint64_t seq, const char *line, size_t len)
{
    struct outslab_chunk *chunk;
    struct entry *e = outslab_alloc(&ob->slab, sizeof *e + len + 1, &chunk);
    e->next = NULL;
    e->chunk = chunk;
    e->len = len + 1;
    e->rank = rank;
    e->seq = seq;
    memcpy(e->data, line, len);
    e->data[len] = '\n';
    if (ob->tail) ob->tail->next = e;
    else ob->head = e;
    ob->tail = e;
    if (!ob->cursor) {
        ob->cursor = e;
        ob->cursor_off = 0;
    }
    ob->bytes += e->len;
    ob->unsent += e->len;
}

void outbox_add(struct outbox *ob, const char *line, size_t len)
{
    append(ob, -1, 0, line, len);
}

void outbox_add_urgent(struct outbox *ob, const char *line, size_t len)
{
    strbuf_add(&ob->urgent, line, len);
    strbuf_add(&ob->urgent, "\n", 1);
}

uint64_t outbox_next_seq(struct outbox *ob, int rank)
{
    return slot_of(ob, rank)->next_seq;
}

void outbox_add_durable(struct outbox *ob, int rank, uint64_t seq, const char *line, size_t len)
{
    struct slot *s = slot_of(ob, rank);
    if (seq >= s->next_seq) s->next_seq = seq + 1;
    append(ob, rank, seq, line, len);
}

static bool entry_done(const struct outbox *ob, const struct entry *e)
{
    if (e->rank < 0) return true;
    const struct slot *s = slot_find(ob, e->rank);
    return s && e->seq <= s->acked;
}

/* Frees written entries from the front that nobody needs again. */
static void trim(struct outbox *ob)
{
    while (ob->head && ob->head != ob->cursor && entry_done(ob, ob->head)) {
        struct entry *e = ob->head;
        ob->head = e->next;
        if (!ob->head) ob->tail = NULL;
        ob->bytes -= e->len;
        entry_free(ob, e);
    }
}

static int write_urgent(struct outbox *ob, int fd)
{
    while (ob->urgent_off < ob->urgent.len) {
        ssize_t n = write(fd, ob->urgent.buf + ob->urgent_off, ob->urgent.len - ob->urgent_off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) return -1;
        ob->urgent_off += (size_t)n;
    }
    strbuf_reset(&ob->urgent);
    ob->urgent_off = 0;
    return 1;
}

int outbox_write(struct outbox *ob, int fd)
{
    int u = write_urgent(ob, fd);
    if (u <= 0) return u;
    while (ob->cursor && !ob->held) {
        struct iovec iov[WRITEV_MAX];
        int n = 0;
        for (struct entry *e = ob->cursor; e && n < WRITEV_MAX; e = e->next, n++) {
            size_t off = n == 0 ? ob->cursor_off : 0;
            iov[n] = (struct iovec){ .iov_base = e->data + off, .iov_len = e->len - off };
        }
        size_t asked = 0;
        for (int k = 0; k < n; k++) asked += iov[k].iov_len;
        ssize_t w = writev(fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w <= 0) return -1;
        size_t left = (size_t)w;
        ob->unsent -= left;
        while (left && ob->cursor) {
            size_t rest = ob->cursor->len - ob->cursor_off;
            if (left < rest) {
                ob->cursor_off += left;
                break;
            }
            left -= rest;
            ob->cursor = ob->cursor->next;
            ob->cursor_off = 0;
        }
        if ((size_t)w < asked) break; /* the pipe is full: wait for POLLOUT */
    }
    trim(ob);
    return 0;
}

size_t outbox_unsent(const struct outbox *ob)
{
    /* held: only urgent lines can go (a loop polling for the rest would spin) */
    return (ob->held ? 0 : ob->unsent) + (ob->urgent.len - ob->urgent_off);
}

size_t outbox_durable_bytes(const struct outbox *ob)
{
    size_t n = 0;
    for (const struct entry *e = ob->head; e; e = e->next)
        if (e->rank >= 0 && !entry_done(ob, e)) n += e->len;
    return n;
}

size_t outbox_bytes(const struct outbox *ob)
{
    return ob->bytes;
}

void outbox_trim(struct outbox *ob)
{
    outslab_trim(&ob->slab);
}

void outbox_ack(struct outbox *ob, int rank, uint64_t seq)
{
    struct slot *s = slot_of(ob, rank);
    if (seq > s->acked) s->acked = seq;
    trim(ob);
}

/* Keeps the entries for which keep() is true, in order; the cursor goes back to the front. */
static void filter(struct outbox *ob, bool (*keep)(const struct outbox *ob, const struct entry *e))
{
    struct entry **pp = &ob->head;
    ob->tail = NULL;
    ob->bytes = 0;
    while (*pp) {
        struct entry *e = *pp;
        if (keep(ob, e)) {
            ob->bytes += e->len;
            ob->tail = e;
            pp = &e->next;
        } else {
            *pp = e->next;
            entry_free(ob, e);
        }
    }
    ob->cursor = ob->head;
    ob->cursor_off = 0;
    ob->unsent = ob->bytes;
}

static bool keep_durable(const struct outbox *ob, const struct entry *e)
{
    return e->rank >= 0 && !entry_done(ob, e);
}

void outbox_unlink(struct outbox *ob)
{
    filter(ob, keep_durable);
    strbuf_reset(&ob->urgent);
    ob->urgent_off = 0;
}

void outbox_relink(struct outbox *ob)
{
    outbox_unlink(ob);
    ob->held = true;
}

static bool keep_unacked(const struct outbox *ob, const struct entry *e)
{
    return e->rank < 0 || !entry_done(ob, e);
}

void outbox_resume(struct outbox *ob, uint64_t (*from)(void *ctx, int rank), void *ctx, size_t *n,
                   size_t *bytes)
{
    for (size_t i = 0; i < ob->n_slots; i++) {
        uint64_t f = from(ctx, ob->slots[i].rank);
        if (f > ob->slots[i].acked) ob->slots[i].acked = f;
    }
    /* What was queued since the relink (status, answers) stays; durable ones the controller
     * has go. */
    filter(ob, keep_unacked);
    size_t count = 0, sum = 0;
    for (const struct entry *e = ob->head; e; e = e->next)
        if (e->rank >= 0) {
            count++;
            sum += e->len;
        }
    ob->held = false;
    if (n) *n = count;
    if (bytes) *bytes = sum;
}

int outbox_held(const struct outbox *ob)
{
    return ob->held;
}
