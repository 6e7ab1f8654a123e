/* The notifier (notify.h): the run's events, of the kinds --notify-on chose, to the user's
 * commands. Three stages, each bounded. (1) Held: per kind, an event that comes within
 * NOTIFY_COALESCE_MS of the last notification of its kind waits for the window's end, and
 * the ones after it are counted into it, so that a burst is two notifications whatever its
 * size (the first at once, the rest as one with its count). (2) Queued: per command, in order,
 * at most NOTIFY_QUEUE_MAX; past that a notification is merged into a queued one of its kind,
 * or dropped and counted (said once). (3) Running: one per command, NOTIFY_RUNNING_MAX in all
 * (notify_proc.c runs them). The JSON each gets is events.jsonl's line for the event
 * (record/run_events.c, the same fields) with the run's and this host's names added. */
#include "notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "job/job.h"
#include "notify_proc.h"
#include "record/run_events.h"
#include "util/util.h"
#include "wire/signals.h"

extern char **environ;

#define PUMP_EVERY_MS 50     /* while a command runs: how soon its exit is seen */
#define ENV_PREFIX "DDPTOP_EVENT_"

struct nitem {
    struct nitem *next;
    cJSON *o;                 /* the event's object (count added when it starts) */
    int kind;
    unsigned count;           /* how many events it stands for */
    int64_t last_wall;        /* the last of them */
};

struct nrun {
    struct notify_proc *p;
    char kind[24];
};

struct ncmd {
    char *cmd;
    char *label;              /* "--notify command 2 (curl)": never the command, which may hold a secret */
    struct nitem *head, *tail;
    size_t queued;
    struct nrun run;          /* the one running (run.p), if any */
    bool failure_said, drop_said;
    unsigned dropped;         /* events dropped (a queue full of other kinds, or the drain's end) */
};

struct held {
    cJSON *o;                 /* the first held event; NULL: none held */
    unsigned count;
    int64_t last_wall, due_ms;
};

struct notify {
    struct ncmd *cmds;
    size_t n_cmds;
    bool want[EV_KINDS];
    int64_t timeout_ms;
    char hostname[256];
    struct held held[EV_KINDS];
    int64_t last_ms[EV_KINDS];  /* when a notification of the kind was last queued */
    bool sent[EV_KINDS];
    size_t running;
    bool draining;
    int64_t drain_deadline_ms;
};

/* "(curl)": the command's first word, printable, short. */
static char *label_of(const char *cmd, size_t i, size_t n)
{
    char word[33];
    size_t k = 0;
    cmd += strspn(cmd, " \t");
    for (; *cmd && *cmd != ' ' && *cmd != '\t' && k + 1 < sizeof word; cmd++)
        word[k++] = (unsigned char)*cmd >= 0x20 && (unsigned char)*cmd < 0x7f ? *cmd : '?';
    word[k] = '\0';
    return n == 1 ? xasprintf("--notify command (%s)", word) : xasprintf("--notify command %zu (%s)", i + 1, word);
}

struct notify *notify_new(const struct notify_opts *o)
{
    if (!o || !o->n_cmds) return NULL;
    struct notify *n = xcalloc(1, sizeof *n);
    n->n_cmds = o->n_cmds;
    n->cmds = xcalloc(o->n_cmds, sizeof *n->cmds);
    for (size_t i = 0; i < o->n_cmds; i++) {
        n->cmds[i].cmd = xstrdup(o->cmds[i]);
        n->cmds[i].label = label_of(o->cmds[i], i, o->n_cmds);
    }
    for (int k = 0; k < EV_KINDS; k++) n->want[k] = notify_opts_wants(o, job_event_kind_name((enum job_event_kind)k));
    n->timeout_ms = (int64_t)(o->timeout_s > 0 ? o->timeout_s : NOTIFY_TIMEOUT_DEFAULT_S) * 1000;
    if (gethostname(n->hostname, sizeof n->hostname - 1) != 0) snprintf(n->hostname, sizeof n->hostname, "?");
    return n;
}

static void item_free(struct nitem *it)
{
    cJSON_Delete(it->o);
    free(it);
}

