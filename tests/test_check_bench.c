/* Unit tests for the measured preflight (check/check_bench.h): the plan (every node sends to and
 * hears from two peers or more, no node twice in a round, a few rounds whatever the size, the
 * same for a seed), the run driven with made-up agents' answers (rounds one after the other,
 * the host figures last, a lost node and a silent one end what they had in flight), and the
 * verdicts: the slow node named with its figure and the median (not its neighbours), a slow link
 * between good nodes, a long round trip, a slow GPU against its model's median, CPU memory, and
 * the words of nodes that pass being the same shape (they fold); NCCL's world and pairs (the
 * slow node bisected out of its pairs, a slow pair between good nodes, a slow world with fast
 * pairs, a failed init that stops the others and leaves the node out of the pairs). The real
 * agents' side: tests/it_check_bench.sh, tests/it_check_nccl.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_bench.h"
#include "check/check_fold.h"
#include "tap.h"
#include "util/util.h"

/* ---- the plan ---- */

static void test_plan_shape(void)
{
    for (size_t na = 1; na <= 70; na++) {
        struct check_bench_xfer *x;
        int rounds;
        size_t n = check_bench_plan(na, 1234 + na, &x, &rounds);
        size_t *out = xcalloc(na, sizeof *out), *in = xcalloc(na, sizeof *in);
        bool ok = true;
        for (size_t k = 0; k < n; k++) {
            ok &= x[k].src != x[k].dst && x[k].src < na && x[k].dst < na;
            out[x[k].src]++;
            in[x[k].dst]++;
            for (size_t j = 0; j < k; j++) {
                ok &= !(x[j].src == x[k].src && x[j].dst == x[k].dst);
                if (x[j].round == x[k].round)
                    ok &= x[j].src != x[k].src && x[j].src != x[k].dst && x[j].dst != x[k].src && x[j].dst != x[k].dst;
            }
        }
        for (size_t i = 0; i < na && na >= 3; i++) ok &= out[i] >= 2 && in[i] >= 2 && out[i] <= 3 && in[i] <= 3;
        if (na == 1) ok &= n == 0;
        if (na == 2) ok &= n == 2 && rounds == 2;
        ok &= n <= 3 * na && rounds <= 11;
        if (!ok) printf("# plan for %zu nodes: %zu transfers, %d rounds\n", na, n, rounds);
        CHECK(ok);
        /* the same seed, the same plan */
        struct check_bench_xfer *y;
        int r2;
        size_t n2 = check_bench_plan(na, 1234 + na, &y, &r2);
        CHECK(n2 == n && r2 == rounds);
        for (size_t k = 0; k < n && k < n2; k++) CHECK(x[k].src == y[k].src && x[k].dst == y[k].dst && x[k].round == y[k].round);
        free(x);
        free(y);
        free(out);
        free(in);
    }
    /* a thousand nodes: still a handful of rounds */
    struct check_bench_xfer *x;
    int rounds;
    size_t n = check_bench_plan(1024, 7, &x, &rounds);
    CHECK(n >= 2 * 1024 && n <= 3 * 1024 && rounds <= 8);
    free(x);
}

/* ---- made-up agents ---- */

struct sent {
    size_t node;
    char op[32];
    int tag;
    cJSON *msg;
};

static struct sent log_[4096];
static size_t n_log;

static cJSON *fake_request(void *ctx, size_t node, const char *op, int tag)
{
    (void)ctx;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "op", op);
    if (n_log < sizeof log_ / sizeof *log_) {
        log_[n_log] = (struct sent){.node = node, .tag = tag, .msg = NULL};
        snprintf(log_[n_log].op, sizeof log_[n_log].op, "%s", op);
        n_log++;
    }
    return m;
}

static void fake_send(void *ctx, size_t node, cJSON *msg)
{
    (void)ctx;
    (void)node;
    if (n_log) log_[n_log - 1].msg = msg; /* the request just made */
    else cJSON_Delete(msg);
}

static void log_clear(void)
{
    for (size_t k = 0; k < n_log; k++) cJSON_Delete(log_[k].msg);
    n_log = 0;
}

