/* Unit tests for launcher/job/failure_line.c and failure_class.c: each class from the exact
 * lines of PyTorch, gloo, NCCL and Slurm (tests/fixtures/failures/, each citing its source),
 * played into a job of four nodes 10.0.0.1-4 (one rank each) and ended as the failure ends:
 * the class, the evidence line and its rank, what it found (the rank behind, the peer's
 * node, the user's frame), the fix; the watchdog's sequence numbers naming rank 3 three
 * collectives behind; the OOM kill confirmed only by the cgroup's count; a hang's root cause
 * with the same analysis; the class written once, when the attempt's ranks have ended. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/failure_class.h"
#include "job/failure_line.h"
#include "job/job.h"
#include "job/rank_report.h"
#include "job/root_cause.h"
#include "tap.h"
#include "util/util.h"

#define FIXTURES "tests/fixtures/failures/"

static char err[256];

static struct job *job4(void)
{
    const char *names[] = { "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4" };
    int per[] = { 1, 1, 1, 1 };
    struct job *j = job_new("fc", NULL, 0, names, NULL, per, 4, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) { printf("# %s\n", err); return j; }
    for (int r = 0; r < 4; r++) job_rank_started(j, r, 100 + r);
    j->state = JOB_RUNNING;
    return j;
}

/* Plays a fixture's lines into j's ranks; false when it cannot be read. */
static bool play(struct job *j, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s", name);
    FILE *f = fopen(path, "r");
    if (!f) { printf("# cannot read %s (run from the repository root)\n", path); return false; }
    char line[8192];
    int rank = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        line[n] = '\0';
        if (line[0] == '#') continue;
        if (strncmp(line, "@rank ", 6) == 0) { rank = atoi(line + 6); continue; }
        job_log_append(j, rank, LOG_STDERR, 0, line, n);
    }
    fclose(f);
    return true;
}

static const struct job_event *cause_event(const struct job *j)
{
    for (size_t i = 0; i < j->ev_count; i++)
        if (job_event_at(j, i)->kind == EV_ROOT_CAUSE) return job_event_at(j, i);
    return NULL;
}

static void test_watchdog_rank3_behind(void)
{
    struct job *j = job4();
    if (!j || !play(j, "watchdog_rank3_behind.txt")) { CHECK(0); job_free(j); return; }
    /* rank 0 aborts first (SIGABRT after the watchdog); rank 3 has not ended: no class yet */
    job_rank_exited(j, 0, 0, SIGABRT, false, NULL, 0);
    CHECK(j->cause.set && j->cause.pending);
    CHECK(cause_event(j) == NULL);
    CHECK(!root_cause_tick(j, 1000));            /* starts the bounded wait */
    CHECK(!root_cause_tick(j, 1000 + ROOT_CAUSE_SETTLE_MS - 1));
    job_rank_exited(j, 1, 0, SIGABRT, false, NULL, 0);
    job_rank_exited(j, 2, 0, SIGTERM, true, NULL, 0);
    CHECK(cause_event(j) == NULL);
    job_rank_exited(j, 3, 0, SIGTERM, true, NULL, 0);   /* the last one: it settles */
    CHECK(!j->cause.pending);
    CHECK(cause_event(j) != NULL);
    const struct root_cause *c = &j->cause;
    CHECK_STR(failure_class_name(c->failure), "collective_timeout");
    CHECK_STR(c->detail, "rank 3 on 10.0.0.4 is 3 collectives behind (last SeqNum 1231, the others 1234, "
              "ALLREDUCE)");
    CHECK_INT(c->n_lagging, 1);
    if (c->n_lagging) CHECK_INT(c->lagging[0], 3);
    CHECK_INT(c->evidence_rank, 3);
    CHECK(c->evidence && strstr(c->evidence, "WorkNCCL(SeqNum=1231, OpType=BROADCAST"));
    CHECK(c->fix && strstr(c->fix, "lagging rank"));
    job_free(j);
    /* the bounded wait: a rank that never ends does not hold the class back */
    j = job4();
    if (!j || !play(j, "watchdog_rank3_behind.txt")) { CHECK(0); job_free(j); return; }
    job_rank_exited(j, 1, 0, SIGABRT, false, NULL, 0);
    CHECK(!root_cause_tick(j, 5000));
    CHECK(root_cause_tick(j, 5000 + ROOT_CAUSE_SETTLE_MS));
    CHECK_STR(failure_class_name(j->cause.failure), "collective_timeout");
    CHECK(j->cause.detail && strstr(j->cause.detail, "rank 3 on 10.0.0.4 is 3 collectives behind"));
    job_free(j);
}

