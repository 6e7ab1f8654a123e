/* Unit tests for reading runs back from disk (launcher/record/run_summary.c, runs.c,
 * run_owner.c): event sequences of events.jsonl -> state, attempts, rank map and root cause
 * (a table, with and without the controller alive, runs written before the `end` event,
 * a reused run id, a corrupt line); a half-written last line; the owner record telling a
 * live controller from a gone one (a reused pid, another host); listing a log directory
 * newest first, skipping what is not a run; finding a run by id or path; and the round
 * trip from the job model's own events (job_new, a launch, job_event_end); one controller per
 * run (controller.lock); a takeover record (adopt.json) read back, and refused when another
 * user owns it or could have put it there; counts a line claims believed only within the limits
 * and as far as the rank logs and attempt directories bear them out. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/job.h"
#include "record/logw.h"
#include "record/run_owner.h"
#include "record/run_record.h"
#include "record/run_summary.h"
#include "record/runs.h"
#include "job_files.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];

#define T0 "2026-11-24T12:00:00.000Z"
#define T1 "2026-11-24T12:00:01.500Z"
#define T2 "2026-11-24T12:00:07.250Z"
#define EV(time, kind, attempt, extra) \
    "{\"time\":\"" time "\",\"kind\":\"" kind "\",\"attempt\":" #attempt extra "}"
#define LAUNCH(t, a) EV(t, "launch", a, ",\"rank\":null,\"host\":null,\"text\":\"attempt " #a \
    ": launching 2 ranks on 1 node (run r, logs in /l/r/attempt-" #a ")\",\"ranks\":2," \
    "\"hosts\":[\"localhost\"],\"ranks_per_node\":[2]")
#define CAUSE(t, a) EV(t, "root_cause", a, ",\"rank\":1,\"host\":\"localhost\",\"text\":" \
    "\"root cause: rank 1 on localhost exited with code 3\",\"exit_code\":3,\"signal\":null," \
    "\"last_lines\":[\"boom\"],\"error_file\":null")
#define END(t, a, st, code) EV(t, "end", a, ",\"rank\":null,\"host\":null,\"text\":\"run r " \
    st " (exit code " #code ")\",\"state\":\"" st "\",\"exit_code\":" #code)
#define PLAIN(t, kind, a, text) EV(t, kind, a, ",\"rank\":null,\"host\":null,\"text\":\"" text "\"")

struct summary_case {
    const char *name;
    const char *lines[10];
    enum run_owner_status owner;
    enum run_state want;
    int attempts;
    const char *cause;          /* NULL: none */
    int cause_attempt;
    long bad_line;
};