static void answer(struct check_bench *b, size_t node, int tag, const char *ev, const char *json)
{
    struct wire_msg m = {.json = cJSON_Parse(json), .ev = ev, .tag = tag};
    CHECK(m.json != NULL);
    check_bench_message(b, node, &m);
    cJSON_Delete(m.json);
}

#define N 6
static const char *const names[N] = {"n0", "n1", "n2", "n3", "n4", "n5"};
static const char *const addrs[N] = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"};

/* The figure of a transfer between a and b in the scenario: n3 is slow (50 Mb/s), the link
 * n0 <-> n1 is slow both ways, the rest 9.4 Gb/s; n5's round trips are 20 ms. */
static double scenario_gbps(size_t a, size_t b)
{
    if (a == 3 || b == 3) return 0.05;
    if ((a == 0 && b == 1) || (a == 1 && b == 0)) return 1.1;
    return 9.4 + 0.01 * (double)(a + b);
}

static void run_scenario(struct check_bench *b, bool lose_n4)
{
    char json[512];
    /* listeners */
    for (size_t k = 0; k < n_log; k++)
        if (strcmp(log_[k].op, "bench_listen") == 0) {
            snprintf(json, sizeof json, "{\"ev\":\"bench_listening\",\"port\":%zu}", 40000 + log_[k].node);
            answer(b, log_[k].node, log_[k].tag, "bench_listening", json);
        }
    /* rounds: answer what was sent, until the host requests come */
    for (int guard = 0; guard < 40; guard++) {
        bool any = false;
        struct sent pending[64];
        size_t np = 0;
        /* the requests not answered yet move here (and are no longer "bench_send" in the log) */
        for (size_t k = 0; k < n_log; k++)
            if (strcmp(log_[k].op, "bench_send") == 0 && np < 64) {
                pending[np++] = log_[k];
                log_[k].msg = NULL;
                snprintf(log_[k].op, sizeof log_[k].op, "done");
            }
        for (size_t k = 0; k < np; k++) {
            size_t src = pending[k].node, dst = 0;
            const char *a = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pending[k].msg, "address"));
            for (size_t j = 0; j < N; j++)
                if (a && strcmp(a, addrs[j]) == 0) dst = j;
            if (lose_n4 && (src == 4 || dst == 4)) continue; /* n4 goes silent: never answered */
            double g = scenario_gbps(src, dst), rtt = (src == 5 || dst == 5) ? 20000 : 110;
            snprintf(json, sizeof json, "{\"ev\":\"bench_sent\",\"bytes\":%.0f,\"seconds\":1.0,\"rtt_us\":%g,\"gbps\":%g}",
                     g * 1.25e8, rtt, g);
            answer(b, src, pending[k].tag, "bench_sent", json);
            any = true;
        }
        for (size_t k = 0; k < np; k++) cJSON_Delete(pending[k].msg);
        if (lose_n4 && !any) break;
        if (!any) break;
    }
}

static const char *host_nccl = "null";   /* bench_host's "nccl": null, or a version in quotes */

static void host_answers(struct check_bench *b)
{
    char json[1024];
    for (size_t k = 0; k < n_log; k++) {
        if (strcmp(log_[k].op, "bench_host") != 0) continue;
        size_t i = log_[k].node;
        snprintf(json, sizeof json,
                 "{\"ev\":\"bench_host\",\"cpu_mem_gbs\":%g,\"gpus\":["
                 "{\"index\":0,\"name\":\"Fake H100\",\"tf32_tflops\":300,\"bf16_tflops\":700,\"d2d_gbs\":2500,\"h2d_gbs\":50,\"error\":null},"
                 "{\"index\":1,\"name\":\"Fake H100\",\"tf32_tflops\":%g,\"bf16_tflops\":%g,\"d2d_gbs\":2500,\"h2d_gbs\":50,\"error\":null}],"
                 "\"gpu_error\":null,\"nccl\":%s}",
                 i == 0 ? 2.0 : 12.0, i == 2 ? 90.0 : 300.0, i == 2 ? 210.0 : 700.0, host_nccl);
        answer(b, i, log_[k].tag, "bench_host", json);
    }
}

