/* Unit tests of the training runtime's math and state: gradients by finite differences for
 * every parameter group, softmax cross-entropy, an AdamW step by hand, the distributed sampler's
 * guarantees, snapshot round trip and corruption handling, fault and JSON helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "hash.h"
#include "metrics.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "snapshot.h"
#include "tap.h"
#include "train.h"

/* ---- gradients -----------------------------------------------------------------------------
 * Central differences, (L(p + h) - L(p - h)) / 2h with h = 1e-2, on a small model with the loss
 * in float: the difference error is O(h^2) and the rounding error about 1e-7 / h = 1e-5, so a
 * gradient entry must match within 1e-3 absolute + 2% relative, and each group's whole gradient
 * within 1% of its norm. Every entry of every group is checked. */

static float loss_at(struct model *m, const uint8_t *tok, const uint8_t *tgt, int B)
{
    return model_forward(m, tok, tgt, B);
}

static void test_gradients_finite_differences(void)
{
    struct model_config cfg = { .context = 3, .embed = 4, .hidden = 6, .layers = 2 };
    int B = 5;
    struct model *m = model_new(&cfg, B);
    model_init_params(m, 42);
    /* a larger output layer than the default init so its gradient path is exercised */
    for (int i = 0; i < m->lin[cfg.layers].ic * m->lin[cfg.layers].oc; i++)
        m->lin[cfg.layers].w[i] *= 10.0f;
    uint8_t tok[5 * 3] = { 'a', 'b', 'c', 'b', 'c', 'd', 'a', 'a', 'b',
                           'x', 'y', 'z', 'c', 'b', 'a' };
    uint8_t tgt[5] = { 'd', 'e', 'c', 'a', 'd' };
    loss_at(m, tok, tgt, B);
    model_backward(m, NULL, NULL);
    float *analytic = malloc(m->n_params * sizeof(float));
    memcpy(analytic, m->grads, m->n_params * sizeof(float));
    const float h = 1e-2f;
    for (int t = 0; t < m->n_tensors; t++) {
        const struct model_tensor *ts = &m->tensors[t];
        double diff2 = 0, norm2 = 0;
        int bad = 0;
        for (size_t i = ts->off; i < ts->off + ts->n; i++) {
            float keep = m->params[i];
            m->params[i] = keep + h;
            double lp = loss_at(m, tok, tgt, B);
            m->params[i] = keep - h;
            double lm = loss_at(m, tok, tgt, B);
            m->params[i] = keep;
            double fd = (lp - lm) / (2.0 * h), an = analytic[i];
            diff2 += (fd - an) * (fd - an);
            norm2 += an * an;
            if (fabs(fd - an) > 1e-3 + 0.02 * fabs(an)) {
                if (bad++ < 3)
                    printf("#   %s[%zu]: finite difference %g, backward %g\n", ts->name,
                           i - ts->off, fd, an);
            }
        }
        if (bad) printf("#   %s: %d of %zu entries off\n", ts->name, bad, ts->n);
        CHECK(bad == 0);
        CHECK(norm2 > 0);   /* every group takes part in the loss */
        CHECK(sqrt(diff2) <= 0.01 * sqrt(norm2));
    }
    free(analytic);
    model_free(m);
}

struct ready_log {
    size_t seen[16];
    int n;
};

static void ready_record(void *ctx, size_t n_ready)
{
    struct ready_log *log = ctx;
    if (log->n < 16) log->seen[log->n++] = n_ready;
}

