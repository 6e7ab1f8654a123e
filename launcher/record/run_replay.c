/* A run's files back into a job model (run_replay.h). events.jsonl is read once into
 * records (a reused --run-id appends a new run to the file: the newest run's records are
 * kept, as run_summary.c does), the job is built with the newest launch's rank map, and the
 * records are played in order: each launch begins its attempt and feeds that attempt's rank
 * logs, exits end ranks, the end ends the job. States change only through job_state.h. */
#include "run_replay.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "job/gpu.h"
#include "job/job_state.h"
#include "job/metrics_parse.h"
#include "run_nccl.h"
#include "runs.h"
#include "job/failure_line.h"
#include "job/health_cause.h"
#include "util/util.h"
#include "wire/signals.h"

/* One line of events.jsonl, as much of it as the replay uses. */
struct rec {
    enum job_event_kind kind;
    int64_t t;                  /* wall clock ns; 0 unknown */
    int attempt, rank;          /* rank -1: none */
    char *host, *text;
    cJSON *o;                   /* root_cause only: the whole line, for its fields */
};

struct recs {
    struct rec *v;
    size_t n, cap;
    long taken;                 /* lines believed (the others are bad lines) */
};

/* A rank's log tail of one attempt, read before the replay (newest attempts first, while the
 * ring's budget lasts) and fed during it (oldest first). Only files that are there are read:
 * the work follows the rank logs on disk, not the numbers events.jsonl holds. */
struct tail {
    int attempt, rank;
    char *data;
    size_t len;
};

struct tails {
    struct tail *v;             /* sorted by attempt, then rank */
    size_t n;
};

static void recs_clear(struct recs *R)
{
    for (size_t i = 0; i < R->n; i++) {
        free(R->v[i].host);
        free(R->v[i].text);
        cJSON_Delete(R->v[i].o);
    }
    R->n = 0;
}

static const char *str_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int int_field(const cJSON *o, const char *key, int dflt, int max)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= max)) return dflt;
    return (int)v->valuedouble;
}

static enum job_event_kind kind_parse(const char *name)
{
    for (int k = EV_LAUNCH; k < EV_KINDS; k++)
        if (strcmp(name, job_event_kind_name((enum job_event_kind)k)) == 0) return (enum job_event_kind)k;
    return EV_INFO;             /* a kind a newer ddptop wrote: shown as a note */
}

/* One line that run_summary_feed believed (a JSON object with a kind, its numbers in range). */
static void recs_feed(struct recs *R, const char *line, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const char *kind = cJSON_IsObject(o) ? str_field(o, "kind") : NULL;
    if (!kind) {
        cJSON_Delete(o);
        return;
    }
    struct rec r = {
        .kind = kind_parse(kind),
        .t = run_summary_parse_time(str_field(o, "time")),
        .attempt = int_field(o, "attempt", 0, RUN_ATTEMPTS_MAX),
        .rank = int_field(o, "rank", -1, RUN_RANKS_MAX),
    };
    /* a new run in a reused directory: the newest run is the one shown (run_summary.h) */
    if (r.kind == EV_LAUNCH && r.attempt == 0)
        for (size_t i = 0; i < R->n; i++)
            if (R->v[i].kind == EV_LAUNCH || R->v[i].kind == EV_END) {
                recs_clear(R);
                break;
            }
    const char *host = str_field(o, "host"), *text = str_field(o, "text");
    r.host = host ? xstrdup(host) : NULL;
    r.text = xstrdup(text ? text : "");
    if (r.t < 0) r.t = 0;
    if (r.kind == EV_ROOT_CAUSE) r.o = o;
    else cJSON_Delete(o);
    if (R->n == R->cap) R->v = xrealloc(R->v, (R->cap = R->cap ? R->cap * 2 : 64) * sizeof *R->v);
    R->v[R->n++] = r;
}

static void recs_take(void *ctx, const char *line, size_t len)
{
    struct recs *R = ctx;
    R->taken++;
    recs_feed(R, line, len);
}

