/* Decoding what a node's agent says (docs/protocol.md, "Run requests") into the job model:
 * hello, spawned, out (log lines and metrics), status (heartbeat, /proc state, CPU), exit
 * (rank states, failures and the root cause), stopped, errors; the answers of stack dumps and
 * files go to controller_stacks.c, a bridge's and a resumed agent's lines to
 * controller_link.c.
 *
 * Output and exits are numbered per rank by the agent ("q"): after a new link it sends again
 * everything we had not acknowledged, so a number already taken is a repeat and is dropped;
 * the log files get each byte once, in order.
 *
 * Root cause order: a failure's exit message is held for EXIT_HOLD_MS with any other exits of
 * its node and they are applied in the order of the agent's monotonic clock (mono_ns), since
 * the agent reports an exit only once the rank's pipes are drained, so a rank that died first
 * can be reported after a peer that died of its death. Across nodes the first to arrive wins. */
#include "controller_int.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/base64.h"
#include "wire/json_flat.h"
#include "wire/json_num.h"
#include "job/metrics_parse.h"
#include "job/nccl.h"
#include "wire/protocol.h"
#include "job/root_cause.h"
#include "util/sanitize.h"
#include "util/util.h"

#define CTL_READ_BYTES_MAX (256 * 1024)

static const cJSON *get(const cJSON *m, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(m, k);
}

/* A measurement (not an integer): finite, else dflt. */
static double num(const cJSON *m, const char *k, double dflt)
{
    const cJSON *v = get(m, k);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : dflt;
}

void ctl_bad_number(struct controller *c, size_t i, const char *ev, const char *key, const cJSON *v)
{
    struct cnode *nd = &c->nodes[i];
    char text[32];
    if (nd->bad_numbers++ < CTL_BAD_NUMBERS_SAID)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: %s message: %s %s out of range; ignored",
                      c->job->nodes[i].name, ev, key, json_num_text(v, text, sizeof text));
    if (nd->bad_numbers == CTL_BAD_NUMBERS_SAID)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: more numbers out of range in its agent's messages "
                      "are ignored without a word (%d said)", c->job->nodes[i].name, CTL_BAD_NUMBERS_SAID);
}

long long ctl_int(struct controller *c, size_t i, const char *ev, const cJSON *m, const char *key, long long lo,
                  long long hi, long long dflt)
{
    const cJSON *v = get(m, key);
    long long x;
    if (!v || cJSON_IsNull(v)) return dflt;
    if (json_int_in(v, lo, hi, &x)) return x;
    ctl_bad_number(c, i, ev, key, v);
    return dflt;
}

/* The members every rank message has: its rank (-1: absent or bad), its message number q (0:
 * none; below 2^53, so a double holds it exactly) and the attempt it belongs to ("a" or
 * "attempt"; absent: dflt). A bad q or attempt is -1: the message is dropped, since taking it
 * would take its number (or put it in another attempt's log). */
static int msg_rank(struct controller *c, size_t i, const char *ev, const cJSON *m)
{
    return (int)ctl_int(c, i, ev, m, "rank", 0, INT_MAX, -1);
}

static long long msg_seq(struct controller *c, size_t i, const char *ev, const cJSON *m)
{
    return get(m, "q") ? ctl_int(c, i, ev, m, "q", 0, JSON_EXACT_MAX, -1) : 0;
}

static int msg_attempt(struct controller *c, size_t i, const char *ev, const cJSON *m, const char *key, int dflt)
{
    return get(m, key) ? (int)ctl_int(c, i, ev, m, key, 0, INT_MAX, -2) : dflt;
}

static const char *str(const cJSON *m, const char *k)
{
    return cJSON_GetStringValue(get(m, k));
}

static bool rank_on_node(const struct controller *c, size_t node, int rank)
{
    const struct node_info *ni = &c->job->nodes[node];
    return rank >= ni->first_rank && rank < ni->first_rank + ni->n_ranks;
}

/* Whether rank's durable message number q (0: none given) is new. A gap means messages that
 * will never come (an agent that lost them): said once. */
