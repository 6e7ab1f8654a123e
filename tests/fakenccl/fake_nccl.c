/* TEST DOUBLE of NVIDIA's NCCL (libnccl.so.2), for the agent's bench_nccl where no GPU exists
 * (docs/check.md "Measured preflight"; tests/it_check_nccl.sh). Built as
 * build/fakenccl/libnccl.so.2; a test puts that directory on LD_LIBRARY_PATH beside the fake
 * CUDA runtime (tests/fakecudart) and the agent's dlopen finds it as it would find NCCL. Only the
 * calls the agent makes are here, with NCCL's ABI (nccl.h).
 *
 * What it does for real: the bytes of an all-reduce go over TCP between the nodes, so that a
 * shaped or stalled link shows in the figures. As NCCL does, ncclGetUniqueId puts the address
 * of a bootstrap root in the id (NCCL_SOCKET_IFNAME's interface, else the first non-loopback
 * IPv4 address) and serves it on a thread; each rank tells the root where it listens and hears
 * where the next rank does, and the ranks make a ring. ncclAllReduce is a ring all-reduce
 * (reduce-scatter then all-gather: 2(n-1)/n of the bytes sent by each rank, as NCCL's ring)
 * of the float sums of a host buffer of its own: the fake CUDA runtime's device memory is
 * addresses only. Within a group (ncclGroupStart/End) the calls run on one thread each, as the
 * ranks of one process must progress together. Variables:
 *
 *   DDPTOP_FAKE_NCCL_FAIL=1   ncclCommInitRank fails: "unhandled system error" (with
 *                             ncclGetLastError saying it is this double's)
 *   DDPTOP_FAKE_NCCL_VERSION  what ncclGetVersion says (default 22105: 2.21.5)
 *   DDPTOP_FAKE_NCCL_ABSENT=1 ncclGetVersion fails, as if the node had no NCCL (this machine has a
 *                             real one in the linker's cache, which the double must hide) */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
typedef struct fake_comm *ncclComm_t;

#define ncclSuccess 0
#define ncclSystemError 2
#define ncclInvalidArgument 4
#define ncclRemoteError 6
#define MAGIC "FAKENCCL"
#define RING_TIMEOUT_MS 60000
#define GROUP_MAX 64

struct id_body { char magic[8]; struct sockaddr_in root; };
struct hello { uint32_t rank, nranks; struct sockaddr_in at; };

struct fake_comm {
    int rank, nranks;
    int next_fd, prev_fd;     /* to the next rank, from the previous one */
    char *buf, *tmp;
    size_t cap;
};

/* the last failure of any rank (the group's threads write it; the caller reads it after) */
static char last_error[200];

static ncclResult_t fail(ncclResult_t r, const char *what)
{
    snprintf(last_error, sizeof last_error, "%s (fake NCCL, a test double)%s%s", what, errno ? ": " : "",
             errno ? strerror(errno) : "");
    return r;
}

/* The address to bind: NCCL_SOCKET_IFNAME's first interface (a prefix, as NCCL reads it), else
 * the first up, non-loopback IPv4 address. */
static int local_addr(struct in_addr *out)
{
    struct ifaddrs *ifs, *i;
    const char *want = getenv("NCCL_SOCKET_IFNAME");
    char name[IF_NAMESIZE + 1] = "";
    if (want && *want && *want != '^') snprintf(name, sizeof name, "%.*s", (int)strcspn(want + (*want == '='), ","),
                                                want + (*want == '='));
    if (getifaddrs(&ifs) < 0) return -1;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        if (name[0] ? strncmp(i->ifa_name, name, strlen(name)) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
        *out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        freeifaddrs(ifs);
        return 0;
    }
    freeifaddrs(ifs);
    if (name[0]) return -1;                  /* as NCCL: "no socket interface found" */
    out->s_addr = htonl(INADDR_LOOPBACK);   /* a lone machine */
    return 0;
}