static const struct summary_case cases[] = {
    { "succeeded", { LAUNCH(T0, 0), PLAIN(T1, "done", 0, "all 2 ranks exited with code 0 (attempt 0)"),
      END(T2, 0, "succeeded", 0) }, OWNER_GONE, RUN_SUCCEEDED, 1, NULL, -1, 0 },
    { "failed with a root cause", { LAUNCH(T0, 0), CAUSE(T1, 0), END(T2, 0, "failed", 1) },
      OWNER_GONE, RUN_FAILED, 1, "rank 1 on localhost exited with code 3", 0, 0 },
    { "restarted once, then succeeded", { LAUNCH(T0, 0), CAUSE(T1, 0),
      PLAIN(T1, "restart", 1, "restarting (after a failure): attempt 1"), LAUNCH(T1, 1),
      PLAIN(T2, "done", 1, "all 2 ranks exited with code 0 (attempt 1)"), END(T2, 1, "succeeded", 0) },
      OWNER_GONE, RUN_SUCCEEDED, 2, "rank 1 on localhost exited with code 3", 0, 0 },
    { "no end, controller alive: running", { LAUNCH(T0, 0) }, OWNER_ALIVE, RUN_RUNNING, 1, NULL, -1, 0 },
    { "no end, controller on another host: running", { LAUNCH(T0, 0) }, OWNER_ELSEWHERE, RUN_RUNNING, 1,
      NULL, -1, 0 },
    { "no end, controller gone: interrupted", { LAUNCH(T0, 0) }, OWNER_GONE, RUN_INTERRUPTED, 1, NULL, -1, 0 },
    { "an end wins over a live controller (the dashboard still open)", { LAUNCH(T0, 0), CAUSE(T1, 0),
      END(T2, 0, "failed", 1) }, OWNER_ALIVE, RUN_FAILED, 1, "rank 1 on localhost exited with code 3", 0, 0 },
    { "a restart after the end (the dashboard's r): running again", { LAUNCH(T0, 0), CAUSE(T1, 0),
      END(T1, 0, "failed", 1), PLAIN(T2, "restart", 1, "restarting (asked for): attempt 1"),
      LAUNCH(T2, 1) }, OWNER_ALIVE, RUN_RUNNING, 2, "rank 1 on localhost exited with code 3", 0, 0 },
    { "Ctrl-C: interrupted", { LAUNCH(T0, 0), PLAIN(T1, "stop", 0, "Interrupt received: stopping every "
      "rank, then exiting"), END(T2, 0, "interrupted", 1) }, OWNER_GONE, RUN_INTERRUPTED, 1, NULL, -1, 0 },
    { "stopped from the dashboard", { LAUNCH(T0, 0), PLAIN(T1, "stop", 0, "stop asked for: stopping "
      "every rank"), END(T2, 0, "stopped", 1) }, OWNER_GONE, RUN_STOPPED, 1, NULL, -1, 0 },
    { "the preflight refused: failed, never launched", { PLAIN(T0, "info", 0, "preflight: 0 hosts pass"),
      END(T1, 0, "failed", 3) }, OWNER_GONE, RUN_FAILED, 0, NULL, -1, 0 },
    { "a reused run id: the newest run counts", { LAUNCH(T0, 0), CAUSE(T0, 0), END(T0, 0, "failed", 1),
      PLAIN(T1, "info", 0, "preflight"), LAUNCH(T1, 0), PLAIN(T2, "done", 0, "all done"),
      END(T2, 0, "succeeded", 0) }, OWNER_GONE, RUN_SUCCEEDED, 1, NULL, -1, 0 },
    { "before end events: done", { LAUNCH(T0, 0), PLAIN(T1, "done", 0, "all done") }, OWNER_NONE,
      RUN_SUCCEEDED, 1, NULL, -1, 0 },
    { "before end events: a root cause in the last attempt", { LAUNCH(T0, 0), CAUSE(T1, 0) }, OWNER_NONE,
      RUN_FAILED, 1, "rank 1 on localhost exited with code 3", 0, 0 },
    { "before end events: a signal", { LAUNCH(T0, 0), PLAIN(T1, "stop", 0, "Terminated received: "
      "stopping every rank, then exiting") }, OWNER_NONE, RUN_INTERRUPTED, 1, NULL, -1, 0 },
    { "before end events: a stop", { LAUNCH(T0, 0), PLAIN(T1, "stop", 0, "stop asked for: stopping "
      "every rank") }, OWNER_NONE, RUN_STOPPED, 1, NULL, -1, 0 },
    { "before end events: nothing decisive", { LAUNCH(T0, 0) }, OWNER_NONE, RUN_UNKNOWN, 1, NULL, -1, 0 },
    { "a corrupt line: unknown, and which line", { LAUNCH(T0, 0), "{\"time\":\"" T1 "\",\"kind\":",
      PLAIN(T1, "done", 0, "all done"), END(T2, 0, "succeeded", 0) }, OWNER_GONE, RUN_UNKNOWN, 1, NULL, -1, 2 },
    { "JSON that is not an event", { LAUNCH(T0, 0), "[1,2]" }, OWNER_GONE, RUN_UNKNOWN, 1, NULL, -1, 2 },
    { "trailing garbage after an event", { LAUNCH(T0, 0) " x" }, OWNER_GONE, RUN_UNKNOWN, 0, NULL, -1, 1 },
};

static void test_summary_table(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const struct summary_case *c = &cases[k];
        struct run_summary s;
        run_summary_init(&s);
        for (size_t i = 0; i < 10 && c->lines[i]; i++) run_summary_feed(&s, c->lines[i], strlen(c->lines[i]));
        run_summary_finish(&s, c->owner);
        int before = tap_cur_failed;
        CHECK_STR(run_state_name(s.state), run_state_name(c->want));
        CHECK_INT(s.attempts, c->attempts);
        CHECK_INT(s.bad_line, c->bad_line);
        if (c->cause) {
            CHECK_STR(s.root_cause, c->cause);
            CHECK_INT(s.cause_attempt, c->cause_attempt);
        } else {
            CHECK(s.root_cause == NULL);
        }
        if (tap_cur_failed != before) printf("#   ... in case '%s'\n", c->name);
        run_summary_done(&s);
    }
}

