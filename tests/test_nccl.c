/* NCCL's account of each rank (launcher/job/nccl.h): the lines as NCCL prints them, read into
 * the model; the odd ones out said once as events; the JSON of nccl.json and back. Every
 * fixture line is in NCCL's exact format, with its source named beside it (NVIDIA/nccl at the
 * tag given, or the GitHub issue the real line comes from). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "job/job.h"
#include "job/nccl.h"
#include "tap.h"

static struct job *mk(size_t n_nodes, int per_node)
{
    const char *names[] = { "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8" };
    int rpn[8];
    for (size_t i = 0; i < n_nodes; i++) rpn[i] = per_node;
    char err[256];
    struct job *j = job_new("t", NULL, 0, names, NULL, rpn, n_nodes, err, sizeof err);
    return j;
}

static void feed(struct job *j, int rank, const char *line, int64_t wall_ns, int64_t now_ms)
{
    nccl_feed_line(j, rank, line, strlen(line), wall_ns, now_ms);
}

/* Events of kind EV_NCCL whose text holds needle. */
static int nccl_events(const struct job *j, const char *needle)
{
    int n = 0;
    for (size_t i = 0; i < j->ev_count; i++) {
        const struct job_event *e = job_event_at(j, i);
        if (e->kind == EV_NCCL && (!needle || strstr(e->text, needle))) n++;
    }
    return n;
}

static void test_line_is(void)
{
    /* src/debug.cc v2.18.3-1 ncclDebugLog: "%s:%d:%d [%d] NCCL INFO " */
    CHECK(nccl_line_is("gpu01:124172:124172 [0] NCCL INFO Bootstrap : Using enp225s0f1:10.10.10.2<0>", 74));
    CHECK(!nccl_line_is("step 10 loss 2.5", 16));
    /* a bare version line: init.cc v2.18.3-1 showVersion printf("%s\n", VERSION_STRING) */
    CHECK(nccl_version_line_is("NCCL version 2.18.3+cuda12.2", 28));
    CHECK(nccl_block_may_hold("x\nNCCL version 2.18.3+cuda12.2\n", 31));
    CHECK(!nccl_block_may_hold("loss 1\nloss 2\n", 14));
}

/* One rank on IB, NCCL 2.18.3 (formats of NVIDIA/nccl v2.18.3-1: bootstrap.cc:52,
 * transport/net_ib.cc:264, init.cc:310 and 1356/1375, transport/p2p.cc:366, shm.cc:95, net.cc:186). */
static const char *const ib_rank0[] = {
    "NCCL version 2.18.3+cuda12.2",
    "n1:4001:4001 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "n1:4001:4001 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "n1:4001:4120 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
    "n1:4001:4120 [0] NCCL INFO Using network IB",
    "n1:4001:4120 [0] NCCL INFO comm 0x55d8c0a1b2c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3a2c1d9e8b6a54 - Init START",
    "n1:4001:4120 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
    "n1:4001:4120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
    "n1:4001:4120 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct/direct",
    "n1:4001:4120 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0",
    "n1:4001:4120 [0] NCCL INFO comm 0x55d8c0a1b2c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3a2c1d9e8b6a54 - Init COMPLETE",
};

static void test_ib_rank(void)
{
    struct job *j = mk(2, 2);
    for (size_t i = 0; i < sizeof ib_rank0 / sizeof *ib_rank0; i++)
        feed(j, 0, ib_rank0[i], (int64_t)(1000000000LL + (long long)i * 150000000LL), 1000);
    const struct nccl_rank *r = &j->nccl->r[0];
    CHECK_STR(r->version, "2.18.3+cuda12.2");
    CHECK_STR(r->boot_if, "eth0");
    CHECK_STR(r->boot_addr, "10.0.0.1<0>");
    CHECK_STR(r->net, "IB");
    CHECK_STR(r->net_devs, "mlx5_0:1/IB mlx5_1:1/RoCE");
    CHECK_STR(r->oob, "eth0:10.0.0.1<0>");
    CHECK_INT(r->transports, NCCL_TR_P2P | NCCL_TR_SHM | NCCL_TR_NET);
    CHECK_INT(r->channels, 3);   /* the ring line "Channel 00/02 :    0   1" has no "via" */
    CHECK(r->init_complete);
    CHECK_INT(r->nranks, 4);
    CHECK_NEAR(nccl_rank_init_s(r), 0.75, 1e-9);   /* lines 5 and 10, 150 ms apart each */
    CHECK(!j->nccl->r[1].seen);
    job_free(j);
}

