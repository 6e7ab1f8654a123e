/* Unit tests for launcher/root_cause.c: the first failure of an attempt wins (later failures
 * and the ranks we stopped never replace it; a new attempt starts afresh), signal names, the
 * last 20 output lines of this attempt, PyTorch's @record error file made readable (or kept
 * raw), and the root_cause line of events.jsonl with all of it. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "job/job.h"
#include "job/rank_report.h"
#include "job/root_cause.h"
#include "job_files.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"
#include "wire/signals.h"

static char tmpdir[64];
static char err[512];

static struct job *new_job(const char *id)
{
    const char *names[] = { "gpu1", "gpu2" };
    int per_node[] = { 2, 2 };
    struct job *j = tjob_new(id, tmpdir, 1, names, NULL, per_node, 2, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) { printf("# %s\n", err); return j; }
    for (int r = 0; r < 4; r++) job_rank_started(j, r, 100 + r);
    j->state = JOB_RUNNING;
    return j;
}

static size_t count_events(const struct job *j, enum job_event_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < j->ev_count; i++) n += job_event_at(j, i)->kind == k;
    return n;
}

static void test_signal_names(void)
{
    CHECK_STR(signals_label(9), "SIGKILL");
    CHECK_STR(signals_label(11), "SIGSEGV");
    CHECK_STR(signals_label(15), "SIGTERM");
    CHECK_STR(signals_label(6), "SIGABRT");
    CHECK_STR(signals_label(7), "SIGBUS");
    CHECK_STR(signals_label(64), "signal 64");
}

static void test_first_failure_wins(void)
{
    struct job *j = new_job("first");
    if (!j) { CHECK(0); return; }
    CHECK(job_rank_exited(j, 2, 1, 0, false, NULL, 0));
    CHECK(j->cause.set);
    CHECK_INT(j->cause.rank, 2);
    CHECK_INT(j->cause.node, 1);
    CHECK_INT(j->cause.exit_code, 1);
    CHECK_INT(j->cause.term_signal, 0);
    CHECK_STR(j->cause.summary, "rank 2 on gpu2 exited with code 1");
    /* A later crash elsewhere, a rank we stopped, a lost node: none replaces it. */
    CHECK(job_rank_exited(j, 0, 0, 11, false, NULL, 0));
    CHECK(!job_rank_exited(j, 1, 0, 15, true, NULL, 0));
    CHECK(!root_cause_node(j, 1, "no heartbeat for 10 s"));
    CHECK(!root_cause_rank(j, 3, 2, 0, NULL, 0));
    CHECK_INT(j->cause.rank, 2);
    CHECK_STR(j->cause.summary, "rank 2 on gpu2 exited with code 1");
    /* rank 3 still runs: the class and the event wait for it, or for root_cause_settle */
    CHECK(j->cause.pending);
    CHECK_INT(count_events(j, EV_ROOT_CAUSE), 0);
    CHECK(root_cause_settle(j));
    CHECK(!root_cause_settle(j));   /* written once */
    CHECK_INT(count_events(j, EV_ROOT_CAUSE), 1);
    CHECK_INT(count_events(j, EV_FAILURE), 2);
    /* The next attempt has its own first failure. */
    j->attempt = 1;
    CHECK_INT(job_attempt_begin(j, err, sizeof err), 0);
    CHECK(!j->cause.set);
    job_rank_started(j, 3, 200);
    CHECK(job_rank_exited(j, 3, 0, 9, false, NULL, 0));
    CHECK_INT(j->cause.rank, 3);
    CHECK_INT(j->cause.attempt, 1);
    CHECK_STR(j->cause.summary, "rank 3 on gpu2 killed by SIGKILL");
    CHECK_INT(count_events(j, EV_ROOT_CAUSE), 2);
    tjob_free(j);
}