static void feed_all(struct run_summary *s, const char *const *lines, size_t n)
{
    run_summary_init(s);
    for (size_t i = 0; i < n; i++) run_summary_feed(s, lines[i], strlen(lines[i]));
}

static void test_summary_times_and_rank_map(void)
{
    const char *lines[] = {
        EV(T0, "launch", 0, ",\"text\":\"attempt 0\",\"ranks\":3,\"hosts\":[\"gpu1\",\"gpu2\"],"
           "\"ranks_per_node\":[2,1]"),
        END(T2, 0, "succeeded", 0),
    };
    struct run_summary s;
    feed_all(&s, lines, 2);
    run_summary_finish(&s, OWNER_GONE);
    CHECK_INT(s.ranks, 3);
    CHECK_INT(s.n_nodes, 2);
    CHECK_STR(run_summary_rank_host(&s, 0), "gpu1");
    CHECK_STR(run_summary_rank_host(&s, 1), "gpu1");
    CHECK_STR(run_summary_rank_host(&s, 2), "gpu2");
    CHECK(run_summary_rank_host(&s, 3) == NULL);
    CHECK_INT(s.exit_code, 0);
    CHECK_INT(s.end_ns - s.start_ns, 7250000000LL);
    CHECK_INT(run_summary_parse_time(T0), 1795521600LL * 1000000000LL);
    CHECK_INT(run_summary_parse_time("2026-11-24T12:00:00Z"), 1795521600LL * 1000000000LL);
    CHECK_INT(run_summary_parse_time("2026-11-24 12:00:00"), -1);
    run_summary_done(&s);

    /* a launch written before the rank map was a field: its text says ranks and nodes */
    const char *old[] = { PLAIN(T0, "launch", 0, "attempt 0: launching 4 ranks on 2 nodes (run x, logs in y)") };
    feed_all(&s, old, 1);
    CHECK_INT(s.ranks, 4);
    CHECK_INT(s.n_nodes, 2);
    CHECK(run_summary_rank_host(&s, 0) == NULL);
    run_summary_done(&s);
}

/* ---- files ---------------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) { printf("# cannot write %s: %s\n", path, strerror(errno)); return; }
    fputs(text, f);
    fclose(f);
}

/* The whole file (at most 64 KiB), or NULL. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = xcalloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *make_run(const char *root, const char *id, const char *events)
{
    char *dir = xasprintf("%s/%s", root, id);
    mkdir(dir, 0755);
    char *ev = xasprintf("%s/events.jsonl", dir);
    write_file(ev, events);
    free(ev);
    return dir;
}

static void test_read_half_written_last_line(void)
{
    char *dir = make_run(tmpdir, "half", LAUNCH(T0, 0) "\n" "{\"time\":\"" T1 "\",\"ki");
    struct run_summary s;
    CHECK_INT(run_summary_read(dir, OWNER_ALIVE, &s), 0);
    CHECK_STR(run_state_name(s.state), "running");
    CHECK_INT(s.bad_line, 0);
    CHECK_INT(s.attempts, 1);
    run_summary_done(&s);
    free(dir);
    /* whole but for its newline: used */
    dir = make_run(tmpdir, "nonl", LAUNCH(T0, 0) "\n" END(T2, 0, "failed", 1));
    CHECK_INT(run_summary_read(dir, OWNER_GONE, &s), 0);
    CHECK_STR(run_state_name(s.state), "failed");
    run_summary_done(&s);
    free(dir);
}

