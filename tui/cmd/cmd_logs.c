/* `ddptop logs` (cmd_logs.h). Rank logs are printed as they are on disk, like cat and tail
 * print a file: with --rank and a pipe or a file as the output, it is exactly the file. On a
 * terminal a rank's bytes go through the sanitizer (util/sanitize.h) as on the dashboard: an
 * escape sequence in a log (OSC 52 writing the clipboard, a title change, a cursor move) is
 * shown as text ("^[]52;..."), never acted on; --raw prints the bytes even there. Following polls every 200 ms
 * (FOLLOW_MS): for each open file, is there more than we printed; is there a newer attempt
 * (switch to it); is the controller still alive (run_owner_check: stop after a last read).
 * Polling keeps it simple and portable to network filesystems, where inotify sees nothing
 * that other machines write; five cheap reads a second are not busy. */
#include "cmd_logs.h"
#include "cmd.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "record/runs.h"
#include "util/cli.h"
#include "util/sanitize.h"
#include "util/util.h"
#include "wire/json_num.h"

#define FOLLOW_MS 200
#define CHUNK (64 * 1024)

struct logs_opts {
    const char *log_dir, *run;
    int rank, attempt;          /* -1: every rank / the newest attempt */
    bool follow, events, raw;
    bool nccl, json;            /* --nccl: NCCL's account (logs_nccl.c); --json with it */
};

/* One rank log being printed, and how far. */
struct tailed {
    int rank;
    int fd;
    off_t off;
};

struct logs {
    struct logs_opts o;
    char *dir;                  /* the run's directory */
    const char *name;           /* the run as the user named it, for messages */
    struct run_summary sum;     /* its rank map (headers name each rank's host) */
    int attempt;                /* shown now; -1 none yet */
    struct tailed *t;
    size_t nt;
    int last_rank;              /* whose bytes went out last: another's get a header first */
    bool printed;               /* anything went out (a header after it gets a blank line) */
    bool sanitize;              /* stdout is a terminal and no --raw: rank bytes made safe */
    bool write_failed;
};

void cmd_logs_usage(FILE *f)
{
    fputs("usage: ddptop logs RUN [--log-dir DIR] [--rank R] [--attempt N] [-f|--follow] [--raw]\n"
          "       ddptop logs RUN [--log-dir DIR] --events [-f|--follow]\n"
          "       ddptop logs RUN [--log-dir DIR] --nccl [--attempt N] [--json]\n"
          "Prints a run's logs. RUN is a run id under the log directory (ddptop ls lists them)\n"
          "or the path of a run directory. Without --rank, every rank's log of the attempt in\n"
          "rank order, each after a header `==> rank R (HOST) <==`; with --rank, that rank's\n"
          "log alone, byte for byte as the rank wrote it (on a terminal, with its controls\n"
          "shown as text: --raw).\n"
          "\n"
          "  --log-dir DIR        where the runs are (default ./ddptop-logs, as for ddptop run)\n"
          "  --rank R             only rank R's log, exactly its bytes\n"
          "  --attempt N          attempt N (default: the newest; 0 is the first)\n"
          "  -f, --follow         keep printing what the ranks write, moving on to each new\n"
          "                       attempt, until the run's controller exits\n"
          "  --events             the run's events (events.jsonl) as readable lines\n"
          "  --nccl               NCCL's account of the attempt: a row per node (version,\n"
          "                       bootstrap interface, network and devices, transports, init\n"
          "                       time, WARNs) and the odd ones out (docs/nccl.md)\n"
          "  --json               with --nccl: the same as one JSON object\n"
          "  --raw                the rank logs' bytes as they are, even on a terminal (by\n"
          "                       default a terminal gets control characters and escape\n"
          "                       sequences as visible text, ^[ for ESC; a pipe or a file\n"
          "                       always gets the exact bytes)\n"
          "  -h, --help           this text\n"
          "\nExit status: 0 printed, 1 nothing to print yet or a read error, 2 usage error or no\n"
          "such run, attempt or rank.\n",
          f);
}

