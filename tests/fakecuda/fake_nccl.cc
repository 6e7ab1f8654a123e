/* fakecuda's NCCL (see nccl.h): ranks of one communicator meet in a directory named after the
 * unique id. Files there, each written to a temporary name and renamed:
 *   rank.R    "PID DEVICE HOST" of rank R: set-up completes when every rank's is there
 *   op.K.R    rank R's contribution to the communicator's K-th all-reduce
 *   done.R    the last all-reduce rank R completed: a rank deletes its own op files once every
 *             rank has completed them
 *   fin.R     rank R finalized or aborted: the last one removes the directory
 * An all-reduce is queued on its stream and completes there when every rank's file is there;
 * the sum goes in rank order, in double, so every rank gets the same bits. A rank whose
 * process has ended while a peer waits for it turns into ncclRemoteError, as NCCL reports a
 * peer that went away. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fake_internal.h"
#include "nccl.h"

enum comm_state { C_JOINING, C_READY, C_FAILED, C_ABORTED };

struct ncclComm {
    std::string dir;
    int nranks, rank, device;
    comm_state state;
    ncclResult_t async;
    std::string last;
    std::vector<int> pids;
    long long next_op, deleted_upto;
};

static std::string last_global;

static bool write_file(const std::string &path, const void *data, size_t len)
{
    std::string tmp = path + ".tmp";
    FILE *f = fopen(tmp.c_str(), "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

static bool read_file(const std::string &path, std::string &out)
{
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return false;
    out.clear();
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    fclose(f);
    return true;
}

static std::string rank_path(const ncclComm *c, const char *what, int r)
{
    return c->dir + "/" + what + "." + std::to_string(r);
}

static std::string op_path(const ncclComm *c, long long k, int r)
{
    return c->dir + "/op." + std::to_string(k) + "." + std::to_string(r);
}

static bool alive(int pid)
{
    if (pid <= 0) return false;
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    std::string stat;   /* an exited child not yet reaped is a zombie: gone all the same */
    if (read_file("/proc/" + std::to_string(pid) + "/stat", stat)) {
        size_t p = stat.rfind(')');
        if (p != std::string::npos && p + 2 < stat.size() && stat[p + 2] == 'Z') return false;
    }
    return true;
}

static ncclResult_t set_failed(ncclComm *c, ncclResult_t r, const std::string &why)
{
    c->state = C_FAILED;
    c->async = r;
    c->last = why;
    return r;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    if (getrandom(id->internal, 16, 0) != 16) return ncclSystemError;
    return ncclSuccess;
}

/* Set-up: done when every rank has announced itself; two ranks on one device are refused. */
static void poll_join(ncclComm *c)
{
    if (c->state != C_JOINING) return;
    std::vector<std::string> where(c->nranks);
    for (int r = 0; r < c->nranks; r++) {
        std::string s;
        if (!read_file(rank_path(c, "rank", r), s)) return;
        int pid = 0, dev = -1;
        char host[256] = "";
        if (sscanf(s.c_str(), "%d %d %255s", &pid, &dev, host) != 3) return;
        c->pids[r] = pid;
        where[r] = std::string(host) + " device " + std::to_string(dev);
        for (int q = 0; q < r; q++)
            if (where[q] == where[r]) {
                set_failed(c, ncclInvalidUsage, "Duplicate GPU detected: rank " +
                           std::to_string(q) + " and rank " + std::to_string(r) +
                           " both on fakecuda " + where[r]);
                return;
            }
    }
    c->state = C_READY;
    c->async = ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        last_global = "rank " + std::to_string(rank) + " of " + std::to_string(nranks);
        return ncclInvalidArgument;
    }
    const char *base = getenv("FAKENCCL_DIR");
    if (!base || !*base) base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    ncclComm *c = new ncclComm();
    c->dir = std::string(base) + "/fakenccl-" + hex;
    c->nranks = nranks;
    c->rank = rank;
    c->device = fake_current_device();
    c->state = C_JOINING;
    c->async = ncclInProgress;
    c->pids.assign(nranks, 0);
    c->deleted_upto = -1;
    if (mkdir(c->dir.c_str(), 0700) != 0 && errno != EEXIST) {
        last_global = c->dir + ": " + strerror(errno);
        delete c;
        return ncclSystemError;
    }
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    char line[400];
    int len = snprintf(line, sizeof line, "%d %d %s\n", (int)getpid(), c->device, host);
    std::string prev;
    int prev_pid = 0;
    if (read_file(rank_path(c, "rank", rank), prev) && sscanf(prev.c_str(), "%d", &prev_pid) == 1 &&
        prev_pid != (int)getpid() && alive(prev_pid)) {
        last_global = "rank " + std::to_string(rank) + " joined twice (pid " +
                      std::to_string(prev_pid) + " has it)";
        delete c;
        return ncclInvalidUsage;
    }
    if (!write_file(rank_path(c, "rank", rank), line, (size_t)len)) {
        last_global = c->dir + ": " + strerror(errno);
        delete c;
        return ncclSystemError;
    }
    *out = c;
    poll_join(c);
    bool blocking = !config || config->blocking;
    while (blocking && c->state == C_JOINING) {
        usleep(1000);
        poll_join(c);
    }
    return c->state == C_READY ? ncclSuccess : c->state == C_FAILED ? c->async : ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async)
{
    if (!c) return ncclInvalidArgument;
    poll_join(c);
    *async = c->state == C_ABORTED ? ncclSuccess : c->async;
    return ncclSuccess;
}