static void test_owner_alive_and_gone(void)
{
    char *dir = xasprintf("%s/owner", tmpdir);
    char err[256] = "";
    struct run_owner o;
    mkdir(dir, 0755);
    CHECK_INT(run_owner_check(dir, &o), OWNER_NONE);
    CHECK_INT(run_owner_write(dir, err, sizeof err), 0);
    CHECK_INT(run_owner_check(dir, &o), OWNER_ALIVE);
    CHECK_INT(o.pid, getpid());
    CHECK(o.start_ticks > 0);
    CHECK_INT(o.start_ticks, run_owner_proc_start(getpid()));
    char host[256];
    gethostname(host, sizeof host);
    char *path = xasprintf("%s/%s", dir, RUN_OWNER_FILE);
    char *text;

    /* a process that exited (and was reaped): gone */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    text = xasprintf("{\"pid\":%d,\"start_ticks\":%llu,\"boot_id\":\"%s\",\"host\":\"%s\"}\n", (int)child,
                     o.start_ticks, o.boot_id, host);
    write_file(path, text);
    free(text);
    CHECK_INT(run_owner_check(dir, &o), OWNER_GONE);

    /* our pid, but another start time: the pid was reused by someone else */
    text = xasprintf("{\"pid\":%d,\"start_ticks\":%llu,\"boot_id\":\"\",\"host\":\"%s\"}\n", (int)getpid(),
                     run_owner_proc_start(getpid()) + 1, host);
    write_file(path, text);
    free(text);
    CHECK_INT(run_owner_check(dir, &o), OWNER_GONE);

    /* another boot: gone, whatever runs under that pid now */
    text = xasprintf("{\"pid\":%d,\"start_ticks\":%llu,\"boot_id\":\"not-this-boot\",\"host\":\"%s\"}\n",
                     (int)getpid(), run_owner_proc_start(getpid()), host);
    write_file(path, text);
    free(text);
    CHECK_INT(run_owner_check(dir, &o), OWNER_GONE);

    /* another host: cannot be checked from here */
    text = xasprintf("{\"pid\":%d,\"start_ticks\":1,\"boot_id\":\"b\",\"host\":\"%s-elsewhere\"}\n",
                     (int)getpid(), host);
    write_file(path, text);
    free(text);
    CHECK_INT(run_owner_check(dir, &o), OWNER_ELSEWHERE);

    write_file(path, "not json\n");
    CHECK_INT(run_owner_check(dir, &o), OWNER_NONE);
    CHECK_INT(run_owner_proc_start(-1), 0);
    free(path);
    free(dir);
}

static void test_list_newest_first(void)
{
    char *root = xasprintf("%s/logs", tmpdir);
    mkdir(root, 0755);
    free(make_run(root, "old", LAUNCH("2026-11-20T08:00:00.000Z", 0) "\n" END("2026-11-20T08:00:05.000Z", 0,
                  "succeeded", 0) "\n"));
    free(make_run(root, "new", LAUNCH("2026-11-24T08:00:00.000Z", 0) "\n" CAUSE("2026-11-24T08:00:01.000Z", 0)
                  "\n" END("2026-11-24T08:00:02.000Z", 0, "failed", 1) "\n"));
    free(make_run(root, "mid", LAUNCH("2026-11-22T08:00:00.000Z", 0) "\n" "garbage\n"));
    char *notrun = xasprintf("%s/not-a-run", root);
    mkdir(notrun, 0755);
    free(notrun);
    char *stray = xasprintf("%s/stray.txt", root);
    write_file(stray, "x\n");
    free(stray);

    struct run_list l;
    char err[512] = "";
    CHECK_INT(runs_list(root, &l, err, sizeof err), 0);
    CHECK_INT(l.n, 3);
    if (l.n == 3) {
        CHECK_STR(l.v[0].id, "new");
        CHECK_STR(run_state_name(l.v[0].sum.state), "failed");
        CHECK_STR(l.v[0].sum.root_cause, "rank 1 on localhost exited with code 3");
        CHECK_STR(l.v[1].id, "mid");
        CHECK_STR(run_state_name(l.v[1].sum.state), "unknown");
        char *want = xasprintf("%s/mid/events.jsonl:2: not JSON", root);
        CHECK_STR(l.v[1].note, want);
        free(want);
        CHECK_STR(l.v[2].id, "old");
        CHECK_STR(run_state_name(l.v[2].sum.state), "succeeded");
        CHECK(l.v[2].note == NULL);
    }
    runs_list_free(&l);

    char *missing = xasprintf("%s/nope", tmpdir);
    CHECK_INT(runs_list(missing, &l, err, sizeof err), -1);
    CHECK(strstr(err, "cannot read the log directory") != NULL);
    free(missing);
    free(root);
}

