/* Unit tests for reading a finished run back into a job model (launcher/record/run_replay.c,
 * `ddptop view`): a failed run (final rank states, exit code, root cause with its last
 * lines, events with their own times and attempts, log lines and the loss series from the
 * step lines), a restarted run (each attempt's lines tagged with it, the second attempt the
 * current one, the first attempt's root cause gone from the header but in the events), GPU
 * samples from gpu.jsonl (ranks as the file says, the utilisation history), a rank log far
 * larger than the ring (only its tail is read, the newest line kept), a reused run id (the
 * newest run shown), and a directory without events.jsonl (an error naming the file). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/job.h"
#include "record/run_replay.h"
#include "tap.h"
#include "job/failure_line.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];

#define EV(time, kind, attempt, extra) \
    "{\"time\":\"2026-11-24T12:00:" time "Z\",\"kind\":\"" kind "\",\"attempt\":" #attempt extra "}\n"
#define LAUNCH(t, a) EV(t, "launch", a, ",\"rank\":null,\"host\":null,\"text\":\"attempt " #a \
    ": launching 2 ranks\",\"ranks\":2,\"hosts\":[\"localhost\"],\"ranks_per_node\":[2]")
#define RANKEV(t, kind, a, r, text) EV(t, kind, a, ",\"rank\":" #r ",\"host\":\"localhost\",\"text\":\"" text "\"")
#define CAUSE(t, a) EV(t, "root_cause", a, ",\"rank\":1,\"host\":\"localhost\",\"text\":" \
    "\"root cause: rank 1 on localhost exited with code 3\",\"exit_code\":3,\"signal\":null," \
    "\"last_lines\":[\"boom\",\"Traceback\"],\"error_file\":null")
#define END(t, a, st, code) EV(t, "end", a, ",\"rank\":null,\"host\":null,\"text\":\"run r " \
    st " (exit code " #code ")\",\"state\":\"" st "\",\"exit_code\":" #code)
#define PLAIN(t, kind, a, text) EV(t, kind, a, ",\"rank\":null,\"host\":null,\"text\":\"" text "\"")

static char *run_path(const char *name)
{
    return xasprintf("%s/%s", tmpdir, name);
}

static void put(const char *dir, const char *rel, const char *text)
{
    char *p = xasprintf("%s/%s", dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    mkdir(p, 0755);
    *slash = '/';
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(p);
}

static const struct log_line *last_line(const struct job *j, int r)
{
    const struct log_ring *ring = &j->ranks[r].log;
    return ring->count ? log_ring_at(ring, ring->count - 1) : NULL;
}

static bool has_event(const struct job *j, enum job_event_kind k, int attempt, const char *text)
{
    for (size_t i = 0; i < j->ev_count; i++) {
        const struct job_event *ev = job_event_at(j, i);
        if (ev->kind == k && ev->attempt == attempt && strstr(ev->text, text)) return true;
    }
    return false;
}

static void test_failed_run(void)
{
    char *dir = run_path("failed");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) RANKEV("01.000", "failure", 0, 1,
        "rank 1 on localhost exited with code 3") CAUSE("01.000", 0)
        RANKEV("01.100", "exit", 0, 0, "rank 0 on localhost stopped (SIGTERM)")
        END("02.500", 0, "failed", 1));
    put(dir, "attempt-0/rank-0.log", "hello 0\n{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":10,"
        "\"loss\":4.5}\nstep 20 loss 3.25\n");
    put(dir, "attempt-0/rank-1.log", "boom\nTraceback");
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    const struct job *j = r.job;
    CHECK(j != NULL);
    if (!j) return;
    CHECK_STR(j->run_id, "failed");
    CHECK_INT(r.state, RUN_FAILED);
    CHECK_INT(j->state, JOB_FAILED);
    CHECK_INT(j->n_ranks, 2);
    CHECK_INT(j->ranks[0].state, RANK_STOPPED);
    CHECK_INT(j->ranks[1].state, RANK_FAILED);
    CHECK_INT(j->ranks[1].exit_code, 3);
    CHECK(j->cause.set);
    CHECK_STR(j->cause.summary, "rank 1 on localhost exited with code 3");
    CHECK_INT(j->cause.rank, 1);
    CHECK_INT(j->cause.n_last_lines, 2);
    CHECK(has_event(j, EV_END, 0, "run r failed"));
    CHECK(has_event(j, EV_FAILURE, 0, "exited with code 3"));
    /* the events keep their own times; the elapsed time is the run's */
    const struct job_event *first = job_event_at(j, 0);
    CHECK(first && first->wall_ns == run_summary_parse_time("2026-11-24T12:00:00.000Z"));
    CHECK_INT(j->ended_ms - j->started_ms, 2500);
    /* logs and metrics: the last step and loss of rank 0, a partial last line of rank 1 */
    CHECK_INT(j->ranks[0].log.count, 3);
    CHECK(j->ranks[0].has_step);
    CHECK_INT(j->ranks[0].step, 20);
    CHECK_NEAR(j->ranks[0].loss, 3.25, 1e-9);
    CHECK_INT(j->ranks[0].series.count, 2);
    const struct log_line *l = last_line(j, 1);
    CHECK(l && l->len == 9 && memcmp(l->text, "Traceback", 9) == 0 && (l->flags & LOG_LINE_PARTIAL));
    run_replay_done(&r);
    free(dir);
}