static const struct check_result *bench_of(const struct check_report *r, size_t i)
{
    return &r->rows[i].checks[CHECK_BENCH];
}

static void test_run_and_verdicts(void)
{
    struct node_opts o;
    struct check_bench_io io = {.request = fake_request, .send = fake_send};
    bool alive[N] = {true, true, true, true, true, true};
    node_opts_init(&o);
    o.bench = true;
    struct check_bench *b = check_bench_new(&o, N, alive, addrs, 99, &io);
    check_bench_start(b, 0);
    size_t listens = 0;
    for (size_t k = 0; k < n_log; k++) listens += strcmp(log_[k].op, "bench_listen") == 0;
    CHECK_INT(listens, N);
    run_scenario(b, false);
    CHECK(!check_bench_done(b));
    size_t hosts = 0, unlistens = 0;
    for (size_t k = 0; k < n_log; k++) {
        hosts += strcmp(log_[k].op, "bench_host") == 0;
        unlistens += strcmp(log_[k].op, "bench_unlisten") == 0;
    }
    CHECK_INT(hosts, N);
    CHECK_INT(unlistens, N); /* the listeners close before the GPUs are measured */
    host_answers(b);
    CHECK(check_bench_done(b));

    struct check_report r;
    check_report_init(&r, N);
    for (size_t i = 0; i < N; i++) check_row_set_host(&r.rows[i], names[i], addrs[i], 22);
    check_bench_evaluate(b, &r, names);
    CHECK(r.bench && r.bench_doc);
    /* n3 slow, named with its figure and the median; its neighbours are not */
    CHECK_INT(bench_of(&r, 3)->status, CHECK_FAIL);
    CHECK(strstr(bench_of(&r, 3)->detail, "0.050 Gb/s to and from its peers, median 9.4") != NULL);
    CHECK(bench_of(&r, 3)->hint && strstr(bench_of(&r, 3)->hint, "NIC"));
    CHECK(bench_of(&r, 2)->status != CHECK_FAIL || strstr(bench_of(&r, 2)->detail, "GPU 1"));
    CHECK(strstr(bench_of(&r, 4)->detail, "Gb/s to and from its peers") == NULL ||
          bench_of(&r, 4)->status == CHECK_PASS);
    /* the slow link n0 <-> n1, on both ends */
    CHECK(strstr(bench_of(&r, 0)->detail, "slow link") && strstr(bench_of(&r, 0)->detail, "n1"));
    CHECK(strstr(bench_of(&r, 1)->detail, "slow link") && strstr(bench_of(&r, 1)->detail, "n0"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.bench_doc, "slow_links")) >= 1);
    /* n5's round trips */
    CHECK_INT(bench_of(&r, 5)->status, CHECK_WARN);
    CHECK(strstr(bench_of(&r, 5)->detail, "20.0 ms round trip to its peers, median 0.110 ms") != NULL);
    /* n2's second GPU against the median of the 12 Fake H100 */
    CHECK_INT(bench_of(&r, 2)->status, CHECK_FAIL);
    CHECK(strstr(bench_of(&r, 2)->detail,
                 "GPU 1: tf32 90.0 TFLOP/s (median 300), bf16 210 TFLOP/s (median 700); of 12 Fake H100") != NULL);
    /* n0's memory */
    CHECK(strstr(bench_of(&r, 0)->detail, "CPU memory 2.00 GB/s, median 12.0 GB/s") != NULL);
    /* n4 passes, with its figures */
    if (bench_of(&r, 4)->status != CHECK_PASS) printf("# n4: %s\n", bench_of(&r, 4)->detail);
    CHECK_INT(bench_of(&r, 4)->status, CHECK_PASS);
    CHECK(strstr(bench_of(&r, 4)->detail, "Gb/s to and from its peers, round trip") != NULL);
    CHECK(strstr(bench_of(&r, 4)->detail, "2 GPUs, 700 TFLOP/s each") != NULL);
    /* --json: the figures per node and per transfer */
    cJSON *doc = check_report_json(&r);
    cJSON *h3 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "hosts"), 3);
    cJSON *bj = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h3, "checks"), "bench");
    CHECK(bj && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bj, "slow")));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(bj, "transfers")) >= 2);
    CHECK(fabs(cJSON_GetObjectItemCaseSensitive(bj, "gbps")->valuedouble - 0.05) < 1e-9);
    CHECK(cJSON_GetObjectItemCaseSensitive(doc, "bench") != NULL);
    cJSON_Delete(doc);
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    node_opts_done(&o);
}