static void test_find_by_id_or_path(void)
{
    char *root = xasprintf("%s/logs", tmpdir);
    char err[512] = "";
    char *d = runs_find(root, "new", err, sizeof err);
    char *want = xasprintf("%s/new", root);
    CHECK_STR(d, want);
    free(d);
    char *slash = xasprintf("%s/", want);
    d = runs_find("/nowhere", slash, err, sizeof err);
    CHECK_STR(d, want);
    free(d);
    free(slash);
    free(want);
    CHECK(runs_find(root, "xyz", err, sizeof err) == NULL);
    char *msg = xasprintf("no run 'xyz' under %s (ddptop ls lists them", root);
    CHECK(strstr(err, msg) == err);
    free(msg);
    char *notrun = xasprintf("%s/not-a-run", root);
    CHECK(runs_find(root, notrun, err, sizeof err) == NULL);
    CHECK(strstr(err, "is not a run directory") != NULL);
    free(notrun);
    free(root);
}

static void test_attempts_and_rank_logs(void)
{
    char *dir = make_run(tmpdir, "files", LAUNCH(T0, 0) "\n");
    const char *names[] = { "attempt-0", "attempt-1", "attempt-10", "attempt-01", "attempt-x", "attempt-" };
    for (size_t i = 0; i < 6; i++) {
        char *p = xasprintf("%s/%s", dir, names[i]);
        mkdir(p, 0755);
        free(p);
    }
    const char *logs[] = { "rank-0.log", "rank-2.log", "rank-10.log", "rank-1.txt", "rank-.log" };
    for (size_t i = 0; i < 5; i++) {
        char *p = xasprintf("%s/attempt-1/%s", dir, logs[i]);
        write_file(p, "");
        free(p);
    }
    size_t n;
    int *v = runs_attempts(dir, &n);
    CHECK_INT(n, 3);
    if (n == 3) { CHECK_INT(v[0], 0); CHECK_INT(v[1], 1); CHECK_INT(v[2], 10); }
    free(v);
    v = runs_rank_logs(dir, 1, &n);
    CHECK_INT(n, 3);
    if (n == 3) { CHECK_INT(v[0], 0); CHECK_INT(v[1], 2); CHECK_INT(v[2], 10); }
    free(v);
    v = runs_rank_logs(dir, 7, &n);
    CHECK_INT(n, 0);
    CHECK(v == NULL);
    free(dir);
}

/* Counts a line claims are believed within the limits, and with a directory only as far as
 * the files there bear them out (run_summary.h); a line beyond them names itself. */
