/* The training run (see train.h). The multi-process set-up (store, ring, resume agreement) is
 * kept in one place, train_connect / train_agree_step, so a world of one runs the very same
 * step loop with no communicator. */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "data.h"
#include "dist.h"
#include "hash.h"
#include "metrics.h"
#include "ops.h"
#include "optim.h"
#include "snapshot.h"
#include "store.h"
#include "train_cuda.h"

#define EMBED_DEFAULT 32
#define COMM_TIMEOUT_DEFAULT 300.0   /* s a collective waits for a silent peer */
#define EXIT_BARRIER_TIMEOUT 60.0

void train_opts_default(struct train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->steps = 400;
    o->batch = 64;
    o->lr = 2e-3f;
    o->seed = 1337;
    o->cfg.context = 16;
    o->cfg.embed = EMBED_DEFAULT;
    o->cfg.hidden = 512;
    o->cfg.layers = 3;
    o->snapshot_every = 50;
    o->log_every = 10;
    o->bucket_mb = 25.0;
    o->rdzv_timeout = 300.0;
    o->device_cuda = TRAIN_DEVICE_AUTO;
    o->precision = 1;   /* tf32 */
}

int train_parse_fault(const char *s, struct train_fault *f)
{
    static const struct { const char *name; enum fault_kind kind; } kinds[] = {
        { "crash", FAULT_CRASH }, { "hang", FAULT_HANG }, { "exit", FAULT_EXIT },
    };
    const char *at = strchr(s, '@');
    if (!at) return -1;
    f->kind = FAULT_NONE;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((size_t)(at - s) == strlen(kinds[i].name) && !strncmp(s, kinds[i].name, at - s))
            f->kind = kinds[i].kind;
    if (f->kind == FAULT_NONE) return -1;
    char *end;
    errno = 0;
    long step = strtol(at + 1, &end, 10);
    if (errno || end == at + 1 || step < 1) return -1;
    f->step = step;
    f->rank = -1;
    if (*end == ':') {
        const char *r = end + 1;
        long rank = strtol(r, &end, 10);
        if (errno || end == r || rank < 0 || rank > 1000000) return -1;
        f->rank = (int)rank;
    }
    return *end ? -1 : 0;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- one run's state ---------------------------------------------------------------------- */

struct bucket {
    size_t off, n;
};

struct run {
    const struct train_opts *o;
    struct dist_env env;
    struct store_server *srv;
    struct store *st;
    struct comm *comm;
    struct data_corpus corpus;
    struct data_sampler sampler;
    struct model *model;
    struct optim opt;
    struct train_cuda *gpu; /* NULL: training on the CPU */
    float *grad_base;       /* the gradients buckets slice: model->grads, or the GPU's */
    uint64_t rng_state;     /* reserved for stochastic layers; saved and restored */
    long step;              /* optimizer steps completed */
    long resumed_from;      /* -1: fresh */
    struct bucket *buckets;
    int n_buckets, next_bucket;
    double wait_ms;         /* this step's time blocked on communication */
};

/* Buckets: consecutive tensors of the gradient allocation in layout order (= backward order); a
 * bucket closes once it holds bucket_mb or more, as torch DDP's bucket_cap_mb does, so there are
 * no tiny buckets of a lone bias. */
static void plan_buckets(struct run *r)
{
    struct model *m = r->model;
    size_t cap = (size_t)(r->o->bucket_mb * 1024 * 1024 / sizeof(float));
    if (cap < 1) cap = 1;
    r->buckets = calloc((size_t)m->n_tensors, sizeof *r->buckets);
    RT_CHECK(r->buckets != NULL, "out of memory");
    r->n_buckets = 0;
    int open_bucket = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (!open_bucket) {
            r->buckets[r->n_buckets].off = m->tensors[i].off;
            r->buckets[r->n_buckets++].n = 0;
            open_bucket = 1;
        }
        struct bucket *b = &r->buckets[r->n_buckets - 1];
        b->n += m->tensors[i].n;
        if (b->n >= cap) open_bucket = 0;
    }
}

static void start_bucket(struct run *r)
{
    struct bucket *b = &r->buckets[r->next_bucket++];
    double t0 = mono_ms();
    if (comm_allreduce_avg_start(r->comm, r->grad_base + b->off, b->n))
        rt_fatal(__FILE__, __LINE__, "gradient all-reduce failed to start: %s", r->comm->err);
    r->wait_ms += mono_ms() - t0;
}

