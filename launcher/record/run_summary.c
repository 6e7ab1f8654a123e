/* events.jsonl read back into a run's summary (run_summary.h): the reader of what
 * job_events.c writes, with the same kind names (job_event_kind_name). Fields it does not
 * know are ignored, as docs/logs.md promises every reader does. */
#include "run_summary.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "job/failure_line.h"
#include "util/util.h"

void run_summary_init(struct run_summary *s)
{
    *s = (struct run_summary){ .ranks = -1, .cause_attempt = -1, .exit_code = -1, .active_nodes = -1 };
}

void run_summary_done(struct run_summary *s)
{
    for (size_t i = 0; s->hosts && i < s->n_nodes; i++) free(s->hosts[i]);
    free(s->hosts);
    free(s->ranks_per_node);
    for (size_t i = 0; i < s->n_excluded; i++) free(s->excluded[i]);
    free(s->excluded);
    free(s->root_cause);
    free(s->cause_class);
    free(s->cause_class_name);
    free(s->cause_detail);
    free(s->cause_lagging);
    free(s->end_text);
    run_summary_init(s);
}

static const char *str_field(const cJSON *o, const char *key);

/* A root cause's class (docs/failures.md): kept when its name is one we know. */
static void take_class(struct run_summary *s, const cJSON *o)
{
    free(s->cause_class);
    free(s->cause_class_name);
    free(s->cause_detail);
    free(s->cause_lagging);
    s->cause_class = s->cause_class_name = s->cause_detail = NULL;
    s->cause_lagging = NULL;
    s->n_cause_lagging = 0;
    enum failure_class fc = failure_class_parse(str_field(o, "class"));
    if (fc == FAILURE_NONE) return;
    s->cause_class = xstrdup(failure_class_label(fc));
    s->cause_class_name = xstrdup(failure_class_name(fc));
    const char *d = str_field(o, "detail");
    if (d) s->cause_detail = xstrndup(d, strnlen(d, 1000));   /* xstrndup copies exactly n bytes */
    const cJSON *lag = cJSON_GetObjectItemCaseSensitive(o, "lagging_ranks"), *r;
    int n = cJSON_IsArray(lag) ? cJSON_GetArraySize(lag) : 0;
    if (n <= 0 || n > 1 << 20) return;
    s->cause_lagging = xcalloc((size_t)n, sizeof *s->cause_lagging);
    cJSON_ArrayForEach(r, lag)
        if (cJSON_IsNumber(r) && r->valuedouble >= 0 && r->valuedouble < 1 << 24)
            s->cause_lagging[s->n_cause_lagging++] = (int)r->valuedouble;
}

/* A new run in the same file (a reused --run-id): forget the older one, but not that the
 * file has a bad line. */
static void start_afresh(struct run_summary *s)
{
    struct run_summary keep = *s;
    run_summary_done(s);
    s->lines = keep.lines;
    s->bad_line = keep.bad_line;
    memcpy(s->bad_text, keep.bad_text, sizeof s->bad_text);
    s->bad_why = keep.bad_why == keep.bad_text ? s->bad_text : keep.bad_why;
    s->dir = keep.dir;
}

/* The current line is not believed: why (the first such line's reason is kept). -1. */
static int reject(struct run_summary *s, const char *fmt, ...)
{
    if (!s->bad_line) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->bad_text, sizeof s->bad_text, fmt, ap);
        va_end(ap);
        s->bad_line = s->lines;
        s->bad_why = s->bad_text;
    }
    return -1;
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

/* How many of rank-0.log .. rank-(n-1).log attempt-A/ holds (names as runs_rank_logs takes
 * them: no sign, no leading zero). */
static size_t rank_logs_below(const char *dir, int attempt, int n)
{
    char *ad = xasprintf("%s/attempt-%d", dir, attempt);
    DIR *d = opendir(ad);
    free(ad);
    size_t have = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *p = de->d_name;
        long v = 0;
        size_t k = 0;
        if (strncmp(p, "rank-", 5) != 0) continue;
        for (p += 5; p[k] >= '0' && p[k] <= '9' && k < 9; k++) v = v * 10 + (p[k] - '0');
        if (k && !(k > 1 && p[0] == '0') && strcmp(p + k, ".log") == 0 && v < n) have++;
    }
    if (d) closedir(d);
    return have;
}

