/* A failed attempt's class from its ranks' last lines (failure_class.h). */
#include "failure_class.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* One rank's last lines of the attempt, oldest first, as ring indices. */
struct window {
    const struct rank_info *r;
    size_t idx[FAILURE_SCAN_LINES];
    size_t n;
};

static void window_take_n(const struct job *j, int rank, struct window *w, size_t max)
{
    const struct rank_info *r = &j->ranks[rank];
    size_t tmp[FAILURE_SCAN_LINES], n = 0;
    if (max > FAILURE_SCAN_LINES) max = FAILURE_SCAN_LINES;
    for (size_t i = r->log.count; i-- > 0 && n < max;) {
        const struct log_line *l = log_ring_at(&r->log, i);
        if (l->attempt != j->attempt) break;
        if (l->stream == LOG_SYSTEM) continue;
        tmp[n++] = i;
    }
    w->r = r;
    w->n = n;
    for (size_t k = 0; k < n; k++) w->idx[k] = tmp[n - 1 - k];
}

static void window_take(const struct job *j, int rank, struct window *w)
{
    window_take_n(j, rank, w, FAILURE_SCAN_LINES);
}

static const struct log_line *wline(const struct window *w, size_t k)
{
    return log_ring_at(&w->r->log, w->idx[k]);
}

static char *line_dup(const struct log_line *l)
{
    size_t n = l->len > FAILURE_EVIDENCE_MAX ? FAILURE_EVIDENCE_MAX : l->len;
    while (n && (l->text[n - 1] == '\r' || l->text[n - 1] == '\n')) n--;
    return xstrndup(l->text, n);
}

static void set_evidence(struct root_cause *c, int rank, const struct log_line *l)
{
    free(c->evidence);
    c->evidence = line_dup(l);
    c->evidence_rank = rank;
}

/* The innermost frame of the user's code in the traceback that line k ends (or is in): the
 * last user frame before k, not past the traceback's start. NULL when none. */
static char *user_frame_before(const struct window *w, size_t k)
{
    for (size_t i = k; i-- > 0 && k - i <= FAILURE_SCAN_LINES;) {
        const struct log_line *l = wline(w, i);
        bool user;
        if (failure_line_frame(l->text, l->len, &user)) {
            if (!user) continue;
            char *s = line_dup(l), *p = s;
            while (*p == ' ' || *p == '[') { /* "  File ..." or "[rank0]:   File ..." */
                if (*p == '[') { char *q = strstr(p, "]:"); if (!q) break; p = q + 2; }
                else p++;
            }
            char *out = xstrdup(p);
            free(s);
            return out;
        }
        if (memmem(l->text, l->len, "Traceback (most recent call last)", 33)) break;
    }
    return NULL;
}

/* ---- the sequence numbers of PyTorch's watchdog, across the ranks ---- */

struct rank_seq {
    long reached;             /* the highest work number it shows; -1 none */
    char op[24];
    long line;                /* window index of its line that showed it; -1 */
};

static void seq_of_rank(const struct window *w, struct rank_seq *s)
{
    *s = (struct rank_seq){ .reached = -1, .line = -1 };
    for (size_t k = 0; k < w->n; k++) {
        const struct log_line *l = wline(w, k);
        struct watchdog_seq q;
        if (!failure_line_watchdog(l->text, l->len, &q)) continue;
        long v = q.seq > q.enqueued ? q.seq : q.enqueued;
        /* the furthest number, and its line: the one naming the collective when two do */
        if (v < 0 || v < s->reached || (v == s->reached && (s->op[0] || !q.op[0]))) continue;
        s->reached = v;
        s->line = (long)k;
        if (q.op[0]) memcpy(s->op, q.op, sizeof s->op);   /* else the timed-out work's stays */
    }
}

/* Ranks named in a detail: the first few, then how many more (a line for people; the whole
 * list is lagging_ranks). */
#define NAMED_RANKS 8

static void add_rank_list(struct strbuf *sb, const struct job *j, const int *ranks, size_t n)
{
    for (size_t i = 0; i < n && i < NAMED_RANKS; i++)
        strbuf_addf(sb, "%s%d (%s)", i ? ", " : "", ranks[i], job_rank_host(j, ranks[i]));
    if (n > NAMED_RANKS) strbuf_addf(sb, " and %zu more", n - NAMED_RANKS);
}