/* A root cause recorded with its class (docs/failures.md): `ddptop view` shows it again. */
static void test_cause_class(void)
{
    char *dir = run_path("classed");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) RANKEV("01.000", "failure", 0, 0,
        "rank 0 on localhost killed by SIGABRT")
        RANKEV("01.100", "exit", 0, 1, "rank 1 on localhost stopped (SIGTERM)")
        EV("01.100", "root_cause", 0, ",\"rank\":0,\"host\":\"localhost\",\"text\":"
           "\"root cause: rank 0 on localhost killed by SIGABRT\",\"exit_code\":null,\"signal\":\"SIGABRT\","
           "\"last_lines\":[],\"error_file\":null,\"class\":\"collective_timeout\","
           "\"class_label\":\"collective timeout\",\"detail\":\"rank 1 on localhost is 3 collectives behind\","
           "\"evidence\":\"WorkNCCL(SeqNum=1231, OpType=ALLREDUCE)\",\"evidence_rank\":1,\"fix\":\"x\","
           "\"lagging_ranks\":[1,7]")
        END("02.500", 0, "failed", 1));
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    const struct job *j = r.job;
    CHECK(j != NULL);
    if (!j) { free(dir); return; }
    CHECK(j->cause.set);
    CHECK_INT(j->cause.failure, FAILURE_COLLECTIVE_TIMEOUT);
    CHECK_STR(j->cause.detail, "rank 1 on localhost is 3 collectives behind");
    CHECK_STR(j->cause.evidence, "WorkNCCL(SeqNum=1231, OpType=ALLREDUCE)");
    CHECK_INT(j->cause.evidence_rank, 1);
    CHECK(j->cause.fix && strstr(j->cause.fix, "lagging rank"));   /* ours, not the file's */
    CHECK_INT(j->cause.n_lagging, 1);                              /* rank 7 is no rank of it */
    run_replay_done(&r);
    free(dir);
}

