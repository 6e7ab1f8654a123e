/* `ddptop ls` (cmd_ls.h): one row per run with its state, attempts, ranks, nodes, start,
 * duration and root cause. The table is for people: every text is made safe for a terminal
 * and the root cause is cut to the terminal's width (on a line of its own when the row
 * leaves it less than ROOM_MIN columns); --json has everything whole. */
#include "cmd_ls.h"
#include "cmd.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "record/runs.h"
#include "util/cli.h"
#include "util/sanitize.h"
#include "util/util.h"

#define ROOM_MIN 24   /* columns the root cause needs beside the row */

void cmd_ls_usage(FILE *f)
{
    fputs("usage: ddptop ls [--log-dir DIR] [--json]\n"
          "Lists the runs under the log directory, newest first: run id, state (running,\n"
          "succeeded, failed, stopped, interrupted, orphaned: its controller is gone and its\n"
          "agents wait for ddptop attach RUN; unknown), attempts, ranks, nodes, start, duration\n"
          "and the root cause of a failure. A run whose record or logs could not all be written\n"
          "says so beside its state: \"failed (incomplete: disk full)\". `ddptop logs RUN` shows\n"
          "a run's logs.\n"
          "\n"
          "  --log-dir DIR        where the runs are (default ./ddptop-logs, as for ddptop run)\n"
          "  --json               one JSON array on stdout, one object per run (docs/logs.md)\n"
          "  -h, --help           this text\n"
          "\nExit status: 0 listed (none is fine), 2 usage error or a log directory that cannot\n"
          "be read.\n",
          f);
}

/* The terminal's width, else $COLUMNS, else 0: no limit (a file or a pipe gets it whole). */
static int out_width(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    long n = c ? strtol(c, NULL, 10) : 0;
    return n > 0 && n <= 100000 ? (int)n : 0;
}

/* "11-24 12:00" in local time (--json has the full UTC time). */
static void fmt_start(int64_t ns, char *buf, size_t n)
{
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    if (ns <= 0 || !localtime_r(&t, &tm)) snprintf(buf, n, "-");
    else strftime(buf, n, "%m-%d %H:%M", &tm);
}

static void fmt_duration(int64_t ns, char *buf, size_t n)
{
    long long s = ns / 1000000000;
    if (ns < 0) snprintf(buf, n, "-");
    else if (s < 3600) snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400) snprintf(buf, n, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else snprintf(buf, n, "%lldd%02lldh", s / 86400, s / 3600 % 24);
}

/* How long it ran: to its end, to now while it runs, else to its last event or when its
 * controller last wrote, whichever is later (a controller killed leaves no end). -1 unknown. */
static int64_t duration_ns(const struct run_entry *e)
{
    const struct run_summary *s = &e->sum;
    if (!s->start_ns) return -1;
    int64_t until = s->ended ? s->end_ns : s->state == RUN_RUNNING ? wall_ns() : s->last_ns;
    if (!s->ended && s->state != RUN_RUNNING && e->last_alive_ns > until) until = e->last_alive_ns;
    return until >= s->start_ns ? until - s->start_ns : -1;
}

/* The last column: a note when there is one, else the root cause ("attempt N: ..." when it
 * was not the last attempt's). malloc'd, "" for none. */
static char *last_column(const struct run_entry *e)
{
    const struct run_summary *s = &e->sum;
    if (e->note) return xasprintf("note: %s", e->note);
    if (s->n_excluded) { /* --nnodes: the nodes left out, then the root cause */
        struct strbuf sb;
        char *rest;
        s = &e->sum;
        strbuf_init(&sb);
        strbuf_adds(&sb, "excluded ");
        for (size_t i = 0; i < s->n_excluded; i++) strbuf_addf(&sb, "%s%s", i ? "; " : "", s->excluded[i]);
        struct run_entry plain = *e;
        plain.sum.n_excluded = 0;
        rest = last_column(&plain);
        if (*rest) strbuf_addf(&sb, " | %s", rest);
        free(rest);
        return sb.buf;
    }
    if (s->root_cause) {
        /* its class first (docs/failures.md), what the class found, then the rank's end */
        char *cls = NULL;
        if (s->cause_class && s->cause_class_name && strcmp(s->cause_class_name, "unknown") != 0 &&
            strcmp(s->cause_class_name, "node_lost") != 0 &&   /* its summary says so already */
            (strcmp(s->cause_class_name, "hang") != 0 || s->cause_detail))
            cls = xasprintf("%s%s%s; ", s->cause_class, s->cause_detail ? ": " : "",
                            s->cause_detail ? s->cause_detail : "");
        char *out = s->cause_attempt != s->attempts - 1
            ? xasprintf("attempt %d: %s%s", s->cause_attempt, cls ? cls : "", s->root_cause)
            : xasprintf("%s%s", cls ? cls : "", s->root_cause);
        free(cls);
        return out;
    }
    if (s->state == RUN_FAILED && s->exit_code == 3 && s->attempts == 0)
        return xstrdup("the preflight refused the launch");
    return xstrdup("");
}