/* A node that stops answering mid-way: its transfers end "no answer in time" at the round's
 * deadline, the rest go on, and it fails with what happened. */
static void test_silent_node(void)
{
    struct node_opts o;
    struct check_bench_io io = {.request = fake_request, .send = fake_send};
    bool alive[N] = {true, true, true, true, true, true};
    node_opts_init(&o);
    o.bench = true;
    o.bench_seconds = 0.5;
    struct check_bench *b = check_bench_new(&o, N, alive, addrs, 5, &io);
    check_bench_start(b, 0);
    run_scenario(b, true);
    /* the round in flight times out; later rounds go on */
    for (int k = 0; k < 20 && !check_bench_done(b); k++) {
        int64_t d = check_bench_deadline_ms(b);
        CHECK(d > 0);
        check_bench_step(b, d);
        run_scenario(b, true);
        host_answers(b);
    }
    CHECK(check_bench_done(b));
    struct check_report r;
    check_report_init(&r, N);
    for (size_t i = 0; i < N; i++) check_row_set_host(&r.rows[i], names[i], addrs[i], 22);
    check_bench_evaluate(b, &r, names);
    CHECK_INT(bench_of(&r, 4)->status, CHECK_FAIL);
    CHECK(strstr(bench_of(&r, 4)->detail, "no transfer to or from it went through") != NULL);
    if (!strstr(bench_of(&r, 4)->detail, "no answer in time")) printf("# n4: %s\n", bench_of(&r, 4)->detail);
    CHECK(strstr(bench_of(&r, 4)->detail, "no answer in time") != NULL);
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    node_opts_done(&o);
}

/* ---- the NCCL part ---- */

/* A pair's busbw in the scenario: n3 is slow (6 MB/s, a 50 Mbit/s link), the link n0 <-> n1
 * is slow for NCCL too, the rest about 180 GB/s; the world says 150. */
static bool nccl_pairs_fast;   /* every pair at about 180 GB/s */
static double nccl_world = 150;

static double nccl_busbw(size_t a, size_t b)
{
    if (nccl_pairs_fast) return 180 + (double)(a + b);
    if (a == 3 || b == 3) return 0.006;
    if ((a == 0 && b == 1) || (a == 1 && b == 0)) return 20;
    return 180 + (double)(a + b);
}

/* Answers the bench_nccl requests as the agents would: the first member's id (a partial
 * answer), then, once every member of a communicator was asked, their figures; fail_node's
 * init fails, and a stopped member says so. Returns whether anything was answered. */
static const char *nccl_fail_cause = "own";   /* the failing node's "cause" */

