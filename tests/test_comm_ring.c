/* Tests for the CPU ring all-reduce (runtime/comm_ring*.c): W real processes over loopback,
 * meeting through a rendezvous store served by the test process. Each rank reports to the test
 * through a pipe; results are compared across ranks and across runs. */
#include "tap.h"
#include "comm.h"
#include "store.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXW     4
#define NSIZES   4
#define TOKEN    "ring-test-token"

struct result {
    int ok;                     /* 1 when every check inside the rank passed */
    double max_err;             /* worst |got - want| / max(1, |want|) */
    uint64_t sum[8];            /* FNV-1a of each result buffer */
    double fail_at;             /* CLOCK_MONOTONIC when wait_all failed, else 0 */
    double comm_ms;
    char err[512];
};

typedef void (*rank_fn)(struct comm *c, int rank, int w, struct result *res);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The values rank r contributes at index i of vector v: deterministic, in [-1, 1). */
static float value(int r, int v, size_t i)
{
    uint64_t z = ((uint64_t)r << 56) ^ ((uint64_t)v << 48) ^ i;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static float *make_vec(int r, int v, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = value(r, v, i);
    return x;
}

/* Checks x against the float64 average of every rank's vector v; records the checksum. */
static void check_vec(struct result *res, int slot, const float *x, int v, size_t n, int w)
{
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < w; r++) want += value(r, v, i);
        want /= w;
        double e = fabs(x[i] - want) / (fabs(want) > 1 ? fabs(want) : 1);
        if (e > res->max_err) res->max_err = e;
    }
    res->sum[slot] = fnv(x, n * sizeof *x);
}

/* W forked ranks and the store they meet at, served by the test process. */
struct world {
    int w, port;
    struct store_server *srv;
    pid_t pid[MAXW];
    int fd[MAXW];
};

/* Forks rank r: it connects to the store, makes its ring, runs fn and reports. */
static void spawn_rank(struct world *wd, int r, rank_fn fn, double timeout_s)
{
    char err[512];
    int p[2];
    if (pipe(p) < 0) exit(1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);   /* never outlive a broken test */
        close(p[0]);
        struct result res = { .ok = 1 };
        struct dist_env env = { .rank = r, .world_size = wd->w, .local_rank = r,
                                .local_world_size = wd->w, .master_port = wd->port };
        strcpy(env.master_addr, "127.0.0.1");
        strcpy(env.token, TOKEN);
        struct store *st = store_connect("127.0.0.1", wd->port, TOKEN, 10, err, sizeof err);
        struct comm *c = st ? comm_ring_new(&env, st, timeout_s, err, sizeof err) : NULL;
        if (!c) {
            res.ok = 0;
            snprintf(res.err, sizeof res.err, "%s", err);
        } else {
            fn(c, r, wd->w, &res);
        }
        if (write(p[1], &res, sizeof res) != (ssize_t)sizeof res) _exit(3);
        _exit(res.ok ? 0 : 2);   /* no cleanup: a failed rank leaves at once, like a trainer */
    }
    close(p[1]);
    wd->pid[r] = pid;
    wd->fd[r] = p[0];
}

/* Starts the store here and forks every rank but skip_rank (-1: none). */
static void start_world(struct world *wd, int w, rank_fn fn, double timeout_s, int skip_rank)
{
    char err[512];
    memset(wd, 0, sizeof *wd);
    wd->w = w;
    wd->srv = store_server_start("127.0.0.1", 0, TOKEN, err, sizeof err);
    if (!wd->srv) {
        printf("# %s\n", err);
        exit(1);
    }
    wd->port = store_server_port(wd->srv);
    for (int r = 0; r < w; r++) {
        wd->pid[r] = -1;
        if (r != skip_rank) spawn_rank(wd, r, fn, timeout_s);
    }
}

/* Waits for every rank and stops the store. */
static void reap_world(struct world *wd)
{
    for (int r = 0; r < wd->w; r++) {
        if (wd->pid[r] <= 0) continue;
        close(wd->fd[r]);
        waitpid(wd->pid[r], NULL, 0);
    }
    store_server_stop(wd->srv);
}

/* Reads rank r's report; res->ok is 0 (and err says why) for a rank that died or failed. */
static void read_report(struct world *wd, int r, struct result *res)
{
    memset(res, 0, sizeof *res);
    if (wd->pid[r] <= 0) return;
    if (read(wd->fd[r], res, sizeof *res) != (ssize_t)sizeof *res) {
        memset(res, 0, sizeof *res);
        snprintf(res->err, sizeof res->err, "rank %d reported nothing", r);
    }
    if (!res->ok && res->err[0]) printf("# rank %d: %s\n", r, res->err);
}

static void finish_world(struct world *wd, struct result *res)
{
    for (int r = 0; r < wd->w; r++) read_report(wd, r, &res[r]);
    reap_world(wd);
}