bool failure_seq_analyse(const struct job *j, struct root_cause *c)
{
    size_t n = j->n_ranks;
    if (!n) return false;
    struct rank_seq *s = xcalloc(n, sizeof *s);
    struct window *w = xmalloc(sizeof *w);
    long top = -1;
    int top_rank = -1;
    size_t per = FAILURE_SCAN_BUDGET / n;
    if (per < FAILURE_SCAN_MIN) per = FAILURE_SCAN_MIN;
    for (size_t r = 0; r < n; r++) {
        window_take_n(j, (int)r, w, per);
        seq_of_rank(w, &s[r]);
        if (s[r].reached > top || (s[r].reached == top && top >= 0 && !s[top_rank].op[0] && s[r].op[0])) {
            top = s[r].reached;
            top_rank = (int)r;
        }
    }
    if (top < 0) { free(s); free(w); return false; }
    const char *op = s[top_rank].op[0] ? s[top_rank].op : NULL;
    int *lag = xcalloc(n, sizeof *lag), *silent = xcalloc(n, sizeof *silent);
    size_t nl = 0, ns = 0;
    int worst = -1;
    for (size_t r = 0; r < n; r++) {
        if (s[r].reached < 0) silent[ns++] = (int)r;
        else if (s[r].reached < top) {
            lag[nl++] = (int)r;
            if (worst < 0 || s[r].reached < s[worst].reached) worst = (int)r;
        }
    }
    struct strbuf sb;
    strbuf_init(&sb);
    if (nl == 1) {
        long behind = top - s[worst].reached;
        strbuf_addf(&sb, "rank %d on %s is %ld collective%s behind (last SeqNum %ld, the others %ld%s%s)", worst,
                    job_rank_host(j, worst), behind, behind == 1 ? "" : "s", s[worst].reached, top,
                    op ? ", " : "", op ? op : "");
    } else if (nl > 1) {
        strbuf_adds(&sb, "ranks ");
        add_rank_list(&sb, j, lag, nl);
        strbuf_adds(&sb, " are behind (last SeqNum");
        for (size_t i = 0; i < nl && i < NAMED_RANKS; i++) strbuf_addf(&sb, "%s %ld", i ? "," : "", s[lag[i]].reached);
        if (nl > NAMED_RANKS) strbuf_adds(&sb, ", ...");
        strbuf_addf(&sb, "; the others %ld%s%s)", top, op ? ", " : "", op ? op : "");
    } else {
        strbuf_addf(&sb, "every rank that printed the watchdog's numbers reached SeqNum %ld%s%s%s", top,
                    op ? " (" : "", op ? op : "", op ? ")" : "");
    }
    if (ns && ns < n) {
        strbuf_adds(&sb, nl ? "; no watchdog line from " : "; none from ");
        strbuf_adds(&sb, ns == 1 ? "rank " : "ranks ");
        add_rank_list(&sb, j, silent, ns);
    }
    free(c->detail);
    c->detail = sb.buf;
    free(c->lagging);
    c->lagging = lag;
    c->n_lagging = nl;
    if (!nl) { free(lag); c->lagging = NULL; }
    /* the line that shows it: the lagging rank's own, else the rank that got furthest */
    int er = worst >= 0 ? worst : (c->rank >= 0 && s[c->rank].line >= 0 ? c->rank : top_rank);
    window_take_n(j, er, w, per);
    set_evidence(c, er, wline(w, (size_t)s[er].line));
    free(silent);
    free(s);
    free(w);
    return true;
}

/* ---- the failing rank's own lines ---- */

/* "gpu2" of "gpu2.cluster.example" (its length); the whole of an address. */
static size_t short_len(const char *name)
{
    size_t n = strcspn(name, ".");
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)name[i])) return n;
    return strlen(name);   /* an IPv4 address: all of it */
}

int failure_node_of_addr(const struct job *j, const char *addr)
{
    bool loop = strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 || strcmp(addr, "localhost") == 0;
    for (size_t i = 0; i < j->n_nodes; i++) {
        const struct node_info *n = &j->nodes[i];
        if (strcmp(n->name, addr) == 0 || (n->addr && strcmp(n->addr, addr) == 0)) return (int)i;
    }
    /* NCCL names a peer by its host name when it resolves: "gpu2.cluster" is node gpu2 */
    size_t al = short_len(addr);
    for (size_t i = 0; i < j->n_nodes; i++) {
        const struct node_info *n = &j->nodes[i];
        size_t nl = short_len(n->name);
        if (al == nl && strncmp(n->name, addr, al) == 0) return (int)i;
    }
    for (size_t i = 0; loop && i < j->n_nodes; i++) {
        const struct node_info *n = &j->nodes[i];
        if (strcmp(n->name, "localhost") == 0) return (int)i;   /* the local (embedded) node */
    }
    return -1;
}