static bool nccl_answers(struct check_bench *b, size_t fail_node)
{
    static const char uid[] = "\"uid\":\"ab00000000000000000000000000000000000000000000000000000000000000"
                              "0000000000000000000000000000000000000000000000000000000000000000"
                              "0000000000000000000000000000000000000000000000000000000000000000"
                              "00000000000000000000000000000000000000000000000000000000000000cd\"";
    char json[600];
    bool any = false;
    for (size_t k = 0; k < n_log; k++) {
        if (strcmp(log_[k].op, "bench_nccl_stop") == 0) {
            snprintf(log_[k].op, sizeof log_[k].op, "done");
            for (size_t q = 0; q < n_log; q++)
                if (strcmp(log_[q].op, "bench_nccl") == 0 && log_[q].node == log_[k].node) {
                    snprintf(log_[q].op, sizeof log_[q].op, "done");
                    answer(b, log_[q].node, log_[q].tag, "bench_nccl",
                           "{\"error\":\"stopped: NCCL failed on 10.0.0.4\",\"cause\":\"stopped\"}");
                }
            any = true;
        }
    }
    for (size_t k = 0; k < n_log; k++) {
        if (strcmp(log_[k].op, "bench_nccl") != 0 || cJSON_GetObjectItemCaseSensitive(log_[k].msg, "uid")) continue;
        snprintf(log_[k].op, sizeof log_[k].op, "bench_nccl*");   /* its id said */
        snprintf(json, sizeof json, "{\"more\":true,%s}", uid);
        answer(b, log_[k].node, log_[k].tag, "bench_nccl_id", json);
        any = true;
    }
    for (size_t k = 0; k < n_log; k++) {
        if (strncmp(log_[k].op, "bench_nccl", 10) != 0 || strcmp(log_[k].op, "bench_nccl_stop") == 0) continue;
        int ranks = cJSON_GetObjectItemCaseSensitive(log_[k].msg, "ranks")->valueint;
        size_t members[N], nm = 0;
        for (size_t q = 0; q < n_log; q++)
            if (log_[q].tag == log_[k].tag && strncmp(log_[q].op, "bench_nccl", 10) == 0 && nm < N) members[nm++] = q;
        if ((int)nm * 2 != ranks) continue;   /* not all asked yet */
        for (size_t m = 0; m < nm; m++) {
            struct sent *s = &log_[members[m]];
            double bus = nm > 2 ? nccl_world : nccl_busbw(log_[members[0]].node, log_[members[1]].node);
            snprintf(s->op, sizeof s->op, "done");
            if (s->node == fail_node)
                snprintf(json, sizeof json, "{\"error\":\"ncclCommInitRank: unhandled system error\",\"cause\":\"%s\"}",
                         nccl_fail_cause);
            else
                snprintf(json, sizeof json, "{\"busbw_gbs\":%g,\"algbw_gbs\":%g,\"error\":null}", bus,
                         bus * ranks / (2.0 * (ranks - 1)));
            answer(b, s->node, s->tag, "bench_nccl", json);
        }
        any = true;
    }
    return any;
}

static void nccl_run(struct check_bench *b, size_t fail_node, struct check_report *r)
{
    check_bench_start(b, 0);
    run_scenario(b, false);
    host_answers(b);
    for (int guard = 0; guard < 100 && !check_bench_done(b); guard++)
        if (!nccl_answers(b, fail_node)) check_bench_step(b, check_bench_deadline_ms(b));
    CHECK(check_bench_done(b));
    check_report_init(r, N);
    for (size_t i = 0; i < N; i++) check_row_set_host(&r->rows[i], names[i], addrs[i], 22);
    check_bench_evaluate(b, r, names);
}

/* The world and the pairs: n3 named as the common factor of its slow pairs (not its peers),
 * the slow pair n0-n1 said on both, the world's figure in the words of those that pass. */