/* ---- output ------------------------------------------------------------------------------ */

static void out_write(struct logs *L, const void *buf, size_t n)
{
    const char *p = buf;
    while (n && !L->write_failed) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            L->write_failed = true;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    L->printed = true;
}

static void out_str(struct logs *L, const char *s)
{
    out_write(L, s, strlen(s));
}

/* A rank's bytes: as they are, or on a terminal made safe line by line (tabs kept, the
 * newlines themselves kept). */
static void out_rank(struct logs *L, const char *buf, size_t n)
{
    if (!L->sanitize) {
        out_write(L, buf, n);
        return;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (buf + i)) : n - i;
        if (len) sanitize_append(&sb, buf + i, len, SANITIZE_KEEP_TAB);
        if (nl) strbuf_add(&sb, "\n", 1);
        i += len + (nl ? 1 : 0);
    }
    if (sb.len) out_write(L, sb.buf, sb.len);
    strbuf_done(&sb);
}

/* How many bytes at the end of buf[0..n) begin a UTF-8 sequence that is not whole yet (a read
 * that cut it): held back until the rest arrives, not shown as U+FFFD. 0 when none. */
static size_t utf8_cut(const char *buf, size_t n)
{
    for (size_t i = 1; i <= 3 && i <= n; i++) {
        unsigned char c = (unsigned char)buf[n - i];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
        return need > i ? i : 0;
    }
    return 0;
}

static void rank_header(struct logs *L, int rank)
{
    const char *host = run_summary_rank_host(&L->sum, rank);
    char *h = host ? sanitize_str(host, strlen(host), 0) : NULL;
    char *line = h ? xasprintf("%s==> rank %d (%s) <==\n", L->printed ? "\n" : "", rank, h)
                   : xasprintf("%s==> rank %d <==\n", L->printed ? "\n" : "", rank);
    out_str(L, line);
    free(line);
    free(h);
    L->last_rank = rank;
}

/* ---- the rank logs of one attempt --------------------------------------------------------- */

static void close_all(struct logs *L)
{
    for (size_t i = 0; i < L->nt; i++) close(L->t[i].fd);
    free(L->t);
    L->t = NULL;
    L->nt = 0;
}

/* Opens the attempt's rank logs not open yet (with --rank only that one), in rank order. */
static void open_new(struct logs *L)
{
    size_t n;
    int *ranks = runs_rank_logs(L->dir, L->attempt, &n);
    for (size_t k = 0; k < n; k++) {
        int r = ranks[k];
        bool have = false;
        if (L->o.rank >= 0 && r != L->o.rank) continue;
        for (size_t i = 0; i < L->nt && !have; i++) have = L->t[i].rank == r;
        if (have) continue;
        char *path = xasprintf("%s/attempt-%d/rank-%d.log", L->dir, L->attempt, r);
        int fd = util_open_read(path); /* a regular file: a FIFO there would hang us */
        free(path);
        if (fd < 0) continue;
        size_t at = L->nt;
        L->t = xrealloc(L->t, (L->nt + 1) * sizeof *L->t);
        while (at > 0 && L->t[at - 1].rank > r) {
            L->t[at] = L->t[at - 1];
            at--;
        }
        L->t[at] = (struct tailed){ .rank = r, .fd = fd };
        L->nt++;
    }
    free(ranks);
}

/* Prints what the file got since the last call. final: the file grows no more (a cut UTF-8
 * sequence at its end is shown as it is). Returns -1 on a read error. */
static int drain(struct logs *L, struct tailed *t, bool final)
{
    static char buf[CHUNK];
    for (;;) {
        ssize_t n = pread(t->fd, buf, sizeof buf, t->off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0 || L->write_failed) return 0;
        size_t use = (size_t)n, cut = L->sanitize ? utf8_cut(buf, use) : 0;
        if (cut && cut < use) use -= cut;
        else if (cut && !final) return 0;
        if (L->o.rank < 0 && t->rank != L->last_rank) rank_header(L, t->rank);
        out_rank(L, buf, use);
        t->off += (off_t)use;
    }
}