/* "rank 0 on n1 lost its connection to 10.0.0.2 (node n2, ranks 2-3)" */
static char *peer_detail(const struct job *j, const struct root_cause *c, const struct log_line *l,
                         bool ib)
{
    char addr[64];
    if (!failure_line_peer(l->text, l->len, addr, sizeof addr)) return NULL;
    int node = failure_node_of_addr(j, addr);
    const char *me = job_rank_host(j, c->evidence_rank);
    if (node < 0)
        return xasprintf("%s rank %d on %s and peer %s (not a node of this job)",
                         ib ? "IB completion error between" : "connection lost between", c->evidence_rank, me, addr);
    const struct node_info *n = &j->nodes[node];
    char ranks[48] = "";
    if (n->n_ranks > 1) snprintf(ranks, sizeof ranks, ", ranks %d-%d", n->first_rank, n->first_rank + n->n_ranks - 1);
    else if (n->n_ranks == 1) snprintf(ranks, sizeof ranks, ", rank %d", n->first_rank);
    if (ib)
        return xasprintf("IB completion error between %s (rank %d) and %s (peer %s%s)", me, c->evidence_rank,
                         n->name, addr, ranks);
    return xasprintf("rank %d on %s lost its connection to peer %s: node %s%s", c->evidence_rank, me, addr,
                     n->name, ranks);
}

/* The order in which a rank's own lines decide, strongest first: the scheduler's word, then
 * what the process ran out of, then the network, then any Python exception. */
static const enum failure_class line_order[] = {
    FAILURE_PREEMPTED, FAILURE_DISK_FULL, FAILURE_CUDA_OOM, FAILURE_NCCL_ERROR /* IB */,
    FAILURE_CONFIG /* NCCL's "Duplicate GPU" comes as an NCCL error */,
    FAILURE_COLLECTIVE_TIMEOUT, FAILURE_CONN_RESET /* names the peer */, FAILURE_NCCL_ERROR,
};

struct own {
    long first[FAILURE_CLASSES];  /* window index of the class's first line; -1 */
    long ib;                      /* the first IB completion error; -1 */
    long exc;                     /* the last exception line; -1 */
    bool first_src[FAILURE_CLASSES]; /* first[] is a traceback's echo of the source */
};

/* A traceback's echo of a source line ("    raise OSError(28, 'No space left...')" under
 * its "  File ..." frame): indented, so it proves less than the exception line it raises. */
static bool source_echo(const struct log_line *l)
{
    size_t i = 0;
    while (i < l->len && i < 8 && l->text[i] == ' ') i++;
    return i >= 4;
}

static void own_scan(const struct window *w, struct own *o)
{
    for (int k = 0; k < FAILURE_CLASSES; k++) o->first[k] = -1;
    o->ib = o->exc = -1;
    for (size_t k = 0; k < w->n; k++) {
        const struct log_line *l = wline(w, k);
        enum failure_class fc = failure_line_class(l->text, l->len);
        /* the first line of its class; a later unindented one wins over a source echo */
        if (fc != FAILURE_NONE && (o->first[fc] < 0 || (o->first_src[fc] && !source_echo(l)))) {
            o->first[fc] = (long)k;
            o->first_src[fc] = source_echo(l);
        }
        if (o->ib < 0 && failure_line_ib(l->text, l->len)) o->ib = (long)k;
        if (failure_line_exception(l->text, l->len)) o->exc = (long)k;
    }
}

static void classify_from(const struct job *j, struct root_cause *c, const struct window *w,
                          enum failure_class fc, long k)
{
    const struct log_line *l = wline(w, (size_t)k);
    c->failure = fc;
    set_evidence(c, c->rank, l);
    if (fc == FAILURE_COLLECTIVE_TIMEOUT) {
        failure_seq_analyse(j, c);
    } else if (fc == FAILURE_CONN_RESET || (fc == FAILURE_NCCL_ERROR && failure_line_ib(l->text, l->len))) {
        c->detail = peer_detail(j, c, l, fc == FAILURE_NCCL_ERROR);
    } else if (fc == FAILURE_PREEMPTED) {
        c->detail = xstrdup(memmem(l->text, l->len, "TIME LIMIT", 10) ? "the job's time limit"
                            : memmem(l->text, l->len, "PREEMPTION", 10) ? "preempted by another job"
                            : "cancelled (scancel)");
    } else {
        c->detail = user_frame_before(w, (size_t)k + 1);
    }
}

/* PyTorch's error file (TORCHELASTIC_ERROR_FILE, made readable by root_cause.c): the
 * exception's message when the rank printed nothing that tells (its stderr went elsewhere). */
