/* Unit tests for --notify (launcher/controller/notify.c, notify_opts.c, notify_proc.c), with
 * real `sh -c` commands: --notify-on's names (the default, `default,straggler`, all, nan and
 * spike, a wrong one named with the kinds there are); 1,000 stragglers in a second are two
 * notifications whose counts add up to 1,000; a command sees its events one at a time, in order;
 * a failing command is said once as an event, with its output's last line; the drain at the end
 * gives a command that sleeps forever its timeout and no more, and leaves no child behind.
 * (tests/it_notify.sh runs them from ddptop run with real ranks.) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "controller/notify.h"
#include "job/job.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];

static struct job *new_job(void)
{
    const char *names[] = {"gpu1"};
    int per_node[] = {4};
    char err[256];
    struct job *j = job_new("nt", NULL, 0, names, NULL, per_node, 1, err, sizeof err);
    if (!j) printf("# job_new: %s\n", err);
    return j;
}

static int parse(struct notify_opts *o, const char *a, const char *b, char *err, size_t errlen)
{
    char *argv[] = {(char *)a, (char *)b, NULL};
    int i = 0;
    return notify_opts_option(o, b ? 2 : 1, argv, &i, err, errlen);
}

/* Events are handed over as the controller does (each one new in the ring); ticks until
 * nothing is left to do or limit_ms passed. */
static void add(struct notify *n, struct job *j, enum job_event_kind k, int rank, const char *text)
{
    job_event_add(j, k, rank, -1, "%s", text);
    notify_event(n, j, job_event_at(j, j->ev_count - 1));
}

