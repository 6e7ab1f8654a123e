/* libFuzzer harness for NCCL's account (launcher/job/nccl.c, nccl_odd.c, nccl_json.c): the
 * input's lines are rank output, each fed to the rank its first byte picks ('1' rank 0) in a job of 4
 * nodes x 2 ranks, some nodes with the preflight's expectations; then the odd ones out are
 * decided and said, and the account goes to JSON and back. Besides "no crash, no leak, no
 * read past the line" (each line is an exact-size copy, not NUL-terminated), it checks what
 * the views rely on: every string kept is NUL-terminated within its field and holds no
 * control byte, and a finding is one line. With -DFUZZ_SMOKE_MAIN, a main() without
 * libFuzzer feeds mutations of the seeds below. */
#include "fuzz_common.h"

#include <cjson/cJSON.h>

#include "job/job.h"
#include "job/nccl.h"

static void clean(const char *s, size_t cap)
{
    EXPECT(memchr(s, '\0', cap) != NULL);
    for (const char *p = s; *p; p++) EXPECT((unsigned char)*p >= 0x20 && *p != 0x7f);
}

static void finding(void *ctx, int node, const char *line)
{
    (void)ctx;
    EXPECT(node >= -1 && node < 4);
    EXPECT(strchr(line, '\n') == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *names[] = { "n1", "n2", "n3", "n4" };
    int rpn[] = { 2, 2, 2, 2 };
    char err[128];
    struct job *j = job_new("f", NULL, 0, names, NULL, rpn, 4, err, sizeof err);
    EXPECT(j);
    nccl_expect(j, 0, "eth0", 2);
    nccl_expect(j, 3, "ib0,ib1", 0);
    int64_t now = 1000;
    for (size_t i = 0; i < size;) {
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        size_t n = nl ? (size_t)(nl - (data + i)) : size - i;
        if (n) {
            char *line = fuzz_bytes(data + i + 1, n - 1);
            /* '1'..'8': ranks 0..7; '0', '9' and others: out of range or wrapped */
            int rank = data[i] >= '0' && data[i] <= '9' ? data[i] - '1' : data[i] % 9 - 1;
            if (line) nccl_feed_line(j, rank, line, n - 1, now * 1000000, now);
            free(line);
        }
        now += 100;
        if (now % 1000 == 0) nccl_tick(j, now);
        i += n + 1;
    }
    nccl_flush(j);
    if (j->nccl) {
        for (size_t r = 0; r < j->nccl->n_ranks; r++) {
            const struct nccl_rank *x = &j->nccl->r[r];
            clean(x->version, sizeof x->version);
            clean(x->boot_if, sizeof x->boot_if);
            clean(x->boot_addr, sizeof x->boot_addr);
            clean(x->net, sizeof x->net);
            clean(x->net_devs, sizeof x->net_devs);
            clean(x->oob, sizeof x->oob);
            for (int k = 0; k < NCCL_WARN_KEEP; k++) clean(x->warn_last[k], sizeof x->warn_last[k]);
        }
        EXPECT(j->nccl->n_warn <= NCCL_WARN_GROUPS);
        nccl_findings(j, finding, NULL);
        cJSON *o = nccl_to_json(j);
        struct job *k = job_new("g", NULL, 0, names, NULL, rpn, 4, err, sizeof err);
        EXPECT(o && k && nccl_from_json(k, o));
        struct nccl_node_sum s;
        for (size_t i = 0; i < 4; i++) {
            nccl_node_sum(k, i, &s);
            clean(s.version, sizeof s.version);
            clean(s.devs, sizeof s.devs);
        }
        cJSON_Delete(o);
        job_free(k);
    }
    job_free(j);
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "1NCCL version 2.18.3+cuda12.2\n1n1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    "1n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"
    "1n1:1:1 [0] NCCL INFO Using network IB\n",
    "5n3:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>\n5n3:1:1 [0] NCCL INFO Using network Socket\n"
    "6n3:1:1 [0] NCCL INFO comm 0x1 rank 5 nranks 8 cudaDev 1 nvmlDev 1 busId 1 commId 0x2 - Init START\n"
    "6n3:1:1 [0] NCCL INFO Channel 00/0 : 5[1] -> 6[0] [send] via NET/Socket/0\n"
    "6n3:1:1 [0] NCCL INFO comm 0x1 rank 5 nranks 8 cudaDev 1 nvmlDev 1 busId 1 commId 0x2 - Init COMPLETE\n",
    "3n2:1:1 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.4<4445> with "
    "error 12, opcode 0, len 0, vendor err 129 (Recv) localGid ::ffff:10.0.0.2 remoteGid ::ffff:10.0.0.4\n"
    "7n4:1:1 [0] NCCL INFO Init timings - ncclCommInitRank: rank 6 nranks 8 total 1.23 (kernels 0.1)\n",
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = " \n:[]<>/0123456789.,;NCCL INFO WARN Using network IB Socket via P2P SHM NET"
                                   " comm 0x - Init START COMPLETE total peer\x1b\0\xff";
    return fuzz_smoke_run(argc, argv, "fuzz_nccl", seeds, sizeof seeds / sizeof seeds[0], alphabet,
                          sizeof alphabet - 1);
}
#endif