static bool seq_take(struct controller *c, int rank, uint64_t q)
{
    struct rank_info *ri = &c->job->ranks[rank];
    if (!q) return true;
    if (q <= ri->seq) return false;
    if (q > ri->seq + 1 && !c->ranks[rank].gap_said) {
        c->ranks[rank].gap_said = true;
        job_event_add(c->job, EV_INFO, rank, -1, "rank %d on %s: messages %llu to %llu of its agent never came (its "
                      "log misses them)", rank, job_rank_host(c->job, rank), (unsigned long long)ri->seq + 1,
                      (unsigned long long)q - 1);
    }
    ri->seq = q;
    return true;
}

/* ---- messages ----------------------------------------------------------------------------- */

static void on_hello(struct controller *c, size_t i, const cJSON *m)
{
    struct cnode *nd = &c->nodes[i];
    char buf[200];
    const char *why = wire_hello_mismatch(m, buf, sizeof buf);
    if (why) {
        ctl_node_lost(c, i, why);
        return;
    }
    if (cJSON_IsTrue(get(m, "resumed"))) {
        ctl_link_resumed(c, i, m);
        return;
    }
    if (nd->bridge) return; /* a fresh agent cannot answer a bridge */
    ctl_link_fresh_agent(c, i);
    nd->hello = true;
    job_node_ready(c->job, i);
    const char *note = str(m, "link_note");
    if (note && *note) {
        /* under srun: the agent could not connect back (docs/slurm.md, "The direct connection") */
        char *safe = sanitize_str(note, strnlen(note, 300), 0);
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: %s (docs/slurm.md, \"The direct connection\")",
                      c->job->nodes[i].name, safe);
        free(safe);
    }
    ctl_gpu_watch(c, i);
    if (c->job->state == JOB_CHECKING && c->pf) ctl_check_node_up(c, i, m);
}

/* A rank that could not start fails like one that exited 127 (the shell's "not found"). */
static void rank_spawn_failed(struct controller *c, int rank, const char *error)
{
    char *note = xasprintf("ddptop: rank %d cannot start: %s", rank, error);
    job_log_append(c->job, rank, LOG_SYSTEM, 0, note, strlen(note));
    job_event_add(c->job, EV_INFO, rank, -1, "rank %d on %s cannot start: %s", rank, job_rank_host(c->job, rank), error);
    free(note);
    if (job_rank_exited(c->job, rank, 127, 0, false, NULL, 0)) ctl_rank_failed_begin_stop(c);
}

static void on_spawned(struct controller *c, size_t i, const cJSON *m)
{
    const cJSON *ranks = get(m, "ranks"), *r;
    c->nodes[i].spawn_answered = true;
    cJSON_ArrayForEach(r, ranks) {
        int rank = msg_rank(c, i, WIRE_EV_SPAWNED, r);
        const char *e = str(r, "error");
        if (!rank_on_node(c, i, rank) || c->job->ranks[rank].state != RANK_PENDING) continue;
        if (e) rank_spawn_failed(c, rank, e);
        else job_rank_started(c->job, rank, (int)ctl_int(c, i, WIRE_EV_SPAWNED, r, "pid", 1, INT_MAX, 0));
    }
}

/* One line of a rank's output into its log, its metrics and the front end. */
static void out_line(struct controller *c, int rank, enum log_stream stream, unsigned flags, const char *t,
                     size_t len, bool metrics, int64_t wall)
{
    const struct log_line *ll;
    job_log_keep(c->job, rank, stream, flags, t, len, wall);
    /* both streams: Python's logging writes to stderr */
    if (metrics && !(flags & LOG_LINE_SPLIT)) metrics_feed_line(c->metrics, c->job, rank, t, len);
    ll = log_ring_at(&c->job->ranks[rank].log, c->job->ranks[rank].log.count - 1);
    if (c->fe.on_line && ll) c->fe.on_line(c->fe.ctx, c->job, rank, ll);
}

/* One out message: a piece of a line (flags), or a block of whole lines, each ending with its
 * newline (docs/protocol.md). The log file gets the bytes as they came, in one write; the
 * ring, the metrics parser and the front end get each line. Output of an earlier attempt
 * (sent again after a new link) goes to that attempt's file only. */