static bool attempt_dir_exists(const char *dir, int attempt)
{
    char *p = xasprintf("%s/attempt-%d", dir, attempt);
    struct stat st;
    bool yes = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return yes;
}

/* A launch's claims against the limits and what is on disk (run_summary.h). 0 when they are
 * believed, else -1 (reject). */
static int launch_check(struct run_summary *s, const cJSON *o, const char *text, int attempt)
{
    const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(o, "hosts");
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(o, "ranks_per_node"), *k;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "ranks");
    double ranks = cJSON_IsNumber(rf) ? rf->valuedouble : -1, nodes = 0, total = 0;
    if (cJSON_IsArray(hosts) && cJSON_IsArray(per) && cJSON_GetArraySize(hosts) == cJSON_GetArraySize(per)) {
        int i = 0;
        nodes = cJSON_GetArraySize(per);
        if (nodes > RUN_NODES_MAX)
            return reject(s, "the launch of attempt %d names %.15g nodes (at most %d)", attempt, nodes, RUN_NODES_MAX);
        cJSON_ArrayForEach(k, per) {
            if (!cJSON_IsNumber(k) || !(k->valuedouble >= 0 && k->valuedouble <= RUN_NODE_RANKS_MAX))
                return reject(s, "the launch of attempt %d gives node %d a rank count out of range "
                              "(0 to %d per node)", attempt, i, RUN_NODE_RANKS_MAX);
            total += (int)k->valuedouble;
            i++;
        }
        if (cJSON_IsNumber(rf) && ranks != total)
            return reject(s, "the launch of attempt %d says %.15g ranks, but its nodes hold %.15g",
                          attempt, ranks, total);
    } else if (text) {
        const char *p;
        int r;
        size_t n;
        if (ranks < 0 && (p = strstr(text, "launching ")) && sscanf(p, "launching %d rank", &r) == 1) ranks = r;
        if ((p = strstr(text, " on ")) && sscanf(p, " on %zu node", &n) == 1 && n > RUN_NODES_MAX)
            return reject(s, "the launch of attempt %d names %zu nodes (at most %d)", attempt, n, RUN_NODES_MAX);
        total = ranks;
    }
    if (total > RUN_RANKS_MAX || ranks > RUN_RANKS_MAX)
        return reject(s, "the launch of attempt %d claims %.15g ranks (at most %d)", attempt,
                      total > ranks ? total : ranks, RUN_RANKS_MAX);
    if (!s->dir) return 0;
    /* what is on disk bears the numbers out: a launch made its attempt-N/ and a log per rank */
    if (attempt > s->launches && !attempt_dir_exists(s->dir, attempt))
        return reject(s, "a launch of attempt %d after %d launch%s, and there is no attempt-%d/", attempt,
                      s->launches, s->launches == 1 ? "" : "es", attempt);
    if (total > RUN_RANKS_UNSEEN) {
        size_t have = rank_logs_below(s->dir, attempt, (int)total);
        if (have + RUN_RANKS_UNSEEN < (size_t)total)
            return reject(s, "the launch of attempt %d claims %.15g ranks, but attempt-%d/ holds %zu of their "
                          "rank logs (more than %d ranks are believed only with their logs)", attempt, total,
                          attempt, have, RUN_RANKS_UNSEEN);
    }
    return 0;
}

/* --nnodes: the launch's roles (how many nodes are active) and its excluded nodes, at most one
 * per node it names. */
static void take_roles(struct run_summary *s, const cJSON *o)
{
    const cJSON *ro = cJSON_GetObjectItemCaseSensitive(o, "roles"), *ex = cJSON_GetObjectItemCaseSensitive(o, "excluded");
    const cJSON *e;
    for (size_t i = 0; i < s->n_excluded; i++) free(s->excluded[i]);
    free(s->excluded);
    s->excluded = NULL;
    s->n_excluded = 0;
    s->active_nodes = -1;
    if (!cJSON_IsArray(ro) || (size_t)cJSON_GetArraySize(ro) != s->n_nodes) return;
    s->active_nodes = 0;
    cJSON_ArrayForEach(e, ro) s->active_nodes += cJSON_IsString(e) && strcmp(e->valuestring, "active") == 0;
    if (!cJSON_IsArray(ex)) return;
    s->excluded = xcalloc(s->n_nodes ? s->n_nodes : 1, sizeof *s->excluded);
    cJSON_ArrayForEach(e, ex) {
        const char *host = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "host"));
        const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "why"));
        if (s->n_excluded == s->n_nodes) break;
        s->excluded[s->n_excluded++] = xasprintf("%s: %s", host ? host : "?", why ? why : "?");
    }
}