/* Appends text (already safe) cut to at most cols code points, "..." marking a cut. */
static void add_cut(struct strbuf *sb, const char *text, int cols)
{
    size_t len = strlen(text), i = 0;
    int seen = 0;
    if (cols <= 0) {
        strbuf_adds(sb, text);
        return;
    }
    for (size_t k = 0; k < len; k++) seen += ((unsigned char)text[k] & 0xC0) != 0x80;
    if (seen <= cols) {
        strbuf_adds(sb, text);
        return;
    }
    int keep = cols > 3 ? cols - 3 : cols;
    for (seen = 0; i < len; i++) {
        if (((unsigned char)text[i] & 0xC0) != 0x80 && seen++ == keep) break;
    }
    strbuf_add(sb, text, i);
    if (cols > 3) strbuf_adds(sb, "...");
}

static char *safe(const char *s)
{
    return sanitize_str(s, strlen(s), 0);
}

static void print_table(const struct run_list *l, int width)
{
    static const char *const head[] = { "RUN", "STATE", "ATTEMPTS", "RANKS", "NODES", "STARTED",
                                        "DURATION" };
    enum { NCOL = 7 };
    char *(*cell)[NCOL] = xcalloc(l->n + 1, sizeof *cell);
    size_t w[NCOL];
    for (int c = 0; c < NCOL; c++) {
        cell[0][c] = xstrdup(head[c]);
        w[c] = strlen(head[c]);
    }
    for (size_t i = 0; i < l->n; i++) {
        const struct run_entry *e = &l->v[i];
        char start[32], dur[32];
        fmt_start(e->sum.start_ns, start, sizeof start);
        fmt_duration(duration_ns(e), dur, sizeof dur);
        char **r = cell[i + 1];
        r[0] = safe(e->id);
        r[1] = e->sum.state == RUN_ORPHANED
                   ? xasprintf("orphaned (agents waiting, %ld s left)", e->orphan_left_s)
                   : xstrdup(run_state_name(e->sum.state));
        if (e->incomplete) {
            char *why = safe(e->incomplete), *st = xasprintf("%s (incomplete: %s)", r[1], why);
            free(why);
            free(r[1]);
            r[1] = st;
        }
        r[2] = xasprintf("%d", e->sum.attempts);
        r[3] = e->sum.ranks >= 0 ? xasprintf("%d", e->sum.ranks) : xstrdup("-");
        r[4] = e->sum.active_nodes >= 0 ? xasprintf("%d of %zu", e->sum.active_nodes, e->sum.n_nodes)
               : e->sum.n_nodes                ? xasprintf("%zu", e->sum.n_nodes)
                                               : xstrdup("-");
        r[5] = xstrdup(start);
        r[6] = xstrdup(dur);
        for (int c = 0; c < NCOL; c++)
            if (strlen(r[c]) > w[c]) w[c] = strlen(r[c]);
    }
    size_t row_w = 0;
    for (int c = 0; c < NCOL; c++) row_w += w[c] + 2;
    bool inline_cause = width <= 0 || (int)row_w + ROOM_MIN <= width;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i <= l->n; i++) {
        for (int c = 0; c < NCOL; c++) {
            bool left = c <= 1 || c == 5;   /* text left, numbers right */
            strbuf_addf(&sb, left ? "%-*s  " : "%*s  ", (int)w[c], cell[i][c]);
            free(cell[i][c]);
        }
        char *last = i ? last_column(&l->v[i - 1]) : xstrdup(inline_cause ? "ROOT CAUSE" : "");
        char *text = safe(last);
        if (inline_cause) {
            add_cut(&sb, text, width > 0 ? width - (int)row_w : 0);
        } else if (*text) {
            while (sb.len && sb.buf[sb.len - 1] == ' ') sb.len--;
            strbuf_adds(&sb, "\n    ");
            add_cut(&sb, text, width - 4);
        }
        free(last);
        free(text);
        while (sb.len && sb.buf[sb.len - 1] == ' ') sb.len--;
        strbuf_adds(&sb, "\n");
    }
    fwrite(sb.buf, 1, sb.len, stdout);
    strbuf_done(&sb);
    free(cell);
}

