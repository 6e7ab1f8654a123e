/* Lines printed by several ranks, grouped (log_fold.h; issue 30). The open groups live in a
 * ring indexed by their id (ids are consecutive; the open ones are [head, next)), and in a hash
 * table of chains through the ring, linked both ways. A line wants the oldest open group of its
 * text that began after its rank's last line: it walks its bucket's chain up from the group of
 * its rank's last line when that is in the same bucket (a rank repeating a line finds the next
 * group at once), else up from the bucket's oldest. The oldest group overall is the oldest of
 * its bucket, so taking it off is O(1). Both matter for a flood of one line from every rank
 * (8 ranks x 250,000 identical lines): walking a chain of thousands of groups for each line, or
 * to unlink each, made that quadratic. */
#include "log_fold.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "hosts/hostlist.h"
#include "log_ring.h"

/* Buffers of a closed group are kept for the next one up to these sizes: a flood of short
 * lines then costs no malloc per line, and a burst of long lines leaves no memory behind. */
#define KEEP_TEXT_ROOM 4096
#define KEEP_RANKS_CAP 256

struct group {
    struct log_fold_group pub;
    uint64_t hash;
    uint64_t chain;            /* the next older group of the same bucket (0: none) */
    uint64_t newer;            /* the next newer one (0: none) */
    char *buf;
    size_t room;
    int *ranks;
    size_t cap;
};

struct log_fold {
    int64_t window_ms;
    size_t max_groups, max_bytes, world;
    struct group *ring;
    size_t mask;               /* ring size - 1 (a power of two >= max_groups) */
    uint64_t head, next;       /* the open groups' ids: [head, next) */
    size_t bytes;              /* their text */
    uint64_t *buckets;         /* the newest group of each bucket (0: none) */
    uint64_t *oldest;          /* the oldest group of each bucket (0: none) */
    size_t bmask;
    uint64_t *last;            /* per rank: the group of its last line (0: none yet) */
    size_t n_last;
};

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

struct log_fold *log_fold_new(int64_t window_ms, size_t max_groups, size_t max_bytes)
{
    struct log_fold *f = xcalloc(1, sizeof *f);
    f->window_ms = window_ms > 0 ? window_ms : 1;
    f->max_groups = max_groups ? max_groups : 1;
    f->max_bytes = max_bytes;
    f->mask = pow2_at_least(f->max_groups) - 1;
    f->ring = xcalloc(f->mask + 1, sizeof *f->ring);
    f->bmask = 2 * (f->mask + 1) - 1;
    f->buckets = xcalloc(f->bmask + 1, sizeof *f->buckets);
    f->oldest = xcalloc(f->bmask + 1, sizeof *f->oldest);
    f->head = f->next = 1;
    return f;
}

void log_fold_free(struct log_fold *f)
{
    if (!f) return;
    for (size_t i = 0; i <= f->mask; i++) {
        free(f->ring[i].buf);
        free(f->ring[i].ranks);
    }
    free(f->ring);
    free(f->buckets);
    free(f->oldest);
    free(f->last);
    free(f);
}

void log_fold_set_world(struct log_fold *f, size_t n_ranks)
{
    f->world = n_ranks;
}

static struct group *slot(const struct log_fold *f, uint64_t id)
{
    return &f->ring[id & f->mask];
}

/* Eight bytes at a time, multiply and shift: a line costs a few cycles a word. Collisions only
 * cost a memcmp; the stream and attempt are compared apart. A line of 32 bytes or more goes
 * through four such lanes side by side, 32 bytes a round: one lane waits on its multiply for
 * every word, and every line of a flood is hashed (one lane was 9% of the controller's CPU with
 * 8 ranks printing 100-byte lines, issue 32 part 3). */
static uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static uint64_t word_at(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static uint64_t text_hash(const char *s, size_t len)
{
    size_t n = len;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n, w;
    if (n >= 32) {
        uint64_t a = h, b = h ^ 0x6a09e667f3bcc908ull, c = h ^ 0xbb67ae8584caa73bull,
                 d = h ^ 0x3c6ef372fe94f82bull;
        while (n >= 32) {
            a = mix(a, word_at(s));
            b = mix(b, word_at(s + 8));
            c = mix(c, word_at(s + 16));
            d = mix(d, word_at(s + 24));
            s += 32;
            n -= 32;
        }
        h = mix(mix(mix(mix(h, a), b), c), d);   /* the lanes folded in as four words */
    }
    for (; n >= 8; s += 8, n -= 8) h = mix(h, word_at(s));
    if (n && len >= 8) {
        /* the last 8 bytes, overlapping what went before: a copy of 1 to 7 bytes into w and a
         * load of all 8 stalls on the store (no forwarding from a narrower one) */
        w = word_at(s + n - 8) >> (8 * (8 - n));
    } else {
        w = 0;
        memcpy(&w, s, n);
    }
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static uint64_t rank_last(const struct log_fold *f, int rank)
{
    return rank >= 0 && (size_t)rank < f->n_last ? f->last[rank] : 0;
}

static void rank_set_last(struct log_fold *f, int rank, uint64_t id)
{
    if (rank < 0) return;
    if ((size_t)rank >= f->n_last) {
        size_t n = pow2_at_least((size_t)rank + 1);
        f->last = xrealloc(f->last, n * sizeof *f->last);
        memset(f->last + f->n_last, 0, (n - f->n_last) * sizeof *f->last);
        f->n_last = n;
    }
    f->last[rank] = id;
}

static void ranks_push(struct group *g, int rank)
{
    if (g->pub.n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->ranks = xrealloc(g->ranks, g->cap * sizeof *g->ranks);
    }
    g->ranks[g->pub.n++] = rank;
    g->pub.ranks = g->ranks;
}

void log_fold_pop(struct log_fold *f)
{
    if (f->head == f->next) return;
    struct group *g = slot(f, f->head);
    size_t b = g->hash & f->bmask;
    /* every older group is gone, so it is its bucket's oldest */
    assert(f->oldest[b] == f->head && g->chain == 0);
    f->oldest[b] = g->newer;
    if (g->newer) slot(f, g->newer)->chain = 0;
    else f->buckets[b] = 0;
    f->bytes -= g->pub.len;
    if (g->room > KEEP_TEXT_ROOM) {
        free(g->buf);
        g->buf = NULL;
        g->room = 0;
    }
    if (g->cap > KEEP_RANKS_CAP) {
        free(g->ranks);
        g->ranks = NULL;
        g->cap = 0;
    }
    f->head++;
}

/* Whether open group g takes a line of this text (find_open's test, the hash left out). */
static bool group_takes(const struct log_fold *f, const struct group *g, int64_t now_ms, int stream, int attempt,
                        unsigned flags, const char *text, size_t len)
{
    return now_ms - g->pub.t0_ms < f->window_ms && !g->pub.solo && g->pub.len == len && g->pub.stream == stream &&
           g->pub.attempt == attempt && !((g->pub.flags ^ flags) & LOG_LINE_TRUNCATED) &&
           memcmp(g->pub.text, text, len) == 0;
}

/* The oldest group of the same text that rank may join at now_ms, or NULL. */
static struct group *find_open(struct log_fold *f, uint64_t h, int64_t now_ms, int rank, int stream,
                               int attempt, unsigned flags, const char *text, size_t len)
{
    uint64_t after = rank_last(f, rank);
    size_t b = h & f->bmask;
    /* from the rank's last group when it is open and of this bucket (everything older is out of
     * reach for this rank), else from the bucket's oldest */
    uint64_t id = after >= f->head && after < f->next && (slot(f, after)->hash & f->bmask) == b
                      ? slot(f, after)->newer
                      : f->oldest[b];
    for (; id; id = slot(f, id)->newer) {
        struct group *g = slot(f, id);
        if (id > after && g->hash == h && group_takes(f, g, now_ms, stream, attempt, flags, text, len)) return g;
    }
    return NULL;
}

/* The group right after the rank's last one, when it takes this line: then it is the oldest
 * group the line may join (none began between them), found without hashing the line. In a
 * flood of one line from every rank that is every rank's line but the one that opens the
 * group. */
static struct group *next_after_last(struct log_fold *f, int64_t now_ms, int rank, int stream, int attempt,
                                     unsigned flags, const char *text, size_t len)
{
    uint64_t after = rank_last(f, rank);
    if (!after || after < f->head || after + 1 >= f->next) return NULL;
    struct group *g = slot(f, after + 1);
    return group_takes(f, g, now_ms, stream, attempt, flags, text, len) ? g : NULL;
}

struct log_fold_group *log_fold_add(struct log_fold *f, int64_t now_ms, int rank, int stream,
                                    int attempt, unsigned flags, const char *text, size_t len)
{
    bool solo = (flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT | LOG_FOLD_ALONE)) || rank < 0;
    struct group *g = solo ? NULL : next_after_last(f, now_ms, rank, stream, attempt, flags, text, len);
    if (g) {
        ranks_push(g, rank);
        rank_set_last(f, rank, g->pub.id);
        return &g->pub;
    }
    uint64_t h = text_hash(text, len);
    g = solo ? NULL : find_open(f, h, now_ms, rank, stream, attempt, flags, text, len);
    if (g) {
        ranks_push(g, rank);
        rank_set_last(f, rank, g->pub.id);
        return &g->pub;
    }
    if (f->next - f->head > f->mask) log_fold_pop(f);   /* the caller took nothing: the oldest goes */
    uint64_t id = f->next++;
    g = slot(f, id);
    if (g->room < len + 1) {
        free(g->buf);
        g->room = len + 1;
        g->buf = xmalloc(g->room);
    }
    memcpy(g->buf, text, len);
    g->buf[len] = '\0';
    g->hash = h;
    g->pub = (struct log_fold_group){
        .id = id, .t0_ms = now_ms, .stream = stream, .attempt = attempt, .flags = flags,
        .solo = solo, .text = g->buf, .len = len, .ranks = g->ranks,
    };
    ranks_push(g, rank);
    size_t b = h & f->bmask;
    g->chain = f->buckets[b];
    g->newer = 0;
    if (g->chain) slot(f, g->chain)->newer = id;
    else f->oldest[b] = id;
    f->buckets[b] = id;
    f->bytes += len;
    rank_set_last(f, rank, id);
    return &g->pub;
}

const struct log_fold_group *log_fold_due(const struct log_fold *f, int64_t now_ms, bool all)
{
    if (f->head == f->next) return NULL;
    const struct group *g = slot(f, f->head);
    if (all || g->pub.solo || now_ms - g->pub.t0_ms >= f->window_ms || f->next - f->head >= f->max_groups ||
        f->bytes > f->max_bytes || (f->world >= 2 && g->pub.n >= f->world))
        return &g->pub;
    return NULL;
}

int64_t log_fold_wait_ms(const struct log_fold *f, int64_t now_ms)
{
    if (f->head == f->next) return -1;
    if (slot(f, f->head)->pub.solo) return 0;
    int64_t left = slot(f, f->head)->pub.t0_ms + f->window_ms - now_ms;
    return left > 0 ? left : 0;
}

bool log_fold_holds(const struct log_fold *f, int rank)
{
    return rank_last(f, rank) >= f->head;
}

size_t log_fold_open(const struct log_fold *f, size_t *bytes)
{
    if (bytes) *bytes = f->bytes;
    return (size_t)(f->next - f->head);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void log_fold_ranks_format(struct strbuf *out, int *ranks, size_t n)
{
    qsort(ranks, n, sizeof *ranks, cmp_int);
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k + 1 < n && (ranks[k + 1] == ranks[k] || ranks[k + 1] == ranks[k] + 1)) k++;
        strbuf_addf(out, "%s%d", i ? "," : "", ranks[i]);
        if (ranks[k] != ranks[i]) strbuf_addf(out, "-%d", ranks[k]);
        i = k + 1;
    }
}

void log_fold_where(struct strbuf *out, const struct job *j, int *ranks, size_t n)
{
    strbuf_adds(out, "r");
    log_fold_ranks_format(out, ranks, n);
    const char **names = xmalloc((n ? n : 1) * sizeof *names);
    for (size_t i = 0; i < n; i++) names[i] = job_rank_host(j, ranks[i]);
    char *hosts = hostlist_compress(names, n);
    if (*hosts) {
        strbuf_adds(out, " ");
        strbuf_adds(out, hosts);
    }
    free(hosts);
    free(names);
}