static void out_block(struct controller *c, int rank, int attempt, uint64_t q, enum log_stream stream,
                      unsigned flags, const char *t, size_t len)
{
    const char *end = t + len;
    int64_t wall = wall_ns();
    bool metrics;
    if (attempt < 0) attempt = c->job->attempt;
    if (flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT)) {
        job_log_write(c->job, rank, attempt, q, t, len, false);
        if (attempt == c->job->attempt) out_line(c, rank, stream, flags, t, len, true, wall);
        return;
    }
    /* An agent's block always ends with a newline; should one not, the log file still gets
     * whole lines. */
    job_log_write(c->job, rank, attempt, q, t, len, len == 0 || t[len - 1] != '\n');
    if (attempt != c->job->attempt) return;
    metrics = metrics_block_may_hold(c->metrics, t, len);
    bool nccl = nccl_block_may_hold(t, len);   /* NCCL's account (job/nccl.h) */
    do {
        const char *nl = memchr(t, '\n', (size_t)(end - t));
        size_t n = nl ? (size_t)(nl - t) : (size_t)(end - t);
        if (nccl) nccl_feed_line(c->job, rank, t, n, wall, mono_ms());
        out_line(c, rank, stream, nccl ? 0 : JOB_KEEP_NOT_NCCL, t, n, metrics, wall);
        t += n + 1;
    } while (t < end);
}

static unsigned out_flags(const char *f)
{
    unsigned flags = 0;
    if (f && strchr(f, 'p')) flags |= LOG_LINE_PARTIAL;
    if (f && strchr(f, 's')) flags |= LOG_LINE_SPLIT;
    return flags;
}

/* The agent dropped output while we were away (its spool was full): said as an event. */
static void out_dropped(struct controller *c, size_t i, int rank, const cJSON *d)
{
    long long lines = ctl_int(c, i, WIRE_EV_OUT, d, "lines", 0, JSON_EXACT_MAX, 0);
    long long bytes = ctl_int(c, i, WIRE_EV_OUT, d, "bytes", 0, JSON_EXACT_MAX, 0);
    if (!lines && !bytes) return;   /* nothing (or nothing usable) to say */
    job_event_add(c->job, EV_INFO, rank, -1, "rank %d on %s: %lld lines (%lld bytes) of its output were dropped on "
                  "its node while the controller was away (the agent's spool, --agent-spool, was full)", rank,
                  job_rank_host(c->job, rank), lines, bytes);
}

static void on_out(struct controller *c, size_t i, const cJSON *m)
{
    int rank = msg_rank(c, i, WIRE_EV_OUT, m);
    long long q = msg_seq(c, i, WIRE_EV_OUT, m);
    int attempt = msg_attempt(c, i, WIRE_EV_OUT, m, "a", -1);
    const char *s = str(m, "s"), *t = str(m, "t"), *b64 = str(m, "b64"), *f = str(m, "f");
    enum log_stream stream = s && s[0] == 'e' ? LOG_STDERR : LOG_STDOUT;
    char *raw = NULL;
    size_t len;
    if (q < 0 || attempt == -2 || !rank_on_node(c, i, rank) || !seq_take(c, rank, (uint64_t)q)) return;
    if (cJSON_IsObject(get(m, "dropped"))) out_dropped(c, i, rank, get(m, "dropped"));
    if (t) {
        len = strlen(t);
    } else if (b64) {
        raw = base64_decode(b64, strlen(b64), &len);
        t = raw;
    } else {
        return;
    }
    out_block(c, rank, attempt, (uint64_t)q, stream, out_flags(f), t, len);
    free(raw);
}

/* A short string member decoded (escapes and all) into buf; NULL when absent or not a string,
 * and *bad when it cannot be decoded here. */
static const char *flat_short_str(const struct json_flat *o, const char *key, char *buf, size_t cap, bool *bad)
{
    const struct json_flat_field *v = json_flat_get(o, key);
    if (!v || v->type != JF_STRING) return NULL;
    if (v->str_len >= cap || json_flat_unescape(v->str, v->str_len, buf) == (size_t)-1) {
        *bad = true;
        return NULL;
    }
    return buf;
}