static void test_summary_bounds(void)
{
#define LAUNCHX(a, extra) "{\"time\":\"" T0 "\",\"kind\":\"launch\",\"attempt\":" #a extra ",\"text\":\"x\"}"
    static const struct { const char *line, *why; } bad[] = {
        { LAUNCHX(16777216, ",\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1]"), "attempt 16777216 is out of range" },
        { LAUNCHX(-1, ""), "attempt -1 is out of range" },
        { LAUNCHX(0, ",\"ranks\":65537,\"hosts\":[\"a\",\"b\"],\"ranks_per_node\":[65536,1]"),
          "gives node 0 a rank count out of range" },
        { LAUNCHX(0, ",\"ranks\":3,\"hosts\":[\"a\",\"b\"],\"ranks_per_node\":[1,1]"), "says 3 ranks, but its nodes hold 2" },
        { LAUNCHX(0, ",\"ranks\":2000000,\"hosts\":[\"a\"],\"ranks_per_node\":[\"x\"]"), "rank count out of range" },
        { LAUNCHX(0, ",\"ranks\":2000000"), "claims 2000000 ranks (at most 1048576)" },
        { LAUNCHX(0, ",\"text\":\"attempt 0: launching 4 ranks on 200000 nodes\""), "names 200000 nodes" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct run_summary s;
        run_summary_init(&s);
        CHECK_INT(run_summary_feed(&s, bad[i].line, strlen(bad[i].line)), -1);
        CHECK_INT(s.bad_line, 1);
        CHECK(s.bad_why && strstr(s.bad_why, bad[i].why) != NULL);
        if (!s.bad_why || !strstr(s.bad_why, bad[i].why)) printf("#   line %zu: %s\n", i, s.bad_why ? s.bad_why : "(none)");
        CHECK_INT(s.attempts, 0);
        CHECK_INT(s.ranks, -1);
        run_summary_done(&s);
    }
    /* 5000 ranks: believed once attempt-0/ holds all but 4096 of their logs */
    const char *big = LAUNCHX(0, ",\"ranks\":5000,\"hosts\":[\"a\"],\"ranks_per_node\":[5000]");
    char *dir = make_run(tmpdir, "big", big);
    struct run_summary s;
    CHECK_INT(run_summary_read(dir, OWNER_NONE, &s), 0);
    CHECK_INT(s.bad_line, 1);
    CHECK(strstr(s.bad_why, "claims 5000 ranks, but attempt-0/ holds 0 of their rank logs") != NULL);
    CHECK(s.dir == NULL);
    run_summary_done(&s);
    char *ad = xasprintf("%s/attempt-0", dir);
    mkdir(ad, 0700);
    for (int r = 0; r < 904; r++) {
        char *p = xasprintf("%s/rank-%d.log", ad, r);
        write_file(p, "");
        free(p);
    }
    CHECK_INT(run_summary_read(dir, OWNER_NONE, &s), 0);
    CHECK_INT(s.bad_line, 0);
    CHECK_INT(s.ranks, 5000);
    CHECK_INT(s.attempts, 1);
    run_summary_done(&s);
    free(ad);
    free(dir);
    /* a jump to attempt 7 needs attempt-7/; a reason survives a reused id's fresh start */
    char *text = xasprintf("%s\n%s\n%s\n", LAUNCHX(0, ",\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1]"),
                           LAUNCHX(7, ",\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1]"),
                           LAUNCHX(0, ",\"ranks\":1,\"hosts\":[\"b\"],\"ranks_per_node\":[1]"));
    dir = make_run(tmpdir, "jump", text);
    CHECK_INT(run_summary_read(dir, OWNER_NONE, &s), 0);
    CHECK_INT(s.bad_line, 2);
    CHECK(strstr(s.bad_why, "a launch of attempt 7 after 1 launch, and there is no attempt-7/") != NULL);
    CHECK(s.hosts && strcmp(s.hosts[0], "b") == 0);
    run_summary_done(&s);
    ad = xasprintf("%s/attempt-7", dir);
    mkdir(ad, 0700);
    CHECK_INT(run_summary_read(dir, OWNER_NONE, &s), 0);
    CHECK_INT(s.bad_line, 0);
    run_summary_done(&s);
    free(ad);
    free(dir);
    free(text);
#undef LAUNCHX
}

/* What the job model writes is what the reader reads. */
static void test_round_trip_from_the_job(void)
{
    char *root = xasprintf("%s/jobs", tmpdir);
    const char *names[] = { "gpu1", "gpu2" };
    int per_node[] = { 2, 1 };
    char err[512] = "";
    struct job *j = tjob_new("rt", root, 0, names, NULL, per_node, 2, err, sizeof err);
    CHECK(j != NULL);
    if (!j) { printf("# job_new: %s\n", err); free(root); return; }
    char *dir = xasprintf("%s/rt", root);
    struct run_owner o;
    CHECK_INT(run_owner_check(dir, &o), OWNER_ALIVE);
    job_event_add(j, EV_LAUNCH, -1, -1, "attempt 0: launching 3 ranks on 2 nodes");
    CHECK(logw_drain(tjob_writer(j), 10000));
    struct run_entry e;
    runs_entry_read(&e, dir, NULL);
    CHECK_STR(e.id, "rt");
    CHECK_STR(run_state_name(e.sum.state), "running");
    CHECK_INT(e.sum.ranks, 3);
    CHECK_STR(run_summary_rank_host(&e.sum, 2), "gpu2");
    runs_entry_free(&e);
    job_event_end(j, RUN_FAILED, 1);
    CHECK(logw_drain(tjob_writer(j), 10000));
    runs_entry_read(&e, dir, NULL);
    CHECK_STR(run_state_name(e.sum.state), "failed");
    CHECK_INT(e.sum.exit_code, 1);
    CHECK(e.note == NULL);
    runs_entry_free(&e);
    CHECK_STR(job_event_kind_name(EV_END), "end");
    tjob_free(j);
    free(dir);
    free(root);
}

/* Two controllers never write one run: the second job_new of a run id stops with who holds it,
 * and gets it once the first is gone. Its directory is the user's alone whatever the umask. */
static void test_one_controller_per_run(void)
{
    char *root = xasprintf("%s/lock", tmpdir);
    const char *names[] = { "n1" };
    int per_node[] = { 1 };
    char err[512] = "";
    mode_t old = umask(002);
    struct job *a = tjob_new("same", root, 0, names, NULL, per_node, 1, err, sizeof err);
    umask(old);
    CHECK(a != NULL);
    if (!a) { printf("# job_new: %s\n", err); free(root); return; }
    char *dir = xasprintf("%s/same", root);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 022) == 0);
    struct job *b = tjob_new("same", root, 0, names, NULL, per_node, 1, err, sizeof err);
    CHECK(b == NULL);
    char *want = xasprintf("is written by another ddptop (pid %d on ", (int)getpid());
    CHECK(strstr(err, want) != NULL);
    if (!strstr(err, want)) printf("# got: %s\n", err);
    free(want);
    tjob_free(b);
    tjob_free(a);
    b = tjob_new("same", root, 0, names, NULL, per_node, 1, err, sizeof err);
    CHECK(b != NULL);
    tjob_free(b);
    free(dir);
    free(root);
}