/* Called by backward as gradients become final: start every bucket that is complete. */
static void on_grads_ready(void *ctx, size_t n_ready)
{
    struct run *r = ctx;
    if (!r->comm || r->o->no_overlap) return;
    while (r->next_bucket < r->n_buckets &&
           r->buckets[r->next_bucket].off + r->buckets[r->next_bucket].n <= n_ready)
        start_bucket(r);
}

static void sync_grads(struct run *r)
{
    if (!r->comm) return;
    while (r->next_bucket < r->n_buckets)   /* --no-overlap: all of them now */
        start_bucket(r);
    double t0 = mono_ms();
    if (comm_wait_all(r->comm)) {
        fflush(stdout);
        fprintf(stderr, "ddptop-train rank %d: gradient all-reduce at step %ld failed: %s\n",
                r->env.rank, r->step + 1, r->comm->err);
        exit(1);
    }
    r->wait_ms += mono_ms() - t0;
}

/* ---- set-up: rendezvous and resume ------------------------------------------------------ */

/* Every rank checks in under "join/<rank>"; waiting for all of them (up to --rdzv-timeout)
 * turns a missing or refused rank into a message that names it, instead of a ring set-up
 * that waits for a peer that never comes. */
static void train_join(struct run *r)
{
    const struct dist_env *e = &r->env;
    int W = e->world_size;
    char key[64];
    snprintf(key, sizeof key, "join/%d", e->rank);
    RT_CHECK(store_set(r->st, key, "1", 1) == 0, "rendezvous store: %s", store_error(r->st));
    char (*names)[32] = calloc((size_t)W, sizeof *names);
    const char **keys = calloc((size_t)W, sizeof *keys);
    RT_CHECK(names && keys, "out of memory");
    for (int i = 0; i < W; i++) {
        snprintf(names[i], sizeof names[i], "join/%d", i);
        keys[i] = names[i];
    }
    if (store_wait(r->st, keys, (size_t)W, r->o->rdzv_timeout) != 0) {
        char why[600], missing[1024] = "";
        snprintf(why, sizeof why, "%s", store_error(r->st));
        size_t n = 0;
        int n_missing = 0;
        for (int i = 0; i < W && n < sizeof missing - 16; i++) {
            void *v;
            size_t len;
            if (store_get(r->st, keys[i], &v, &len, 0.01) == 0) {
                free(v);
                continue;
            }
            n_missing++;
            n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%d", n ? ", " : "", i);
        }
        if (n_missing == 0 || n_missing == W)   /* the store itself failed */
            rt_log("rendezvous at %s:%d failed: %s", e->master_addr, e->master_port, why);
        else
            rt_log("rendezvous at %s:%d: rank %s did not join within %g s (not started, a "
                   "different DDPTOP_JOB_TOKEN, or cannot reach MASTER_ADDR)", e->master_addr,
                   e->master_port, missing, r->o->rdzv_timeout);
        exit(1);
    }
    free(keys);
    free(names);
}

static void train_connect(struct run *r)
{
    const struct dist_env *e = &r->env;
    char err[1024] = "";
    if (e->world_size == 1) return;   /* nothing to agree on with nobody */
    if (e->rank == 0) {
        r->srv = store_server_start(e->master_addr, e->master_port, e->token, err, sizeof err);
        if (!r->srv) {
            rt_log("%s", err);
            exit(1);
        }
    }
    r->st = store_connect(e->master_addr, e->master_port, e->token, r->o->rdzv_timeout, err,
                          sizeof err);
    if (!r->st) {
        rt_log("rendezvous failed: %s", err);
        exit(1);
    }
    train_join(r);
    double comm_timeout = COMM_TIMEOUT_DEFAULT;
    const char *ct = getenv("DDPTOP_COMM_TIMEOUT");
    if (ct && *ct) {
        char *end;
        comm_timeout = strtod(ct, &end);
        if (*end || !(comm_timeout > 0)) {
            rt_log("DDPTOP_COMM_TIMEOUT=%s: expected a positive number of seconds", ct);
            exit(2);
        }
    }
    if (r->gpu)
        r->comm = train_cuda_comm_new(r->gpu, e, r->st, comm_timeout, err, sizeof err);
    else
        r->comm = comm_ring_new(e, r->st, comm_timeout, err, sizeof err);
    if (!r->comm) {
        rt_log("setting up the %s failed: %s", r->gpu ? "NCCL communicator" :
               "CPU ring all-reduce", err);
        exit(1);
    }
}