static void run_world(int w, rank_fn fn, double timeout_s, struct result *res)
{
    struct world wd;
    start_world(&wd, w, fn, timeout_s, -1);
    finish_world(&wd, res);
}

static size_t sizes_for(int w, int i)
{
    const size_t s[NSIZES] = { 1, (size_t)w - 1, 1000003, 0 };
    return s[i];
}

static void rank_sizes(struct comm *c, int rank, int w, struct result *res)
{
    for (int v = 0; v < NSIZES; v++) {
        size_t n = sizes_for(w, v);
        float *x = make_vec(rank, v, n);
        if (comm_allreduce_avg_start(c, x, n) < 0 || comm_wait_all(c) < 0) {
            res->ok = 0;
            snprintf(res->err, sizeof res->err, "%s", c->err);
            return;
        }
        check_vec(res, v, x, v, n, w);
        free(x);
    }
    res->comm_ms = c->comm_ms;
    comm_free(c);
}

static void test_allreduce_is_the_average_bitwise_same_everywhere(void)
{
    for (int w = 2; w <= MAXW; w++) {
        struct result a[MAXW], b[MAXW];
        run_world(w, rank_sizes, 10, a);
        run_world(w, rank_sizes, 10, b);
        for (int r = 0; r < w; r++) {
            CHECK(a[r].ok && b[r].ok);
            CHECK(a[r].max_err <= 1e-6);
            for (int v = 0; v < NSIZES; v++) {
                /* The same bytes on every rank, and in the second run. */
                CHECK(a[r].sum[v] == a[0].sum[v]);
                CHECK(b[r].sum[v] == a[0].sum[v]);
            }
        }
        CHECK(a[0].comm_ms > 0);
        printf("# W=%d: max relative error %.3g, comm_ms %.1f\n", w, a[0].max_err, a[0].comm_ms);
    }
}

static void rank_buckets(struct comm *c, int rank, int w, struct result *res)
{
    const size_t n[5] = { 5, 1000, 250000, 3, 77777 };
    float *x[5];
    for (int v = 0; v < 5; v++) {
        x[v] = make_vec(rank, 10 + v, n[v]);
        if (comm_allreduce_avg_start(c, x[v], n[v]) < 0) res->ok = 0;
    }
    if (comm_wait_all(c) < 0) {
        res->ok = 0;
        snprintf(res->err, sizeof res->err, "%s", c->err);
    }
    for (int v = 0; v < 5; v++) {
        check_vec(res, v, x[v], 10 + v, n[v], w);
        free(x[v]);
    }
    /* A second ring on the same store (new keys) still works. */
    comm_free(c);
    res->comm_ms = 0;
}

static void test_buckets_started_back_to_back(void)
{
    struct result res[3];
    run_world(3, rank_buckets, 10, res);
    for (int r = 0; r < 3; r++) {
        CHECK(res[r].ok);
        CHECK(res[r].max_err <= 1e-6);
        for (int v = 0; v < 5; v++) CHECK(res[r].sum[v] == res[0].sum[v]);
    }
}

/* Loops on a large all-reduce until a peer is lost; reports when and how it failed. */
static void rank_until_lost(struct comm *c, int rank, int w, struct result *res)
{
    (void)w;
    size_t n = 4u << 20;
    float *x = make_vec(rank, 0, n);
    for (int it = 0; it < 2000; it++) {
        if (comm_allreduce_avg_start(c, x, n) < 0 || comm_wait_all(c) < 0) {
            res->fail_at = now_s();
            snprintf(res->err, sizeof res->err, "%s", c->err);
            /* A failed comm stays failed. */
            res->ok = comm_wait_all(c) == -1 && comm_allreduce_avg_start(c, x, 1) == -1;
            return;
        }
    }
    res->ok = 0;
    snprintf(res->err, sizeof res->err, "never noticed the lost peer");
}

static void test_killed_peer_ends_the_others_with_its_name(void)
{
    struct world wd;
    struct result res[4];
    start_world(&wd, 4, rank_until_lost, 30, -1);
    usleep(700 * 1000);   /* set up, and deep in all-reduces */
    kill(wd.pid[2], SIGKILL);
    double killed = now_s();
    finish_world(&wd, res);
    for (int r = 0; r < 4; r++) {
        if (r == 2) continue;
        CHECK(res[r].ok);
        CHECK(res[r].fail_at > 0 && res[r].fail_at - killed < 5.0);
        CHECK(strstr(res[r].err, "closed the connection during all-reduce") != NULL);
        printf("# rank %d after %.2f s: %s\n", r, res[r].fail_at - killed, res[r].err);
    }
    /* The first to notice names rank 2 (the next rank of 1, the previous rank of 3); the
     * others may hear first from a neighbour that gave up (the bytes already buffered from
     * rank 2 are read before its end is seen), and name that neighbour. */
    int named = 0;
    for (int r = 1; r < 4; r += 2) {
        const char *role = r == 1 ? "the next rank in the ring" : "the previous rank in the ring";
        if (strstr(res[r].err, "rank 2 (127.0.0.1:") && strstr(res[r].err, role)) named++;
    }
    CHECK(named >= 1);
}