/* ---- files' tails ------------------------------------------------------------------------ */

/* The last max bytes of path, from a line's start (a cut first line is dropped). NULL when
 * it cannot be read or is empty. *cut: the file held more. */
static char *read_tail(const char *path, size_t max, size_t *len, bool *cut)
{
    *len = 0;
    int fd = util_open_read(path); /* a FIFO planted in a shared --log-dir must not hang view */
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 || max == 0) {
        close(fd);
        return NULL;
    }
    off_t from = (uint64_t)st.st_size > max ? st.st_size - (off_t)max : 0;
    size_t want = (size_t)(st.st_size - from), got = 0;
    char *buf = xmalloc(want + 1);
    while (got < want) {
        ssize_t k = pread(fd, buf + got, want - got, from + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    size_t skip = 0;
    if (from > 0) {
        *cut = true;
        char *nl = memchr(buf, '\n', got);
        skip = nl ? (size_t)(nl - buf) + 1 : got;
    }
    memmove(buf, buf + skip, got - skip);
    *len = got - skip;
    buf[*len] = '\0';
    if (*len == 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Drops whole lines from t's front until at most max_lines are left. */
static size_t tail_keep_lines(struct tail *t, size_t max_lines)
{
    size_t lines = 0;
    for (size_t i = 0; i < t->len; i++) lines += t->data[i] == '\n';
    if (t->len && t->data[t->len - 1] != '\n') lines++;
    size_t skip = 0;
    while (lines > max_lines && skip < t->len) {
        char *nl = memchr(t->data + skip, '\n', t->len - skip);
        skip = nl ? (size_t)(nl - t->data) + 1 : t->len;
        lines--;
    }
    memmove(t->data, t->data + skip, t->len - skip);
    t->len -= skip;
    return lines;
}

static int tail_cmp(const void *a, const void *b)
{
    const struct tail *x = a, *y = b;
    if (x->attempt != y->attempt) return x->attempt < y->attempt ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Per rank, the newest attempts' tails while the ring's budget lasts: each attempt-N/ on disk
 * (newest first) and the rank logs in it of ranks the job has. */
static void tails_read(struct tails *T, const char *dir, const struct job *j, bool *cut)
{
    size_t n_dirs = 0, cap = 0, open_ranks = j->n_ranks;
    int *dirs = runs_attempts(dir, &n_dirs);
    size_t *bytes = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *bytes);
    size_t *lines = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *lines);
    for (size_t r = 0; r < j->n_ranks; r++) {
        bytes[r] = j->log_max_bytes;
        lines[r] = j->log_max_lines;
    }
    for (size_t d = n_dirs; d-- > 0;) {
        if (!open_ranks) {
            *cut = true;            /* older attempts left unread */
            break;
        }
        size_t n_logs = 0;
        int *logs = runs_rank_logs(dir, dirs[d], &n_logs);
        for (size_t k = 0; k < n_logs; k++) {
            size_t r = (size_t)logs[k];
            if (r >= j->n_ranks || !bytes[r] || !lines[r]) continue;
            struct tail t = { .attempt = dirs[d], .rank = logs[k] };
            char *path = xasprintf("%s/attempt-%d/rank-%zu.log", dir, dirs[d], r);
            t.data = read_tail(path, bytes[r], &t.len, cut);
            free(path);
            if (!t.data) continue;
            size_t kept = tail_keep_lines(&t, lines[r]);
            bytes[r] = t.len < bytes[r] ? bytes[r] - t.len : 0;
            lines[r] = kept < lines[r] ? lines[r] - kept : 0;
            if (!bytes[r] || !lines[r]) {
                *cut = true;
                open_ranks--;
            }
            if (T->n == cap) T->v = xrealloc(T->v, (cap = cap ? cap * 2 : 64) * sizeof *T->v);
            T->v[T->n++] = t;
        }
        free(logs);
    }
    free(dirs);
    free(bytes);
    free(lines);
    if (T->n) qsort(T->v, T->n, sizeof *T->v, tail_cmp);
}

static void tails_free(struct tails *T)
{
    for (size_t i = 0; i < T->n; i++) free(T->v[i].data);
    free(T->v);
}

/* A tail's lines into the rank's ring and, where they hold one, its metrics. */
static void tail_feed(struct job *j, int rank, const struct tail *t,
                      const struct metrics_parser *mp, int64_t wall)
{
    bool may = t->data && metrics_block_may_hold(mp, t->data, t->len);
    for (size_t i = 0; t->data && i < t->len;) {
        char *nl = memchr(t->data + i, '\n', t->len - i);
        size_t len = nl ? (size_t)(nl - (t->data + i)) : t->len - i;
        job_log_keep(j, rank, LOG_STDOUT, nl ? 0 : LOG_LINE_PARTIAL, t->data + i, len, wall);
        if (may) metrics_feed_line(mp, j, rank, t->data + i, len);
        i += len + (nl ? 1 : 0);
    }
}

/* ---- the events played ------------------------------------------------------------------- */

/* The job's nodes sorted by name, so that a line naming a host costs a binary search, not a
 * pass over every node (a file may name 100000 of them, and as many lines may name one). */
static const struct job *by_name_job;   /* qsort's context (single-threaded) */

static int by_name_cmp(const void *a, const void *b)
{
    return strcmp(by_name_job->nodes[*(const int *)a].name, by_name_job->nodes[*(const int *)b].name);
}

static int *nodes_by_name(const struct job *j)
{
    int *v = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *v);
    for (size_t i = 0; i < j->n_nodes; i++) v[i] = (int)i;
    by_name_job = j;
    qsort(v, j->n_nodes, sizeof *v, by_name_cmp);
    by_name_job = NULL;
    return v;
}

/* The first node called name (hostfile order among equals), or -1. */
static int node_named(const struct job *j, const int *by_name, const char *name)
{
    size_t lo = 0, hi = j->n_nodes;
    int best = -1;
    while (name && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(j->nodes[by_name[mid]].name, name);
        if (c == 0 && (best < 0 || by_name[mid] < best)) best = by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return best;
}

struct player {
    struct job *j;
    const struct tails *tails;
    const struct metrics_parser *mp;
    const int *by_name;
};

static int node_of(const struct player *P, const struct rec *r)
{
    const struct job *j = P->j;
    if (r->rank >= 0 && (size_t)r->rank < j->n_ranks) return j->ranks[r->rank].node;
    return node_named(j, P->by_name, r->host);
}

/* "SIGSEGV" or "signal 77" (signals_label) back to its number; 0 when neither. */
static int signal_number(const char *s)
{
    int n;
    if (!s) return 0;
    if (sscanf(s, "signal %d", &n) == 1) return n;
    for (n = 1; n < 65; n++)
        if (signals_name(n) && strncmp(s, signals_name(n), strlen(signals_name(n))) == 0) return n;
    return 0;
}

/* A launch: attempt a begins, its ranks run, and what they printed is theirs. */
static void play_launch(struct player *P, const struct rec *r)
{
    struct job *j = P->j;
    char err[256];
    j->attempt = r->attempt;
    job_attempt_begin(j, err, sizeof err);      /* in memory: no files, cannot fail */
    job_cause_clear(j);     /* as a live attempt's begin does (the in-memory one keeps it) */
    job_launching(j);
    for (size_t n = 0; n < j->n_nodes; n++) job_node_running(j, n);
    for (size_t k = 0; k < j->n_ranks; k++) job_rank_running(j, (int)k, 0);
    /* the attempt's tails: the first at or after (attempt, rank 0), in rank order */
    const struct tails *T = P->tails;
    size_t lo = 0, hi = T->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (T->v[mid].attempt < r->attempt) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < T->n && T->v[lo].attempt == r->attempt; lo++)
        tail_feed(j, T->v[lo].rank, &T->v[lo], P->mp, r->t);
    job_running(j);
}

/* An exit or a failure, from its text (rank_report.c writes it): stopped by us, exit code 0,
 * or a failure with its code or signal. */
static void play_exit(struct job *j, const struct rec *r)
{
    if (r->rank < 0 || (size_t)r->rank >= j->n_ranks) return;
    struct rank_info *ri = &j->ranks[r->rank];
    const char *killed = strstr(r->text, " killed by "), *code = strstr(r->text, "with code ");
    ri->term_signal = killed ? signal_number(killed + 11) : 0;
    /* a file's text: strtol saturates where atoi's overflow is undefined */
    long ec = code ? strtol(code + 10, NULL, 10) : 0;
    ri->exit_code = ec >= 0 && ec <= 255 ? (int)ec : 0;
    if (r->kind == EV_FAILURE) job_rank_ended(j, r->rank, RANK_FAILED);
    else if (strstr(r->text, " stopped")) job_rank_ended(j, r->rank, RANK_STOPPED);
    else job_rank_ended(j, r->rank, RANK_EXITED);
}

/* The root cause as job_events.c wrote it: its summary is the text, without "root cause: ". */
static void play_cause(const struct player *P, const struct rec *r)
{
    struct job *j = P->j;
    struct root_cause *c = &j->cause;
    const cJSON *o = r->o;
    job_cause_clear(j);
    c->set = true;
    c->rank = r->rank;
    c->node = node_of(P, r);
    c->attempt = r->attempt;
    c->summary = xstrdup(strncmp(r->text, "root cause: ", 12) == 0 ? r->text + 12 : r->text);
    c->exit_code = int_field(o, "exit_code", 0, 255);
    c->term_signal = signal_number(str_field(o, "signal"));
    c->hang = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "hang"));
    const char *health = str_field(o, "health");   /* --on-nan, --on-spike (job/health.h) */
    if (health) c->health = strcmp(health, "nan") == 0 ? HEALTH_NAN : strcmp(health, "spike") == 0 ? HEALTH_SPIKE : 0;
    if (c->health) {
        c->health_step = int_field(o, "step", 0, INT32_MAX);
        c->health_followers = int_field(o, "followers", 0, RUN_RANKS_MAX);
    }
    const cJSON *lines = cJSON_GetObjectItemCaseSensitive(o, "last_lines"), *l;
    if (cJSON_IsArray(lines)) {
        c->last_lines = xcalloc((size_t)cJSON_GetArraySize(lines) + 1, sizeof *c->last_lines);
        cJSON_ArrayForEach(l, lines)
            if (cJSON_IsString(l)) c->last_lines[c->n_last_lines++] = xstrdup(l->valuestring);
    }
    const char *ef = str_field(o, "error_file");
    if (ef) c->error_file = xstrdup(ef);
    /* its class (docs/failures.md), when the run was recorded with one */
    c->failure = failure_class_parse(str_field(o, "class"));
    if (c->failure == FAILURE_NONE) return;
    c->fix = failure_class_fix(c->failure);
    const char *d = str_field(o, "detail"), *e = str_field(o, "evidence");
    if (d) c->detail = xstrndup(d, strnlen(d, 4096));   /* xstrndup copies exactly n bytes */
    if (e) c->evidence = xstrndup(e, strnlen(e, 4096));
    c->evidence_rank = e ? int_field(o, "evidence_rank", -1, (int)j->n_ranks - 1) : -1;
    const cJSON *lag = cJSON_GetObjectItemCaseSensitive(o, "lagging_ranks");
    int n = cJSON_IsArray(lag) ? cJSON_GetArraySize(lag) : 0;
    if (n > 0 && (size_t)n <= j->n_ranks) {
        c->lagging = xcalloc((size_t)n, sizeof *c->lagging);
        cJSON_ArrayForEach(l, lag)
            if (cJSON_IsNumber(l) && l->valuedouble >= 0 && l->valuedouble < (double)j->n_ranks)
                c->lagging[c->n_lagging++] = (int)l->valuedouble;
    }
}

