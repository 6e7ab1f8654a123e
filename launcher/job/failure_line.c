/* What one output line says about a failure (failure_line.h). The strings matched are the
 * messages' own, from their sources (tests/fixtures/failures/ cites each):
 *   PyTorch  torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (2.1-2.5): "Watchdog caught
 *            collective operation timeout: WorkNCCL(SeqNum=N, OpType=OP, NumelIn=..,
 *            NumelOut=.., Timeout(ms)=..) ran for N milliseconds before timing out.",
 *            "Timeout at NCCL work: N, last enqueued NCCL work: N, last completed NCCL work: N."
 *            (2.2), "Exception (either an error or timeout) detected by watchdog at work: N,
 *            ..." (2.3+); NCCLUtils's "NCCL error in: FILE:LINE, unhandled system error ...";
 *            c10/cuda's "CUDA out of memory. Tried to allocate ..."
 *   gloo     transport/tcp/pair.cc: "Connection closed by peer [ADDR]:PORT", "Read error
 *            [ADDR]:PORT: Connection reset by peer"; unbound_buffer.cc "Timed out waiting
 *            Nms for recv operation to complete"
 *   NCCL     net_ib.cc "NET/IB : Got completion from peer ADDR<PORT> with error N, ..."
 *   Slurm    slurmstepd "*** STEP 12.0 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***"
 *   config   ddptop-train's runtime/train_cuda.c "NCCL needs a GPU for every rank", "no CUDA
 *            device visible"; NCCL's init.cc "Duplicate GPU detected : rank 1 and rank 0
 *            both on CUDA device 0" (torch prints it under "NCCL error in:"); CUDA's
 *            cudaErrorInvalidDevice "invalid device ordinal" */
