/* What a node's agent says (docs/protocol.md, "Run requests"), into the job model: one table
 * (agent_events, below) gives each message its handler, as the agent's own table gives each
 * request its op (agent/agent_main.c). hello, spawned, out (log lines and metrics: the fast
 * path for the message that comes most), status (heartbeat, /proc state, CPU), exit (held and
 * applied in order by controller_exits.c), stopped, errors, notices; the answers of stack
 * dumps and files go to controller_stacks.c, GPU samples to controller_gpu.c, a bridge's and a
 * resumed agent's lines to controller_link.c, the preflight's answers to check/preflight.c.
 *
 * Handlers record what they are told and decide nothing: a failed rank, a lost node or the
 * scheduler's SIGTERM is noted (ctl_note_stop) for the progress step (controller.c), which
 * acts on it after this pass's lines.
 *
 * Output and exits are numbered per rank by the agent ("q"): after a new link it sends again
 * everything we had not acknowledged, so a number already taken is a repeat and is dropped;
 * the log files get each byte once, in order. */
#include "controller_int.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/base64.h"
#include "wire/json_flat.h"
#include "wire/json_num.h"
#include "wire/protocol.h"
#include "job/rank_report.h"
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

static const char *str(const cJSON *m, const char *k)
{
    return cJSON_GetStringValue(get(m, k));
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

/* ---- hello, spawned ------------------------------------------------------------------------- */

static void on_hello(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    struct cnode *nd = &c->nodes[i];
    char buf[200];
    const char *why = wire_hello_mismatch(m, buf, sizeof buf);
    if (why) {
        ctl_node_lost(c, i, why);   /* recorded: the progress step acts */
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
    if (job_rank_exited(c->job, rank, 127, 0, false, NULL, 0)) ctl_note_stop(c, STOP_FAILURE);
}

static void on_spawned(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *ranks = get(wm->json, "ranks"), *r;
    if (wm->id != c->nodes[i].spawn_id) return;   /* not this attempt's spawn */
    c->nodes[i].spawn_answered = true;
    cJSON_ArrayForEach(r, ranks) {
        int rank = ctl_msg_rank(c, i, WIRE_EV_SPAWNED, r);
        const char *e = str(r, "error");
        if (!ctl_rank_on_node(c, i, rank) || c->job->ranks[rank].state != RANK_PENDING) continue;
        if (e) rank_spawn_failed(c, rank, e);
        else job_rank_started(c->job, rank, (int)ctl_int(c, i, WIRE_EV_SPAWNED, r, "pid", 1, INT_MAX, 0));
    }
}

/* ---- out ------------------------------------------------------------------------------------ */

/* One out message into the model: the rank's log file, its ring, its metrics, NCCL's account,
 * and the front end's on_line for each line (job_rank_output). */
static void out_block(struct controller *c, int rank, int attempt, uint64_t q, enum log_stream stream,
                      unsigned flags, const char *t, size_t len)
{
    struct job_output_observer obs = {.ctx = c->fe.ctx, .line = c->fe.on_line};
    job_rank_output(c->job, rank, attempt, q, stream, flags, t, len, c->metrics, &obs);
}

/* The "f" member (len bytes; NULL: absent) as LOG_LINE_* flags. */
static unsigned out_flags(const char *f, size_t len)
{
    unsigned flags = 0;
    if (f && memchr(f, 'p', len)) flags |= LOG_LINE_PARTIAL;
    if (f && memchr(f, 's', len)) flags |= LOG_LINE_SPLIT;
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

static void on_out(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    int rank = ctl_msg_rank(c, i, WIRE_EV_OUT, m);
    long long q = ctl_msg_seq(c, i, WIRE_EV_OUT, m);
    int attempt = ctl_msg_attempt(c, i, WIRE_EV_OUT, m, "a", -1);
    const char *s = str(m, "s"), *t = str(m, "t"), *b64 = str(m, "b64"), *f = str(m, "f");
    enum log_stream stream = s && s[0] == 'e' ? LOG_STDERR : LOG_STDOUT;
    char *raw = NULL;
    size_t len;
    if (q < 0 || attempt == -2 || !ctl_rank_on_node(c, i, rank) || !seq_take(c, rank, (uint64_t)q)) return;
    if (cJSON_IsObject(get(m, "dropped"))) out_dropped(c, i, rank, get(m, "dropped"));
    if (t) {
        len = strlen(t);
    } else if (b64) {
        raw = base64_decode(b64, strlen(b64), &len);
        t = raw;
    } else {
        return;
    }
    out_block(c, rank, attempt, (uint64_t)q, stream, out_flags(f, f ? strlen(f) : 0), t, len);
    free(raw);
}

/* A string member (decoded by the scan), or NULL when absent or not a string. */
static const struct json_flat_field *flat_str(const struct json_flat *o, const char *key)
{
    const struct json_flat_field *v = json_flat_get(o, key);
    return v && v->type == JF_STRING ? v : NULL;
}

/* "out", the message that comes 10,000 times a second with 1,024 ranks, without building a
 * cJSON tree: the same decisions as on_out. Its text is decoded in the scan's one pass, into
 * c->unesc. False: not one it takes (base64 text, escapes it leaves to cJSON, anything
 * unusual), for agent_message to decode with cJSON. */
static bool fast_out(struct controller *c, size_t i, const char *line, size_t n)
{
    static const char head[] = "{\"ev\":\"out\",";
    struct json_flat o;
    const struct json_flat_field *rk, *t, *q, *a, *s, *f;
    long long rank = -1, seq = 0, attempt = -1;
    if (n < sizeof head - 1 || memcmp(line, head, sizeof head - 1) != 0) return false;
    if (n > c->unesc_cap) {
        c->unesc_cap = n > 65536 ? n : 65536;
        free(c->unesc);
        c->unesc = xmalloc(c->unesc_cap);
    }
    if (!json_flat_scan_decoded(line, n, &o, c->unesc)) return false;
    t = flat_str(&o, "t");
    if (!t || json_flat_get(&o, "dropped")) return false;
    s = flat_str(&o, "s");
    f = flat_str(&o, "f");
    ctl_link_heard(c, i);
    rk = json_flat_get(&o, "rank");
    q = json_flat_get(&o, "q");
    a = json_flat_get(&o, "a");
    /* a number that is not one the protocol allows: cJSON's path (on_out) says it */
    if ((rk && (rk->type != JF_NUMBER || !json_whole_in(rk->num, 0, INT_MAX, &rank))) ||
        (q && (q->type != JF_NUMBER || !json_whole_in(q->num, 0, JSON_EXACT_MAX, &seq))) ||
        (a && (a->type != JF_NUMBER || !json_whole_in(a->num, 0, INT_MAX, &attempt))))
        return false;
    if (ctl_rank_on_node(c, i, (int)rank) && seq_take(c, (int)rank, (uint64_t)seq))
        out_block(c, (int)rank, (int)attempt, (uint64_t)seq,
                  s && s->str_len && s->str[0] == 'e' ? LOG_STDERR : LOG_STDOUT,
                  out_flags(f ? f->str : NULL, f ? f->str_len : 0), t->str, t->str_len);
    return true;
}

/* ---- status, exit, stopped, errors, notices ----------------------------------------------- */

/* One rank's entry of a status heartbeat: its /proc state (st: NULL or "" when unknown) and
 * CPU time (cpu_s, or < 0) as the agent read them at mono (its clock, ns). */
static void status_rank(struct controller *c, size_t i, int rank, const char *st, double cpu, int64_t mono)
{
    struct rank_info *ri;
    struct crank *cr;
    if (!ctl_rank_on_node(c, i, rank)) return;
    ri = &c->job->ranks[rank];
    cr = &c->ranks[rank];
    if (ri->state != RANK_RUNNING && ri->state != RANK_STALLED) return;
    if (st && *st) ri->proc_state = st[0];
    if (cpu >= 0 && mono > 0) {
        if (cr->cpu_mono_ns > 0 && mono > cr->cpu_mono_ns)
            ri->cpu_pct = 100.0 * (cpu - cr->cpu_s) / ((double)(mono - cr->cpu_mono_ns) / 1e9);
        cr->cpu_s = cpu;
        cr->cpu_mono_ns = mono;
    }
}

static void on_status(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    const cJSON *r;
    int64_t mono = ctl_int(c, i, WIRE_EV_STATUS, m, "mono_ns", 0, LLONG_MAX, 0);
    cJSON_ArrayForEach(r, get(m, "ranks")) {
        int rank = ctl_msg_rank(c, i, WIRE_EV_STATUS, r);
        double cpu = num(r, "cpu_s", -1);
        if (cpu > 1e15) {   /* 30 million years of CPU: not a CPU time */
            ctl_bad_number(c, i, WIRE_EV_STATUS, "cpu_s", get(r, "cpu_s"));
            cpu = -1;
        }
        status_rank(c, i, rank, str(r, "state"), cpu, mono);
    }
    c->job->generation++;
}

/* The status heartbeat (1,024 a second with 1,024 nodes, 8 ranks in each) as the agent writes
 * it, {"ev":"status","mono_ns":N,"ranks":[{flat},...]}, without a cJSON tree: the same
 * decisions as on_status. False, with nothing done: any other shape, or anything on_status
 * would have to report (a bad rank or CPU time), which agent_message then decodes with cJSON. */
#define FAST_STATUS_RANKS 64

static bool fast_status(struct controller *c, size_t i, const char *line, size_t n)
{
    static const char head[] = "{\"ev\":\"status\",\"mono_ns\":", mid[] = ",\"ranks\":[";
    struct { int rank; char st[2]; double cpu; } e[FAST_STATUS_RANKS];
    size_t k = sizeof head - 1, d, m = 0;
    int64_t mono = 0;
    if (n < k || memcmp(line, head, k) != 0) return false;
    for (d = k; k < n && k - d < 18 && line[k] >= '0' && line[k] <= '9'; k++) mono = mono * 10 + (line[k] - '0');
    if (k == d || n - k < sizeof mid - 1 || memcmp(line + k, mid, sizeof mid - 1) != 0) return false;
    k += sizeof mid - 1;
    while (k < n && line[k] != ']') {
        struct json_flat o;
        const struct json_flat_field *rk, *st, *cpu;
        long long rank;
        size_t used = m < FAST_STATUS_RANKS ? json_flat_scan_at(line + k, n - k, &o) : 0;
        if (!used) return false;
        k += used;
        rk = json_flat_get(&o, "rank");
        st = json_flat_get(&o, "state");
        cpu = json_flat_get(&o, "cpu_s");
        if (!rk || rk->type != JF_NUMBER || !json_whole_in(rk->num, 0, INT_MAX, &rank)) return false;
        if (st && st->type == JF_STRING && st->str_escaped) return false;
        e[m].rank = (int)rank;
        e[m].st[0] = st && st->type == JF_STRING && st->str_len ? st->str[0] : '\0';
        e[m].st[1] = '\0';
        e[m].cpu = cpu && cpu->type == JF_NUMBER && isfinite(cpu->num) ? cpu->num : -1;
        if (e[m].cpu > 1e15) return false;
        m++;
        if (k < n && line[k] == ',' && k + 1 < n && line[k + 1] == '{') k++; /* [{},] is not JSON */
        else if (k >= n || line[k] != ']') return false;
    }
    if (n - k < 2 || line[k + 1] != '}') return false;
    ctl_link_heard(c, i);
    for (size_t r = 0; r < m; r++) status_rank(c, i, e[r].rank, e[r].st, e[r].cpu, mono);
    c->job->generation++;
    return true;
}

/* The answer to the once-a-second ping, {"ev":"pong","id":N}: the request ends and the node
 * was heard, as agent_message would do after a cJSON parse. */
static bool fast_pong(struct controller *c, size_t i, const char *line, size_t n)
{
    static const char head[] = "{\"ev\":\"pong\",";
    struct json_flat o;
    const struct json_flat_field *id;
    long long v;
    if (n < sizeof head - 1 || memcmp(line, head, sizeof head - 1) != 0 || !json_flat_scan(line, n, &o)) return false;
    id = json_flat_get(&o, "id");
    if (!id || id->type != JF_NUMBER || !json_whole_in(id->num, 1, INT_MAX, &v) ||
        wire_client_tag(&c->nodes[i].cl, (int)v, false) != WIRE_TAG_PING)
        return false;
    wire_client_tag(&c->nodes[i].cl, (int)v, true);
    ctl_link_heard(c, i);
    return true;
}

/* An exit of a rank (not the answer to an exit request, which has an id): a repeat is dropped,
 * the others held to be applied in the agent's order (controller_exits.c). */
static void on_rank_exit(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    if (wm->id) return;
    int rank = ctl_msg_rank(c, i, WIRE_EV_EXIT, m);
    long long q = ctl_msg_seq(c, i, WIRE_EV_EXIT, m);
    int a = ctl_msg_attempt(c, i, WIRE_EV_EXIT, m, "attempt", 0);
    if (q < 0 || a == -2 || !ctl_rank_on_node(c, i, rank) || !seq_take(c, rank, (uint64_t)q)) return;
    ctl_exits_hold(c, i, wm->json);
    wm->json = NULL;   /* the held exits have it now */
}

static void on_stopped(struct controller *c, size_t i, struct wire_msg *wm)
{
    if (wm->id == c->nodes[i].stop_id) c->nodes[i].stopped = true;
}

static void on_error(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
    int id = wm->id;
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
static void on_notice(struct controller *c, size_t i, struct wire_msg *wm)
{
    const cJSON *m = wm->json;
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
         * KillWait; the job stops without restarting (the progress step), and says why */
        char *why = xasprintf("Slurm stopped the job on %s with SIGTERM (scancel, the job's time limit or a "
                              "preemption)", c->job->nodes[i].name);
        job_event_add(c->job, EV_SIGNAL, -1, (int)i, "SIGTERM on %s: %s", c->job->nodes[i].name,
                      text ? text : "from Slurm");
        if (ctl_stop_open(c)) {
            root_cause_scheduler(c->job, (int)i, why);
            ctl_note_stop(c, STOP_SCHEDULER);
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

/* The answer to a stack dump or a flight recorder request (controller_stacks.c). */
static void on_stacks_answer(struct controller *c, size_t i, struct wire_msg *wm)
{
    ctl_stacks_answer(c, i, wm->id, wm->ev, wm->json);
}

/* A bridge's first line (ddptop-agent --attach): it is up, and is told which agent to reach. */
static void on_bridge(struct controller *c, size_t i, struct wire_msg *wm)
{
    (void)wm;
    ctl_link_bridge(c, i);
}

/* A bridge says the agent is gone, or that it could not reach it (not final). */
static void on_gone(struct controller *c, size_t i, struct wire_msg *wm)
{
    const char *e = str(wm->json, "error");
    /* an older bridge without "final" only said it for an agent that is gone */
    const cJSON *fin = get(wm->json, "final");
    ctl_link_gone(c, i, e ? e : "its agent is gone", !fin || cJSON_IsTrue(fin));
}

/* ---- the table ------------------------------------------------------------------------------ */

/* Each message the agent (or a bridge to it) sends, by its "ev", and its handler. heard: the
 * message is the agent's word, so the node was heard from (a bridge's lines are not). An
 * answer that the preflight or a resume waits for is theirs before the table is asked. */
struct agent_event {
    const char *ev;
    bool heard;
    void (*take)(struct controller *c, size_t node, struct wire_msg *m);
};

static const struct agent_event agent_events[] = {
    { WIRE_EV_OUT, true, on_out },                  /* most come by fast_out */
    { WIRE_EV_STATUS, true, on_status },
    { WIRE_EV_EXIT, true, on_rank_exit },
    { WIRE_EV_HELLO, true, on_hello },
    { WIRE_EV_SPAWNED, true, on_spawned },
    { WIRE_EV_STOPPED, true, on_stopped },
    { WIRE_EV_STACKS, true, on_stacks_answer },
    { WIRE_EV_LIST, true, on_stacks_answer },
    { WIRE_EV_READ, true, on_stacks_answer },
    { WIRE_EV_ERROR, true, on_error },
    { WIRE_EV_GPU, true, ctl_on_gpu },
    { WIRE_EV_NOTICE, true, on_notice },
    { WIRE_EV_GPU_WATCH, true, ctl_on_gpu_watch },
    { WIRE_EV_BRIDGE, false, on_bridge },
    { WIRE_EV_GONE, false, on_gone },
    { NULL, false, NULL },
};

static const struct agent_event *event_of(const char *ev)
{
    for (const struct agent_event *e = agent_events; e->ev; e++)
        if (strcmp(e->ev, ev) == 0) return e;
    return NULL;
}

/* One message of node i's agent. */
static void agent_message(struct controller *c, size_t i, const char *line)
{
    struct cnode *nd = &c->nodes[i];
    struct wire_msg wm;
    size_t n = strlen(line);
    if (fast_out(c, i, line, n) || fast_status(c, i, line, n) || fast_pong(c, i, line, n)) return;
    if (!wire_client_parse(&nd->cl, line, &wm)) return; /* not a protocol message: ignored */
    const struct agent_event *e = event_of(wm.ev);
    if (e && !e->heard) {
        e->take(c, i, &wm);
    } else {
        ctl_link_heard(c, i);
        if (wm.tag >= WIRE_TAG_CHECK) {
            /* the preflight's answers; after it (a late connect, an unlisten) nobody needs them */
            if (c->job->state == JOB_CHECKING && c->pf) preflight_node_message(c->pf, i, &wm, line);
        } else if (wm.tag == WIRE_TAG_RESUME && wm.id == nd->resume_id) {
            if (strcmp(wm.ev, WIRE_EV_ERROR) == 0)
                ctl_link_gone(c, i, str(wm.json, "error") ? str(wm.json, "error") : "resume refused", false);
            else ctl_link_resume_answer(c, i, wm.json);
        } else if (e) {
            e->take(c, i, &wm);
        }
    }
    wire_msg_done(&wm);
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
        agent_message(c, i, c->line_in.buf);
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