static void test_seq_lines(void)
{
    struct watchdog_seq q;
    const char *l = "[PG ID 0 PG GUID 0(default_pg) Rank 5] Exception (either an error or timeout) detected by "
                    "watchdog at work: 32, last enqueued NCCL work: 33, last completed NCCL work: 31.";
    CHECK(failure_line_watchdog(l, strlen(l), &q));
    CHECK_INT(q.seq, 32);
    CHECK_INT(q.enqueued, 33);
    CHECK_INT(q.completed, 31);
    l = "step 12 loss 0.5";
    CHECK(!failure_line_watchdog(l, strlen(l), &q));
    char addr[64];
    l = "n1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.3<45678> with error 12, opcode 0";
    CHECK(failure_line_peer(l, strlen(l), addr, sizeof addr));
    CHECK_STR(addr, "10.0.0.3");
    l = "Connection closed by peer [::1]:5000";
    CHECK(failure_line_peer(l, strlen(l), addr, sizeof addr));
    CHECK_STR(addr, "::1");
    l = "NCCL version 2.19.3 ProcessGroupNCCL.cpp:1970";
    CHECK(!failure_line_peer(l, strlen(l), addr, sizeof addr));
    bool user;
    l = "[rank0]:   File \"/home/u/train.py\", line 42, in step";
    CHECK(failure_line_frame(l, strlen(l), &user) && user);
    l = "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 1, in f";
    CHECK(failure_line_frame(l, strlen(l), &user) && !user);
    CHECK(failure_line_exception("ValueError: x", 13));
    CHECK(failure_line_exception("torch.distributed.DistBackendError: x", 37));
    CHECK(!failure_line_exception("step 12: Error", 14));
    CHECK(!failure_line_exception("  File x", 8));
    l = "gpu1:1:2 [0] NCCL WARN socketProgress: Connection closed by remote peer gpu2.cluster<50233>";
    CHECK(failure_line_peer(l, strlen(l), addr, sizeof addr));
    CHECK_STR(addr, "gpu2.cluster");
    CHECK_INT(failure_class_parse("collective_timeout"), FAILURE_COLLECTIVE_TIMEOUT);
    CHECK_INT(failure_class_parse("nonsense"), FAILURE_NONE);
}

struct expect {
    const char *fixture;
    int rank, code, sig, oom_kills;
    const char *cls;          /* failure_class_name */
    const char *evidence;     /* a part of the evidence line; NULL: none */
    int evidence_rank;
    const char *detail;       /* a part of the detail; NULL: no detail */
};

static void check_one(const struct expect *e)
{
    struct job *j = job4();
    if (!j || !play(j, e->fixture)) { CHECK(0); job_free(j); return; }
    j->ranks[e->rank].oom_kills = e->oom_kills;
    job_rank_exited(j, e->rank, e->code, e->sig, false, NULL, 0);
    for (int r = 0; r < 4; r++)
        if (r != e->rank) job_rank_exited(j, r, 0, SIGTERM, true, NULL, 0);
    const struct root_cause *c = &j->cause;
    printf("# %s: %s | %s | %s\n", e->fixture, failure_class_name(c->failure), c->detail ? c->detail : "-",
           c->evidence ? c->evidence : "-");
    CHECK(!c->pending && cause_event(j) != NULL);
    CHECK_STR(failure_class_name(c->failure), e->cls);
    if (e->evidence) {
        CHECK(c->evidence && strstr(c->evidence, e->evidence));
        CHECK_INT(c->evidence_rank, e->evidence_rank);
    } else {
        CHECK(c->evidence == NULL);
    }
    if (e->detail) CHECK(c->detail && strstr(c->detail, e->detail));
    else CHECK(c->detail == NULL);
    CHECK(c->fix && *c->fix);
    job_free(j);
}