static int drain_all(struct logs *L, bool final)
{
    int rc = 0;
    for (size_t i = 0; i < L->nt; i++)
        if (drain(L, &L->t[i], final) < 0) {
            fprintf(stderr, "ddptop logs: cannot read %s/attempt-%d/rank-%d.log: %s\n", L->dir,
                    L->attempt, L->t[i].rank, strerror(errno));
            rc = -1;
        }
    return rc;
}

/* "0-3", "0, 2, 5" or "none": for messages. */
static char *list_text(const int *v, size_t n)
{
    struct strbuf sb;
    bool run = n > 1;
    strbuf_init(&sb);
    for (size_t i = 1; i < n; i++) run = run && v[i] == v[i - 1] + 1;
    if (!n) strbuf_adds(&sb, "none");
    else if (run) strbuf_addf(&sb, "%d-%d", v[0], v[n - 1]);
    else
        for (size_t i = 0; i < n; i++) strbuf_addf(&sb, "%s%d", i ? ", " : "", v[i]);
    return sb.buf;
}

/* ---- following ---------------------------------------------------------------------------- */

/* Whether the run may still write: its controller is alive here, or (on another host) it
 * recorded no end yet. */
static bool run_live(struct logs *L)
{
    struct run_owner o;
    enum run_owner_status st = run_owner_check(L->dir, &o);
    if (st != OWNER_ELSEWHERE) return st == OWNER_ALIVE;
    struct run_summary s;
    run_summary_read(L->dir, st, &s);
    bool live = !s.ended;
    run_summary_done(&s);
    return live;
}

static void pause_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* The attempt to move to, or -1: with --attempt N, N once its directory exists; else the
 * newest, when it is newer than the one shown. */
static int next_attempt(struct logs *L)
{
    size_t n;
    int next = -1;
    if (L->o.attempt >= 0 && L->attempt >= 0) return -1;
    int *v = runs_attempts(L->dir, &n);
    for (size_t i = 0; i < n; i++)
        if (L->o.attempt >= 0 ? v[i] == L->o.attempt : v[i] > L->attempt) next = v[i];
    free(v);
    return next;
}

static void switch_attempt(struct logs *L, int next)
{
    close_all(L);
    L->attempt = next;
    run_summary_done(&L->sum);
    run_summary_read(L->dir, OWNER_NONE, &L->sum);   /* the new launch's rank map */
    if (L->o.rank >= 0) {
        /* stdout stays exactly the rank's bytes: the news goes to stderr */
        fprintf(stderr, "ddptop logs: attempt %d began (%s/attempt-%d)\n", next, L->dir, next);
    } else {
        char *h = xasprintf("%s==> attempt %d <==\n", L->printed ? "\n" : "", next);
        out_str(L, h);
        free(h);
        L->last_rank = -1;
    }
    open_new(L);
}

static int follow(struct logs *L)
{
    int rc = 0;
    for (;;) {
        int next = next_attempt(L);
        if (next >= 0) {
            if (drain_all(L, true) < 0) rc = 1;
            switch_attempt(L, next);
        }
        if (L->attempt >= 0) open_new(L);
        if (drain_all(L, false) < 0) rc = 1;
        if (L->write_failed) return 1;
        if (!run_live(L)) break;
        pause_ms(FOLLOW_MS);
    }
    /* the controller is gone: what it wrote last, and an attempt it began just before */
    for (;;) {
        if (L->attempt >= 0) open_new(L);
        if (drain_all(L, true) < 0) rc = 1;
        int next = next_attempt(L);
        if (next < 0) break;
        switch_attempt(L, next);
    }
    return L->write_failed ? 1 : rc;
}

/* ---- events.jsonl as readable lines ------------------------------------------------------- */