/* NCCL 2.22/2.23's own init time: "Init timings: rank %d nranks %d total %.2f" (init.cc v2.22.3-1:1437)
 * and "Init timings - %s: rank ..." (v2.23.4-1:1489); the 2.23 version as an INFO line (showVersion). */
static void test_newer_formats(void)
{
    struct job *j = mk(1, 2);
    feed(j, 0, "n1:77:77 [0] NCCL INFO NCCL version 2.23.4+cuda12.6", 0, 5);
    feed(j, 0, "n1:77:99 [0] NCCL INFO ncclCommInitRank comm 0x1a2b rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xabc - Init START", 0, 5);
    feed(j, 0, "n1:77:99 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 0.82 (kernels 0.20, alloc 0.01, bootstrap 0.05, allgathers 0.01, topo 0.30, graphs 0.02, connections 0.20, rest 0.03)", 0, 5);
    feed(j, 1, "n1:78:78 [1] NCCL INFO Init timings: rank 1 nranks 2 total 0.45 (kernels 0.10, bootstrap 0.05, allgathers 0.01, topo 0.20, graphs 0.02, connections 0.05, rest 0.02)", 0, 5);
    /* 2.26: "Bootstrap: Using" (bootstrap.cc v2.26.2-1:120) */
    feed(j, 1, "n1:78:78 [1] NCCL INFO Bootstrap: Using ib0:fe80::a288:c203:d2:aaf2%ib0<0>", 0, 5);
    CHECK_STR(j->nccl->r[0].version, "2.23.4+cuda12.6");
    CHECK_NEAR(nccl_rank_init_s(&j->nccl->r[0]), 0.82, 1e-9);
    CHECK_NEAR(nccl_rank_init_s(&j->nccl->r[1]), 0.45, 1e-9);
    CHECK_STR(j->nccl->r[1].boot_if, "ib0");
    CHECK_STR(j->nccl->r[1].boot_addr, "fe80::a288:c203:d2:aaf2%ib0<0>");
    job_free(j);
}

/* Older NCCL prints NET/Socket's line before NET/IB's (github.com/NVIDIA/nccl-tests/issues/29):
 * without "Using network" IB wins; with it, NCCL's word does. */
static void test_net_choice(void)
{
    struct job *j = mk(1, 2);
    feed(j, 0, "server3:15216:15216 [0] NCCL INFO NET/Socket : Using [0]enp41s0f1:<0>", 0, 5);
    feed(j, 0, "server3:15216:15216 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB enp41s0f1:<0>", 0, 5);
    CHECK_STR(j->nccl->r[0].net, "IB");
    CHECK_STR(j->nccl->r[0].net_devs, "mlx5_0:1/IB");
    /* NCCL_IB_DISABLE=1: github.com/NVIDIA/nccl/issues/676 */
    feed(j, 1, "gpu01:124172:124172 [0] NCCL INFO NET/Socket : Using [0]enp225s0f1:10.10.10.2<0>", 0, 5);
    feed(j, 1, "gpu01:124172:124172 [0] NCCL INFO Using network Socket", 0, 5);
    CHECK_STR(j->nccl->r[1].net, "Socket");
    CHECK_STR(j->nccl->r[1].net_devs, "enp225s0f1:10.10.10.2<0>");
    job_free(j);
}

/* A rank's account of 4 nodes x 2 ranks: node n3 on Socket, n4 on another NCCL version and bootstrap interface. */
static void play(struct job *j, int64_t now)
{
    for (int rk = 0; rk < 8; rk++) {
        int node = rk / 2;
        char l[400];
        const char *host = j->nodes[node].name;
        snprintf(l, sizeof l, "NCCL version %s", node == 3 ? "2.19.3+cuda12.3" : "2.18.3+cuda12.2");
        feed(j, rk, l, 0, now);
        snprintf(l, sizeof l, "%s:%d:%d [%d] NCCL INFO Bootstrap : Using %s:10.0.0.%d<0>", host, 100 + rk, 100 + rk,
                 rk % 2, node == 3 ? "eth1" : "eth0", node + 1);
        feed(j, rk, l, 0, now);
        if (node == 2) {
            snprintf(l, sizeof l, "%s:%d:%d [%d] NCCL INFO NET/IB : No device found.", host, 100 + rk, 100 + rk, rk % 2);
            feed(j, rk, l, 0, now);
            snprintf(l, sizeof l, "%s:%d:%d [%d] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>", host, 100 + rk, 100 + rk, rk % 2);
        } else {
            snprintf(l, sizeof l, "%s:%d:%d [%d] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.%d<0>", host,
                     100 + rk, 100 + rk, rk % 2, node + 1);
        }
        feed(j, rk, l, 0, now);
        snprintf(l, sizeof l, "%s:%d:%d [%d] NCCL INFO Using network %s", host, 100 + rk, 100 + rk, rk % 2,
                 node == 2 ? "Socket" : "IB");
        feed(j, rk, l, 0, now);
    }
}