static void test_each_class(void)
{
    static const struct expect cases[] = {
        { "cuda_oom.txt", 1, 1, 0, -1, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
          1, "File \"/home/u/model.py\", line 21, in forward" },
        { "cuda_oom_old.txt", 2, 1, 0, -1, "cuda_oom", "RuntimeError: CUDA out of memory. Tried", 2, NULL },
        { "cuda_oom_old.txt", 3, 1, 0, -1, "cuda_oom", "RuntimeError: CUDA error: out of memory", 3, NULL },
        { "nccl_ib_error.txt", 1, 1, 0, -1, "nccl_error", "NET/IB : Got completion from peer 10.0.0.3<45678> with error 12",
          1, "IB completion error between 10.0.0.2 (rank 1) and 10.0.0.3 (peer 10.0.0.3, rank 2)" },
        { "nccl_system_error.txt", 2, 1, 0, -1, "nccl_error", "unhandled system error", 2,
          "File \"/home/u/train.py\", line 12, in <module>" },
        { "gloo_reset.txt", 0, 1, 0, -1, "connection_reset", "Connection closed by peer [10.0.0.2]:47913", 0,
          "rank 0 on 10.0.0.1 lost its connection to peer 10.0.0.2: node 10.0.0.2, rank 1" },
        { "gloo_read_reset.txt", 3, 1, 0, -1, "connection_reset", "Connection reset by peer", 3, "node 10.0.0.1, rank 0" },
        { "nccl_socket_reset.txt", 2, 1, 0, -1, "connection_reset",
          "NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.4<50233>", 2,
          "rank 2 on 10.0.0.3 lost its connection to peer 10.0.0.4: node 10.0.0.4, rank 3" },
        { "python_exception.txt", 2, 1, 0, -1, "python_exception", "ValueError: Expected input batch_size (32)", 2,
          "File \"/home/u/train.py\", line 42, in step" },
        { "disk_full.txt", 0, 1, 0, -1, "disk_full", "OSError: [Errno 28] No space left on device", 0,
          "File \"/home/u/train.py\", line 120, in save_snapshot" },
        { "disk_full_echo.txt", 1, 1, 0, -1, "disk_full", "OSError: [Errno 28] No space left on device: '/ckpt/x.pt'", 1,
          "File \"/home/u/train.py\", line 3, in save" },
        { "slurm_cancel.txt", 1, 0, SIGTERM, -1, "preempted", "CANCELLED AT 2026-11-25T10:00:00 DUE TO TIME LIMIT", 1,
          "the job's time limit" },
        { "segfault.txt", 3, 0, SIGSEGV, -1, "segfault", "Fatal Python error: Segmentation fault", 3, "SIGSEGV" },
        { "segfault.txt", 3, 135, 0, -1, "segfault", "Fatal Python error: Segmentation fault", 3, "SIGBUS" },
        /* SIGKILL not sent by us: the OOM killer, confirmed by the cgroup's count, or likely */
        { "segfault.txt", 0, 0, SIGKILL, 2, "oom_kill", NULL, -1, "confirmed: its memory cgroup counted 2 OOM kills" },
        { "segfault.txt", 0, 0, SIGKILL, -1, "oom_kill", NULL, -1, "likely" },
        { "segfault.txt", 0, 137, 0, -1, "oom_kill", NULL, -1, "likely" },
        { "segfault.txt", 0, 0, SIGKILL, 0, "unknown", NULL, -1, "not the OOM killer" },
        { "segfault.txt", 0, 0, SIGTERM, -1, "preempted", NULL, -1, "likely: SIGTERM not sent by ddptop" },
        /* a configuration error, not NCCL's or the network's: ranks against GPUs */
        { "config_gpus.txt", 1, 2, 0, -1, "configuration", "NCCL needs a GPU for every rank", 1, NULL },
        { "duplicate_gpu.txt", 1, 1, 0, -1, "configuration",
          "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device", 1,
          "File \"/home/u/train.py\", line 14, in <module>" },
        /* nothing that tells: unknown, today's lines */
        { "segfault.txt", 1, 3, 0, -1, "unknown", NULL, -1, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_one(&cases[i]);
}

/* The error file (PyTorch's @record) tells when the rank's lines do not. */
static void test_error_file(void)
{
    struct job *j = job4();
    if (!j) { CHECK(0); return; }
    const char *ef = "{\"message\":{\"message\":\"OSError: [Errno 28] No space left on device\","
                     "\"extraInfo\":{\"py_callstack\":\"Traceback\",\"timestamp\":\"1\"}}}";
    job_rank_exited(j, 2, 1, 0, false, ef, strlen(ef));
    root_cause_settle(j);
    CHECK_STR(failure_class_name(j->cause.failure), "disk_full");
    CHECK_STR(j->cause.evidence, "OSError: [Errno 28] No space left on device");
    job_free(j);
}

/* A hang (--on-hang) with the watchdog's lines: the same analysis, the class "hang". */
static void test_hang_seq(void)
{
    struct job *j = job4();
    if (!j || !play(j, "watchdog_rank3_behind.txt")) { CHECK(0); job_free(j); return; }
    CHECK(root_cause_hang(j, 3, 20000, "rank 3 in data loader"));
    CHECK_STR(failure_class_name(j->cause.failure), "hang");
    CHECK(j->cause.detail && strstr(j->cause.detail, "rank 3 on 10.0.0.4 is 3 collectives behind"));
    CHECK_INT(j->cause.n_lagging, 1);
    job_free(j);
    /* without them: where the ranks are */
    j = job4();
    CHECK(root_cause_hang(j, 1, 20000, "rank 1 in freeze (job.py)"));
    CHECK(j->cause.detail == NULL);
    CHECK(strstr(j->cause.summary, "rank 1 in freeze (job.py)") != NULL);
    CHECK_INT(j->cause.n_lagging, 0);
    job_free(j);
}

/* Many ranks behind: the first few named, their count, every one in lagging_ranks. */
static void test_many_behind(void)
{
    enum { N = 40 };
    const char *names[] = { "n1", "n2", "n3", "n4" };
    int per[] = { N / 4, N / 4, N / 4, N / 4 };
    struct job *j = job_new("many", NULL, 0, names, NULL, per, 4, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) { CHECK(0); job_free(j); return; }
    char line[256];
    for (int r = 0; r < N; r++) {
        job_rank_started(j, r, 100 + r);
        int n = snprintf(line, sizeof line, "[Rank %d] Watchdog caught collective operation timeout: "
                         "WorkNCCL(SeqNum=%d, OpType=ALLGATHER, NumelIn=1, NumelOut=1, Timeout(ms)=1000) ran for "
                         "1001 milliseconds before timing out.", r, r < 30 ? 7 : 9);
        job_log_append(j, r, LOG_STDERR, 0, line, (size_t)n);
    }
    job_rank_exited(j, 35, 0, SIGABRT, false, NULL, 0);
    root_cause_settle(j);
    CHECK_STR(failure_class_name(j->cause.failure), "collective_timeout");
    CHECK_INT(j->cause.n_lagging, 30);
    CHECK(j->cause.detail && strstr(j->cause.detail, "ranks 0 (n1), 1 (n1)") &&
          strstr(j->cause.detail, " and 22 more are behind (last SeqNum 7, 7") &&
          strstr(j->cause.detail, "; the others 9, ALLGATHER)"));
    CHECK(j->cause.detail && strlen(j->cause.detail) < 300);
    job_free(j);
}

/* A peer's address or host name to the job's node. */
static void test_node_of_addr(void)
{
    const char *names[] = { "gpu1", "gpu2.cluster.example", "10.0.0.3" };
    int per[] = { 1, 1, 1 };
    struct job *j = job_new("na", NULL, 0, names, NULL, per, 3, err, sizeof err);
    if (!j) { CHECK(0); return; }
    CHECK_INT(failure_node_of_addr(j, "gpu1.cluster"), 0);    /* NCCL's resolved name */
    CHECK_INT(failure_node_of_addr(j, "gpu2"), 1);
    CHECK_INT(failure_node_of_addr(j, "10.0.0.3"), 2);
    CHECK_INT(failure_node_of_addr(j, "10.0.0.30"), -1);
    CHECK_INT(failure_node_of_addr(j, "10"), -1);
    CHECK_INT(failure_node_of_addr(j, "127.0.0.1"), -1);       /* no local node in this job */
    job_node_address(j, 0, "192.168.7.21");                     /* where its agent was reached */
    CHECK_INT(failure_node_of_addr(j, "192.168.7.21"), 0);
    job_free(j);
}

/* Node and scheduler causes are classed at once. */
static void test_told(void)
{
    struct job *j = job4();
    CHECK(root_cause_scheduler(j, 1, "Slurm stopped the job on 10.0.0.2 with SIGTERM"));
    CHECK_STR(failure_class_name(j->cause.failure), "preempted");
    CHECK(cause_event(j) != NULL);
    job_free(j);
    j = job4();
    CHECK(root_cause_node(j, 2, "no heartbeat for 10 s"));
    CHECK_STR(failure_class_name(j->cause.failure), "node_lost");
    job_free(j);
}

/* Configuration errors by their own lines; each a line a user's run prints, not a near miss. */
static void test_config_lines(void)
{
    static const char *const yes[] = {
        "RuntimeError: CUDA error: invalid device ordinal",
        "ddptop-train rank 0: --device cuda: no CUDA device visible (no driver; CUDA_VISIBLE_DEVICES=unset): use --device cpu",
        "Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 41000",
    };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK_STR(failure_class_name(failure_line_class(yes[i], strlen(yes[i]))), "configuration");
    const char *nccl = "RuntimeError: NCCL error in: x.cpp:1, unhandled system error";
    CHECK_STR(failure_class_name(failure_line_class(nccl, strlen(nccl))), "nccl_error");
    CHECK_STR(failure_class_label(FAILURE_CONFIG), "configuration error");
    CHECK(failure_class_parse("configuration") == FAILURE_CONFIG);
    CHECK(strstr(failure_class_fix(FAILURE_CONFIG), "--device cpu") != NULL);
}

int main(void)
{
    RUN(test_config_lines);
    RUN(test_seq_lines);
    RUN(test_watchdog_rank3_behind);
    RUN(test_each_class);
    RUN(test_error_file);
    RUN(test_hang_seq);
    RUN(test_many_behind);
    RUN(test_node_of_addr);
    RUN(test_told);
    return tap_done();
}