static void add_block(struct strbuf *sb, const char *prefix, const char *text)
{
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        strbuf_adds(sb, prefix);
        sanitize_append(sb, p, n, 0);
        strbuf_adds(sb, "\n");
        p += n + (p[n] == '\n');
    }
}

/* "2026-11-24 12:00:01.123  attempt 0  failure     rank 1 on gpu2 exited with code 3", and
 * for a root cause its exit status, last lines and error file indented below. */
static void event_text(struct strbuf *sb, const char *line, size_t len, long lineno)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    if (!cJSON_IsObject(o) || !cJSON_IsString(kind)) {
        strbuf_addf(sb, "events.jsonl:%ld: not an event: ", lineno);
        sanitize_append(sb, line, len > 200 ? 200 : len, 0);
        strbuf_adds(sb, "\n");
        cJSON_Delete(o);
        return;
    }
    const cJSON *time_v = cJSON_GetObjectItemCaseSensitive(o, "time");
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(o, "attempt");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "text");
    int64_t ns = run_summary_parse_time(cJSON_IsString(time_v) ? time_v->valuestring : NULL);
    char when[48] = "-";
    if (ns > 0) {
        time_t t = (time_t)(ns / 1000000000);
        struct tm tm;
        char base[32];
        localtime_r(&t, &tm);
        strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(when, sizeof when, "%s.%03d", base, (int)(ns / 1000000 % 1000));
    }
    int attempt = 0;
    if (!json_int_in_i(att, 0, INT_MAX, &attempt)) attempt = 0;
    strbuf_addf(sb, "%-23s  attempt %d  ", when, attempt);
    char *k = sanitize_str(kind->valuestring, strlen(kind->valuestring), 0);
    strbuf_addf(sb, "%-10s  ", k);
    free(k);
    if (cJSON_IsString(text)) sanitize_append(sb, text->valuestring, strlen(text->valuestring), 0);
    strbuf_adds(sb, "\n");
    if (strcmp(kind->valuestring, "root_cause") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(o, "exit_code");
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(o, "signal");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(o, "last_lines");
        const cJSON *efile = cJSON_GetObjectItemCaseSensitive(o, "error_file");
        const cJSON *l;
        int exit_code;
        if (cJSON_IsString(sig)) add_block(sb, "    killed by ", sig->valuestring);
        else if (json_int_in_i(code, INT_MIN, INT_MAX, &exit_code)) strbuf_addf(sb, "    exit code %d\n", exit_code);
        if (cJSON_GetArraySize(last) > 0) strbuf_adds(sb, "    its last lines:\n");
        cJSON_ArrayForEach(l, last)
            if (cJSON_IsString(l)) add_block(sb, "    | ", l->valuestring);
        if (cJSON_IsString(efile)) {
            strbuf_adds(sb, "    its error file:\n");
            add_block(sb, "    | ", efile->valuestring);
        }
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "class_label");
        const cJSON *det = cJSON_GetObjectItemCaseSensitive(o, "detail");
        const cJSON *evi = cJSON_GetObjectItemCaseSensitive(o, "evidence");
        const cJSON *fix = cJSON_GetObjectItemCaseSensitive(o, "fix");
        if (cJSON_IsString(cls)) add_block(sb, "    class: ", cls->valuestring);
        if (cJSON_IsString(det)) add_block(sb, "    found: ", det->valuestring);
        if (cJSON_IsString(evi)) add_block(sb, "    evidence: ", evi->valuestring);
        if (cJSON_IsString(fix) && *fix->valuestring) add_block(sb, "    fix: ", fix->valuestring);
    }
    cJSON_Delete(o);
}

/* Prints every whole line of events.jsonl after *off (following: again as more arrive). */
static int events_drain(struct logs *L, int fd, off_t *off, struct strbuf *pending, long *lineno)
{
    static char buf[CHUNK];
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, *off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        *off += n;
        strbuf_add(pending, buf, (size_t)n);
        size_t start = 0;
        struct strbuf out;
        strbuf_init(&out);
        for (;;) {
            char *nl = memchr(pending->buf + start, '\n', pending->len - start);
            if (!nl) break;
            size_t len = (size_t)(nl - (pending->buf + start));
            event_text(&out, pending->buf + start, len, ++*lineno);
            start += len + 1;
        }
        strbuf_consume(pending, start);
        if (out.len) out_write(L, out.buf, out.len);
        strbuf_done(&out);
        if (L->write_failed) return 0;
    }
}