static void test_odd_ones_out(void)
{
    struct job *j = mk(4, 2);
    nccl_expect(j, 3, "eth0", 2);
    nccl_expect(j, 2, "eth0", 1);   /* n3 has an active IB port, yet NCCL is on Socket */
    play(j, 1000);
    /* all 8 ranks said their network: decided at once, each finding once */
    nccl_tick(j, 1001);
    CHECK_INT(nccl_events(j, "NCCL versions differ: 2.18.3+cuda12.2 on n[1-3] (ranks 0-5), 2.19.3+cuda12.3 on n4 (ranks 6-7)"), 1);
    CHECK_INT(nccl_events(j, "NCCL networks differ: IB on n[1-2,4] (ranks 0-3,6-7), Socket on n3 (ranks 4-5)"), 1);
    CHECK_INT(nccl_events(j, "NCCL bootstrap interfaces differ: eth0 on n[1-3] (ranks 0-5), eth1 on n4 (ranks 6-7)"), 1);
    CHECK_INT(nccl_events(j, "NCCL bootstraps over eth1 on n4, not what the preflight expected there (eth0)"), 1);
    CHECK_INT(nccl_events(j, "NCCL uses Socket on n3 though the preflight saw active IB ports there"), 1);
    int before = nccl_events(j, NULL);
    CHECK_INT(before, 5);
    nccl_tick(j, 50000);
    nccl_flush(j);
    CHECK_INT(nccl_events(j, NULL), before);   /* said once per attempt */
    /* a new attempt starts afresh */
    j->attempt++;
    char err[64];
    job_attempt_begin(j, err, sizeof err);
    struct nccl_node_sum ns;
    nccl_node_sum(j, 0, &ns);
    CHECK_INT(ns.ranks_seen, 0);              /* the old attempt's account is not shown */
    CHECK(!nccl_get(j)->r[0].seen);           /* and is forgotten at the new one's first use */
    CHECK(j->nccl->expect_ifs[3] != NULL);    /* the preflight's word stays */
    job_free(j);
}

/* The preflight's expectations fold alike nodes into one line: 3 nodes on an interface it did
 * not expect are one event, and one node that matches is not named. */
static void test_preflight_folded(void)
{
    struct job *j = mk(4, 2);
    for (size_t i = 0; i < 4; i++) nccl_expect(j, i, i == 3 ? "eth1" : "ib0,ib1", 0);
    play(j, 1000);
    nccl_tick(j, 1001);
    CHECK_INT(nccl_events(j, "NCCL bootstraps over eth0 on n[1-3], not what the preflight expected there (ib0,ib1)"), 1);
    CHECK_INT(nccl_events(j, "preflight expected"), 1);
    CHECK_INT(nccl_events(j, "active IB ports"), 0);   /* 0 ports: nothing to say */
    job_free(j);
}

/* A node that reports after the decision: a value not seen before is said (once), one seen
 * before is not said again. */
static void test_late_node(void)
{
    struct job *j = mk(3, 1);
    feed(j, 0, "NCCL version 2.18.3+cuda12.2", 0, 1000);
    feed(j, 0, "n1:1:1 [0] NCCL INFO Using network IB", 0, 1000);
    feed(j, 1, "NCCL version 2.19.3+cuda12.3", 0, 1000);
    feed(j, 1, "n2:1:1 [0] NCCL INFO Using network IB", 0, 1000);
    nccl_tick(j, 1000 + NCCL_DECIDE_MS);   /* n3 silent: decided without it */
    CHECK_INT(nccl_events(j, "NCCL versions differ: 2.18.3+cuda12.2 on n1 (rank 0), 2.19.3+cuda12.3 on n2 (rank 1)"), 1);
    feed(j, 2, "NCCL version 2.18.3+cuda12.2", 0, 20000);
    feed(j, 2, "n3:1:1 [0] NCCL INFO Using network Socket", 0, 20000);
    nccl_tick(j, 20001);
    CHECK_INT(nccl_events(j, "NCCL versions differ"), 1);   /* the same two versions: not again */
    CHECK_INT(nccl_events(j, "NCCL networks differ: IB on n[1-2] (ranks 0-1), Socket on n3 (rank 2)"), 1);
    nccl_tick(j, 30000);
    nccl_flush(j);
    CHECK_INT(nccl_events(j, NULL), 2);
    job_free(j);
}