#include "failure_line.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *label, *fix;
} classes[FAILURE_CLASSES] = {
    [FAILURE_NONE] = { "none", "not classified", "" },
    [FAILURE_CUDA_OOM] = { "cuda_oom", "CUDA out of memory",
        "lower the per-GPU batch size, or use activation checkpointing or mixed precision; "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps fragmentation" },
    [FAILURE_COLLECTIVE_TIMEOUT] = { "collective_timeout", "collective timeout",
        "find why the lagging rank did not reach the collective (its stack: --on-hang stacks; "
        "a branch that skips a collective, slow data or I/O on its node); raise the timeout "
        "only if the wait is legitimate" },
    [FAILURE_NCCL_ERROR] = { "nccl_error", "NCCL error",
        "check the named nodes' network (ibstat, link errors, `ddptop check`); rerun with "
        "NCCL_DEBUG=INFO to see which transport and interface NCCL chose" },
    [FAILURE_CONN_RESET] = { "connection_reset", "connection reset",
        "the peer process died or its node dropped off the network: look at the peer's own "
        "log for why it ended, and at the link between the two nodes" },
    [FAILURE_OOM_KILL] = { "oom_kill", "killed by the OOM killer",
        "lower host memory use (dataloader workers, pinned memory, prefetch) or ask for more "
        "memory per node" },
    [FAILURE_SEGFAULT] = { "segfault", "segmentation fault",
        "a native crash: get its stack (run with PYTHONFAULTHANDLER=1, or a core dump) and "
        "check the extension or library versions it names" },
    [FAILURE_PYTHON_EXCEPTION] = { "python_exception", "Python exception",
        "fix the error at the frame named (the rank's full traceback is in its log)" },
    [FAILURE_DISK_FULL] = { "disk_full", "no space left on device",
        "free space on the node's checkpoint or log volume, or point snapshots at a larger "
        "one (df -h on the node)" },
    [FAILURE_PREEMPTED] = { "preempted", "cancelled by the scheduler",
        "resume from the last snapshot; ask for a longer time limit, or a partition or QOS "
        "that is not preempted" },
    [FAILURE_NODE_LOST] = { "node_lost", "node lost",
        "check the node (power, network, its agent's log); --nnodes MIN:MAX lets a spare "
        "take its place" },
    [FAILURE_HANG] = { "hang", "hang",
        "look at where the lagging ranks are (the stacks saved); a rank outside the "
        "collective the others wait in is the one to fix" },
    [FAILURE_UNKNOWN] = { "unknown", "unknown",
        "read the rank's last lines and its full log" },
    [FAILURE_LOSS_NAN] = { "loss_nan", "loss NaN or inf",
        "lower the learning rate (or lengthen its warmup), enable gradient clipping "
        "(clip_grad_norm_ 1.0), prefer bf16 to fp16; check the first rank's data at that step; "
        "resume from a snapshot taken before it" },
    [FAILURE_LOSS_SPIKE] = { "loss_spike", "loss spike",
        "check the data the first rank saw at that step (a corrupt or repeated batch); lower the "
        "learning rate or enable gradient clipping; resume from a snapshot taken before it" },
    [FAILURE_CONFIG] = { "configuration", "configuration error",
        "a restart runs into it again: start at most one rank per GPU (slots= in the hostfile, "
        "CUDA_VISIBLE_DEVICES), give each rank its own device (torch.cuda.set_device(LOCAL_RANK)), "
        "or train on the CPU (--device cpu); the rank's message says which" },
};

const char *failure_class_name(enum failure_class c)
{
    return c >= 0 && c < FAILURE_CLASSES ? classes[c].name : "unknown";
}

const char *failure_class_label(enum failure_class c)
{
    return c >= 0 && c < FAILURE_CLASSES ? classes[c].label : "unknown";
}

const char *failure_class_fix(enum failure_class c)
{
    return c >= 0 && c < FAILURE_CLASSES ? classes[c].fix : "";
}

enum failure_class failure_class_parse(const char *name)
{
    for (int c = 1; name && c < FAILURE_CLASSES; c++)
        if (strcmp(name, classes[c].name) == 0) return (enum failure_class)c;
    return FAILURE_NONE;
}

static bool has(const char *t, size_t len, const char *needle)
{
    return memmem(t, len, needle, strlen(needle)) != NULL;
}

static const char *find(const char *t, size_t len, const char *needle)
{
    return memmem(t, len, needle, strlen(needle));
}

static size_t scan_len(size_t len)
{
    return len > FAILURE_LINE_SCAN ? FAILURE_LINE_SCAN : len;
}

bool failure_line_ib(const char *text, size_t len)
{
    return has(text, scan_len(len), "NET/IB : Got completion from peer");
}

enum failure_class failure_line_class(const char *t, size_t len)
{
    len = scan_len(len);
    if (has(t, len, "No space left on device") || has(t, len, "[Errno 28]") || has(t, len, "ENOSPC"))
        return FAILURE_DISK_FULL;
    if (has(t, len, "CUDA out of memory") || has(t, len, "CUDA error: out of memory") ||
        has(t, len, "OutOfMemoryError"))
        return FAILURE_CUDA_OOM;
    /* before NCCL's: torch raises NCCL's "Duplicate GPU" as an "NCCL error in:" */
    if (has(t, len, "NCCL needs a GPU for every rank") || has(t, len, "no CUDA device visible") ||
        has(t, len, "Duplicate GPU detected") || has(t, len, "invalid device ordinal"))
        return FAILURE_CONFIG;
    if (has(t, len, "*** ") && (has(t, len, " CANCELLED AT ") || has(t, len, "DUE TO PREEMPTION")))
        return FAILURE_PREEMPTED;
    if (has(t, len, "Watchdog caught collective operation timeout") ||
        has(t, len, "Timeout at NCCL work:") ||
        (has(t, len, "Timed out waiting ") && has(t, len, " operation to complete")))
        return FAILURE_COLLECTIVE_TIMEOUT;
    if (failure_line_ib(t, len) || has(t, len, "ncclSystemError") || has(t, len, "ncclRemoteError") ||
        has(t, len, "ncclInternalError") || has(t, len, "unhandled system error") ||
        has(t, len, "remote process exited or there was a network error") ||
        has(t, len, "NCCL error in:"))
        return FAILURE_NCCL_ERROR;
    if (has(t, len, "Connection reset by peer") || has(t, len, "Connection closed by peer") ||
        has(t, len, "Connection closed by remote peer") || has(t, len, "Connection refused") ||
        has(t, len, "ECONNRESET") || has(t, len, "ECONNREFUSED") ||
        has(t, len, "Software caused connection abort"))
        return FAILURE_CONN_RESET;
    return FAILURE_NONE;
}

/* The number after needle (-1: needle absent or no digits after it). */
static long num_after(const char *t, size_t len, const char *needle)
{
    const char *p = find(t, len, needle);
    if (!p) return -1;
    p += strlen(needle);
    const char *end = t + len;
    if (p >= end || !(isdigit((unsigned char)*p) || *p == '-')) return -1;
    char buf[24];
    size_t n = 0;
    while (p < end && n + 1 < sizeof buf && (isdigit((unsigned char)*p) || (n == 0 && *p == '-')))
        buf[n++] = *p++;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

bool failure_line_watchdog(const char *t, size_t len, struct watchdog_seq *o)
{
    len = scan_len(len);
    *o = (struct watchdog_seq){ .seq = -1, .enqueued = -1, .completed = -1 };
    /* every form has one of these: most lines are turned away after two scans */
    if (!has(t, len, "SeqNum=") && !has(t, len, "work: ")) return false;
    o->seq = num_after(t, len, "WorkNCCL(SeqNum=");
    if (o->seq < 0) o->seq = num_after(t, len, "Timeout at NCCL work: ");
    if (o->seq < 0) o->seq = num_after(t, len, "detected by watchdog at work: ");
    o->enqueued = num_after(t, len, "last enqueued NCCL work: ");
    if (o->enqueued < 0) o->enqueued = num_after(t, len, "Last enqueued NCCL work: ");
    o->completed = num_after(t, len, "last completed NCCL work: ");
    const char *op = find(t, len, "OpType=");
    if (op) {
        op += 7;
        size_t n = 0;
        while (op + n < t + len && n + 1 < sizeof o->op && (isalnum((unsigned char)op[n]) || op[n] == '_'))
            n++;
        memcpy(o->op, op, n);
        o->op[n] = '\0';
    }
    o->timeout = has(t, len, "collective operation timeout") || has(t, len, "Timeout at NCCL work");
    return o->seq >= 0 || o->enqueued >= 0 || o->completed >= 0;
}

/* A dotted quad at p (digits and three dots, each part <= 255): its length, 0 if none. */
static size_t ipv4_at(const char *p, const char *end)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        size_t d = 0;
        int v = 0;
        while (p + i < end && isdigit((unsigned char)p[i]) && d < 3) v = v * 10 + (p[i++] - '0'), d++;
        if (d == 0 || v > 255) return 0;
        if (part < 3) {
            if (p + i >= end || p[i] != '.') return 0;
            i++;
        }
    }
    if (p + i < end && (isdigit((unsigned char)p[i]) || p[i] == '.')) return 0;
    return i;
}