static int show_events(struct logs *L)
{
    char *path = xasprintf("%s/events.jsonl", L->dir);
    int fd = util_open_read(path), rc = 0;
    if (fd < 0) {
        fprintf(stderr, "ddptop logs: cannot read %s: %s\n", path, util_open_read_error(errno));
        free(path);
        return 1;
    }
    off_t off = 0;
    long lineno = 0;
    struct strbuf pending;
    strbuf_init(&pending);
    bool more = true;
    while (more && !L->write_failed) {
        more = L->o.follow && run_live(L);
        if (events_drain(L, fd, &off, &pending, &lineno) < 0) {
            fprintf(stderr, "ddptop logs: cannot read %s: %s\n", path, strerror(errno));
            rc = 1;
            break;
        }
        if (more) pause_ms(FOLLOW_MS);
    }
    close(fd);
    free(path);
    strbuf_done(&pending);
    return L->write_failed ? 1 : rc;
}

/* ---- the command -------------------------------------------------------------------------- */

static int parse(int argc, char **argv, struct logs_opts *o, char *err, size_t errlen)
{
    const char *val;
    int rc;
    *o = (struct logs_opts){ .rank = -1, .attempt = -1 };
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return 1;
        if (strcmp(a, "-f") == 0 || strcmp(a, "--follow") == 0) {
            o->follow = true;
        } else if (strcmp(a, "--events") == 0) {
            o->events = true;
        } else if (strcmp(a, "--raw") == 0) {
            o->raw = true;
        } else if (strcmp(a, "--nccl") == 0) {
            o->nccl = true;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if ((rc = cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val)) != 0) {
            if (rc < 0 || !*val) return cli_fail(err, errlen, "--log-dir needs a directory (see ddptop logs --help)");
            o->log_dir = val;
        } else if ((rc = cli_opt_value(argc, argv, &i, "--rank", NULL, &val)) != 0) {
            if (rc < 0) return cli_fail(err, errlen, "--rank needs a rank number (see ddptop logs --help)");
            if (cli_parse_int("--rank", val, 0, 1 << 24, &o->rank, err, errlen) < 0) return -1;
        } else if ((rc = cli_opt_value(argc, argv, &i, "--attempt", NULL, &val)) != 0) {
            if (rc < 0) return cli_fail(err, errlen, "--attempt needs an attempt number (see ddptop logs --help)");
            if (cli_parse_int("--attempt", val, 0, 1 << 24, &o->attempt, err, errlen) < 0) return -1;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail(err, errlen, "unknown option '%s' (see ddptop logs --help)", a);
        } else if (o->run) {
            return cli_fail(err, errlen, "one run at a time ('%s' and '%s')", o->run, a);
        } else {
            o->run = a;
        }
    }
    if (!o->run) return cli_fail(err, errlen, "which run? give its id or its directory (ddptop ls lists them)");
    if (o->events && (o->rank >= 0 || o->attempt >= 0))
        return cli_fail(err, errlen, "--events shows the whole run: it takes no --rank or --attempt");
    if (o->json && !o->nccl)
        return cli_fail(err, errlen, "--json goes with --nccl (the logs are bytes, the events are in events.jsonl)");
    if (o->nccl && (o->events || o->rank >= 0 || o->follow || o->raw))
        return cli_fail(err, errlen, "--nccl prints NCCL's account of an attempt: it takes --attempt, not --events, --rank, -f or --raw");
    if (o->events && o->raw)
        return cli_fail(err, errlen, "--raw is for the rank logs' bytes: --events prints readable lines, always made safe");
    return 0;
}