static void test_silent_peer_times_out_with_its_name(void)
{
    struct world wd;
    struct result res[3];
    start_world(&wd, 3, rank_until_lost, 1.0, -1);
    usleep(700 * 1000);
    kill(wd.pid[1], SIGSTOP);
    double stopped = now_s();
    /* Rank 1 never reports; hear from the others first, then end it. */
    read_report(&wd, 0, &res[0]);
    read_report(&wd, 2, &res[2]);
    kill(wd.pid[1], SIGKILL);
    reap_world(&wd);
    for (int r = 0; r < 3; r += 2) {
        CHECK(res[r].ok);
        CHECK(res[r].fail_at > 0 && res[r].fail_at - stopped < 5.0);
        printf("# rank %d after %.2f s: %s\n", r, res[r].fail_at - stopped, res[r].err);
    }
    /* Whoever times out first names rank 1 (rank 2 hears nothing from it, rank 0 cannot send
     * to it); the other may instead hear that the first one gave up. */
    int named = 0;
    for (int r = 0; r < 3; r += 2)
        if (strstr(res[r].err, "rank 1 (127.0.0.1:") && strstr(res[r].err, " for 1 s during"))
            named++;
    CHECK(named >= 1);
}

static void rank_plain(struct comm *c, int rank, int w, struct result *res)
{
    float *x = make_vec(rank, 3, 1000);
    if (comm_allreduce_avg_start(c, x, 1000) < 0 || comm_wait_all(c) < 0) {
        res->ok = 0;
        snprintf(res->err, sizeof res->err, "%s", c->err);
    }
    check_vec(res, 0, x, 3, 1000, w);
    free(x);
    comm_free(c);
}

static void test_stray_connection_is_refused(void)
{
    struct world wd;
    struct result res[2];
    char err[512];
    start_world(&wd, 2, rank_plain, 10, 1);   /* rank 1 comes later */
    struct store *st = store_connect("127.0.0.1", wd.port, TOKEN, 5, err, sizeof err);
    void *addr = NULL;
    size_t n;
    CHECK(st && store_get(st, "ring/1/0", &addr, &n, 5) == 0);
    /* Pretend to be rank 1 with the wrong token (hello format: comm_ring_setup.c). */
    int fd = -1;
    if (addr) {
        int port = atoi(strrchr(addr, ':') + 1);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
        unsigned char h[19 + 5] = { 'D', 'D', 'P', 'R', 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2,
                                    0, 5, 'w', 'r', 'o', 'n', 'g' };
        CHECK(write(fd, h, sizeof h) == (ssize_t)sizeof h);
    }
    spawn_rank(&wd, 1, rank_plain, 10);
    unsigned char reply[5] = { 0 };
    if (fd >= 0) {
        struct timeval tv = { 5, 0 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        CHECK(read(fd, reply, 5) == 5);
        CHECK(memcmp(reply, "DDPR\x01", 5) == 0);   /* status 1: wrong token */
        CHECK(read(fd, reply, 1) == 0);             /* and closed */
        close(fd);
    }
    free(addr);
    store_close(st);
    finish_world(&wd, res);
    CHECK(res[0].ok && res[1].ok);
    CHECK(res[0].max_err <= 1e-6 && res[0].sum[0] == res[1].sum[0]);
}

static void test_world_of_one_is_a_no_op(void)
{
    char err[512];
    struct dist_env env = { .rank = 0, .world_size = 1, .local_world_size = 1 };
    struct comm *c = comm_ring_new(&env, NULL, 1, err, sizeof err);
    CHECK(c != NULL);
    if (!c) return;
    float x[3] = { 1, 2, 3 };
    CHECK_INT(comm_allreduce_avg_start(c, x, 3), 0);
    CHECK_INT(comm_wait_all(c), 0);
    CHECK(x[0] == 1 && x[1] == 2 && x[2] == 3);
    CHECK(c->comm_ms == 0);
    CHECK_INT(c->world_size, 1);
    comm_free(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(test_world_of_one_is_a_no_op);
    RUN(test_allreduce_is_the_average_bitwise_same_everywhere);
    RUN(test_buckets_started_back_to_back);
    RUN(test_stray_connection_is_refused);
    RUN(test_killed_peer_ends_the_others_with_its_name);
    RUN(test_silent_peer_times_out_with_its_name);
    return tap_done();
}