/* The rank map of a launch (launch_check believed it): its fields, or for older files what
 * its text says. */
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
    s->launches++;
    if (cJSON_IsArray(hosts) && cJSON_IsArray(per) &&
        cJSON_GetArraySize(hosts) == cJSON_GetArraySize(per)) {
        size_t n = (size_t)cJSON_GetArraySize(hosts), i = 0;
        const cJSON *h, *k;
        s->hosts = xcalloc(n ? n : 1, sizeof *s->hosts);
        s->ranks_per_node = xcalloc(n ? n : 1, sizeof *s->ranks_per_node);
        cJSON_ArrayForEach(h, hosts) s->hosts[i++] = xstrdup(cJSON_IsString(h) ? h->valuestring : "?");
        i = 0;
        cJSON_ArrayForEach(k, per) s->ranks_per_node[i++] = int_value(k, 0);
        s->n_nodes = n;
    } else if (text) { /* older files: "attempt 0: launching 4 ranks on 2 nodes (...)" */
        const char *p;
        size_t nodes;
        if (ranks < 0 && (p = strstr(text, "launching "))) sscanf(p, "launching %d rank", &ranks);
        if ((p = strstr(text, " on ")) && sscanf(p, " on %zu node", &nodes) == 1) s->n_nodes = nodes;
    }
    s->ranks = ranks < 0 || ranks > RUN_RANKS_MAX ? -1 : ranks;
    take_roles(s, o);
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
    const cJSON *av = cJSON_GetObjectItemCaseSensitive(o, "attempt");
    if (cJSON_IsNumber(av) && !(av->valuedouble >= 0 && av->valuedouble <= RUN_ATTEMPTS_MAX)) {
        double bad = av->valuedouble;
        cJSON_Delete(o);
        return reject(s, "attempt %.15g is out of range (0 to %d)", bad, RUN_ATTEMPTS_MAX);
    }
    int attempt = int_field(o, "attempt", 0);
    if (is_kind(kind, EV_LAUNCH) && launch_check(s, o, text, attempt) < 0) {
        cJSON_Delete(o);
        return -1;
    }
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
        take_class(s, o);
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
        if (att > s->attempts && att <= RUN_ATTEMPTS_MAX + 1) s->attempts = att;
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

int run_summary_scan(const char *run_dir, struct run_summary *s, run_summary_line_fn *fn, void *ctx)
{
    char *path = xasprintf("%s/events.jsonl", run_dir);
    FILE *f = util_fopen_read(path); /* not a FIFO planted in a shared --log-dir: ls would hang */
    free(path);
    if (!f) {
        s->state = RUN_UNKNOWN;
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    s->dir = run_dir;
    while ((n = getline(&line, &cap, f)) > 0) {
        size_t len = (size_t)n;
        if (line[n - 1] == '\n') {
            len--;
        } else {
            /* the last line, its newline not written yet: use it only when it is whole */
            cJSON *o = parse_line(line, len);
            cJSON_Delete(o);
            if (!o) {
                s->cut_short = true;
                continue;
            }
        }
        if (run_summary_feed(s, line, len) == 0 && fn) fn(ctx, line, len);
    }
    int bad = ferror(f), saved = errno;
    free(line);
    fclose(f);
    s->dir = NULL;              /* the caller's string */
    if (bad) {
        s->state = RUN_UNKNOWN;
        errno = saved;
        return -1;
    }
    return 0;
}

int run_summary_read(const char *run_dir, enum run_owner_status owner, struct run_summary *s)
{
    run_summary_init(s);
    if (run_summary_scan(run_dir, s, NULL, NULL) != 0) return -1;
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