/* Picks the attempt to show: --attempt N (it must exist), else the newest. 2 when there is
 * no such attempt, 1 when the run has none yet (and we are not waiting for one), else 0. */
static int pick_attempt(struct logs *L)
{
    size_t n;
    int *v = runs_attempts(L->dir, &n);
    int rc = 0;
    L->attempt = n ? v[n - 1] : -1;
    if (L->o.attempt >= 0) {
        bool have = false;
        for (size_t i = 0; i < n && !have; i++) have = v[i] == L->o.attempt;
        if (!have && !(L->o.follow && (!n || L->o.attempt > v[n - 1]))) {
            char *list = list_text(v, n);
            fprintf(stderr, "ddptop logs: run '%s' has no attempt %d (its attempts: %s)\n", L->name,
                    L->o.attempt, list);
            free(list);
            rc = 2;
        }
        L->attempt = have ? L->o.attempt : -1;
    } else if (!n && !L->o.follow) {
        fprintf(stderr, "ddptop logs: run '%s' has no rank logs: it never launched (ddptop logs %s "
                "--events says why)\n", L->name, L->name);
        rc = 1;
    }
    free(v);
    return rc;
}

/* --rank R must name a rank of the attempt (once it has rank logs at all). */
static int check_rank(struct logs *L)
{
    if (L->o.rank < 0 || L->attempt < 0) return 0;
    size_t n;
    int *v = runs_rank_logs(L->dir, L->attempt, &n);
    bool have = false;
    for (size_t i = 0; i < n && !have; i++) have = v[i] == L->o.rank;
    int rc = 0;
    if (!have && (n || !L->o.follow)) {
        char *list = list_text(v, n);
        fprintf(stderr, "ddptop logs: run '%s' has no rank %d in attempt %d (its ranks: %s)\n",
                L->name, L->o.rank, L->attempt, list);
        free(list);
        rc = 2;
    }
    free(v);
    return rc;
}

static int show(struct logs *L)
{
    int rc = pick_attempt(L);
    if (rc == 0) rc = check_rank(L);
    if (rc) return rc;
    if (L->o.nccl) return logs_nccl_print(L->dir, L->name, L->attempt, &L->sum, L->o.json);
    if (L->attempt >= 0) open_new(L);
    if (L->o.follow) return follow(L);
    if (L->nt == 0) {
        fprintf(stderr, "ddptop logs: run '%s' has no rank logs in attempt %d\n", L->name, L->attempt);
        return 1;
    }
    rc = drain_all(L, true) < 0 ? 1 : 0;
    return L->write_failed ? 1 : rc;
}

int cmd_logs_main(int argc, char **argv)
{
    struct logs L = { .attempt = -1, .last_rank = -1 };
    char err[1024];
    int rc = parse(argc, argv, &L.o, err, sizeof err);
    if (rc > 0) {
        cmd_logs_usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "ddptop logs: %s\n", err);
        return 2;
    }
    char *root = runs_log_root(L.o.log_dir);
    L.dir = runs_find(root, L.o.run, err, sizeof err);
    free(root);
    if (!L.dir) {
        fprintf(stderr, "ddptop logs: %s\n", err);
        return 2;
    }
    L.name = L.o.run;
    L.sanitize = !L.o.raw && isatty(STDOUT_FILENO);
    run_summary_read(L.dir, OWNER_NONE, &L.sum);
    rc = L.o.events ? show_events(&L) : show(&L);
    close_all(&L);
    run_summary_done(&L.sum);
    free(L.dir);
    return rc;
}

static int logs_main(int argc, char **argv)
{
    return cmd_logs_main(argc - 1, argv + 1);
}

const struct cmd_entry cmd_logs_entry = {
    .name = "logs",
    .args = "RUN [--rank R] [--attempt N] [-f] [--events] [--nccl [--json]]",
    .summary = "a run's logs, or its events; -f follows them",
    .main = logs_main,
    .usage = cmd_logs_usage,
    .flags = CMD_QUIET_PIPE,
};