/* "out", the message that comes 10,000 times a second with 1,024 ranks, without building a
 * cJSON tree: the same decisions as on_out. False: not one it takes (base64 text, escapes it
 * leaves to cJSON, anything unusual), for agent_message to decode with cJSON. */
static bool fast_out(struct controller *c, size_t i, const char *line)
{
    static const char head[] = "{\"ev\":\"out\",";
    struct json_flat o;
    const struct json_flat_field *rk, *t, *q, *a;
    char sbuf[16], fbuf[16];
    const char *s, *f, *text;
    bool bad = false;
    long long rank = -1, seq = 0, attempt = -1;
    size_t len;
    if (strncmp(line, head, sizeof head - 1) != 0 || !json_flat_scan(line, strlen(line), &o)) return false;
    t = json_flat_get(&o, "t");
    if (!t || t->type != JF_STRING || json_flat_get(&o, "dropped")) return false;
    s = flat_short_str(&o, "s", sbuf, sizeof sbuf, &bad);
    f = flat_short_str(&o, "f", fbuf, sizeof fbuf, &bad);
    if (bad) return false;
    if (t->str_escaped) {
        if (t->str_len + 1 > c->unesc_cap) {
            c->unesc_cap = t->str_len + 1 > 65536 ? t->str_len + 1 : 65536;
            free(c->unesc);
            c->unesc = xmalloc(c->unesc_cap);
        }
        len = json_flat_unescape(t->str, t->str_len, c->unesc);
        if (len == (size_t)-1) return false;
        text = c->unesc;
    } else {
        text = t->str;
        len = t->str_len;
    }
    ctl_link_heard(c, i);
    rk = json_flat_get(&o, "rank");
    q = json_flat_get(&o, "q");
    a = json_flat_get(&o, "a");
    /* a number that is not one the protocol allows: cJSON's path (on_out) says it */
    if ((rk && (rk->type != JF_NUMBER || !json_whole_in(rk->num, 0, INT_MAX, &rank))) ||
        (q && (q->type != JF_NUMBER || !json_whole_in(q->num, 0, JSON_EXACT_MAX, &seq))) ||
        (a && (a->type != JF_NUMBER || !json_whole_in(a->num, 0, INT_MAX, &attempt))))
        return false;
    if (rank_on_node(c, i, (int)rank) && seq_take(c, (int)rank, (uint64_t)seq))
        out_block(c, (int)rank, (int)attempt, (uint64_t)seq, s && s[0] == 'e' ? LOG_STDERR : LOG_STDOUT,
                  out_flags(f), text, len);
    return true;
}

static void on_status(struct controller *c, size_t i, const cJSON *m)
{
    const cJSON *r;
    int64_t mono = ctl_int(c, i, WIRE_EV_STATUS, m, "mono_ns", 0, LLONG_MAX, 0);
    cJSON_ArrayForEach(r, get(m, "ranks")) {
        int rank = msg_rank(c, i, WIRE_EV_STATUS, r);
        struct rank_info *ri;
        struct crank *cr;
        const char *st = str(r, "state");
        double cpu = num(r, "cpu_s", -1);
        if (cpu > 1e15) {   /* 30 million years of CPU: not a CPU time */
            ctl_bad_number(c, i, WIRE_EV_STATUS, "cpu_s", get(r, "cpu_s"));
            cpu = -1;
        }
        if (!rank_on_node(c, i, rank)) continue;
        ri = &c->job->ranks[rank];
        cr = &c->ranks[rank];
        if (ri->state != RANK_RUNNING && ri->state != RANK_STALLED) continue;
        if (st && *st) ri->proc_state = st[0];
        if (cpu >= 0 && mono > 0) {
            if (cr->cpu_mono_ns > 0 && mono > cr->cpu_mono_ns)
                ri->cpu_pct = 100.0 * (cpu - cr->cpu_s) / ((double)(mono - cr->cpu_mono_ns) / 1e9);
            cr->cpu_s = cpu;
            cr->cpu_mono_ns = mono;
        }
    }
    c->job->generation++;
}