static void test_restarted_run(void)
{
    char *dir = run_path("restarted");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) RANKEV("01.000", "failure", 0, 1,
        "rank 1 on localhost killed by SIGSEGV") CAUSE("01.000", 0)
        RANKEV("01.100", "exit", 0, 0, "rank 0 on localhost exited with code 0")
        PLAIN("01.200", "restart", 1, "restarting (after a failure): attempt 1") LAUNCH("01.300", 1)
        RANKEV("03.000", "exit", 1, 0, "rank 0 on localhost exited with code 0")
        RANKEV("03.000", "exit", 1, 1, "rank 1 on localhost exited with code 0")
        PLAIN("03.000", "done", 1, "all 2 ranks exited with code 0 (attempt 1)")
        END("03.000", 1, "succeeded", 0));
    put(dir, "attempt-0/rank-0.log", "a0 r0\n");
    put(dir, "attempt-0/rank-1.log", "a0 r1\n");
    put(dir, "attempt-1/rank-0.log", "a1 r0\nloss 1.5\n");
    put(dir, "attempt-1/rank-1.log", "a1 r1\n");
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, "restarted", OWNER_GONE, &r, err, sizeof err), 0);
    const struct job *j = r.job;
    if (!j) return;
    CHECK_INT(j->state, JOB_DONE);
    CHECK_INT(j->attempt, 1);
    CHECK_INT(j->ranks[1].state, RANK_EXITED);
    CHECK_INT(j->nodes[0].state, NODE_DONE);
    CHECK(!j->cause.set);                       /* the current attempt succeeded */
    CHECK(has_event(j, EV_ROOT_CAUSE, 0, "rank 1"));
    CHECK_INT(j->ranks[0].log.count, 3);
    const struct log_line *l0 = log_ring_at(&j->ranks[0].log, 0), *l2 = last_line(j, 0);
    CHECK(l0 && l0->attempt == 0 && memcmp(l0->text, "a0 r0", 5) == 0);
    CHECK(l2 && l2->attempt == 1 && memcmp(l2->text, "loss 1.5", 8) == 0);
    CHECK_NEAR(j->ranks[0].loss, 1.5, 1e-9);
    run_replay_done(&r);
    free(dir);
}

static void test_gpu_samples(void)
{
    char *dir = run_path("gpus");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) END("05.000", 0, "succeeded", 0));
    put(dir, "gpu.jsonl",
        "{\"time\":\"2026-11-24T12:00:01.000Z\",\"attempt\":0,\"host\":\"localhost\",\"gpus\":["
        "{\"index\":0,\"rank\":0,\"util\":40},{\"index\":1,\"rank\":1,\"util\":50}]}\n"
        "not json\n"
        "{\"time\":\"2026-11-24T12:00:02.000Z\",\"attempt\":0,\"host\":\"localhost\",\"gpus\":["
        "{\"index\":0,\"rank\":0,\"util\":90,\"temp_c\":71,\"throttle\":64},{\"index\":1,\"util\":60}]}\n"
        "{\"time\":\"2026-11-24T12:00:03.000Z\",\"host\":\"localh");    /* being written */
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    const struct job *j = r.job;
    if (!j) return;
    CHECK_INT(r.gpu_samples, 2);
    CHECK_INT(r.bad_lines, 1);
    const struct node_gpus *ng = &j->nodes[0].gpus;
    CHECK(ng->seen);
    CHECK_INT(ng->n, 2);
    CHECK_INT(ng->g[0].rank, 0);
    CHECK_INT(ng->g[0].hist_n, 2);
    CHECK_INT(ng->g[0].hist[1], 90);
    CHECK_NEAR(ng->g[0].temp_c, 71, 1e-9);
    CHECK(ng->g[0].has_throttle && ng->g[0].throttle == 64);
    CHECK_INT(ng->g[1].rank, -1);
    CHECK_INT(j->ranks[0].gpu, 0);
    run_replay_done(&r);
    free(dir);
}

