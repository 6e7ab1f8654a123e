/* events.jsonl read back into a run's summary (run_summary.h): the reader of what
 * job_events.c writes, with the same kind names (job_event_kind_name). Fields it does not
 * know are ignored, as docs/logs.md promises every reader does. */
#include "run_summary.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "util/util.h"

/* What a file may claim and still be believed (a file may hold anything). */
#define RANKS_MAX    (1 << 24)
#define ATTEMPTS_MAX (1 << 24)

void run_summary_init(struct run_summary *s)
{
    *s = (struct run_summary){ .ranks = -1, .cause_attempt = -1, .exit_code = -1 };
}

void run_summary_done(struct run_summary *s)
{
    for (size_t i = 0; s->hosts && i < s->n_nodes; i++) free(s->hosts[i]);
    free(s->hosts);
    free(s->ranks_per_node);
    free(s->root_cause);
    free(s->end_text);
    run_summary_init(s);
}

/* A new run in the same file (a reused --run-id): forget the older one, but not that the
 * file has a bad line. */
static void start_afresh(struct run_summary *s)
{
    long lines = s->lines, bad = s->bad_line;
    const char *why = s->bad_why;
    run_summary_done(s);
    s->lines = lines;
    s->bad_line = bad;
    s->bad_why = why;
}

int64_t run_summary_parse_time(const char *str)
{
    struct tm tm = {0};
    int ms = 0, used = 0;
    if (!str || sscanf(str, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
        return -1;
    const char *p = str + used;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3) ms = ms * 10 + (*p - '0');
        while (digits > 0 && digits < 3) { ms *= 10; digits++; }
    }
    if (strcmp(p, "Z") != 0) return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t < 0 || t > 9000000000) return -1;   /* 1970 to 2255: ns since 1970 fit 64 bits */
    return (int64_t)t * 1000000000 + (int64_t)ms * 1000000;
}

static enum run_state state_parse(const char *name)
{
    for (int st = RUN_RUNNING; st <= RUN_INTERRUPTED; st++)
        if (strcmp(name, run_state_name((enum run_state)st)) == 0) return (enum run_state)st;
    return RUN_UNKNOWN;
}

static const char *str_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A number that fits an int (a file may hold anything), else dflt. */
static int int_value(const cJSON *v, int dflt)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT_MIN && v->valuedouble <= INT_MAX)) return dflt;
    return (int)v->valuedouble;
}

static int int_field(const cJSON *o, const char *key, int dflt)
{
    return int_value(cJSON_GetObjectItemCaseSensitive(o, key), dflt);
}