static void test_backward_reports_ready_in_layout_order(void)
{
    struct model_config cfg = { .context = 2, .embed = 3, .hidden = 4, .layers = 3 };
    struct model *m = model_new(&cfg, 2);
    model_init_params(m, 1);
    uint8_t tok[4] = { 1, 2, 3, 4 }, tgt[2] = { 5, 6 };
    model_forward(m, tok, tgt, 2);
    struct ready_log log = { .n = 0 };
    model_backward(m, ready_record, &log);
    CHECK_INT(log.n, cfg.layers + 2);   /* output layer, each hidden layer, embeddings */
    for (int i = 1; i < log.n; i++) CHECK(log.seen[i] > log.seen[i - 1]);
    CHECK_INT(log.seen[log.n - 1], m->n_params);
    CHECK_INT(log.seen[0], m->tensors[1].off + m->tensors[1].n);   /* out.w, out.b first */
    CHECK_STR(m->tensors[0].name, "out.w");
    CHECK_STR(m->tensors[m->n_tensors - 1].name, "wte");
    model_free(m);
}

static void test_default_size_and_first_loss(void)
{
    struct train_opts o;
    train_opts_default(&o);
    CHECK(model_count_params(&o.cfg) >= 1000000);
    CHECK(model_config_check(&o.cfg) == NULL);
    struct model *m = model_new(&o.cfg, 8);
    CHECK_INT(m->n_params, model_count_params(&o.cfg));
    model_init_params(m, o.seed);
    uint8_t tok[8 * 16], tgt[8];
    for (size_t i = 0; i < sizeof tok; i++) tok[i] = (uint8_t)('a' + i % 26);
    for (int i = 0; i < 8; i++) tgt[i] = (uint8_t)(' ' + i);
    float loss = model_forward(m, tok, tgt, 8);
    CHECK_NEAR(loss, log(256.0), 0.1);   /* an untrained model knows nothing */
    model_free(m);
}

/* ---- softmax cross-entropy and AdamW ------------------------------------------------------- */

static void test_softmax_xent(void)
{
    float logits[8] = { 1, 2, 3, 4, 0, 0, 0, 0 }, probs[8], d[8];
    uint8_t tgt[2] = { 2, 0 };
    float loss = ops_softmax_xent_forward(probs, logits, tgt, 2, 4);
    double z = exp(1) + exp(2) + exp(3) + exp(4);
    CHECK_NEAR(probs[0], exp(1) / z, 1e-6);
    CHECK_NEAR(probs[3], exp(4) / z, 1e-6);
    CHECK_NEAR(probs[5], 0.25, 1e-7);
    double want = (-log(exp(3) / z) + log(4.0)) / 2;
    CHECK_NEAR(loss, want, 1e-6);
    ops_softmax_xent_backward(d, probs, tgt, 2, 4);
    CHECK_NEAR(d[2], (exp(3) / z - 1) / 2, 1e-6);
    CHECK_NEAR(d[1], exp(2) / z / 2, 1e-6);
    CHECK_NEAR(d[4], (0.25 - 1) / 2, 1e-6);
    /* huge logits: no overflow, exact loss */
    float big[2] = { 1000, 0 }, pb[2];
    uint8_t t1[1] = { 1 };
    CHECK_NEAR(ops_softmax_xent_forward(pb, big, t1, 1, 2), 1000.0, 1e-3);
}

static void test_adamw_by_hand(void)
{
    float p[2] = { 1.0f, -2.0f }, g[2] = { 0.5f, 0.0f }, m[2] = { 0 }, v[2] = { 0 };
    float lr = 0.1f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    ops_adamw(p, g, m, v, 2, lr, b1, b2, eps, wd, 1);
    /* t=1: m=0.05, v=0.00025, mhat=0.5, vhat=0.25: p = 1*(1-0.001) - 0.1*0.5/(0.5+1e-8) */
    CHECK_NEAR(m[0], 0.05, 1e-7);
    CHECK_NEAR(v[0], 0.00025, 1e-8);   /* float (1 - beta2) is 1.3e-5 off */
    CHECK_NEAR(p[0], 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6);
    CHECK_NEAR(p[1], -2.0 * (1 - 0.001), 1e-6);   /* zero gradient: decay only */
    g[0] = -1.0f;
    ops_adamw(p, g, m, v, 2, lr, b1, b2, eps, wd, 2);
    double m2 = 0.9 * 0.05 - 0.1, v2 = 0.999 * 0.00025 + 0.001;
    double mh = m2 / (1 - 0.81), vh = v2 / (1 - 0.999 * 0.999);
    double p1 = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8);
    double want = p1 * (1 - 0.001) - 0.1 * mh / (sqrt(vh) + 1e-8);
    CHECK_NEAR(m[0], m2, 1e-7);
    CHECK_NEAR(v[0], v2, 5e-8);
    CHECK_NEAR(p[0], want, 1e-6);
}