static void write_record(const char *dir, mode_t mode)
{
    char *argv[] = { "--run-id", "rec", "--", "/bin/true" }, *env[] = { "PATH=/usr/bin", "API_KEY=sekrit" };
    char *hosts[] = { "n1" };
    int rpn[] = { 1 };
    uint64_t base[] = { 7 };
    struct run_record r = { .argv = argv, .argc = 4, .cwd = "/tmp", .adoptable = true, .env = env, .n_env = 2,
                            .token = "tok3n",
                            .attempt = 2, .state = "RUNNING", .agent_grace_s = 600, .ranks_per_node = rpn,
                            .hosts = hosts, .n_nodes = 1, .rank_base = base, .n_ranks = 1,
                            .slurm_jobid = "42", .slurm_release = true };
    char *text = run_record_json(&r), *path = xasprintf("%s/%s", dir, RUN_RECORD_FILE);
    unlink(path);
    write_file(path, text);
    chmod(path, mode);
    free(text);
    free(path);
}

/* adopt.json says what ddptop attach runs: read back whole, and only when no other user
 * could have written it or put it there. */
static void test_takeover_record_is_ours(void)
{
    char *dir = xasprintf("%s/record", tmpdir);
    char err[512] = "";
    struct run_record r;
    mkdir(dir, 0700);
    write_record(dir, 0600);
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), 0);
    CHECK_INT(r.argc, 4);
    CHECK_STR(r.argv[3], "/bin/true");
    CHECK_INT(r.attempt, 2);
    CHECK_INT(r.n_ranks, 1);
    CHECK_INT(r.rank_base[0], 7);
    CHECK_STR(r.slurm_jobid, "42");
    CHECK(r.slurm_release);
    CHECK(r.adoptable);
    CHECK_INT(r.n_env, 2);
    CHECK_STR(r.env[1], "API_KEY=sekrit");
    CHECK_STR(r.token, "tok3n");
    run_record_free(&r);

    write_record(dir, 0620); /* the group may write it */
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), -1);
    CHECK(strstr(err, "is not yours alone") != NULL);
    write_record(dir, 0600);
    chmod(dir, 0777); /* anyone may replace it */
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), -1);
    CHECK(strstr(err, "its directory is not yours alone") != NULL);
    chmod(dir, 0700);
    if (geteuid() == 0) { /* another user's file, in our directory */
        char *path = xasprintf("%s/%s", dir, RUN_RECORD_FILE);
        CHECK_INT(chown(path, 65534, 65534), 0);
        CHECK_INT(run_record_read(dir, &r, err, sizeof err), -1);
        CHECK(strstr(err, "is not yours alone") != NULL);
        free(path);
    }
    free(dir);
}

/* The environment and the token are kept only while the run can be taken over (issue 28): an
 * ended run's record is written without them and read back as not adoptable; forgetting them
 * (a dead controller whose agents gave up) rewrites the record with the state given, keeps
 * everything else and the file's time and mode, and is done once. */