static void test_nccl_bisect(void)
{
    struct node_opts o;
    struct check_bench_io io = {.request = fake_request, .send = fake_send};
    bool alive[N] = {true, true, true, true, true, true};
    struct check_report r;
    node_opts_init(&o);
    o.bench = true;
    host_nccl = "\"2.21.5\"";
    struct check_bench *b = check_bench_new(&o, N, alive, addrs, 99, &io);
    nccl_run(b, N, &r);
    CHECK(strstr(bench_of(&r, 3)->detail, "NCCL all-reduce with its peers: busbw 0.006 GB/s, median 1") != NULL);
    for (size_t i = 0; i < N; i++)
        if (i != 3) CHECK(strstr(bench_of(&r, i)->detail, "NCCL all-reduce with its peers") == NULL);
    /* (n0's and n1's first three findings are their TCP link's and n0's memory: the NCCL pair's
     * is counted in "and 1 more", and in --json) */
    CHECK(strstr(bench_of(&r, 0)->detail, "and 1 more (--json)") != NULL);
    if (bench_of(&r, 4)->status != CHECK_PASS) printf("# n4: %s\n", bench_of(&r, 4)->detail);
    CHECK(strstr(bench_of(&r, 4)->detail, "NCCL all-reduce 6 nodes x 2 GPUs: busbw 150 GB/s, with its peers 18") != NULL);
    cJSON *nc = cJSON_GetObjectItemCaseSensitive(r.bench_doc, "nccl");
    cJSON *w = cJSON_GetObjectItemCaseSensitive(nc, "world");
    CHECK(cJSON_GetObjectItemCaseSensitive(w, "ranks")->valueint == 12);
    CHECK(fabs(cJSON_GetObjectItemCaseSensitive(w, "busbw_gbs")->valuedouble - 150) < 1e-9);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(nc, "pairs")) >= N);
    cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(nc, "pairs")) {
        const char *a = cJSON_GetObjectItemCaseSensitive(pr, "a")->valuestring, *bb = cJSON_GetObjectItemCaseSensitive(pr, "b")->valuestring;
        bool slow = strcmp(a, "n3") == 0 || strcmp(bb, "n3") == 0 || (strcmp(a, "n0") == 0 && strcmp(bb, "n1") == 0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pr, "slow")) == slow);
    }
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    /* n3's NCCL init fails: it is named with the error, the others stopped and not blamed, and
     * it is left out of the pairs */
    b = check_bench_new(&o, N, alive, addrs, 99, &io);
    nccl_run(b, 3, &r);
    if (!strstr(bench_of(&r, 3)->detail, "NCCL all-reduce of the world failed here: ncclCommInitRank: unhandled system error"))
        printf("# n3: %s\n", bench_of(&r, 3)->detail);
    CHECK(strstr(bench_of(&r, 3)->detail, "NCCL all-reduce of the world failed here: ncclCommInitRank") != NULL);
    CHECK_INT(bench_of(&r, 3)->status, CHECK_FAIL);
    CHECK(strstr(bench_of(&r, 4)->detail, "NCCL") == NULL || strstr(bench_of(&r, 4)->detail, "failed") == NULL);
    cJSON *pairs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r.bench_doc, "nccl"), "pairs"), *p;
    cJSON_ArrayForEach(p, pairs) {
        CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(p, "a")->valuestring, "n3") != 0);
        CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(p, "b")->valuestring, "n3") != 0);
    }
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    /* the same words with the cause "peer" (NCCL's ncclRemoteError, as the agent reports it):
     * the agent's code decides, not the text, and n3 is not blamed for what a peer did */
    nccl_fail_cause = "peer";
    b = check_bench_new(&o, N, alive, addrs, 99, &io);
    nccl_run(b, 3, &r);
    if (strstr(bench_of(&r, 3)->detail, "failed here")) printf("# n3 (peer): %s\n", bench_of(&r, 3)->detail);
    CHECK(strstr(bench_of(&r, 3)->detail, "failed here") == NULL);   /* (n3 fails still: its TCP is slow) */
    nccl_fail_cause = "own";
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    /* every pair fast, the world slow: nobody to name, so every node says it */
    nccl_pairs_fast = true;
    nccl_world = 50;
    b = check_bench_new(&o, N, alive, addrs, 99, &io);
    nccl_run(b, N, &r);
    if (!strstr(bench_of(&r, 4)->detail, "NCCL all-reduce of the world: busbw 50.0 GB/s, below 0.5 x the pairs' median 18"))
        printf("# n4: %s\n", bench_of(&r, 4)->detail);
    CHECK(strstr(bench_of(&r, 4)->detail, "NCCL all-reduce of the world: busbw 50.0 GB/s, below 0.5 x the pairs' median 18") != NULL);
    CHECK_INT(bench_of(&r, 4)->status, CHECK_WARN);
    CHECK(strstr(bench_of(&r, 3)->detail, "NCCL all-reduce with its peers") == NULL);
    check_report_done(&r);
    check_bench_free(b);
    log_clear();
    nccl_pairs_fast = false;
    nccl_world = 150;
    host_nccl = "null";
    node_opts_done(&o);
}

int main(void)
{
    RUN(test_plan_shape);
    RUN(test_run_and_verdicts);
    RUN(test_silent_node);
    RUN(test_nccl_bisect);
    return tap_done();
}