static void test_optim_skips_decay_on_biases(void)
{
    struct model_config cfg = { .context = 1, .embed = 2, .hidden = 2, .layers = 1 };
    struct model *m = model_new(&cfg, 1);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = 1.0f;
    memset(m->grads, 0, m->n_params * sizeof(float));
    struct optim o;
    optim_init(&o, m->n_params, 0.5f);
    optim_step(&o, m);
    CHECK_NEAR(m->lin[0].w[0], 1.0 - 0.5 * 0.01, 1e-7);
    CHECK_NEAR(m->lin[0].b[0], 1.0, 0);
    CHECK_NEAR(m->wte[0], 1.0 - 0.5 * 0.01, 1e-7);
    CHECK_INT(o.t, 1);
    optim_free(&o);
    model_free(m);
}

/* ---- the sampler ---------------------------------------------------------------------------- */

static struct data_corpus corpus_of(size_t n)
{
    struct data_corpus c = { malloc(n), n };
    for (size_t i = 0; i < n; i++) c.bytes[i] = (uint8_t)(i * 7 + i / 256);
    return c;
}

static void test_sampler_shards_partition_the_epoch(void)
{
    for (int pad = 0; pad <= 1; pad++) {
        int W = 3, C = 4;
        size_t S = 300 + (size_t)pad * 2;   /* 302 samples: padded by 1 to 303 */
        struct data_corpus c = corpus_of(S + C);
        struct data_sampler s[3];
        char err[256];
        for (int r = 0; r < W; r++)
            CHECK_INT(data_sampler_init(&s[r], &c, C, r, W, 5, 99, err, sizeof err), 0);
        size_t per = s[0].per_rank;
        CHECK_INT(per, (S + W - 1) / W);
        int *count = calloc(S, sizeof *count);
        for (int r = 0; r < W; r++) {
            CHECK_INT(s[r].per_rank, per);   /* equal sizes */
            for (size_t k = 0; k < per; k++) {
                size_t i = data_sampler_shard_index(&s[r], 2, k);
                CHECK(i < S);
                count[i]++;
            }
        }
        /* the union is every sample; only padding (W*per - S of them) repeats */
        int missing = 0, repeats = 0;
        for (size_t i = 0; i < S; i++) {
            if (count[i] == 0) missing++;
            if (count[i] > 1) repeats += count[i] - 1;
        }
        CHECK_INT(missing, 0);
        CHECK_INT(repeats, (int)(W * per - S));
        /* another epoch is another order, the same epoch the same one */
        int same = 1;
        for (size_t k = 0; k < 20; k++)
            if (data_sampler_shard_index(&s[0], 3, k) != data_sampler_shard_index(&s[0], 2, k))
                same = 0;
        CHECK(!same);
        struct data_sampler again;
        CHECK_INT(data_sampler_init(&again, &c, C, 1, W, 5, 99, err, sizeof err), 0);
        for (size_t k = 0; k < per; k++)
            CHECK_INT(data_sampler_shard_index(&again, 2, k),
                      data_sampler_shard_index(&s[1], 2, k));
        data_sampler_free(&again);
        for (int r = 0; r < W; r++) data_sampler_free(&s[r]);
        free(count);
        data_corpus_free(&c);
    }
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void test_sampler_two_ranks_equal_one_rank_double_batch(void)
{
    int C = 5, B = 8;
    struct data_corpus c = corpus_of(1000);
    struct data_sampler one, r0, r1;
    char err[256];
    CHECK_INT(data_sampler_init(&one, &c, C, 0, 1, 2 * B, 7, err, sizeof err), 0);
    CHECK_INT(data_sampler_init(&r0, &c, C, 0, 2, B, 7, err, sizeof err), 0);
    CHECK_INT(data_sampler_init(&r1, &c, C, 1, 2, B, 7, err, sizeof err), 0);
    uint8_t tok[16 * 5], tgt[16];
    for (int step = 0; step < 150; step++) {   /* past an epoch boundary (61 steps) */
        size_t a[16], b[16];
        data_sampler_next(&one, tok, tgt, a);
        data_sampler_next(&r0, tok, tgt, b);
        /* tokens and targets are the corpus bytes at the sample index */
        CHECK_INT(tgt[B - 1], c.bytes[b[B - 1] + C]);
        CHECK_INT(tok[0], c.bytes[b[0]]);
        data_sampler_next(&r1, tok, tgt, b + B);
        qsort(a, 16, sizeof a[0], cmp_size);
        qsort(b, 16, sizeof b[0], cmp_size);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    CHECK_INT(one.epoch, r0.epoch);
    /* seeking reproduces the stream */
    struct data_sampler again;
    CHECK_INT(data_sampler_init(&again, &c, C, 1, 2, B, 7, err, sizeof err), 0);
    data_sampler_seek(&again, r1.epoch, r1.pos);
    size_t x[8], y[8];
    data_sampler_next(&again, tok, tgt, x);
    data_sampler_next(&r1, tok, tgt, y);
    CHECK(memcmp(x, y, sizeof x) == 0);
    data_sampler_free(&again);
    data_sampler_free(&one);
    data_sampler_free(&r0);
    data_sampler_free(&r1);
    data_corpus_free(&c);
}

static void test_sampler_too_small_is_an_error(void)
{
    struct data_corpus c = corpus_of(20);
    struct data_sampler s;
    char err[512] = "";
    CHECK_INT(data_sampler_init(&s, &c, 16, 0, 2, 4, 1, err, sizeof err), -1);
    CHECK(strstr(err, "20 bytes") != NULL);
    data_corpus_free(&c);
    CHECK_INT(data_load_file(&c, "/nonexistent/x", err, sizeof err), -1);
    CHECK(strstr(err, "/nonexistent/x") != NULL);
}

static void test_builtin_corpus(void)
{
    struct data_corpus a, b;
    data_builtin(&a, 4096);
    data_builtin(&b, 4096);
    CHECK_INT(a.n, 4096);
    CHECK(memcmp(a.bytes, b.bytes, 4096) == 0);
    int printable = 1;
    for (size_t i = 0; i < a.n; i++)
        if (!(a.bytes[i] == '\n' || (a.bytes[i] >= 32 && a.bytes[i] < 127))) printable = 0;
    CHECK(printable);
    CHECK(memchr(a.bytes, ' ', 64) != NULL);
    data_corpus_free(&a);
    data_corpus_free(&b);
}

/* ---- snapshots ------------------------------------------------------------------------------ */

static char tmpdir[256];

static struct snapshot_meta meta_of(size_t n, uint64_t step)
{
    struct snapshot_meta m = {
        .cfg = { .context = 3, .embed = 4, .hidden = 5, .layers = 2 }, .n_params = n,
        .step = step, .epoch = 2, .pos = 17, .batch_size = 8, .world_size = 2, .seed = 5,
        .rng_state = 0x1122334455667788ULL, .adam_t = step, .lr = 1e-3f, .beta1 = 0.9f,
        .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
    };
    return m;
}

static void fill(float *x, size_t n, float base)
{
    for (size_t i = 0; i < n; i++) x[i] = base + (float)i * 0.25f;
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(ch ^ 0x10, f);
    fclose(f);
}

static void test_snapshot_round_trip_and_corruption(void)
{
    char path[512], prev[600], used[600], err[2048];
    snprintf(path, sizeof path, "%s/snap.bin", tmpdir);
    snprintf(prev, sizeof prev, "%s.prev", path);
    size_t n = 1000;
    float p[1000], m[1000], v[1000];
    fill(p, n, 1);
    fill(m, n, 2);
    fill(v, n, 3);
    struct snapshot s;
    CHECK_INT(snapshot_load_latest(path, &s, used, sizeof used, err, sizeof err), 1);
    struct snapshot_meta meta = meta_of(n, 10);
    CHECK_INT(snapshot_save(path, &meta, p, m, v, err, sizeof err), 0);
    CHECK(access(prev, F_OK) != 0);   /* nothing to keep yet */
    CHECK_INT(snapshot_load(path, &s, err, sizeof err), 0);
    CHECK_INT(s.meta.step, 10);
    CHECK_INT(s.meta.cfg.hidden, 5);
    CHECK_INT(s.meta.pos, 17);
    CHECK_INT(s.meta.epoch, 2);
    CHECK(s.meta.rng_state == 0x1122334455667788ULL);
    CHECK(memcmp(s.params, p, sizeof p) == 0 && memcmp(s.m, m, sizeof m) == 0 &&
          memcmp(s.v, v, sizeof v) == 0);
    snapshot_release(&s);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    CHECK_INT(ftell(f), (long)snapshot_file_size(n));
    fclose(f);

    /* second save keeps the first as .prev */
    meta.step = 20;
    p[0] = 99;
    CHECK_INT(snapshot_save(path, &meta, p, m, v, err, sizeof err), 0);
    CHECK_INT(snapshot_load(prev, &s, err, sizeof err), 0);
    CHECK_INT(s.meta.step, 10);
    snapshot_release(&s);

    /* a flipped byte in the parameters: detected; latest falls back to .prev */
    flip_byte(path, SNAPSHOT_HEADER_BYTES + 4 * 500 + 1);
    CHECK_INT(snapshot_load(path, &s, err, sizeof err), -1);
    CHECK(strstr(err, "checksum") != NULL);
    CHECK_INT(snapshot_load_latest(path, &s, used, sizeof used, err, sizeof err), 0);
    CHECK_STR(used, prev);
    CHECK_INT(s.meta.step, 10);
    snapshot_release(&s);

    /* truncated: detected by length */
    CHECK_INT(snapshot_save(path, &meta, p, m, v, err, sizeof err), 0);
    CHECK_INT(truncate(path, (off_t)snapshot_file_size(n) - 100), 0);
    CHECK_INT(snapshot_load(path, &s, err, sizeof err), -1);
    CHECK(strstr(err, "truncated") != NULL);

    /* both bad: refused, naming both files */
    flip_byte(prev, 20);
    CHECK_INT(snapshot_load_latest(path, &s, used, sizeof used, err, sizeof err), -1);
    CHECK(strstr(err, path) != NULL && strstr(err, prev) != NULL);

    /* PATH missing but .prev good (a crash between the renames) */
    CHECK_INT(snapshot_save(path, &meta, p, m, v, err, sizeof err), 0);
    CHECK_INT(rename(path, prev), 0);
    CHECK_INT(snapshot_load_latest(path, &s, used, sizeof used, err, sizeof err), 0);
    CHECK_STR(used, prev);
    CHECK_INT(s.meta.step, 20);
    snapshot_release(&s);

    /* not a snapshot at all */
    f = fopen(path, "wb");
    fputs("hello world, this is not a snapshot but it is long enough to have a header......"
          "................................................................", f);
    fclose(f);
    CHECK_INT(snapshot_load(path, &s, err, sizeof err), -1);
    CHECK(strstr(err, "magic") != NULL);
    unlink(path);
    unlink(prev);
}

static void test_snapshot_header_is_little_endian(void)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/le.bin", tmpdir);
    float p[2] = { 1.0f, -2.0f }, z[2] = { 0, 0 };
    struct snapshot_meta meta = meta_of(2, 0x0102);
    CHECK_INT(snapshot_save(path, &meta, p, z, z, err, sizeof err), 0);
    unsigned char b[SNAPSHOT_HEADER_BYTES + 8];
    FILE *f = fopen(path, "rb");
    CHECK_INT(fread(b, 1, sizeof b, f), sizeof b);
    fclose(f);
    CHECK(memcmp(b, "DDPTSNAP", 8) == 0);
    CHECK_INT(b[8], SNAPSHOT_VERSION);
    CHECK_INT(b[56], 0x02);   /* step, low byte first */
    CHECK_INT(b[57], 0x01);
    /* 1.0f = 0x3f800000 stored 00 00 80 3f */
    CHECK(b[128] == 0 && b[129] == 0 && b[130] == 0x80 && b[131] == 0x3f);
    unlink(path);
}

/* ---- small helpers ------------------------------------------------------------------------- */

static void test_fnv1a64_vectors(void)
{
    CHECK(hash_fnv1a64(HASH_FNV1A64_INIT, "", 0) == 0xcbf29ce484222325ULL);
    CHECK(hash_fnv1a64(HASH_FNV1A64_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL);
    CHECK(hash_fnv1a64(HASH_FNV1A64_INIT, "foobar", 6) == 0x85944171f73967e8ULL);
    float one = 1.0f;
    unsigned char le[4] = { 0, 0, 0x80, 0x3f };
    CHECK(hash_floats_le(HASH_FNV1A64_INIT, &one, 1) == hash_fnv1a64(HASH_FNV1A64_INIT, le, 4));
}

static void test_fault_parse(void)
{
    struct train_fault f;
    CHECK_INT(train_parse_fault("crash@10", &f), 0);
    CHECK_INT(f.kind, FAULT_CRASH);
    CHECK_INT(f.step, 10);
    CHECK_INT(f.rank, -1);
    CHECK_INT(train_parse_fault("hang@5:1", &f), 0);
    CHECK_INT(f.kind, FAULT_HANG);
    CHECK_INT(f.rank, 1);
    CHECK_INT(train_parse_fault("exit@3:0", &f), 0);
    CHECK_INT(f.kind, FAULT_EXIT);
    CHECK_INT(f.rank, 0);
    CHECK_INT(train_parse_fault("crash", &f), -1);
    CHECK_INT(train_parse_fault("boom@3", &f), -1);
    CHECK_INT(train_parse_fault("crash@0", &f), -1);
    CHECK_INT(train_parse_fault("crash@3:", &f), -1);
    CHECK_INT(train_parse_fault("crash@3x", &f), -1);
    CHECK_INT(train_parse_fault("crashy@3", &f), -1);
}

static void test_json_string_escaping(void)
{
    char out[64];
    metrics_json_string(out, sizeof out, "a\"b\\c\nd\x01");
    CHECK_STR(out, "\"a\\\"b\\\\c\\u000ad\\u0001\"");
    size_t need = metrics_json_string(out, 4, "abcdef");
    CHECK_INT(need, 8);
    CHECK_INT(strlen(out), 3);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_model.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    ops_init();
    RUN(test_gradients_finite_differences);
    RUN(test_backward_reports_ready_in_layout_order);
    RUN(test_default_size_and_first_loss);
    RUN(test_softmax_xent);
    RUN(test_adamw_by_hand);
    RUN(test_optim_skips_decay_on_biases);
    RUN(test_sampler_shards_partition_the_epoch);
    RUN(test_sampler_two_ranks_equal_one_rank_double_batch);
    RUN(test_sampler_too_small_is_an_error);
    RUN(test_builtin_corpus);
    RUN(test_snapshot_round_trip_and_corruption);
    RUN(test_snapshot_header_is_little_endian);
    RUN(test_fnv1a64_vectors);
    RUN(test_fault_parse);
    RUN(test_json_string_escaping);
    rmdir(tmpdir);
    return tap_done();
}