static void config_mismatch(const char *path, const char *what, long snap, long run)
{
    rt_log("snapshot %s was written with %s %ld but this run has %s %ld: use the same model "
           "options as the run that wrote it, or another --snapshot path", path, what, snap,
           what, run);
    exit(2);
}

static void train_resume(struct run *r)
{
    const struct train_opts *o = r->o;
    struct snapshot s;
    char used[4096], err[2048];
    int rc = snapshot_load_latest(o->snapshot, &s, used, sizeof used, err, sizeof err);
    if (rc == 1) return;
    if (rc < 0) {
        rt_log("refusing to start: %s", err);
        exit(1);
    }
    const struct model_config *c = &s.meta.cfg, *w = &o->cfg;
    if (c->hidden != w->hidden) config_mismatch(used, "--hidden", c->hidden, w->hidden);
    if (c->layers != w->layers) config_mismatch(used, "--layers", c->layers, w->layers);
    if (c->context != w->context) config_mismatch(used, "--context", c->context, w->context);
    if (c->embed != w->embed) config_mismatch(used, "embedding width", c->embed, w->embed);
    if (s.meta.n_params != r->model->n_params)
        config_mismatch(used, "parameter count", (long)s.meta.n_params,
                        (long)r->model->n_params);
    size_t n = r->model->n_params;
    memcpy(r->model->params, s.params, n * sizeof(float));
    memcpy(r->opt.m, s.m, n * sizeof(float));
    memcpy(r->opt.v, s.v, n * sizeof(float));
    r->opt.t = (long)s.meta.adam_t;
    r->step = (long)s.meta.step;
    r->resumed_from = r->step;
    r->rng_state = s.meta.rng_state;
    if (s.meta.seed != o->seed)
        rt_log("warning: %s was written with --seed %" PRIu64 ", this run has --seed %" PRIu64
               ": the data order changes from here on", used, s.meta.seed, o->seed);
    uint64_t per_step_old = (uint64_t)s.meta.batch_size * s.meta.world_size;
    uint64_t per_step_new = (uint64_t)o->batch * r->env.world_size;
    if (per_step_old == per_step_new) {
        data_sampler_seek(&r->sampler, s.meta.epoch, s.meta.pos);
    } else {   /* keep the epoch's sample offset; the batches differ from here on */
        uint64_t pos = s.meta.pos * per_step_old / per_step_new;
        rt_log("warning: %s was written by %u rank(s) x batch %u, this run is %d x %d: "
               "resuming at epoch %" PRIu64 " batch %" PRIu64 " (not bit-exact)", used,
               s.meta.world_size,
               s.meta.batch_size, r->env.world_size, o->batch, s.meta.epoch, pos);
        data_sampler_seek(&r->sampler, s.meta.epoch, pos);
    }
    rt_log("resumed from %s at step %ld", used, r->step);
    snapshot_release(&s);
}

/* Every rank publishes the step it would start from; all must agree. */
static void train_agree_step(struct run *r)
{
    if (!r->st) return;
    int W = r->env.world_size;
    char key[64], val[32];
    snprintf(key, sizeof key, "resume/%d", r->env.rank);
    snprintf(val, sizeof val, "%ld", r->step);
    RT_CHECK(store_set(r->st, key, val, strlen(val)) == 0, "store set %s: %s", key,
             store_error(r->st));
    long *steps = calloc((size_t)W, sizeof *steps);
    RT_CHECK(steps != NULL, "out of memory");
    int agree = 1;
    for (int i = 0; i < W; i++) {
        void *v;
        size_t len;
        snprintf(key, sizeof key, "resume/%d", i);
        RT_CHECK(store_get(r->st, key, &v, &len, r->o->rdzv_timeout) == 0,
                 "waiting for rank %d's resume step: %s", i, store_error(r->st));
        char buf[32];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < 31 ? len : 31), (char *)v);
        free(v);
        steps[i] = strtol(buf, NULL, 10);
        if (steps[i] != steps[0]) agree = 0;
    }
    if (!agree) {
        char msg[2048];
        size_t n = 0;
        for (int i = 0; i < W && n < sizeof msg - 40; i++)
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%srank %d at step %ld",
                                  i ? ", " : "", i, steps[i]);
        rt_log("ranks disagree on the step to resume from (%s): their snapshots differ; give "
               "every node the same snapshot (or remove them all to start over)", msg);
        exit(1);
    }
    free(steps);
}