void notify_free(struct notify *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n_cmds; i++) {
        struct ncmd *c = &n->cmds[i];
        notify_proc_free(c->run.p);
        while (c->head) {
            struct nitem *it = c->head;
            c->head = it->next;
            item_free(it);
        }
        free(c->cmd);
        free(c->label);
    }
    for (int k = 0; k < EV_KINDS; k++) cJSON_Delete(n->held[k].o);
    free(n->cmds);
    free(n);
}

/* An event as the commands get it: events.jsonl's object, and what says which run it is. */
static cJSON *event_object(const struct notify *n, const struct job *j, const struct job_event *ev)
{
    char *line = run_events_line(j, ev);
    cJSON *o = line ? cJSON_Parse(line) : NULL;
    free(line);
    if (!o) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", job_event_kind_name(ev->kind));
    }
    cJSON_AddStringToObject(o, "run_id", j->run_id ? j->run_id : "");
    if (j->log_dir) cJSON_AddStringToObject(o, "log_dir", j->log_dir);
    else cJSON_AddNullToObject(o, "log_dir");
    cJSON_AddStringToObject(o, "hostname", n->hostname);
    return o;
}

/* Into a command's queue (takes o); a full queue merges it into one of its kind. */
static void cmd_push(struct ncmd *c, cJSON *o, int kind, unsigned count, int64_t last_wall)
{
    if (c->queued >= NOTIFY_QUEUE_MAX) {
        for (struct nitem *it = c->head; it; it = it->next)
            if (it->kind == kind) {
                it->count += count;
                it->last_wall = last_wall;
                cJSON_Delete(o);
                return;
            }
        c->dropped += count;
        cJSON_Delete(o);
        return;
    }
    struct nitem *it = xcalloc(1, sizeof *it);
    *it = (struct nitem){.o = o, .kind = kind, .count = count, .last_wall = last_wall};
    if (c->tail) c->tail->next = it;
    else c->head = it;
    c->tail = it;
    c->queued++;
}

/* One notification for every command (takes o). */
static void enqueue(struct notify *n, cJSON *o, int kind, unsigned count, int64_t last_wall)
{
    for (size_t i = 0; i < n->n_cmds; i++)
        cmd_push(&n->cmds[i], i + 1 == n->n_cmds ? o : cJSON_Duplicate(o, 1), kind, count, last_wall);
    n->last_ms[kind] = mono_ms();
    n->sent[kind] = true;
}

void notify_event(struct notify *n, const struct job *j, const struct job_event *ev)
{
    if (!n || (unsigned)ev->kind >= EV_KINDS || !n->want[ev->kind]) return;
    int k = (int)ev->kind;
    struct held *h = &n->held[k];
    if (h->o) { /* a burst: counted into the one held */
        h->count++;
        h->last_wall = ev->wall_ns;
        return;
    }
    cJSON *o = event_object(n, j, ev);
    int64_t now = mono_ms();
    if (!n->sent[k] || now - n->last_ms[k] >= NOTIFY_COALESCE_MS || n->draining) {
        enqueue(n, o, k, 1, ev->wall_ns);
        return;
    }
    *h = (struct held){.o = o, .count = 1, .last_wall = ev->wall_ns, .due_ms = n->last_ms[k] + NOTIFY_COALESCE_MS};
}

static void release_held(struct notify *n, bool all, int64_t now)
{
    for (int k = 0; k < EV_KINDS; k++) {
        struct held *h = &n->held[k];
        if (!h->o || (!all && now < h->due_ms)) continue;
        enqueue(n, h->o, k, h->count, h->last_wall);
        memset(h, 0, sizeof *h);
    }
}

/* ---- the environment ---------------------------------------------------------------------- */

struct envb {
    char **v;
    size_t n, cap;
};

static void env_put(struct envb *e, char *kv)
{
    if (e->n + 2 > e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->v = xrealloc(e->v, e->cap * sizeof *e->v);
    }
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
}