static void play(struct player *P, const struct rec *r)
{
    struct job *j = P->j;
    int node = node_of(P, r);
    switch (r->kind) {
    case EV_LAUNCH: play_launch(P, r); break;
    case EV_EXIT: case EV_FAILURE: play_exit(j, r); break;
    case EV_ROOT_CAUSE: play_cause(P, r); break;
    case EV_NODE_LOST:
        if (node >= 0) job_node_lost(j, (size_t)node, r->text, true);
        break;
    case EV_DONE:
        for (size_t n = 0; n < j->n_nodes; n++) job_node_done(j, n);
        break;
    default: break;
    }
    job_event_restore(j, r->kind, r->t, r->attempt,
                      r->rank >= 0 && (size_t)r->rank < j->n_ranks ? r->rank : -1, node, r->text);
}

enum job_state run_replay_job_state(enum run_state st)
{
    return st == RUN_SUCCEEDED ? JOB_DONE : st == RUN_FAILED ? JOB_FAILED : JOB_STOPPED;
}

/* ---- gpu.jsonl ---------------------------------------------------------------------------- */

static double num_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A count from a file as an unsigned long long, when it is one (else false). */
static bool count_field(const cJSON *v, unsigned long long *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1.8e19)) return false;
    *out = (unsigned long long)v->valuedouble;
    return true;
}