/* Not every rank reports: decided NCCL_DECIDE_MS after the first, with those that did. */
static void test_decide_by_time(void)
{
    struct job *j = mk(2, 1);
    feed(j, 0, "n1:1:1 [0] NCCL INFO Using network IB", 0, 1000);
    nccl_tick(j, 1000 + NCCL_DECIDE_MS - 1);
    CHECK_INT(nccl_events(j, NULL), 0);
    CHECK(!j->nccl->decided);
    nccl_tick(j, 1000 + NCCL_DECIDE_MS);
    CHECK(j->nccl->decided);
    CHECK_INT(nccl_events(j, NULL), 0);   /* one network: nothing odd */
    job_free(j);
}

/* WARNs grouped by shape; an IB completion error names its peer's node through the bootstrap
 * addresses (net_ib.cc v2.18.3-1:1295 "NET/IB : Got completion from peer %s with error %d, opcode
 * %d, len %d, vendor err %d (%s)%s%s%s%s"; debug.cc's WARN prefix "\n%s:%d:%d [%d] %s:%d NCCL WARN "). */
static void test_warn_groups(void)
{
    struct job *j = mk(4, 2);
    play(j, 1000);
    nccl_tick(j, 1001);
    int base = nccl_events(j, NULL);
    feed(j, 2, "n2:102:300 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.4<44455> "
         "with error 12, opcode 0, len 0, vendor err 129 (Recv) localGid ::ffff:10.0.0.2 remoteGid ::ffff:10.0.0.4", 0, 2000);
    feed(j, 3, "n2:103:301 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.4<44460> "
         "with error 12, opcode 1, len 0, vendor err 129 (Send) localGid ::ffff:10.0.0.2 remoteGid ::ffff:10.0.0.4", 0, 2100);
    feed(j, 0, "n1:100:302 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer 10.0.0.2<51234>", 0, 2200);
    CHECK_INT(j->nccl->n_warn, 2);
    CHECK_INT(j->nccl->r[2].warns, 1);
    nccl_tick(j, 2000 + NCCL_WARN_WAIT_MS - 1);
    CHECK_INT(nccl_events(j, NULL), base);
    nccl_tick(j, 2000 + NCCL_WARN_WAIT_MS);
    CHECK_INT(nccl_events(j, "NCCL WARN 2 times on n2 (ranks 2-3), with peer n4: NET/IB : Got completion from peer 10.0.0.4<44455>"), 1);
    nccl_flush(j);
    CHECK_INT(nccl_events(j, "NCCL WARN 1 time on n1 (rank 0): Net : Connection closed by remote peer"), 1);
    nccl_flush(j);
    CHECK_INT(nccl_events(j, NULL), base + 2);
    job_free(j);
}

/* Bounded: a WARN line of 10 kB, many shapes, control bytes. */
static void test_bounds(void)
{
    struct job *j = mk(1, 1);
    char *big = malloc(10000);
    memcpy(big, "h:1:1 [0] x.cc:1 NCCL WARN ", 27);
    memset(big + 27, 'A', 10000 - 28);
    big[9999] = '\0';
    feed(j, 0, big, 0, 10);
    CHECK(strlen(j->nccl->r[0].warn_last[NCCL_WARN_KEEP - 1]) < 200);
    for (int i = 0; i < 40; i++) {
        char l[100];
        snprintf(l, sizeof l, "h:1:1 [0] x.cc:1 NCCL WARN shape%c", 'a' + i % 26);
        feed(j, 0, l, 0, 10);
    }
    CHECK_INT(j->nccl->n_warn, NCCL_WARN_GROUPS);
    CHECK(j->nccl->warn_dropped > 0);
    feed(j, 0, "h:1:1 [0] NCCL INFO Bootstrap : Using e\033[31m:1<0>", 0, 10);
    CHECK(strchr(j->nccl->r[0].boot_if, '\033') == NULL);
    free(big);
    job_free(j);
}