static void test_takeover_record_forget(void)
{
    char *dir = xasprintf("%s/forget", tmpdir), *path = xasprintf("%s/%s", dir, RUN_RECORD_FILE);
    char err[512] = "";
    struct run_record r;
    mkdir(dir, 0700);

    char *argv[] = { "--", "/bin/true" }, *hosts[] = { "n1" };
    int rpn[] = { 1 };
    uint64_t base[] = { 0 };
    struct run_record ended = { .argv = argv, .argc = 2, .cwd = "/", .state = "DONE", .ranks_per_node = rpn,
                                .hosts = hosts, .n_nodes = 1, .rank_base = base, .n_ranks = 1 };
    char *text = run_record_json(&ended);
    CHECK(strstr(text, "\"env\"") == NULL && strstr(text, "\"token\"") == NULL);
    CHECK(strstr(text, "\"state\":\"DONE\"") != NULL);
    write_file(path, text);
    chmod(path, 0600);
    free(text);
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), 0);
    CHECK(!r.adoptable && r.env == NULL && r.n_env == 0 && r.token == NULL);
    CHECK_STR(r.state, "DONE");
    run_record_free(&r);

    write_record(dir, 0600);
    struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } }; /* 2001: a dead controller's */
    CHECK_INT(utimensat(AT_FDCWD, path, old, 0), 0);
    CHECK_INT(run_record_forget(dir, "INTERRUPTED", err, sizeof err), 0);
    struct stat st;
    CHECK_INT(stat(path, &st), 0);
    CHECK_INT(st.st_mtim.tv_sec, 1000000000);
    CHECK_INT(st.st_mode & 07777, 0600);
    char *raw = read_file(path);
    CHECK(raw && !strstr(raw, "sekrit") && !strstr(raw, "tok3n") && !strstr(raw, "PATH=/usr/bin"));
    free(raw);
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), 0);
    CHECK(!r.adoptable && r.env == NULL && r.token == NULL);
    CHECK_STR(r.state, "INTERRUPTED");
    CHECK_INT(r.argc, 4); /* the rest is as it was */
    CHECK_INT(r.rank_base[0], 7);
    CHECK_INT(r.agent_grace_s, 600);
    run_record_free(&r);
    CHECK_INT(run_record_forget(dir, "STOPPED", err, sizeof err), 0); /* nothing left to forget */
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), 0);
    CHECK_STR(r.state, "INTERRUPTED");
    run_record_free(&r);

    /* half a record: an environment without its token */
    write_file(path, "{\"version\":1,\"argv\":[],\"cwd\":\"/\",\"env\":[],\"state\":\"RUNNING\",\"attempt\":0,"
                     "\"agent_grace_s\":0,\"hosts\":[\"n1\"],\"ranks_per_node\":[1],\"rank_base\":[0]}");
    chmod(path, 0600);
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), -1);
    CHECK(strstr(err, "without the other") != NULL);
    free(path);
    free(dir);

    /* an ended run whose record still holds them (written by a ddptop before issue 28):
     * listing it drops them and says how it ended */
    dir = make_run(tmpdir, "endedrec", LAUNCH(T0, 0) "\n" END(T2, 0, "succeeded", 0) "\n");
    write_record(dir, 0600);
    struct run_entry e;
    runs_entry_read(&e, dir, "endedrec");
    CHECK_STR(run_state_name(e.sum.state), "succeeded");
    runs_entry_free(&e);
    CHECK_INT(run_record_read(dir, &r, err, sizeof err), 0);
    CHECK(!r.adoptable && r.env == NULL && r.token == NULL);
    CHECK_STR(r.state, "DONE");
    run_record_free(&r);
    free(dir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-runs.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_summary_table);
    RUN(test_summary_times_and_rank_map);
    RUN(test_read_half_written_last_line);
    RUN(test_owner_alive_and_gone);
    RUN(test_list_newest_first);
    RUN(test_find_by_id_or_path);
    RUN(test_attempts_and_rank_logs);
    RUN(test_summary_bounds);
    RUN(test_round_trip_from_the_job);
    RUN(test_one_controller_per_run);
    RUN(test_takeover_record_is_ours);
    RUN(test_takeover_record_forget);
    tmptree_remove(tmpdir);
    return tap_done();
}