static void run_until_idle(struct notify *n, struct job *j, int limit_ms)
{
    int64_t end = mono_ms() + limit_ms;
    while (mono_ms() < end) {
        notify_tick(n, j);
        if (!notify_next_ms(n)) return;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The JSON lines of path, parsed; their number in *n. */
static cJSON **read_lines(const char *path, size_t *n)
{
    cJSON **v = NULL;
    char line[8192];
    FILE *f = fopen(path, "r");
    *n = 0;
    while (f && fgets(line, sizeof line, f)) {
        v = xrealloc(v, (*n + 1) * sizeof *v);
        v[(*n)++] = cJSON_Parse(line);
    }
    if (f) fclose(f);
    return v;
}

static void free_lines(cJSON **v, size_t n)
{
    for (size_t i = 0; i < n; i++) cJSON_Delete(v[i]);
    free(v);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void test_kinds(void)
{
    struct notify_opts o;
    char err[1024] = "";
    notify_opts_init(&o);
    CHECK(notify_opts_wants(&o, "end") && notify_opts_wants(&o, "root_cause") && notify_opts_wants(&o, "stall"));
    CHECK(notify_opts_wants(&o, "node_lost") && notify_opts_wants(&o, "nan") && notify_opts_wants(&o, "spike"));
    CHECK(!notify_opts_wants(&o, "straggler") && !notify_opts_wants(&o, "info") && !notify_opts_wants(&o, "launch"));
    CHECK_INT(o.timeout_s, 30);
    CHECK_INT(parse(&o, "--notify-on", "default,straggler", err, sizeof err), 1);
    CHECK(notify_opts_wants(&o, "straggler") && notify_opts_wants(&o, "end") && !notify_opts_wants(&o, "restart"));
    CHECK_INT(parse(&o, "--notify-on=restart", NULL, err, sizeof err), 1);
    CHECK(notify_opts_wants(&o, "restart") && notify_opts_wants(&o, "straggler"));
    notify_opts_done(&o);

    notify_opts_init(&o);
    CHECK_INT(parse(&o, "--notify-on", "launch", err, sizeof err), 1);
    CHECK(notify_opts_wants(&o, "launch") && !notify_opts_wants(&o, "end"));
    CHECK_INT(parse(&o, "--notify-on", "nan,spike", err, sizeof err), 1);
    CHECK(notify_opts_wants(&o, "nan") && notify_opts_wants(&o, "spike"));
    CHECK_INT(parse(&o, "--notify-on", "hang", err, sizeof err), -1);
    CHECK(strstr(err, "'hang' is no kind of event") && strstr(err, "stall") && strstr(err, "root_cause"));
    CHECK_INT(parse(&o, "--notify-on", "end,,stall", err, sizeof err), -1);
    CHECK_INT(parse(&o, "--notify-on", "all", err, sizeof err), 1);
    CHECK(notify_opts_wants(&o, "info") && notify_opts_wants(&o, "gpu"));
    CHECK_INT(parse(&o, "--notify", "", err, sizeof err), -1);
    CHECK_INT(parse(&o, "--notify", NULL, err, sizeof err), -1);
    CHECK_INT(parse(&o, "--notify", "cat", err, sizeof err), 1);
    CHECK_INT(parse(&o, "--notify", "mail -s x me", err, sizeof err), 1);
    CHECK_INT((long long)o.n_cmds, 2);
    CHECK_STR(o.cmds[1], "mail -s x me");
    CHECK_INT(parse(&o, "--notify-timeout", "0", err, sizeof err), -1);
    CHECK_INT(parse(&o, "--notify-timeout", "5", err, sizeof err), 1);
    CHECK_INT(o.timeout_s, 5);
    CHECK_INT(parse(&o, "--notify-onx", "end", err, sizeof err), 0);
    notify_opts_done(&o);
    CHECK(notify_new(NULL) == NULL);
}

/* 1,000 stragglers within a second: the first at once, the other 999 as one with its count. */
static void test_burst(void)
{
    char *path = xasprintf("%s/burst.jsonl", tmpdir), *cmd = xasprintf("cat >> %s", path);
    const char *cmds[] = {cmd};
    struct notify_opts o;
    notify_opts_init(&o);
    o.cmds = cmds;
    o.n_cmds = 1;
    o.kinds = xstrdup("straggler");
    struct job *j = new_job();
    struct notify *n = notify_new(&o);
    int64_t t0 = mono_ms();
    for (int i = 0; i < 1000; i++) {
        char text[64];
        snprintf(text, sizeof text, "rank %d on gpu1 is a straggler", i % 4);
        add(n, j, EV_STRAGGLER, i % 4, text);
        if (i % 100 == 0) notify_tick(n, j);
    }
    CHECK(mono_ms() - t0 < 1000);
    run_until_idle(n, j, 5000);
    size_t k;
    cJSON **v = read_lines(path, &k);
    CHECK_INT((long long)k, 2);
    if (k == 2 && v[0] && v[1]) {
        CHECK_STR(str(v[0], "kind"), "straggler");
        CHECK_STR(str(v[1], "kind"), "straggler");
        CHECK_INT((long long)num(v[0], "count"), 1);
        CHECK_INT((long long)num(v[1], "count"), 999);
        CHECK_STR(str(v[0], "text"), "rank 0 on gpu1 is a straggler");
        CHECK_STR(str(v[1], "text"), "rank 1 on gpu1 is a straggler"); /* the first held */
        CHECK(*str(v[1], "last_time") && !cJSON_GetObjectItem(v[0], "last_time"));
        CHECK_STR(str(v[0], "run_id"), "nt");
        CHECK(*str(v[0], "hostname"));
    }
    free_lines(v, k);
    notify_free(n);
    job_free(j);
    free(o.kinds);
    free(cmd);
    free(path);
}

/* One at a time per command, in order; the kinds not chosen are not told. */
static void test_order(void)
{
    char *path = xasprintf("%s/order.txt", tmpdir);
    char *cmd = xasprintf("sleep 0.1; printf '%%s %%s\\n' \"$DDPTOP_EVENT_KIND\" \"$DDPTOP_EVENT_COUNT\" >> %s", path);
    const char *cmds[] = {cmd};
    struct notify_opts o;
    notify_opts_init(&o);
    o.cmds = cmds;
    o.n_cmds = 1;
    struct job *j = new_job();
    struct notify *n = notify_new(&o);
    add(n, j, EV_LAUNCH, -1, "launching");
    add(n, j, EV_STALL, 2, "rank 2 stalled");
    add(n, j, EV_ROOT_CAUSE, 2, "root cause: rank 2");
    add(n, j, EV_NODE_LOST, -1, "node lost");
    add(n, j, EV_INFO, -1, "something");
    job_event_end(j, RUN_FAILED, 1);
    notify_event(n, j, job_event_at(j, j->ev_count - 1));
    run_until_idle(n, j, 5000);
    struct strbuf got;
    strbuf_init(&got);
    int fd = open(path, O_RDONLY);
    util_read_fd(fd, &got, 4096);
    if (fd >= 0) close(fd);
    CHECK_STR(got.buf, "stall 1\nroot_cause 1\nnode_lost 1\nend 1\n");
    strbuf_done(&got);
    notify_free(n);
    job_free(j);
    free(cmd);
    free(path);
}

static size_t events_with(const struct job *j, const char *needle)
{
    size_t k = 0;
    for (size_t i = 0; i < j->ev_count; i++)
        if (strstr(job_event_at(j, i)->text, needle)) k++;
    return k;
}

/* A failing command: one event, with its output's last line, however often it fails. */
static void test_failing(void)
{
    const char *cmds[] = {"echo first; echo 'oops: no route' >&2; exit 7"};
    struct notify_opts o;
    notify_opts_init(&o);
    o.cmds = cmds;
    o.n_cmds = 1;
    o.kinds = xstrdup("all");
    struct job *j = new_job();
    struct notify *n = notify_new(&o);
    add(n, j, EV_LAUNCH, -1, "launching");
    add(n, j, EV_EXIT, 1, "rank 1 exited");
    add(n, j, EV_FAILURE, 1, "rank 1 failed");
    run_until_idle(n, j, 5000);
    CHECK_INT((long long)events_with(j, "--notify command (echo), telling the launch event, failed: exit status 7"), 1);
    CHECK_INT((long long)events_with(j, "(its output: oops: no route)"), 1);
    add(n, j, EV_ROOT_CAUSE, 1, "root cause");
    run_until_idle(n, j, 5000);
    CHECK_INT((long long)events_with(j, "--notify command"), 1);
    notify_free(n);
    job_free(j);
    free(o.kinds);
}

/* A command that sleeps forever: the drain at the end waits its timeout, then kills it; no
 * child of ours is left. */
static void test_drain(void)
{
    const char *cmds[] = {"sleep 300 & sleep 600", "true"};
    struct notify_opts o;
    notify_opts_init(&o);
    o.cmds = cmds;
    o.n_cmds = 2;
    o.timeout_s = 1;
    struct job *j = new_job();
    struct notify *n = notify_new(&o);
    add(n, j, EV_ROOT_CAUSE, 0, "root cause");
    notify_tick(n, j);
    job_event_end(j, RUN_FAILED, 1);
    notify_event(n, j, job_event_at(j, j->ev_count - 1));
    int64_t t0 = mono_ms();
    notify_drain(n, j);
    int64_t took = mono_ms() - t0;
    CHECK(took >= 900 && took < 1800);
    if (took < 900 || took >= 1800) printf("#   the drain took %lld ms\n", (long long)took);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
    CHECK_INT((long long)events_with(j, "--notify command 1 (sleep), telling the root_cause event, ran past its 1 s timeout and was killed"), 1);
    /* the end's notification had no time left after the root cause's: not told (said), or
     * started in the last moment and killed (its failure not said again) */
    CHECK(events_with(j, "--notify command 1 (sleep)") <= 2);
    CHECK_INT((long long)events_with(j, "--notify command 2"), 0);
    notify_free(n);
    job_free(j);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as ddptop's main: a command that does not read its stdin */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_notify.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_kinds);
    RUN(test_burst);
    RUN(test_order);
    RUN(test_failing);
    RUN(test_drain);
    tmptree_remove(tmpdir);
    return tap_done();
}