/* An exit's status (0 to 255) and signal (1 to 127), each -1 when absent or not one: said when
 * the exit is applied (apply_exit), quietly here. */
#define EXIT_CODE_MAX 255
#define EXIT_SIGNAL_MAX 127

static int exit_member(const cJSON *m, const char *key, int hi)
{
    int v;
    return json_int_in_i(get(m, key), key[0] == 's' ? 1 : 0, hi, &v) ? v : -1;
}

/* Only signals we send end a rank "by us": the agent may say by_us for a rank that died of
 * SIGSEGV just before our stop reached it. A signal that is not one is not ours. */
static bool exit_by_us(const cJSON *m)
{
    int sig = get(m, "signo") ? exit_member(m, "signo", EXIT_SIGNAL_MAX) : 0;
    if (!cJSON_IsTrue(get(m, "by_us"))) return false;
    return sig == 0 || sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP || sig == SIGPIPE;
}

static bool exit_is_failure(const cJSON *m)
{
    if (exit_by_us(m)) return false;
    return cJSON_IsNumber(get(m, "signo")) || exit_member(m, "code", EXIT_CODE_MAX) != 0;
}

static void apply_exit(struct controller *c, size_t i, const cJSON *m)
{
    int rank = msg_rank(c, i, WIRE_EV_EXIT, m);
    const char *ef = str(m, "error_file");
    int sig = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "signo", 1, EXIT_SIGNAL_MAX, 0);
    int ec = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "code", 0, EXIT_CODE_MAX, sig ? 0 : -1);
    enum rank_state st;
    int a = msg_attempt(c, i, WIRE_EV_EXIT, m, "attempt", c->job->attempt);
    long long q = msg_seq(c, i, WIRE_EV_EXIT, m);
    if (q < 0 || a == -2 || !rank_on_node(c, i, rank)) return;
    /* after its event (the log writer keeps the order): a takeover that finds the exit
     * acknowledged finds it in events.jsonl */
    if (a != c->job->attempt) {
        job_log_mark(c->job, rank, a, (uint64_t)q);
        return;
    }
    st = c->job->ranks[rank].state;
    /* the kernel's OOM kills in the rank's cgroup (absent from older agents: unknown) */
    c->job->ranks[rank].oom_kills = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "oom_kills", 0, 1000000, -1);
    if ((st == RANK_RUNNING || st == RANK_STALLED || st == RANK_PENDING) &&
        job_rank_exited(c->job, rank, ec, sig, exit_by_us(m), ef, ef ? strlen(ef) : 0))
        ctl_rank_failed_begin_stop(c);
    job_log_mark(c->job, rank, c->job->attempt, (uint64_t)q);
}

static int by_mono(const void *a, const void *b)
{
    double x = num(*(cJSON *const *)a, "mono_ns", 0), y = num(*(cJSON *const *)b, "mono_ns", 0);
    return x < y ? -1 : x > y;
}

void ctl_exits_release(struct controller *c, size_t i, bool apply)
{
    struct cnode *nd = &c->nodes[i];
    cJSON **ex = nd->exits;
    size_t n = nd->n_exits;
    nd->exits = NULL;
    nd->n_exits = 0;
    nd->hold_until_ms = 0;
    if (apply) qsort(ex, n, sizeof *ex, by_mono);
    for (size_t k = 0; k < n; k++) {
        if (apply) apply_exit(c, i, ex[k]);
        cJSON_Delete(ex[k]);
    }
    free(ex);
}

static void on_error(struct controller *c, size_t i, const cJSON *m, int id)
{
    struct cnode *nd = &c->nodes[i];
    const char *e = str(m, "error");
    struct node_info *ni = &c->job->nodes[i];
    if (!e) e = "?";
    if (id && id == nd->spawn_id && !nd->spawn_answered) {
        nd->spawn_answered = true;
        for (int k = 0; k < ni->n_ranks; k++)
            if (c->job->ranks[ni->first_rank + k].state == RANK_PENDING) rank_spawn_failed(c, ni->first_rank + k, e);
    } else if (id && id == nd->stop_id) {
        nd->stopped = true;
        job_event_add(c->job, EV_INFO, -1, (int)i, "agent on %s refused the stop: %s", ni->name, e);
    } else if (ctl_stacks_answer(c, i, id, WIRE_EV_ERROR, m)) {
        /* a stack dump or a flight recorder file that could not be had */
    } else {
        job_event_add(c->job, EV_INFO, -1, (int)i, "agent on %s: %s", ni->name, e);
    }
}