static int listen_on(struct sockaddr_in *at)
{
    socklen_t len = sizeof *at;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(at, 0, sizeof *at);
    at->sin_family = AF_INET;
    if (fd < 0 || local_addr(&at->sin_addr) < 0 || bind(fd, (struct sockaddr *)at, sizeof *at) < 0 ||
        listen(fd, 1024) < 0 || getsockname(fd, (struct sockaddr *)at, &len) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int io_all(int fd, void *p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? send(fd, (char *)p + done, n - done, MSG_NOSIGNAL) : recv(fd, (char *)p + done, n - done, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

/* The bootstrap root: every rank's address in, each rank's next one out. */
static void *root_main(void *arg)
{
    int lfd = (int)(intptr_t)arg, fds[4096];
    struct hello h, at[4096];
    uint32_t n = 0, got = 0;
    do {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 || io_all(fd, &h, sizeof h, 0) < 0 || h.nranks == 0 || h.nranks > 4096 ||
            h.rank >= h.nranks || (n && h.nranks != n)) {
            if (fd >= 0) close(fd);
            continue;
        }
        n = h.nranks;
        fds[h.rank] = fd;
        at[h.rank] = h;
        got++;
    } while (got < n);
    for (uint32_t r = 0; r < n; r++) {
        io_all(fds[r], &at[(r + 1) % n].at, sizeof at[0].at, 1);
        close(fds[r]);
    }
    close(lfd);
    return NULL;
}

ncclResult_t ncclGetVersion(int *v)
{
    const char *s = getenv("DDPTOP_FAKE_NCCL_VERSION"), *absent = getenv("DDPTOP_FAKE_NCCL_ABSENT");
    if (absent && *absent == '1') return fail(ncclSystemError, "DDPTOP_FAKE_NCCL_ABSENT is set");
    *v = s && *s ? atoi(s) : 22105;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    struct id_body b;
    pthread_t th;
    memset(id, 0, sizeof *id);
    memcpy(b.magic, MAGIC, 8);
    errno = 0;
    int fd = listen_on(&b.root);
    if (fd < 0) return fail(ncclSystemError, "Bootstrap : no socket interface found, or listen failed");
    if (pthread_create(&th, NULL, root_main, (void *)(intptr_t)fd) != 0) {
        close(fd);
        return fail(ncclSystemError, "bootstrap root: thread");
    }
    pthread_detach(th);
    memcpy(id->internal, &b, sizeof b);
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    struct id_body b;
    struct hello h = { .rank = (uint32_t)rank, .nranks = (uint32_t)nranks };
    struct sockaddr_in next;
    const char *f = getenv("DDPTOP_FAKE_NCCL_FAIL");
    memcpy(&b, id.internal, sizeof b);
    errno = 0;
    if (f && *f == '1') return fail(ncclSystemError, "DDPTOP_FAKE_NCCL_FAIL is set");
    if (memcmp(b.magic, MAGIC, 8) != 0 || nranks < 1 || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "not a fake NCCL unique id, or a bad rank");
    struct fake_comm *c = calloc(1, sizeof *c);
    c->rank = rank;
    c->nranks = nranks;
    c->next_fd = c->prev_fd = -1;
    *out = c;
    if (nranks == 1) return ncclSuccess;
    int lfd = listen_on(&h.at), rfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || rfd < 0 || connect(rfd, (struct sockaddr *)&b.root, sizeof b.root) < 0 ||
        io_all(rfd, &h, sizeof h, 1) < 0 || io_all(rfd, &next, sizeof next, 0) < 0) {
        if (lfd >= 0) close(lfd);
        if (rfd >= 0) close(rfd);
        return fail(ncclRemoteError, "bootstrap: the root or a peer went away");
    }
    close(rfd);
    /* connect first: the next rank's backlog takes it before it accepts, so no order deadlocks */
    c->next_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->next_fd < 0 || connect(c->next_fd, (struct sockaddr *)&next, sizeof next) < 0 ||
        (c->prev_fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
        close(lfd);
        return fail(ncclRemoteError, "ring: connect to the next rank");
    }
    close(lfd);
    return ncclSuccess;
}

/* Sends n bytes to the next rank while receiving n from the previous one (both at once: a
 * ring of blocking sends would deadlock once the socket buffers are full). */
static int exchange(struct fake_comm *c, const char *out, char *in, size_t n)
{
    size_t sent = 0, got = 0;
    while (sent < n || got < n) {
        struct pollfd p[2] = { { c->next_fd, sent < n ? POLLOUT : 0, 0 }, { c->prev_fd, got < n ? POLLIN : 0, 0 } };
        int r = poll(p, 2, RING_TIMEOUT_MS);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        if (p[0].revents & (POLLERR | POLLHUP)) return -1;
        if (p[0].revents & POLLOUT) {
            ssize_t k = send(c->next_fd, out + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && errno != EAGAIN && errno != EINTR) return -1;
            if (k > 0) sent += (size_t)k;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t k = recv(c->prev_fd, in + got, n - got, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) return -1;
            if (k > 0) got += (size_t)k;
        }
    }
    return 0;
}

static ncclResult_t all_reduce(size_t count, int dtype, struct fake_comm *c)
{
    static const size_t size_of[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
    size_t es = dtype >= 0 && dtype < 10 ? size_of[dtype] : 4, n = (size_t)c->nranks;
    size_t chunk = (count * es + n - 1) / n;
    if (n == 1) return ncclSuccess;
    chunk = (chunk + 3) & ~(size_t)3;
    if (c->cap < chunk * n) {
        free(c->buf);
        free(c->tmp);
        c->cap = chunk * n;
        c->buf = calloc(1, c->cap);
        c->tmp = malloc(chunk);
        if (!c->buf || !c->tmp) return fail(ncclSystemError, "out of host memory");
    }
    errno = 0;
    /* reduce-scatter: after n-1 steps chunk (rank+1) mod n holds everyone's sum */
    for (size_t s = 0; s + 1 < n; s++) {
        size_t out = ((size_t)c->rank + n - s) % n, in = ((size_t)c->rank + 2 * n - s - 1) % n;
        if (exchange(c, c->buf + out * chunk, c->tmp, chunk) < 0)
            return fail(ncclRemoteError, "ring: a peer stalled or went away");
        float *dst = (float *)(c->buf + in * chunk), *add = (float *)c->tmp;
        for (size_t k = 0; k < chunk / 4; k++) dst[k] += add[k];
    }
    /* all-gather: the sums go round */
    for (size_t s = 0; s + 1 < n; s++) {
        size_t out = ((size_t)c->rank + 1 + n - s) % n, in = ((size_t)c->rank + n - s) % n;
        if (exchange(c, c->buf + out * chunk, c->buf + in * chunk, chunk) < 0)
            return fail(ncclRemoteError, "ring: a peer stalled or went away");
    }
    return ncclSuccess;
}

/* ---- groups: calls recorded, then run on a thread each and joined ---- */

struct call {
    int kind;                 /* 0: init, 1: all-reduce */
    ncclComm_t *out;
    int nranks, rank, dtype;
    ncclUniqueId id;
    size_t count;
    ncclComm_t comm;
    ncclResult_t res;
};
static struct call group[GROUP_MAX];
static int group_depth, group_n;

static void *call_main(void *arg)
{
    struct call *k = arg;
    k->res = k->kind == 0 ? init_rank(k->out, k->nranks, k->id, k->rank) : all_reduce(k->count, k->dtype, k->comm);
    return NULL;
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    pthread_t th[GROUP_MAX];
    ncclResult_t r = ncclSuccess;
    if (group_depth == 0) return ncclInvalidArgument;
    if (--group_depth) return ncclSuccess;
    for (int i = 0; i < group_n; i++) pthread_create(&th[i], NULL, call_main, &group[i]);
    for (int i = 0; i < group_n; i++) {
        pthread_join(th[i], NULL);
        if (group[i].res != ncclSuccess && r == ncclSuccess) r = group[i].res;
    }
    group_n = 0;
    return r;
}

static ncclResult_t run(struct call k)
{
    if (!group_depth) {
        call_main(&k);
        return k.res;
    }
    if (group_n == GROUP_MAX) return ncclInvalidArgument;
    group[group_n++] = k;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    *comm = NULL;
    return run((struct call){ .kind = 0, .out = comm, .nranks = nranks, .rank = rank, .id = id });
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, ncclComm_t comm,
                           void *stream)
{
    (void)send, (void)recv, (void)op, (void)stream;
    if (!comm) return ncclInvalidArgument;
    return run((struct call){ .kind = 1, .count = count, .dtype = dtype, .comm = comm });
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!c) return ncclSuccess;
    if (c->next_fd >= 0) close(c->next_fd);
    if (c->prev_fd >= 0) close(c->prev_fd);
    free(c->buf);
    free(c->tmp);
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c)
{
    (void)c;
    return last_error;
}