/* DDPTOP_EVENT_<name>: the member key of o as text; empty when absent or null. */
static void env_member(struct envb *e, const char *name, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) env_put(e, xasprintf(ENV_PREFIX "%s=%s", name, v->valuestring));
    else if (cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble)
        env_put(e, xasprintf(ENV_PREFIX "%s=%lld", name, (long long)v->valuedouble));
    else if (cJSON_IsNumber(v)) env_put(e, xasprintf(ENV_PREFIX "%s=%g", name, v->valuedouble));
    else if (cJSON_IsBool(v)) env_put(e, xasprintf(ENV_PREFIX "%s=%s", name, cJSON_IsTrue(v) ? "true" : "false"));
    else env_put(e, xasprintf(ENV_PREFIX "%s=", name));
}

/* Ours, and DDPTOP_EVENT_* as this event has them (none of ours inherited: a stale one would
 * look like this event's). */
static char **event_env(const cJSON *o, const char *kind, unsigned count)
{
    static const char *const members[][2] = {
        {"KIND", "kind"}, {"TIME", "time"}, {"TEXT", "text"}, {"ATTEMPT", "attempt"}, {"RANK", "rank"},
        {"HOST", "host"}, {"RUN_ID", "run_id"}, {"LOG_DIR", "log_dir"}, {"HOSTNAME", "hostname"},
        {"COUNT", "count"}, {"STATE", "state"}, {"EXIT_CODE", "exit_code"}, {"CLASS", "class"},
    };
    struct envb e = {0};
    for (char **p = environ; p && *p; p++)
        if (strncmp(*p, ENV_PREFIX, strlen(ENV_PREFIX)) != 0) env_put(&e, xstrdup(*p));
    for (size_t i = 0; i < sizeof members / sizeof *members; i++) env_member(&e, members[i][0], o, members[i][1]);
    /* one line for a person (a chat message, a mail's subject) */
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "text"), *run = cJSON_GetObjectItemCaseSensitive(o, "run_id");
    char more[64] = "";
    if (count > 1) snprintf(more, sizeof more, " (and %u more %s events)", count - 1, kind);
    env_put(&e, xasprintf(ENV_PREFIX "MESSAGE=ddptop %s: %s%s", cJSON_IsString(run) ? run->valuestring : "?",
                          cJSON_IsString(text) ? text->valuestring : kind, more));
    if (!e.v) env_put(&e, xstrdup("DDPTOP_EVENT_KIND="));
    return e.v;
}

static void env_free(char **env)
{
    for (char **p = env; p && *p; p++) free(*p);
    free(env);
}

/* ---- running them ------------------------------------------------------------------------- */

/* A command's trouble, said once as an event (after the end event only shown, as the writer's
 * errors are: the end stays events.jsonl's last line). */
static void say(struct job *j, const char *text)
{
    if (j->end_written) job_event_restore(j, EV_INFO, wall_ns(), j->attempt, -1, -1, text);
    else job_event_add(j, EV_INFO, -1, -1, "%s", text);
}

static void failed(struct ncmd *c, struct job *j, const char *kind, const struct notify_end *end, int timeout_s)
{
    char why[96], *text;
    if (c->failure_said) return;
    if (end->timed_out) snprintf(why, sizeof why, "ran past its %d s timeout and was killed", timeout_s);
    else if (end->signo) snprintf(why, sizeof why, "was killed by %s", signals_label(end->signo));
    else if (end->exit_code == 127) snprintf(why, sizeof why, "failed: exit status 127 (command not found?)");
    else snprintf(why, sizeof why, "failed: exit status %d", end->exit_code);
    text = xasprintf("%s, telling the %s event, %s%s%s%s; its later failures are not said", c->label, kind, why,
                     end->last_line[0] ? " (its output: " : "", end->last_line, end->last_line[0] ? ")" : "");
    say(j, text);
    free(text);
    c->failure_said = true;
}