static void train_save(struct run *r)
{
    const struct train_opts *o = r->o;
    struct snapshot_meta meta = {
        .cfg = o->cfg, .n_params = r->model->n_params, .step = (uint64_t)r->step,
        .epoch = r->sampler.epoch, .pos = r->sampler.pos, .batch_size = (uint32_t)o->batch,
        .world_size = (uint32_t)r->env.world_size, .seed = o->seed, .rng_state = r->rng_state,
        .adam_t = (uint64_t)r->opt.t, .lr = r->opt.lr, .beta1 = r->opt.beta1,
        .beta2 = r->opt.beta2, .eps = r->opt.eps, .weight_decay = r->opt.weight_decay,
    };
    char err[1024];
    if (r->gpu) train_cuda_download(r->gpu, &r->opt);   /* one portable format */
    if (snapshot_save(o->snapshot, &meta, r->model->params, r->opt.m, r->opt.v, err,
                      sizeof err)) {
        rt_log("warning: %s; training goes on without this snapshot", err);
        return;
    }
    metrics_snapshot(r->step, o->snapshot);
}

static void fault_fire(const struct run *r)
{
    const struct train_fault *f = &r->o->fault;
    if (f->kind == FAULT_NONE || f->step != r->step + 1) return;
    if (f->rank >= 0 && f->rank != r->env.rank) return;
    fflush(stdout);
    switch (f->kind) {
    case FAULT_CRASH:
        rt_log("fault injection: crash (SIGSEGV) at step %ld", f->step);
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        break;
    case FAULT_HANG:
        rt_log("fault injection: hang at step %ld (no further progress)", f->step);
        for (;;)
            sleep(3600);
    case FAULT_EXIT:
        rt_log("fault injection: exit with status 3 at step %ld", f->step);
        exit(3);
    case FAULT_NONE:
        break;
    }
}

static void dump_params(const struct run *r)
{
    const char *path = getenv("DDPTOP_TRAIN_DUMP_PARAMS");
    if (!path || !*path || r->env.rank != 0) return;
    FILE *f = fopen(path, "wb");
    RT_CHECK(f != NULL, "DDPTOP_TRAIN_DUMP_PARAMS=%s: %s", path, strerror(errno));
    size_t n = fwrite(r->model->params, sizeof(float), r->model->n_params, f);
    RT_CHECK(n == r->model->n_params && fclose(f) == 0, "writing %s failed", path);
}

/* At the end every rank checks in, and rank 0 keeps serving the store until all have: a peer
 * still reading the store must not find it gone. */
static void train_finish(struct run *r)
{
    if (r->st) {
        char key[64];
        snprintf(key, sizeof key, "exit/%d", r->env.rank);
        store_set(r->st, key, "1", 1);
        if (r->srv) {
            int W = r->env.world_size;
            char (*names)[32] = calloc((size_t)W, sizeof *names);
            const char **keys = calloc((size_t)W, sizeof *keys);
            RT_CHECK(names && keys, "out of memory");
            for (int i = 0; i < W; i++) {
                snprintf(names[i], sizeof names[i], "exit/%d", i);
                keys[i] = names[i];
            }
            store_wait(r->st, keys, (size_t)W, EXIT_BARRIER_TIMEOUT);
            free(keys);
            free(names);
        }
    }
    comm_free(r->comm);
    if (r->st) store_close(r->st);
    if (r->srv) store_server_stop(r->srv);
}

/* ---- the loop ---------------------------------------------------------------------------- */