/* One JSON value and nothing after it but blanks; NULL otherwise. */
static cJSON *parse_line(const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!o) return NULL;
    while (end && end < line + len && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (!end || end != line + len) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool is_kind(const char *kind, enum job_event_kind k)
{
    return strcmp(kind, job_event_kind_name(k)) == 0;
}

/* The rank map of a launch: its fields, or for older files what its text says. */
static void take_launch(struct run_summary *s, const cJSON *o, const char *text)
{
    const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(o, "hosts");
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(o, "ranks_per_node");
    int ranks = int_field(o, "ranks", -1);
    for (size_t i = 0; s->hosts && i < s->n_nodes; i++) free(s->hosts[i]);
    free(s->hosts);
    free(s->ranks_per_node);
    s->hosts = NULL;
    s->ranks_per_node = NULL;
    s->n_nodes = 0;
    if (cJSON_IsArray(hosts) && cJSON_IsArray(per) &&
        cJSON_GetArraySize(hosts) == cJSON_GetArraySize(per)) {
        size_t n = (size_t)cJSON_GetArraySize(hosts), i = 0;
        const cJSON *h, *k;
        s->hosts = xcalloc(n ? n : 1, sizeof *s->hosts);
        s->ranks_per_node = xcalloc(n ? n : 1, sizeof *s->ranks_per_node);
        cJSON_ArrayForEach(h, hosts) s->hosts[i++] = xstrdup(cJSON_IsString(h) ? h->valuestring : "?");
        i = 0;
        cJSON_ArrayForEach(k, per) {
            int v = int_value(k, 0);
            s->ranks_per_node[i++] = v < 0 || v > RANKS_MAX ? 0 : v;
        }
        s->n_nodes = n;
    } else if (text) { /* older files: "attempt 0: launching 4 ranks on 2 nodes (...)" */
        const char *p;
        size_t nodes;
        if (ranks < 0 && (p = strstr(text, "launching "))) sscanf(p, "launching %d rank", &ranks);
        if ((p = strstr(text, " on ")) && sscanf(p, " on %zu node", &nodes) == 1) s->n_nodes = nodes;
    }
    s->ranks = ranks < 0 || ranks > RANKS_MAX ? -1 : ranks;
}

int run_summary_feed(struct run_summary *s, const char *line, size_t len)
{
    s->lines++;
    cJSON *o = parse_line(line, len);
    const char *kind = cJSON_IsObject(o) ? str_field(o, "kind") : NULL;
    if (!kind) {
        if (!s->bad_line) {
            s->bad_line = s->lines;
            s->bad_why = !o ? "not JSON" : "not an event (a JSON object with a \"kind\")";
        }
        cJSON_Delete(o);
        return -1;
    }
    const char *text = str_field(o, "text");
    int attempt = int_field(o, "attempt", 0);
    if (attempt < 0 || attempt > ATTEMPTS_MAX) attempt = 0;
    if (is_kind(kind, EV_LAUNCH) && attempt == 0 && (s->attempts > 0 || s->ended)) start_afresh(s);
    int64_t t = run_summary_parse_time(str_field(o, "time"));
    if (t > 0) {
        if (!s->start_ns) s->start_ns = t;
        s->last_ns = t;
    }
    if (is_kind(kind, EV_LAUNCH)) {
        if (attempt + 1 > s->attempts) s->attempts = attempt + 1;
        take_launch(s, o, text);
    } else if (is_kind(kind, EV_ROOT_CAUSE)) {
        const char *c = text ? text : "?";
        if (strncmp(c, "root cause: ", 12) == 0) c += 12;
        free(s->root_cause);
        s->root_cause = xstrdup(c);
        s->cause_attempt = attempt;
    } else if (is_kind(kind, EV_DONE)) {
        s->saw_done = true;
    } else if (is_kind(kind, EV_STOP)) {
        s->saw_stop = true;
        /* "Interrupt received: ..." and "... again: killing every rank now" (controller_run.c) */
        if (text && (strstr(text, " received: ") || strstr(text, " again: "))) s->stop_by_signal = true;
    } else if (is_kind(kind, EV_RESTART)) {
        s->ended = s->saw_done = s->saw_stop = s->stop_by_signal = false;
    } else if (is_kind(kind, EV_END)) {
        const char *st = str_field(o, "state");
        s->ended = true;
        s->end_state = st ? state_parse(st) : RUN_UNKNOWN;
        s->exit_code = int_field(o, "exit_code", -1);
        /* the end counts the attempts: launches of a full disk's run may be missing */
        int att = int_field(o, "attempts", -1);
        if (att > s->attempts && att <= ATTEMPTS_MAX) s->attempts = att;
        s->end_ns = t > 0 ? t : s->last_ns;
        free(s->end_text);
        s->end_text = xstrdup(text ? text : "");
    }
    cJSON_Delete(o);
    return 0;
}

void run_summary_finish(struct run_summary *s, enum run_owner_status owner)
{
    if (s->bad_line) s->state = RUN_UNKNOWN;
    else if (s->ended) s->state = s->end_state;
    else if (owner == OWNER_ALIVE || owner == OWNER_ELSEWHERE) s->state = RUN_RUNNING;
    else if (owner == OWNER_GONE) s->state = RUN_INTERRUPTED;
    else if (s->saw_done) s->state = RUN_SUCCEEDED;
    else if (s->saw_stop) s->state = s->stop_by_signal ? RUN_INTERRUPTED : RUN_STOPPED;
    else if (s->root_cause && s->cause_attempt == s->attempts - 1) s->state = RUN_FAILED;
    else s->state = RUN_UNKNOWN;
}

int run_summary_read(const char *run_dir, enum run_owner_status owner, struct run_summary *s)
{
    run_summary_init(s);
    char *path = xasprintf("%s/events.jsonl", run_dir);
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) {
        s->state = RUN_UNKNOWN;
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') {
            run_summary_feed(s, line, (size_t)n - 1);
            continue;
        }
        /* the last line, its newline not written yet: use it only when it is whole */
        cJSON *o = parse_line(line, (size_t)n);
        if (o) run_summary_feed(s, line, (size_t)n);
        else s->cut_short = true;
        cJSON_Delete(o);
    }
    int bad = ferror(f), saved = errno;
    free(line);
    fclose(f);
    if (bad) {
        s->state = RUN_UNKNOWN;
        errno = saved;
        return -1;
    }
    run_summary_finish(s, owner);
    return 0;
}

const char *run_summary_rank_host(const struct run_summary *s, int r)
{
    if (!s->hosts || r < 0) return NULL;
    for (size_t i = 0; i < s->n_nodes; i++) {
        if (r < s->ranks_per_node[i]) return s->hosts[i];
        r -= s->ranks_per_node[i];
    }
    return NULL;
}