static void test_last_lines(void)
{
    struct job *j = new_job("lines");
    if (!j) { CHECK(0); return; }
    char line[64];
    /* Lines of an earlier attempt are not this attempt's output. */
    job_log_append(j, 1, LOG_STDOUT, 0, "old attempt", 11);
    j->attempt = 1;
    job_attempt_begin(j, err, sizeof err);
    job_rank_started(j, 1, 300);
    for (int i = 1; i <= 5; i++) {
        int n = snprintf(line, sizeof line, "line %d", i);
        job_log_append(j, 1, i % 2 ? LOG_STDOUT : LOG_STDERR, 0, line, (size_t)n);
    }
    job_log_append(j, 1, LOG_SYSTEM, 0, "ddptop: note", 12);
    job_rank_exited(j, 1, 3, 0, false, NULL, 0);
    CHECK_INT(j->cause.n_last_lines, 5);
    CHECK_STR(j->cause.last_lines[0], "line 1");
    CHECK_STR(j->cause.last_lines[4], "line 5");
    tjob_free(j);

    j = new_job("lines20");
    for (int i = 1; i <= 30; i++) {
        int n = snprintf(line, sizeof line, "Traceback line %d", i);
        job_log_append(j, 0, LOG_STDERR, 0, line, (size_t)n);
    }
    char big[10000];
    memset(big, 'B', sizeof big);
    job_log_append(j, 0, LOG_STDERR, 0, big, sizeof big);
    job_rank_exited(j, 0, 1, 0, false, NULL, 0);
    CHECK_INT(j->cause.n_last_lines, ROOT_CAUSE_LINES);
    CHECK_STR(j->cause.last_lines[0], "Traceback line 12");
    CHECK_STR(j->cause.last_lines[18], "Traceback line 30");
    CHECK_INT(strlen(j->cause.last_lines[19]), ROOT_CAUSE_LINE_MAX);
    tjob_free(j);
}

static const char RECORD[] =
    "{\"message\": {\"message\": \"RuntimeError: CUDA error: out of memory\", \"extraInfo\": "
    "{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"train.py\\\", line 9, "
    "in main\\n    x = torch.empty(1 << 40)\\nRuntimeError: CUDA error: out of memory\\n\", "
    "\"timestamp\": \"1700000000\"}}}";

static void test_error_file_format(void)
{
    char *s = root_cause_format_error_file(RECORD, strlen(RECORD));
    CHECK_STR(s, "RuntimeError: CUDA error: out of memory\n"
                 "Traceback (most recent call last):\n"
                 "  File \"train.py\", line 9, in main\n"
                 "    x = torch.empty(1 << 40)\n"
                 "RuntimeError: CUDA error: out of memory\n"
                 "(error file written 2023-11-14T22:13:20Z)");
    free(s);
    /* "message" as a plain string (torchelastic accepts that too). */
    const char *plain = "{\"message\": \"Signal 6 (SIGABRT) received by PID 42\"}";
    s = root_cause_format_error_file(plain, strlen(plain));
    CHECK_STR(s, "Signal 6 (SIGABRT) received by PID 42");
    free(s);
    /* Anything else is kept as it is. */
    const char *raw = "not json at all\nsecond line";
    s = root_cause_format_error_file(raw, strlen(raw));
    CHECK_STR(s, raw);
    free(s);
    const char *other = "{\"error\": 1}";
    s = root_cause_format_error_file(other, strlen(other));
    CHECK_STR(s, other);
    free(s);
    /* A huge file is capped. */
    size_t n = 200000;
    char *huge = xmalloc(n);
    memset(huge, 'e', n);
    s = root_cause_format_error_file(huge, n);
    CHECK_INT(strlen(s), ROOT_CAUSE_ERROR_MAX);
    free(s);
    free(huge);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) strbuf_add(&sb, buf, n);
    fclose(f);
    return sb.buf;
}