static void classify_error_file(struct root_cause *c)
{
    const char *t = c->error_file;
    const char *best = NULL, *exc = NULL;
    size_t best_len = 0, exc_len = 0, best_rank = sizeof line_order / sizeof *line_order;
    while (t && *t) {
        size_t n = strcspn(t, "\n");
        enum failure_class fc = failure_line_class(t, n);
        for (size_t i = 0; fc != FAILURE_NONE && i < best_rank; i++)
            if (line_order[i] == fc && (i != 3 || failure_line_ib(t, n))) {
                best = t, best_len = n, best_rank = i;
                c->failure = fc;
            }
        if (!exc && failure_line_exception(t, n)) exc = t, exc_len = n;
        t += n + (t[n] == '\n');
    }
    if (!best && exc) {
        c->failure = FAILURE_PYTHON_EXCEPTION;
        best = exc, best_len = exc_len;
    }
    if (!best) return;
    if (best_len > FAILURE_EVIDENCE_MAX) best_len = FAILURE_EVIDENCE_MAX;
    free(c->evidence);
    c->evidence = xstrndup(best, best_len);
    c->evidence_rank = c->rank;
}

void failure_classify(const struct job *j, struct root_cause *c)
{
    c->failure = FAILURE_UNKNOWN;
    if (c->rank < 0 || (size_t)c->rank >= j->n_ranks) {
        c->fix = failure_class_fix(c->failure);
        return;
    }
    const struct rank_info *r = &j->ranks[c->rank];
    struct window *w = xmalloc(sizeof *w);
    struct own o;
    window_take(j, c->rank, w);
    own_scan(w, &o);
    int sig = c->term_signal, ec = c->exit_code;
    bool segv = sig == SIGSEGV || sig == SIGBUS || (!sig && (ec == 128 + SIGSEGV || ec == 128 + SIGBUS));
    bool killed = sig == SIGKILL || (!sig && ec == 128 + SIGKILL);
    if (segv) {
        c->failure = FAILURE_SEGFAULT;
        int s = sig ? sig : ec - 128;
        c->detail = sig ? xasprintf("%s, killed by %s", s == SIGBUS ? "bus error" : "invalid memory access",
                                    s == SIGBUS ? "SIGBUS" : "SIGSEGV")
                        : xasprintf("%s, exit status %d (%s)", s == SIGBUS ? "bus error" : "invalid memory access",
                                    ec, s == SIGBUS ? "SIGBUS" : "SIGSEGV");
        for (size_t k = w->n; k-- > 0;) {
            const struct log_line *l = wline(w, k);
            if (memmem(l->text, l->len, "Segmentation fault", 18) || memmem(l->text, l->len, "Bus error", 9)) {
                set_evidence(c, c->rank, l);
                break;
            }
        }
    } else if (killed && r->oom_kills > 0) {
        c->failure = FAILURE_OOM_KILL;
        c->detail = xasprintf("confirmed: its memory cgroup counted %d OOM kill%s", r->oom_kills,
                              r->oom_kills == 1 ? "" : "s");
    } else {
        for (size_t i = 0; i < sizeof line_order / sizeof *line_order && c->failure == FAILURE_UNKNOWN; i++) {
            enum failure_class fc = line_order[i];
            long k = i == 3 ? o.ib : o.first[fc];
            if (k >= 0) classify_from(j, c, w, fc, k);
        }
        if (c->failure == FAILURE_UNKNOWN && killed && r->oom_kills != 0) {
            c->failure = FAILURE_OOM_KILL;
            c->detail = xstrdup("likely: SIGKILL not sent by ddptop (the node's OOM kill count is unknown)");
        } else if (c->failure == FAILURE_UNKNOWN && sig == SIGTERM) {
            c->failure = FAILURE_PREEMPTED;
            c->detail = xstrdup("likely: SIGTERM not sent by ddptop (a scheduler's or an operator's)");
        } else if (c->failure == FAILURE_UNKNOWN && killed) {
            c->detail = xstrdup("SIGKILL not sent by ddptop, and not the OOM killer (its cgroup counted none)");
        } else if (c->failure == FAILURE_UNKNOWN && o.exc >= 0) {
            c->failure = FAILURE_PYTHON_EXCEPTION;
            set_evidence(c, c->rank, wline(w, (size_t)o.exc));
            c->detail = user_frame_before(w, (size_t)o.exc);
        } else if (c->failure == FAILURE_UNKNOWN && c->error_file) {
            classify_error_file(c);
        }
    }
    c->fix = failure_class_fix(c->failure);
    free(w);
}