/* One line of gpu.jsonl (gpu.c's keep_sample) into its node; false when it is not one (more
 * GPUs than a node reports, RUN_REPLAY_GPUS_MAX, included). */
static bool gpu_line(struct job *j, const int *by_name, const char *line, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const char *host = cJSON_IsObject(o) ? str_field(o, "host") : NULL;
    const cJSON *gpus = host ? cJSON_GetObjectItemCaseSensitive(o, "gpus") : NULL, *e;
    int node = node_named(j, by_name, host), n = 0;
    if (cJSON_GetArraySize(gpus) > RUN_REPLAY_GPUS_MAX) {
        cJSON_Delete(o);
        return false;
    }
    if (node < 0 || !cJSON_IsArray(gpus)) {
        cJSON_Delete(o);
        return host != NULL;        /* a host no longer in the run (a reused id): not an error */
    }
    struct gpu_info *g = xcalloc((size_t)cJSON_GetArraySize(gpus) + 1, sizeof *g);
    cJSON_ArrayForEach(e, gpus) {
        struct gpu_info *x = &g[n];
        if (!cJSON_IsObject(e)) continue;
        *x = (struct gpu_info){
            .index = int_field(e, "index", 0, 1 << 16), .rank = int_field(e, "rank", -1, 1 << 24),
            .util = num_field(e, "util"), .mem_util = NAN,
            .mem_used_mib = num_field(e, "mem_used_mib"), .mem_total_mib = num_field(e, "mem_total_mib"),
            .power_w = num_field(e, "power_w"), .power_limit_w = NAN, .temp_c = num_field(e, "temp_c"),
            .sm_mhz = num_field(e, "sm_mhz"),
        };
        x->has_throttle = count_field(cJSON_GetObjectItemCaseSensitive(e, "throttle"), &x->throttle);
        x->has_ecc = count_field(cJSON_GetObjectItemCaseSensitive(e, "ecc_uncorrected"), &x->ecc);
        n++;
    }
    job_gpu_restore(j, node, g, n);
    free(g);
    cJSON_Delete(o);
    return true;
}