struct pending_reduce {
    ncclComm *c;
    long long k;
    float *recv;
    size_t count;
    ncclRedOp_t op;
};

/* Deletes this rank's op files that every rank has completed. */
static void collect(ncclComm *c)
{
    long long low = c->next_op;
    for (int r = 0; r < c->nranks; r++) {
        std::string s;
        long long d = -1;
        if (read_file(rank_path(c, "done", r), s)) sscanf(s.c_str(), "%lld", &d);
        if (d < low) low = d;
    }
    for (; c->deleted_upto < low; c->deleted_upto++)
        unlink(op_path(c, c->deleted_upto + 1, c->rank).c_str());
}

static bool reduce_poll(void *ctx)
{
    pending_reduce *p = (pending_reduce *)ctx;
    ncclComm *c = p->c;
    std::vector<double> sum(p->count, 0.0);
    std::string data;
    for (int r = 0; r < c->nranks; r++) {
        struct stat st;
        if (stat(op_path(c, p->k, r).c_str(), &st) != 0) {
            if (!alive(c->pids[r]) && c->state == C_READY)
                set_failed(c, ncclRemoteError, "rank " + std::to_string(r) + " (pid " +
                           std::to_string(c->pids[r]) + ") exited before all-reduce " +
                           std::to_string(p->k));
            return false;
        }
    }
    for (int r = 0; r < c->nranks; r++) {
        if (!read_file(op_path(c, p->k, r), data) || data.size() != p->count * 4)
            fake_die("fake NCCL: all-reduce %lld: rank %d's contribution is %zu bytes, not %zu: "
                     "the ranks queued different sizes", p->k, r, data.size(), p->count * 4);
        const float *x = (const float *)data.data();
        for (size_t i = 0; i < p->count; i++) sum[i] += x[i];
    }
    fake_mem_open();
    for (size_t i = 0; i < p->count; i++)
        p->recv[i] = (float)(p->op == ncclAvg ? sum[i] / c->nranks : sum[i]);
    fake_mem_close();
    std::string k = std::to_string(p->k);
    write_file(rank_path(c, "done", c->rank), k.data(), k.size());
    collect(c);
    delete p;
    return true;
}

static void reduce_drop(void *ctx) { delete (pending_reduce *)ctx; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t stream)
{
    if (!c) return ncclInvalidArgument;
    if (c->state == C_FAILED) return c->async;
    if (c->state != C_READY) {
        c->last = "ncclAllReduce on a communicator that is not set up (or was aborted)";
        return ncclInvalidUsage;
    }
    if (type != ncclFloat || (op != ncclSum && op != ncclAvg)) {
        c->last = "fakecuda's NCCL reduces ncclFloat with ncclSum or ncclAvg only";
        return ncclInvalidArgument;
    }
    if (!fake_dev_span(send, count * 4) || !fake_dev_span(recv, count * 4)) {
        c->last = "ncclAllReduce: a buffer of " + std::to_string(count) + " floats is not "
                  "inside one device allocation";
        fake_say("%s", c->last.c_str());
        return ncclInvalidArgument;
    }
    cudaStream_t s = fake_stream(stream);
    if (!s) return ncclInvalidArgument;
    /* The contribution is the buffer as it is when the stream reaches the operation: here,
     * once what was queued before it has finished. */
    fake_stream_drain(s);
    long long k = c->next_op++;
    fake_mem_open();
    bool ok = write_file(op_path(c, k, c->rank), send, count * 4);
    fake_mem_close();
    if (!ok) return set_failed(c, ncclSystemError, c->dir + ": " + strerror(errno));
    pending_reduce *p = new pending_reduce{c, k, (float *)recv, count, op};
    fake_stream_push(s, fake_op{reduce_poll, reduce_drop, p, c});
    fake_stream_progress(s);
    return ncclSuccess;
}

/* The last rank to leave removes the directory (ranks that never joined do not count: a
 * set-up that timed out leaves nothing behind). */
static void leave(ncclComm *c)
{
    write_file(rank_path(c, "fin", c->rank), "", 0);
    for (int r = 0; r < c->nranks; r++)
        if (access(rank_path(c, "rank", r).c_str(), F_OK) == 0 &&
            access(rank_path(c, "fin", r).c_str(), F_OK) != 0)
            return;
    DIR *d = opendir(c->dir.c_str());
    if (!d) return;
    while (struct dirent *e = readdir(d))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink((c->dir + "/" + e->d_name).c_str());
    closedir(d);
    rmdir(c->dir.c_str());
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    return c ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!c) return ncclInvalidArgument;
    fake_stream_drop_owner(c);
    leave(c);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c) return ncclSuccess;
    c->state = C_ABORTED;
    return ncclCommDestroy(c);
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for "
                                        "details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL "
                                   "developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t c)
{
    return c ? c->last.c_str() : last_global.c_str();
}
