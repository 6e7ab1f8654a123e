/* The outbox's chunks (launcher/agent/agent_outslab.h): messages cut from 2 MiB chunks never
 * overlap and keep their bytes while others come and go, freed in order or not; an empty
 * chunk is reused, at most OUTSLAB_SPARE_MAX are kept; a flood whose acknowledgements free a
 * second's output at once reuses those chunks for the next second's (no fresh mapping), and
 * once it stops the spares go back down to OUTSLAB_SPARE_KEEP; a message too large for a chunk
 * comes from malloc. Then the outbox on top of it: what was written is what was added. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/agent_outbox.h"
#include "agent/agent_outslab.h"
#include "tap.h"

#define N 3000

static void test_no_overlap(void)
{
    struct outslab s = { 0 };
    static void *p[N];
    static struct outslab_chunk *c[N];
    static size_t len[N];
    unsigned seed = 7;
    int bad_align = 0, bad_bytes = 0, from_malloc = 0;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        len[i] = 1 + (seed >> 8) % 70000;
        if (i % 500 == 0) len[i] = OUTSLAB_BIG + 1;    /* a few too large for a chunk */
        p[i] = outslab_alloc(&s, len[i], &c[i]);
        if ((uintptr_t)p[i] % 16) bad_align++;
        if (!c[i]) from_malloc++;
        memset(p[i], i & 0xff, len[i]);
        /* free every third one at once, out of order: the others must keep their bytes */
        if (i % 3 == 2) {
            outslab_free(&s, p[i - 1], c[i - 1]);
            p[i - 1] = NULL;
        }
    }
    for (int i = 0; i < N; i++) {
        if (!p[i]) continue;
        for (size_t k = 0; k < len[i]; k += 97)
            if (((unsigned char *)p[i])[k] != (i & 0xff)) {
                bad_bytes++;
                break;
            }
    }
    CHECK_INT(bad_align, 0);
    CHECK_INT(bad_bytes, 0);
    CHECK_INT(from_malloc, N / 500);
    for (int i = 0; i < N; i++)
        if (p[i]) outslab_free(&s, p[i], c[i]);
    /* all free: what is mapped is the current chunk and the spares */
    CHECK(s.mapped <= (size_t)(OUTSLAB_SPARE_MAX + 1) * OUTSLAB_CHUNK);
    CHECK(s.n_spare <= OUTSLAB_SPARE_MAX);
    outslab_done(&s);
    CHECK_INT(s.mapped, 0);
}

/* A flood as the agent sees it: 64 KiB messages added, the oldest freed as acknowledgements
 * come, for many times the spare limit: the chunks mapped stay bounded by what is held. */
static void test_flood_bounded(void)
{
    struct outslab s = { 0 };
    enum { HELD = 100, MSG = 65536 };
    void *p[HELD] = { 0 };
    struct outslab_chunk *c[HELD] = { 0 };
    size_t peak = 0;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    for (int i = 0; i < 20000; i++) {
        int k = i % HELD;
        if (p[k]) outslab_free(&s, p[k], c[k]);
        p[k] = outslab_alloc(&s, MSG, &c[k]);
        memset(p[k], 'x', MSG);
        if (s.mapped > peak) peak = s.mapped;
    }
    getrusage(RUSAGE_SELF, &r1);
    /* 100 x 64 KiB held = 3.2 chunks, one being filled, one or two waiting for their last */
    CHECK(peak <= 6 * (size_t)OUTSLAB_CHUNK);
    printf("# 1.3 GB through 64 KiB messages: %ld minor page faults\n", r1.ru_minflt - r0.ru_minflt);
    for (int k = 0; k < HELD; k++) outslab_free(&s, p[k], c[k]);
    outslab_done(&s);
    CHECK_INT(s.mapped, 0);
}

/* A flood in waves as acknowledgements make it: 20 chunks' worth of 64 KiB messages held,
 * then all freed at once, a trim (the agent's once-a-second) between waves. After the first
 * wave every chunk comes from the spares; once the waves stop, two trims give back all but
 * OUTSLAB_SPARE_KEEP. */
static void test_waves_reuse(void)
{
    struct outslab s = { 0 };
    enum { MSG = 65536, PER_WAVE = 20 * 32 - 8 };
    static void *p[PER_WAVE];
    static struct outslab_chunk *c[PER_WAVE];
    size_t maps_after_first = 0;
    for (int wave = 0; wave < 6; wave++) {
        for (int i = 0; i < PER_WAVE; i++) {
            p[i] = outslab_alloc(&s, MSG - 64, &c[i]);
            memset(p[i], 'x', 64);
        }
        for (int i = 0; i < PER_WAVE; i++) outslab_free(&s, p[i], c[i]);
        if (wave == 0) maps_after_first = s.maps;
        outslab_trim(&s);
    }
    CHECK(maps_after_first >= 20);
    CHECK_INT(s.maps, maps_after_first);   /* waves 2 to 6: no fresh chunk */
    CHECK(s.n_spare >= 19);
    outslab_trim(&s);                      /* a second with no allocation */
    outslab_trim(&s);
    CHECK_INT(s.n_spare, OUTSLAB_SPARE_KEEP);
    CHECK(s.mapped <= (size_t)(OUTSLAB_SPARE_KEEP + 1) * OUTSLAB_CHUNK);
    outslab_done(&s);
    CHECK_INT(s.mapped, 0);
}

static uint64_t from_none(void *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    return 0;
}

/* The outbox over the chunks: messages of all sizes, written through a pipe, come out as
 * added; acknowledged ones are let go; a relink sends the unacknowledged ones again. */
static void test_outbox_roundtrip(void)
{
    struct outbox *ob = outbox_new();
    int fd[2];
    CHECK(pipe2(fd, O_NONBLOCK) == 0);
    static char line[OUTSLAB_BIG + 100], got[400000];
    size_t lens[] = { 1, 100, 65536, OUTSLAB_BIG + 10, 250000, 7 };
    size_t want = 0;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        memset(line, 'a' + (int)i, lens[i]);
        outbox_add_durable(ob, 0, outbox_next_seq(ob, 0), line, lens[i]);
        want += lens[i] + 1;
    }
    CHECK_INT(outbox_bytes(ob), want);
    size_t n = 0;
    int bad = 0;
    while (outbox_unsent(ob)) {
        CHECK_INT(outbox_write(ob, fd[1]), 0);
        ssize_t k = read(fd[0], got, sizeof got);
        if (k <= 0) break;
        for (ssize_t j = 0; j < k; j++, n++) {
            size_t off = n, m = 0;
            while (off >= lens[m] + 1) off -= lens[m++] + 1;
            char w = off == lens[m] ? '\n' : (char)('a' + (int)m);
            if (got[j] != w) bad++;
        }
    }
    CHECK_INT(n, want);
    CHECK_INT(bad, 0);
    outbox_ack(ob, 0, 3);
    CHECK_INT(outbox_durable_bytes(ob), lens[3] + lens[4] + lens[5] + 3);
    outbox_unlink(ob);
    outbox_relink(ob);
    size_t again = 0, again_bytes = 0;
    outbox_resume(ob, from_none, NULL, &again, &again_bytes);
    CHECK_INT(again, 3);
    outbox_ack(ob, 0, 6);
    CHECK_INT(outbox_durable_bytes(ob), 0);
    close(fd[0]);
    close(fd[1]);
    outbox_free(ob);
}

int main(void)
{
    RUN(test_no_overlap);
    RUN(test_flood_bounded);
    RUN(test_waves_reuse);
    RUN(test_outbox_roundtrip);
    return tap_done();
}