/* A rank log of 20 MiB: only the tail the ring keeps is read. */
static void test_large_log_tail(void)
{
    char *dir = run_path("large");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) END("09.000", 0, "succeeded", 0));
    put(dir, "attempt-0/rank-1.log", "");
    char *p = xasprintf("%s/attempt-0/rank-0.log", dir);
    FILE *f = fopen(p, "w");
    free(p);
    if (!f) { CHECK(f != NULL); return; }
    for (long i = 1; i <= 400000; i++) fprintf(f, "line %07ld of a long log, with some padding text\n", i);
    fputs("the very last line\n", f);
    fclose(f);
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    const struct job *j = r.job;
    if (!j) return;
    CHECK(r.log_cut);
    CHECK(j->ranks[0].log.bytes <= j->log_max_bytes);
    CHECK(j->ranks[0].log.count <= j->log_max_lines && j->ranks[0].log.count > 100);
    const struct log_line *l = last_line(j, 0);
    CHECK(l && l->len == 18 && memcmp(l->text, "the very last line", 18) == 0);
    /* the oldest kept line is a whole one */
    const struct log_line *o = log_ring_at(&j->ranks[0].log, 0);
    CHECK(o && strncmp(o->text, "line ", 5) == 0);
    run_replay_done(&r);
    free(dir);
}

static void test_reused_id_and_missing(void)
{
    char *dir = run_path("reused");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) CAUSE("01.000", 0) END("02.000", 0, "failed", 1)
        LAUNCH("10.000", 0) PLAIN("11.000", "done", 0, "all 2 ranks exited with code 0 (attempt 0)")
        END("11.000", 0, "succeeded", 0));
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    if (r.job) {
        CHECK_INT(r.job->state, JOB_DONE);
        CHECK(!has_event(r.job, EV_ROOT_CAUSE, 0, "rank 1"));
        CHECK_INT(r.job->ended_ms - r.job->started_ms, 1000);
    }
    run_replay_done(&r);
    free(dir);
    dir = run_path("no-events");
    mkdir(dir, 0755);
    CHECK_INT(run_replay_load(dir, NULL, OWNER_NONE, &r, err, sizeof err), -1);
    CHECK(strstr(err, "no-events/events.jsonl") != NULL);
    CHECK(r.job == NULL);
    free(dir);
}

/* A gpu.jsonl line of more GPUs than a node reports is not a sample (the node keeps the
 * sample before it); counts that do not fit are left unknown, not cast; a host no longer in
 * the run is no error. */
static void test_gpu_line_bounds(void)
{
    char *dir = run_path("gpu-bounds");
    mkdir(dir, 0755);
    put(dir, "events.jsonl", LAUNCH("00.000", 0) END("05.000", 0, "succeeded", 0));
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "{\"host\":\"localhost\",\"gpus\":[{\"index\":0,\"throttle\":1e30,"
                "\"ecc_uncorrected\":3}]}\n");
    strbuf_adds(&sb, "{\"host\":\"localhost\",\"gpus\":[");
    for (int i = 0; i < RUN_REPLAY_GPUS_MAX + 1; i++) strbuf_addf(&sb, "%s{\"index\":%d}", i ? "," : "", i);
    strbuf_adds(&sb, "]}\n{\"host\":\"zz\",\"gpus\":[]}\n");
    put(dir, "gpu.jsonl", sb.buf);
    strbuf_done(&sb);
    struct run_replay r;
    char err[256] = "";
    CHECK_INT(run_replay_load(dir, NULL, OWNER_GONE, &r, err, sizeof err), 0);
    if (r.job) {
        CHECK_INT(r.gpu_samples, 2);            /* the first line and the host not in the run */
        CHECK_INT(r.bad_lines, 1);              /* 65 GPUs */
        const struct node_gpus *ng = &r.job->nodes[0].gpus;
        CHECK_INT(ng->n, 1);
        if (ng->n == 1) {
            CHECK(!ng->g[0].has_throttle);
            CHECK(ng->g[0].has_ecc && ng->g[0].ecc == 3);
        }
    }
    run_replay_done(&r);
    free(dir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-replay.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_failed_run);
    RUN(test_cause_class);
    RUN(test_restarted_run);
    RUN(test_gpu_samples);
    RUN(test_large_log_tail);
    RUN(test_reused_id_and_missing);
    RUN(test_gpu_line_bounds);
    tmptree_remove(tmpdir);
    return tap_done();
}