static cJSON *num_or_null(double v, bool known)
{
    return known ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *str_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *entry_json(const struct run_entry *e)
{
    static const char *const owner_names[] = {
        [OWNER_NONE] = "none", [OWNER_ALIVE] = "alive", [OWNER_GONE] = "gone",
        [OWNER_ELSEWHERE] = "elsewhere",
    };
    const struct run_summary *s = &e->sum;
    cJSON *o = cJSON_CreateObject();
    char when[48];
    int64_t dur = duration_ns(e);
    cJSON_AddStringToObject(o, "run_id", e->id);
    cJSON_AddStringToObject(o, "dir", e->dir);
    cJSON_AddStringToObject(o, "state", run_state_name(s->state));
    if (s->state == RUN_ORPHANED) cJSON_AddNumberToObject(o, "agents_wait_s", (double)e->orphan_left_s);
    cJSON_AddNumberToObject(o, "attempts", s->attempts);
    cJSON_AddItemToObject(o, "ranks", num_or_null(s->ranks, s->ranks >= 0));
    cJSON_AddItemToObject(o, "nodes", num_or_null((double)s->n_nodes, s->n_nodes > 0));
    cJSON_AddItemToObject(o, "active_nodes", num_or_null(s->active_nodes, s->active_nodes >= 0));
    cJSON *exl = cJSON_AddArrayToObject(o, "excluded");
    for (size_t i = 0; i < s->n_excluded; i++) cJSON_AddItemToArray(exl, cJSON_CreateString(s->excluded[i]));
    cJSON *hosts = cJSON_AddArrayToObject(o, "hosts");
    for (size_t i = 0; s->hosts && i < s->n_nodes; i++)
        cJSON_AddItemToArray(hosts, cJSON_CreateString(s->hosts[i]));
    if (s->start_ns) util_iso_time(s->start_ns, when, sizeof when);
    cJSON_AddItemToObject(o, "start", str_or_null(s->start_ns ? when : NULL));
    if (s->end_ns) util_iso_time(s->end_ns, when, sizeof when);
    cJSON_AddItemToObject(o, "end", str_or_null(s->end_ns ? when : NULL));
    cJSON_AddItemToObject(o, "duration_s", num_or_null((double)dur / 1e9, dur >= 0));
    cJSON_AddItemToObject(o, "exit_code", num_or_null(s->exit_code, s->exit_code >= 0));
    cJSON_AddItemToObject(o, "root_cause", str_or_null(s->root_cause));
    cJSON_AddItemToObject(o, "root_cause_attempt", num_or_null(s->cause_attempt, s->root_cause != NULL));
    cJSON_AddItemToObject(o, "failure_class", str_or_null(s->cause_class_name));
    cJSON_AddItemToObject(o, "failure_detail", str_or_null(s->cause_detail));
    cJSON *lag = cJSON_AddArrayToObject(o, "lagging_ranks");
    for (size_t i = 0; i < s->n_cause_lagging; i++) cJSON_AddItemToArray(lag, cJSON_CreateNumber(s->cause_lagging[i]));
    cJSON *ctl = cJSON_AddObjectToObject(o, "controller");
    cJSON_AddStringToObject(ctl, "status", owner_names[e->owner_status]);
    cJSON_AddItemToObject(ctl, "pid", num_or_null(e->owner.pid, e->owner_status != OWNER_NONE));
    cJSON_AddItemToObject(ctl, "host", str_or_null(e->owner_status != OWNER_NONE ? e->owner.host : NULL));
    cJSON_AddItemToObject(o, "note", str_or_null(e->note));
    cJSON_AddItemToObject(o, "incomplete", str_or_null(e->incomplete));
    cJSON_AddItemToObject(o, "incomplete_detail", str_or_null(e->incomplete_detail));
    return o;
}

static void print_json(const struct run_list *l)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < l->n; i++) cJSON_AddItemToArray(arr, entry_json(&l->v[i]));
    char *text = cJSON_Print(arr);
    cJSON_Delete(arr);
    if (text) printf("%s\n", text);
    free(text);
}

int cmd_ls_main(int argc, char **argv)
{
    const char *log_dir = NULL, *val;
    bool json = false;
    char err[1024];
    int rc;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cmd_ls_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if ((rc = cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val)) != 0) {
            if (rc < 0 || !*val) {
                fprintf(stderr, "ddptop ls: --log-dir needs a directory (see ddptop ls --help)\n");
                return 2;
            }
            log_dir = val;
        } else {
            fprintf(stderr, "ddptop ls: %s '%s' (see ddptop ls --help)\n",
                    a[0] == '-' ? "unknown option" : "unexpected argument", a);
            return 2;
        }
    }
    char *root = runs_log_root(log_dir);
    struct run_list l;
    if (runs_list(root, &l, err, sizeof err) != 0) {
        fprintf(stderr, "ddptop ls: %s\n", err);
        free(root);
        return 2;
    }
    if (json) print_json(&l);
    else if (!l.n) fprintf(stderr, "ddptop ls: no runs under %s\n", root);
    else print_table(&l, out_width());
    runs_list_free(&l);
    free(root);
    return 0;
}

static int ls_main(int argc, char **argv)
{
    return cmd_ls_main(argc - 1, argv + 1);
}

const struct cmd_entry cmd_ls_entry = {
    .name = "ls",
    .args = "[--log-dir DIR] [--json]",
    .summary = "the runs in the log directory",
    .main = ls_main,
    .usage = cmd_ls_usage,
    .flags = CMD_QUIET_PIPE,
};