/* The root_cause line of events.jsonl, parsed. */
static cJSON *root_cause_line(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s/events.jsonl", tmpdir, id);
    char *d = read_all(path);
    cJSON *found = NULL;
    for (char *line = d, *nl; d && (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        cJSON *o = cJSON_Parse(line);
        if (!o) { printf("# unparseable: %s\n", line); CHECK(0); continue; }
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(o, "kind"));
        if (kind && strcmp(kind, "root_cause") == 0 && !found) found = o;
        else cJSON_Delete(o);
    }
    free(d);
    return found;
}

static void test_events_jsonl_root_cause(void)
{
    struct job *j = new_job("evrc");
    if (!j) { CHECK(0); return; }
    job_log_append(j, 3, LOG_STDERR, 0, "Traceback (most recent call last):", 34);
    job_log_append(j, 3, LOG_STDERR, 0, "bad \xff byte", 10);
    job_rank_exited(j, 3, 1, 0, false, RECORD, strlen(RECORD));
    root_cause_settle(j);
    const struct job_event *ev = job_event_at(j, j->ev_count - 1);
    CHECK_INT(ev->kind, EV_ROOT_CAUSE);
    CHECK_STR(ev->text, "root cause: rank 3 on gpu2 exited with code 1: RuntimeError: CUDA "
              "error: out of memory");
    job_rank_exited(j, 0, 0, 11, false, NULL, 0);
    tjob_free(j);
    cJSON *o = root_cause_line("evrc");
    CHECK(o != NULL);
    if (o) {
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "host")), "gpu2");
        CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "rank")), 3);
        CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "exit_code")), 1);
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "signal")));
        cJSON *lines = cJSON_GetObjectItem(o, "last_lines");
        CHECK_INT(cJSON_GetArraySize(lines), 2);
        CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(lines, 0)),
                  "Traceback (most recent call last):");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(lines, 1)), "bad \xEF\xBF\xBD byte");
        const char *ef = cJSON_GetStringValue(cJSON_GetObjectItem(o, "error_file"));
        CHECK(ef && strncmp(ef, "RuntimeError: CUDA error: out of memory\nTraceback", 48) == 0);
        cJSON_Delete(o);
    }
    /* A signal: exit_code null, the signal's name. */
    j = new_job("evsig");
    job_rank_exited(j, 1, 0, 6, false, NULL, 0);
    root_cause_settle(j);
    tjob_free(j);
    o = root_cause_line("evsig");
    CHECK(o != NULL);
    if (o) {
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "exit_code")));
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "signal")), "SIGABRT");
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "error_file")));
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "host")), "gpu1");
        cJSON_Delete(o);
    }
}

static void test_node_cause(void)
{
    struct job *j = new_job("node");
    if (!j) { CHECK(0); return; }
    CHECK(root_cause_node(j, 1, "connection dropped"));
    CHECK_STR(j->cause.summary, "node gpu2 lost: connection dropped (ranks 2-3)");
    CHECK_INT(j->cause.rank, -1);
    CHECK_INT(j->cause.node, 1);
    CHECK_INT(j->cause.n_last_lines, 0);
    CHECK(!job_rank_exited(j, 0, 0, 15, true, NULL, 0));
    CHECK(job_rank_exited(j, 1, 1, 0, false, NULL, 0));     /* a failure, not the cause */
    CHECK_INT(j->cause.node, 1);
    CHECK_INT(j->cause.rank, -1);
    tjob_free(j);
    cJSON *o = root_cause_line("node");
    CHECK(o != NULL);
    if (o) {
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "host")), "gpu2");
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "rank")));
        CHECK(cJSON_GetObjectItem(o, "exit_code") == NULL);
        cJSON_Delete(o);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-rc-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_signal_names);
    RUN(test_first_failure_wins);
    RUN(test_last_lines);
    RUN(test_error_file_format);
    RUN(test_events_jsonl_root_cause);
    RUN(test_node_cause);
    tmptree_remove(tmpdir);
    return tap_done();
}