/* A scheduler's warning signal reached the node's agent (Slurm's --signal, a preemption), or
 * the agent cannot be reached again if its link is lost (no private socket directory). */
static void on_notice(struct controller *c, size_t i, const cJSON *m)
{
    const char *sig = str(m, "signal"), *text = str(m, "text"), *what = str(m, "what");
    int n;
    if (what && strcmp(what, "no_reconnect") == 0) {
        c->nodes[i].no_reconnect = true;
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s cannot be reconnected if its link is lost: %s",
                      c->job->nodes[i].name, text ? text : "?");
        return;
    }
    if (sig && strcmp(sig, "SIGTERM") == 0) {
        /* Slurm is ending the job: the ranks have their SIGTERM, Slurm SIGKILLs after its
         * KillWait; ddptop stops the job without restarting it and says why */
        char *why = xasprintf("Slurm stopped the job on %s with SIGTERM (scancel, the job's time limit or a "
                              "preemption)", c->job->nodes[i].name);
        job_event_add(c->job, EV_SIGNAL, -1, (int)i, "SIGTERM on %s: %s", c->job->nodes[i].name,
                      text ? text : "from Slurm");
        if (job_is_running(c->job)) {
            root_cause_scheduler(c->job, (int)i, why);
            ctl_begin_stop(c, JOB_FAILING, JOB_FAILED, AFTER_END, false);
            c->stop_deadline_ms = mono_ms() + SLURM_KILLWAIT_MS + 5000;
        }
        free(why);
        return;
    }
    if (text)
        job_event_add(c->job, EV_SIGNAL, -1, (int)i, "%s on %s: %s", sig ? sig : "?", c->job->nodes[i].name, text);
    else if ((n = (int)ctl_int(c, i, WIRE_EV_NOTICE, m, "passed_to", 0, INT_MAX, -1)) >= 0)
        job_event_add(c->job, EV_SIGNAL, -1, (int)i, "%s on %s: passed on to its %d rank(s)", sig ? sig : "?",
                      c->job->nodes[i].name, n);
    else
        job_event_add(c->job, EV_SIGNAL, -1, (int)i, "%s on %s: passed on to its ranks", sig ? sig : "?",
                      c->job->nodes[i].name);
}

