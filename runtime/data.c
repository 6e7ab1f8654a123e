/* Corpus loading, the built-in text generator, and the distributed sampler (see data.h). */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "rng.h"

#define DATA_BUILTIN_SEED 0x64647074ULL   /* fixed: every rank, every run, the same text */

int data_load_file(struct data_corpus *c, const char *path, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--data %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    RT_CHECK(buf != NULL, "out of memory");
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            RT_CHECK(buf != NULL, "out of memory reading %s", path);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "--data %s: read error", path);
        return -1;
    }
    c->bytes = buf;
    c->n = n;
    return 0;
}

void data_corpus_free(struct data_corpus *c)
{
    free(c->bytes);
    memset(c, 0, sizeof *c);
}

/* ---- built-in corpus: sentences from a tiny grammar ---------------------------------------
 * sentence := NP VP [PP] ("." | "!" | "?")    NP := det [adj] noun    VP := verb NP
 * Small vocabulary, real spelling and word order: a byte-level MLP learns spelling within a
 * few hundred steps, and the word choices leave an entropy well under 2 nats per byte. */

static const char *const nouns[] = {
    "cat", "dog", "bird", "fox", "horse", "farmer", "teacher", "child", "king", "queen",
    "river", "garden", "house", "ship", "tree", "city",
};
static const char *const verbs[] = {
    "sees", "likes", "finds", "builds", "follows", "paints", "watches", "helps", "carries",
    "visits", "remembers", "loves",
};
static const char *const adjs[] = {
    "small", "old", "quick", "green", "quiet", "bright", "happy", "strange", "little", "brave",
};
static const char *const dets[] = { "the", "a", "every", "my", "this" };
static const char *const preps[] = { "near", "under", "behind", "with", "beyond", "in" };

#define PICK(arr, s) arr[rng_below(s, (uint32_t)(sizeof arr / sizeof arr[0]))]

struct text { uint8_t *p; size_t n, cap; };

static void put_word(struct text *t, const char *w, int capital)
{
    for (size_t i = 0; w[i] && t->n < t->cap; i++) {
        char ch = w[i];
        if (capital && i == 0 && ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
        t->p[t->n++] = (uint8_t)ch;
    }
}

static void put_np(struct text *t, uint64_t *s, int capital)
{
    put_word(t, PICK(dets, s), capital);
    put_word(t, " ", 0);
    if (rng_below(s, 2)) {
        put_word(t, PICK(adjs, s), 0);
        put_word(t, " ", 0);
    }
    put_word(t, PICK(nouns, s), 0);
}

void data_builtin(struct data_corpus *c, size_t n)
{
    uint64_t s = DATA_BUILTIN_SEED;
    struct text t = { malloc(n ? n : 1), 0, n };
    RT_CHECK(t.p != NULL, "out of memory");
    int in_paragraph = 0;
    while (t.n < t.cap) {
        put_np(&t, &s, 1);
        put_word(&t, " ", 0);
        put_word(&t, PICK(verbs, &s), 0);
        put_word(&t, " ", 0);
        put_np(&t, &s, 0);
        if (rng_below(&s, 3) == 0) {
            put_word(&t, " ", 0);
            put_word(&t, PICK(preps, &s), 0);
            put_word(&t, " ", 0);
            put_np(&t, &s, 0);
        }
        uint32_t end = rng_below(&s, 10);
        put_word(&t, end < 8 ? "." : end == 8 ? "!" : "?", 0);
        put_word(&t, ++in_paragraph % 6 == 0 ? "\n" : " ", 0);
    }
    c->bytes = t.p;
    c->n = t.n;
}

/* ---- the sampler -------------------------------------------------------------------------- */

int data_sampler_init(struct data_sampler *s, const struct data_corpus *c, int context, int rank,
                      int world, int batch, uint64_t seed, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    size_t need = (size_t)context + (size_t)world * batch;
    if (c->n < need || c->n - context > UINT32_MAX) {
        snprintf(err, errlen, "the training data has %zu bytes; it needs at least --context + "
                 "world size x --batch-size = %d + %d x %d = %zu bytes (and at most 4 GiB): "
                 "use a bigger --data file or a smaller batch", c->n, context, world, batch, need);
        return -1;
    }
    s->bytes = c->bytes;
    s->context = context;
    s->rank = rank;
    s->world = world;
    s->batch = batch;
    s->seed = seed;
    s->n_samples = c->n - (size_t)context;
    s->per_rank = (s->n_samples + world - 1) / world;
    s->steps_per_epoch = s->per_rank / batch;
    s->perm = malloc(s->per_rank * world * sizeof(uint32_t));
    RT_CHECK(s->perm != NULL, "out of memory for the sampler");
    s->perm_epoch = UINT64_MAX;
    return 0;
}

void data_sampler_free(struct data_sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}

void data_sampler_seek(struct data_sampler *s, uint64_t epoch, uint64_t pos)
{
    s->epoch = epoch + pos / s->steps_per_epoch;
    s->pos = pos % s->steps_per_epoch;
}

/* The permutation depends on (seed, epoch, n_samples) only, never on rank or world size. */
static void make_perm(struct data_sampler *s, uint64_t epoch)
{
    if (s->perm_epoch == epoch) return;
    size_t n = s->n_samples, total = s->per_rank * s->world;
    uint64_t st = s->seed * 0x9e3779b97f4a7c15ULL ^ (epoch + 1) * 0xd1b54a32d192ed03ULL;
    for (size_t i = 0; i < n; i++)
        s->perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {   /* Fisher-Yates */
        size_t j = rng_below(&st, (uint32_t)(i + 1));
        uint32_t tmp = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = tmp;
    }
    for (size_t i = n; i < total; i++)     /* pad with the head, like DistributedSampler */
        s->perm[i] = s->perm[i - n];
    s->perm_epoch = epoch;
}

size_t data_sampler_shard_index(struct data_sampler *s, uint64_t epoch, size_t k)
{
    make_perm(s, epoch);
    return s->perm[(size_t)s->rank + k * (size_t)s->world];
}

void data_sampler_next(struct data_sampler *s, uint8_t *tokens, uint8_t *targets, size_t *idx)
{
    make_perm(s, s->epoch);
    for (int b = 0; b < s->batch; b++) {
        size_t k = (size_t)s->pos * s->batch + b;
        size_t i = s->perm[(size_t)s->rank + k * (size_t)s->world];
        memcpy(tokens + (size_t)b * s->context, s->bytes + i, (size_t)s->context);
        targets[b] = s->bytes[i + s->context];
        if (idx) idx[b] = i;
    }
    if (++s->pos == s->steps_per_epoch) {
        s->pos = 0;
        s->epoch++;
    }
}