static void gpu_read(struct run_replay *out, const char *dir, const int *by_name)
{
    char *path = xasprintf("%s/gpu.jsonl", dir);
    size_t len;
    bool cut = false;
    char *buf = read_tail(path, RUN_REPLAY_GPU_TAIL, &len, &cut);
    free(path);
    for (size_t i = 0; buf && i < len;) {
        char *nl = memchr(buf + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (buf + i)) : len - i;
        if (!nl) break;             /* the last line, not yet whole */
        /* a line longer than 64 GPUs' worth is no sample: not parsed (cJSON would take ten
         * times its size) */
        if (n > RUN_REPLAY_GPU_LINE_MAX) out->bad_lines++;
        else if (n && gpu_line(out->job, by_name, buf + i, n)) out->gpu_samples++;
        else if (n) out->bad_lines++;
        i += n + 1;
    }
    free(buf);
}

/* ---- the whole run ------------------------------------------------------------------------ */

struct job *run_replay_job_build(const struct run_summary *s, const char *id, char *err, size_t errlen)
{
    const char *one_name = "?";
    int one_count = s->ranks > 0 ? s->ranks : 0;
    const char *const *names = s->hosts ? (const char *const *)s->hosts : &one_name;
    const int *rpn = s->hosts ? s->ranks_per_node : &one_count;
    size_t n = s->hosts ? s->n_nodes : one_count ? 1 : 0;
    return job_new(id, NULL, 0, names, NULL, rpn, n, err, errlen);
}