int train_run(const struct train_opts *o)
{
    struct run run = { .o = o, .resumed_from = -1 };
    struct run *r = &run;
    char err[1024];
    signal(SIGPIPE, SIG_IGN);   /* a dead peer's socket is an error to report, not a death */
    ops_init();
    if (dist_env_read(&r->env, err, sizeof err)) {
        fprintf(stderr, "ddptop-train: %s\n", err);
        return 2;
    }
    metrics_init(r->env.rank, r->env.world_size);
    const char *bad = model_config_check(&o->cfg);
    if (bad) {
        rt_log("%s", bad);
        return 2;
    }
    int use_cuda = train_cuda_choose(o->device_cuda, &r->env, err, sizeof err);
    if (use_cuda < 0) {
        rt_log("%s", err);
        return 2;
    }
    if (*err) rt_log("%s", err);
    if (o->data) {
        if (data_load_file(&r->corpus, o->data, err, sizeof err)) {
            rt_log("%s", err);
            return 2;
        }
    } else {
        data_builtin(&r->corpus, DATA_BUILTIN_BYTES);
    }
    if (data_sampler_init(&r->sampler, &r->corpus, o->cfg.context, r->env.rank,
                          r->env.world_size, o->batch, o->seed, err, sizeof err)) {
        if (o->data) rt_log("--data %s: %s", o->data, err);
        else rt_log("built-in corpus: %s", err);
        data_corpus_free(&r->corpus);
        return 2;
    }
    r->model = model_new(&o->cfg, o->batch);
    model_init_params(r->model, o->seed);
    optim_init(&r->opt, r->model->n_params, o->lr);
    r->rng_state = o->seed ^ 0x747261696e726e67ULL;
    r->grad_base = r->model->grads;
    if (use_cuda) {   /* before train_connect: NCCL needs the device selected */
        r->gpu = train_cuda_new(r->model, r->env.local_rank, o->precision);
        r->grad_base = train_cuda_grads(r->gpu);
    }
    plan_buckets(r);
    train_connect(r);
    if (o->snapshot) train_resume(r);
    train_agree_step(r);
    if (r->gpu) {
        train_cuda_upload(r->gpu, &r->opt);   /* init or resumed state, from the host */
        char what[400];
        train_cuda_describe(r->gpu, what, sizeof what);
        if (r->env.rank == 0) rt_log("training on %s", what);
    }
    if (r->env.rank == 0 && r->comm)
        rt_log("world of %d, %zu parameters, gradients in %d all-reduce bucket(s), overlap %s",
               r->env.world_size, r->model->n_params, r->n_buckets,
               o->no_overlap ? "off" : "on");
    metrics_start(r->model->n_params, r->resumed_from, r->gpu ? "cuda" : "cpu");

    int B = o->batch, W = r->env.world_size;
    uint8_t *tokens = malloc((size_t)B * o->cfg.context), *targets = malloc((size_t)B);
    RT_CHECK(tokens && targets, "out of memory");
    double sum_loss = 0, sum_step = 0, sum_comm = 0, sum_wait = 0;
    int window = 0;
    while (r->step < o->steps) {
        fault_fire(r);
        double t0 = mono_ms();
        if (r->comm) r->comm->comm_ms = 0;
        r->wait_ms = 0;
        r->next_bucket = 0;
        data_sampler_next(&r->sampler, tokens, targets, NULL);
        float loss;
        if (r->gpu) {   /* the same step queued on the GPU; the loss is known at its end */
            train_cuda_forward(r->gpu, tokens, targets, B);
            train_cuda_backward(r->gpu, on_grads_ready, r);
            sync_grads(r);
            train_cuda_optim_step(r->gpu, &r->opt);
            loss = train_cuda_loss(r->gpu);
            RT_CHECK(isfinite(loss), "loss is %f at step %ld: training diverged; lower --lr",
                     loss, r->step + 1);
        } else {
            loss = model_forward(r->model, tokens, targets, B);
            RT_CHECK(isfinite(loss), "loss is %f at step %ld: training diverged; lower --lr",
                     loss, r->step + 1);
            model_backward(r->model, on_grads_ready, r);
            sync_grads(r);
            optim_step(&r->opt, r->model);
        }
        r->step++;
        sum_loss += loss;
        sum_step += mono_ms() - t0;
        sum_comm += r->comm ? r->comm->comm_ms : 0;
        sum_wait += r->wait_ms;
        window++;
        if (r->step % o->log_every == 0 || r->step == o->steps) {
            double step_ms = sum_step / window;
            metrics_step(r->step, sum_loss / window, step_ms, sum_comm / window,
                         sum_wait / window, step_ms > 0 ? B * W * 1000.0 / step_ms : 0);
            sum_loss = sum_step = sum_comm = sum_wait = 0;
            window = 0;
        }
        if (o->snapshot && r->env.local_rank == 0 &&
            ((o->snapshot_every > 0 && r->step % o->snapshot_every == 0) || r->step == o->steps))
            train_save(r);
    }
    if (r->gpu) train_cuda_download(r->gpu, NULL);   /* the checksum is of the host copy */
    uint64_t sum = hash_floats_le(HASH_FNV1A64_INIT, r->model->params, r->model->n_params);
    metrics_done(r->step, sum);
    dump_params(r);
    train_finish(r);
    train_cuda_free(r->gpu);
    free(tokens);
    free(targets);
    free(r->buckets);
    optim_free(&r->opt);
    model_free(r->model);
    data_sampler_free(&r->sampler);
    data_corpus_free(&r->corpus);
    return 0;
}