/* nccl.json's object and back: what ddptop logs --nccl and ddptop view read. */
static void test_json(void)
{
    struct job *j = mk(4, 2);
    play(j, 1000);
    cJSON *o = nccl_to_json(j);
    char *text = cJSON_PrintUnformatted(o);
    CHECK(strstr(text, "\"nccl_version\":\"2.19.3+cuda12.3\"") != NULL);
    CHECK(strstr(text, "\"findings\":[\"NCCL versions differ") != NULL);
    struct job *k = mk(4, 2);
    CHECK(nccl_from_json(k, o));
    struct nccl_node_sum s;
    nccl_node_sum(k, 2, &s);
    CHECK_STR(s.net, "Socket");
    CHECK_STR(s.devs, "eth0:10.0.0.3<0>");
    CHECK_INT(s.ranks_seen, 2);
    nccl_node_sum(k, 3, &s);
    CHECK_STR(s.version, "2.19.3+cuda12.3");
    CHECK_STR(s.boot, "eth1:10.0.0.4<0>");
    nccl_tick(k, 999999);
    CHECK_INT(nccl_events(k, NULL), 0);   /* read back: quiet */
    free(text);
    cJSON_Delete(o);
    job_free(j);
    job_free(k);
}

/* The scans without memmem (nccl_line.c) answer as memmem did, on every string of a small
 * alphabet that makes near misses ("NCCLversion", "NCC ", a capital N at either end). */
static bool ref_line_is(const char *text, size_t len)
{
    static const char *const levels[] = { "INFO", "WARN", "TRACE" };
    if (len > 256) len = 256;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *hit = memmem(p, (size_t)(end - p), " NCCL ", 6);
        if (!hit) return false;
        const char *lv = hit + 6;
        for (size_t i = 0; i < 3; i++) {
            size_t n = strlen(levels[i]);
            if ((size_t)(end - lv) >= n && memcmp(lv, levels[i], n) == 0 &&
                (lv + n == end || lv[n] == ' ' || lv[n] == '\n'))
                return true;
        }
        p = hit + 1;
    }
    return false;
}

static void test_scan_like_memmem(void)
{
    static const char *const parts[] = { " ", "N", "NCCL", "NCCL ", " NCCL ", "INFO", "WARN", "TRACE", "NCCL version ",
                                         "version ", "\n", "x", "NCC", "L " };
    char buf[400];
    unsigned seed = 12345;
    int bad_line = 0, bad_block = 0, hits = 0;
    for (int round = 0; round < 200000; round++) {
        size_t n = 0;
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 16) % 12);
        for (int i = 0; i < k; i++) {
            seed = seed * 1103515245u + 12345u;
            const char *p = parts[(seed >> 16) % (sizeof parts / sizeof *parts)];
            size_t l = strlen(p);
            if (n + l >= sizeof buf) break;
            memcpy(buf + n, p, l);
            n += l;
        }
        /* also off by one at either end: each length from the whole string down to 0 */
        for (size_t m = n; m + 3 >= n && m <= n; m--) {
            bool ref_block = memmem(buf, m, " NCCL ", 6) || memmem(buf, m, "NCCL version ", 13);
            if (nccl_block_may_hold(buf, m) != ref_block) bad_block++;
            if (nccl_line_is(buf, m) != ref_line_is(buf, m)) bad_line++;
            if (ref_block) hits++;
            if (!m) break;
        }
    }
    CHECK_INT(bad_block, 0);
    CHECK_INT(bad_line, 0);
    CHECK(hits > 1000);   /* the alphabet makes hits */
    /* past 256 bytes the line is not looked at; a block is looked at whole */
    memset(buf, 'x', sizeof buf);
    memcpy(buf + 300, " NCCL INFO x", 12);
    CHECK(!nccl_line_is(buf, sizeof buf));
    CHECK(nccl_block_may_hold(buf, sizeof buf));
    CHECK(!nccl_block_may_hold(buf, 305));
}

int main(void)
{
    RUN(test_line_is);
    RUN(test_scan_like_memmem);
    RUN(test_ib_rank);
    RUN(test_newer_formats);
    RUN(test_net_choice);
    RUN(test_odd_ones_out);
    RUN(test_preflight_folded);
    RUN(test_decide_by_time);
    RUN(test_late_node);
    RUN(test_warn_groups);
    RUN(test_bounds);
    RUN(test_json);
    return tap_done();
}