bool failure_line_peer(const char *t, size_t len, char *buf, size_t n)
{
    len = scan_len(len);
    const char *end = t + len;
    /* gloo's "[ADDR]:PORT" (IPv4 or IPv6 inside the brackets) */
    for (const char *p = t; p < end; p++) {
        if (*p != '[') continue;
        const char *q = p + 1;
        while (q < end && (isxdigit((unsigned char)*q) || *q == ':' || *q == '.')) q++;
        if (q < end && *q == ']' && q + 1 < end && q[1] == ':' && q - p > 2 &&
            (memchr(p + 1, '.', (size_t)(q - p - 1)) || memchr(p + 1, ':', (size_t)(q - p - 1)))) {
            snprintf(buf, n, "%.*s", (int)(q - p - 1), p + 1);
            return true;
        }
    }
    /* NCCL's "ADDR<PORT>" (ncclSocketToString: a host name when it resolves, else the
     * address) */
    for (const char *p = t; p < end; p++) {
        if (*p != '<' || p == t || p + 1 >= end || !isdigit((unsigned char)p[1])) continue;
        const char *q = p + 1;
        while (q < end && isdigit((unsigned char)*q)) q++;
        if (q >= end || *q != '>') continue;
        const char *b = p;
        while (b > t && (isalnum((unsigned char)b[-1]) || b[-1] == '.' || b[-1] == '-' || b[-1] == ':' ||
                         b[-1] == '_'))
            b--;
        if (b == p) continue;
        snprintf(buf, n, "%.*s", (int)(p - b), b);
        return true;
    }
    /* an address anywhere else in the line */
    for (const char *p = t; p < end; p++) {
        if (!isdigit((unsigned char)*p) || (p > t && (isalnum((unsigned char)p[-1]) || p[-1] == '.'))) continue;
        size_t l = ipv4_at(p, end);
        if (!l) continue;
        snprintf(buf, n, "%.*s", (int)l, p);
        return true;
    }
    return false;
}

/* torchrun 2.3+ and Python's logging put "[rank3]: " (or "[rank3]:") before a rank's
 * lines; the frame and exception shapes are looked at after it. */
static const char *skip_rank_prefix(const char *t, size_t *len)
{
    if (*len > 6 && memcmp(t, "[rank", 5) == 0) {
        size_t i = 5;
        while (i < *len && isdigit((unsigned char)t[i])) i++;
        if (i + 1 < *len && t[i] == ']' && t[i + 1] == ':') {
            i += 2;
            if (i < *len && t[i] == ' ') i++;
            *len -= i;
            return t + i;
        }
    }
    return t;
}

bool failure_line_frame(const char *t, size_t len, bool *user)
{
    t = skip_rank_prefix(t, &len);
    len = scan_len(len);
    size_t i = 0;
    while (i < len && t[i] == ' ') i++;
    if (i == 0 || len - i < 7 || memcmp(t + i, "File \"", 6) != 0) return false;
    const char *path = t + i + 6;
    const char *q = memchr(path, '"', len - i - 6);
    if (!q || !has(q, (size_t)(t + len - q), "\", line ")) return false;
    size_t pl = (size_t)(q - path);
    static const char *const theirs[] = { "site-packages/", "dist-packages/", "/lib/python",
                                          "/torch/", "<frozen ", "<string>" };
    *user = pl > 0;
    for (size_t k = 0; k < sizeof theirs / sizeof *theirs && *user; k++)
        if (memmem(path, pl, theirs[k], strlen(theirs[k]))) *user = false;
    return true;
}

bool failure_line_exception(const char *t, size_t len)
{
    t = skip_rank_prefix(t, &len);
    len = scan_len(len);
    size_t i = 0;
    if (len == 0 || !(isalpha((unsigned char)t[0]) || t[0] == '_')) return false;
    while (i < len && (isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == '.')) i++;
    if (i < len && t[i] != ':') return false;
    size_t k = i;
    while (k > 0 && t[k - 1] != '.') k--;
    const char *name = t + k;
    size_t nl = i - k;
    static const char *const ends[] = { "Error", "Exception", "Interrupt", "Exit" };
    for (size_t e = 0; e < sizeof ends / sizeof *ends; e++) {
        size_t el = strlen(ends[e]);
        if (nl >= el && memcmp(name + nl - el, ends[e], el) == 0) return true;
    }
    return false;
}