int run_replay_load(const char *run_dir, const char *id, enum run_owner_status owner,
                    struct run_replay *out, char *err, size_t errlen)
{
    *out = (struct run_replay){ 0 };
    struct recs R = { 0 };
    /* one reading: the summary checks each line, the records take those it believed */
    run_summary_init(&out->sum);
    if (run_summary_scan(run_dir, &out->sum, recs_take, &R) != 0) {
        snprintf(err, errlen, "cannot read %s/events.jsonl: %s (a run's directory holds events.jsonl; "
                 "ddptop ls lists the runs)", run_dir, util_open_read_error(errno));
        recs_clear(&R);
        free(R.v);
        run_summary_done(&out->sum);
        return -1;
    }
    run_summary_finish(&out->sum, owner);
    out->state = out->sum.state;
    if (!id) {
        const char *slash = strrchr(run_dir, '/');
        id = slash && slash[1] ? slash + 1 : run_dir;
    }
    struct job *j = out->job = run_replay_job_build(&out->sum, id, err, errlen);
    if (!j) {
        recs_clear(&R);
        free(R.v);
        run_summary_done(&out->sum);
        return -1;
    }
    out->events = out->sum.lines;
    out->bad_lines = out->sum.lines - R.taken;
    struct tails tails = { 0 };
    tails_read(&tails, run_dir, j, &out->log_cut);
    struct metrics_parser *mp = metrics_parser_new(NULL, err, errlen);
    int *by_name = nodes_by_name(j);
    struct player P = { .j = j, .tails = &tails, .mp = mp, .by_name = by_name };
    for (size_t i = 0; i < R.n; i++) play(&P, &R.v[i]);
    run_nccl_load(j, run_dir, j->attempt);   /* the last attempt's NCCL account (docs/nccl.md) */
    out->rank_ended = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *out->rank_ended);
    for (size_t k = 0; k < j->n_ranks; k++)
        out->rank_ended[k] = j->ranks[k].state != RANK_RUNNING && j->ranks[k].state != RANK_STALLED &&
                             j->ranks[k].state != RANK_PENDING;
    /* the end: ranks still running when the controller went away were stopped with it */
    job_ranks_stopped(j);
    job_ended(j, run_replay_job_state(out->state));
    int64_t from = out->sum.start_ns, to = out->sum.end_ns ? out->sum.end_ns : out->sum.last_ns;
    if (from > 0 && to >= from) j->started_ms = j->ended_ms - (to - from) / 1000000;
    metrics_parser_free(mp);
    tails_free(&tails);
    recs_clear(&R);
    free(R.v);
    gpu_read(out, run_dir, by_name);
    free(by_name);
    return 0;
}

void run_replay_done(struct run_replay *r)
{
    free(r->rank_ended);
    job_free(r->job);
    run_summary_done(&r->sum);
    *r = (struct run_replay){ 0 };
}