/* One message; exits are returned (not applied) so the caller can order them. */
static cJSON *agent_message(struct controller *c, size_t i, const char *line)
{
    struct cnode *nd = &c->nodes[i];
    struct wire_msg wm;
    cJSON *m;
    const char *ev;
    int id;
    if (fast_out(c, i, line)) return NULL;
    if (!wire_client_parse(&nd->cl, line, &wm)) return NULL; /* not a protocol message: ignored */
    m = wm.json;
    ev = wm.ev;
    id = wm.id;
    if (strcmp(ev, WIRE_EV_BRIDGE) == 0) {
        ctl_link_bridge(c, i);
        cJSON_Delete(m);
        return NULL;
    }
    if (strcmp(ev, WIRE_EV_GONE) == 0) {
        const char *e = str(m, "error");
        /* an older bridge without "final" only said it for an agent that is gone */
        const cJSON *fin = get(m, "final");
        ctl_link_gone(c, i, e ? e : "its agent is gone", !fin || cJSON_IsTrue(fin));
        cJSON_Delete(m);
        return NULL;
    }
    ctl_link_heard(c, i);
    if (wm.tag >= WIRE_TAG_CHECK) {
        /* the preflight's answers; after it (a late connect, an unlisten) nobody needs them */
        if (c->job->state == JOB_CHECKING && c->pf) preflight_node_message(c->pf, i, &wm, line);
        wire_msg_done(&wm);
        return NULL;
    }
    if (strcmp(ev, WIRE_EV_EXIT) == 0 && !id) {
        int rank = msg_rank(c, i, WIRE_EV_EXIT, m);
        long long q = msg_seq(c, i, WIRE_EV_EXIT, m);
        int a = msg_attempt(c, i, WIRE_EV_EXIT, m, "attempt", 0);
        if (q >= 0 && a != -2 && rank_on_node(c, i, rank) && seq_take(c, rank, (uint64_t)q)) return m;
        cJSON_Delete(m);
        return NULL;
    }
    if (wm.tag == WIRE_TAG_RESUME && id == nd->resume_id) {
        if (strcmp(ev, WIRE_EV_ERROR) == 0)
            ctl_link_gone(c, i, str(m, "error") ? str(m, "error") : "resume refused", false);
        else ctl_link_resume_answer(c, i, m);
        cJSON_Delete(m);
        return NULL;
    }
    if (strcmp(ev, WIRE_EV_OUT) == 0) on_out(c, i, m);
    else if (strcmp(ev, WIRE_EV_STATUS) == 0) on_status(c, i, m);
    else if (strcmp(ev, WIRE_EV_HELLO) == 0) on_hello(c, i, m);
    else if (strcmp(ev, WIRE_EV_SPAWNED) == 0 && id == nd->spawn_id) on_spawned(c, i, m);
    else if (strcmp(ev, WIRE_EV_STOPPED) == 0 && id == nd->stop_id) nd->stopped = true;
    else if (strcmp(ev, WIRE_EV_STACKS) == 0 || strcmp(ev, WIRE_EV_LIST) == 0 || strcmp(ev, WIRE_EV_READ) == 0)
        ctl_stacks_answer(c, i, id, ev, m);
    else if (strcmp(ev, WIRE_EV_ERROR) == 0) on_error(c, i, m, id);
    else if (strcmp(ev, WIRE_EV_GPU) == 0) ctl_on_gpu(c, i, m);
    else if (strcmp(ev, WIRE_EV_NOTICE) == 0) on_notice(c, i, m);
    else if (strcmp(ev, WIRE_EV_GPU_WATCH) == 0) ctl_on_gpu_watch(c, i, m);
    cJSON_Delete(m);
    return NULL;
}

void ctl_agent_lines(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    enum transport_state st;
    if (!nd->t || nd->lost || nd->released) return;
    /* bounded per call (messages and bytes: one out message may carry 64 KiB of lines) so one
     * chatty node cannot starve the others or the timers, pings included, on a starved CPU */
    size_t bytes = 0;
    for (int k = 0; !nd->lost && transport_next_line_into(nd->t, &c->line_in); k++) {
        bytes += c->line_in.len;
        cJSON *ex = agent_message(c, i, c->line_in.buf);
        if (ex) {
            nd->exits = xrealloc(nd->exits, (nd->n_exits + 1) * sizeof *nd->exits);
            nd->exits[nd->n_exits++] = ex;
            if (!nd->hold_until_ms && exit_is_failure(ex)) nd->hold_until_ms = mono_ms() + EXIT_HOLD_MS;
        }
        if (k == 4096 || bytes >= CTL_READ_BYTES_MAX) {
            c->more_lines = true;
            break;
        }
    }
    if (nd->lost) return;
    st = transport_state(nd->t);
    /* exits without a failure among them need no waiting */
    if (nd->n_exits && (!nd->hold_until_ms || mono_ms() >= nd->hold_until_ms || st != TRANSPORT_READY))
        ctl_exits_release(c, i, true);
    if (nd->hello && !nd->lost && !nd->away && (st == TRANSPORT_CLOSED || st == TRANSPORT_FAILED)) {
        const char *e = transport_error(nd->t);
        if (ctl_link_applies(c, i)) {
            /* Our own link to the agent closed from its end: the agent process ended (killed,
             * or it gave up). A connection that failed, or a bridge's end, is a lost link. */
            ctl_link_ended(c, i, e ? e : "its connection closed", st == TRANSPORT_CLOSED && !nd->bridge);
        } else {
            char *why = xasprintf("connection to its agent ended (%s)", e ? e : "closed");
            ctl_link_lost(c, i, why);
            free(why);
        }
    }
}