static void start_one(struct notify *n, struct ncmd *c, struct job *j, int64_t now)
{
    struct nitem *it = c->head;
    char err[128];
    c->head = it->next;
    if (!c->head) c->tail = NULL;
    c->queued--;
    const char *kind = job_event_kind_name((enum job_event_kind)it->kind);
    cJSON_AddNumberToObject(it->o, "count", it->count);
    if (it->count > 1) {
        char when[48];
        util_iso_time(it->last_wall, when, sizeof when);
        cJSON_AddStringToObject(it->o, "last_time", when);
    }
    char *json = cJSON_PrintUnformatted(it->o);
    char *input = xasprintf("%s\n", json ? json : "{}");
    char **env = event_env(it->o, kind, it->count);
    int64_t deadline = now + n->timeout_ms;
    if (n->draining && n->drain_deadline_ms < deadline) deadline = n->drain_deadline_ms;
    struct notify_proc *p = notify_proc_start(c->cmd, env, input, strlen(input), deadline, err, sizeof err);
    if (p) {
        c->run.p = p;
        snprintf(c->run.kind, sizeof c->run.kind, "%s", kind);
        n->running++;
    } else if (!c->failure_said) {
        char *text = xasprintf("%s, telling the %s event, cannot start: %s; its later failures are not said", c->label,
                               kind, err);
        say(j, text);
        free(text);
        c->failure_said = true;
    }
    env_free(env);
    free(input);
    free(json);
    item_free(it);
}

static void pump_cmd(struct notify *n, struct ncmd *c, struct job *j, int64_t now)
{
    struct notify_end end;
    if (!c->run.p || !notify_proc_pump(c->run.p, now, &end)) return;
    if (end.timed_out || end.exit_code > 0 || end.signo) failed(c, j, c->run.kind, &end, (int)(n->timeout_ms / 1000));
    notify_proc_free(c->run.p);
    c->run.p = NULL;
    n->running--;
}

void notify_tick(struct notify *n, struct job *j)
{
    if (!n) return;
    int64_t now = mono_ms();
    release_held(n, n->draining, now);
    for (size_t i = 0; i < n->n_cmds; i++) pump_cmd(n, &n->cmds[i], j, now);
    bool late = n->draining && now >= n->drain_deadline_ms;
    for (size_t i = 0; i < n->n_cmds && !late; i++) {
        struct ncmd *c = &n->cmds[i];
        /* one at a time per command: it sees the events in order */
        if (c->head && !c->run.p && n->running < NOTIFY_RUNNING_MAX) start_one(n, c, j, now);
    }
    for (size_t i = 0; i < n->n_cmds; i++) {
        struct ncmd *c = &n->cmds[i];
        if (!c->dropped || c->drop_said) continue;
        char *text = xasprintf("%s: %u event%s not told to it (it could not keep up, or the run ended first)",
                               c->label, c->dropped, c->dropped == 1 ? "" : "s");
        say(j, text);
        free(text);
        c->drop_said = true;
    }
}

int64_t notify_next_ms(const struct notify *n)
{
    if (!n) return 0;
    int64_t now = mono_ms(), next = 0;
    if (n->running) next = now + PUMP_EVERY_MS;
    for (size_t i = 0; i < n->n_cmds; i++)
        if (n->cmds[i].head && !n->cmds[i].run.p && n->running < NOTIFY_RUNNING_MAX) return now;
    for (int k = 0; k < EV_KINDS; k++)
        if (n->held[k].o && (!next || n->held[k].due_ms < next)) next = n->held[k].due_ms;
    return next;
}

static bool idle(const struct notify *n)
{
    if (n->running) return false;
    for (size_t i = 0; i < n->n_cmds; i++)
        if (n->cmds[i].head) return false;
    return true;
}

void notify_drain(struct notify *n, struct job *j)
{
    if (!n) return;
    n->draining = true;
    n->drain_deadline_ms = mono_ms() + n->timeout_ms;
    release_held(n, true, mono_ms());
    for (;;) {
        notify_tick(n, j);
        /* past the deadline every command was killed (its deadline is the drain's at most):
         * a moment for the kernel to end them */
        if (idle(n) || mono_ms() >= n->drain_deadline_ms + 2000) break;
        if (mono_ms() >= n->drain_deadline_ms) {
            for (size_t i = 0; i < n->n_cmds; i++) {
                struct ncmd *c = &n->cmds[i];
                while (c->head) { /* never started: no time was left */
                    struct nitem *it = c->head;
                    c->head = it->next;
                    c->dropped += it->count;
                    item_free(it);
                }
                c->tail = NULL;
                c->queued = 0;
            }
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    notify_tick(n, j); /* what the last pass found: said */
}
