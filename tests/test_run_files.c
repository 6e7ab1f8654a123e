/* Unit tests for the run's files (launcher/record/run_files.c) and the job model's sink: a job
 * made by job_new touches no disk (its directory appears only when run_files_open makes it);
 * with the files open, what the model takes reaches them through the sink (rank bytes, events,
 * the attempt's directory) and a second writer of the run is refused; closed, the job goes on
 * in memory; a new shape of the run (--nproc-per-node gpu after the preflight) gets a writer
 * for its ranks, in the same directory, under the same lock. Under a fresh temporary
 * directory, removed at the end. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/job.h"
#include "record/logw.h"
#include "record/run_files.h"
#include "record/run_owner.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];

static bool exists(const char *dir, const char *name)
{
    char *p = xasprintf("%s/%s", dir, name);
    struct stat st;
    bool ok = lstat(p, &st) == 0;
    free(p);
    return ok;
}

/* The file's contents (NUL-terminated; "" when unreadable). */
static char *slurp(const char *dir, const char *name)
{
    char *p = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    free(p);
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[4096];
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0) strbuf_add(&sb, buf, n);
    if (f) fclose(f);
    if (!sb.buf) strbuf_adds(&sb, "");
    return sb.buf;
}

static void test_model_touches_no_disk(void)
{
    int per_node[] = { 2 };
    char err[256];
    char *root = xasprintf("%s/nodisk", tmpdir);
    struct job *j = job_new("r", root, 0, NULL, NULL, per_node, 1, err, sizeof err);
    CHECK(j != NULL);
    if (!j) { free(root); return; }
    char *want = xasprintf("%s/r", root);
    CHECK_STR(j->log_dir, want);
    free(want);
    CHECK(j->sink == NULL);
    job_attempt_begin(j, err, sizeof err);
    job_log_append(j, 0, LOG_STDOUT, 0, "hello", 5);
    job_event_add(j, EV_INFO, -1, -1, "an event");
    job_event_end(j, RUN_SUCCEEDED, 0);
    CHECK_INT(j->ranks[0].log.count, 1);
    CHECK_INT(j->ev_count, 2);
    struct stat st;
    CHECK(lstat(root, &st) != 0 && errno == ENOENT);   /* nothing made: no directory at all */
    job_free(j);
    free(root);
}

static void test_sink_writes_the_run(void)
{
    const char *names[] = { "gpu1" };
    int per_node[] = { 2 };
    char err[256] = "";
    struct job *j = job_new("s", tmpdir, 0, names, NULL, per_node, 1, err, sizeof err);
    CHECK(j != NULL);
    if (!j) return;
    struct run_files *f = run_files_open(j, err, sizeof err);
    CHECK(f != NULL);
    if (!f) { printf("# %s\n", err); job_free(j); return; }
    CHECK(j->sink != NULL);
    run_files_set_mode(f, 0640);
    CHECK_INT(j->log_mode, 0640);
    /* a second controller of the run stops before it touches a file */
    struct job *other = job_new("s", tmpdir, 0, names, NULL, per_node, 1, err, sizeof err);
    CHECK(other && run_files_open(other, err, sizeof err) == NULL);
    CHECK(strstr(err, "written by another ddptop") != NULL);
    job_free(other);

    job_attempt_begin(j, err, sizeof err);
    job_log_append(j, 1, LOG_STDOUT, 0, "line of rank 1", 14);
    job_log_append(j, 1, LOG_SYSTEM, 0, "a note of ddptop's", 18);   /* the ring only */
    job_event_add(j, EV_INFO, 1, -1, "rank 1 said something");
    run_files_flush(f);
    CHECK(logw_drain(run_files_writer(f), 10000));
    char *dir = j->log_dir;
    CHECK(exists(dir, RUN_OWNER_FILE));
    CHECK(exists(dir, "agent.log"));
    char *log = slurp(dir, "attempt-0/rank-1.log");
    CHECK_STR(log, "line of rank 1\n");
    free(log);
    char *ev = slurp(dir, "events.jsonl");
    CHECK(strstr(ev, "\"text\":\"rank 1 said something\"") && strstr(ev, "\"host\":\"gpu1\""));
    free(ev);
    struct stat st;
    CHECK(stat(dir, &st) == 0);
    CHECK_INT(st.st_mode & 07777, 0750);
    char *p = xasprintf("%s/attempt-0/rank-1.log", dir);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
    free(p);

    /* closed: the sink is unhooked and the job goes on in memory */
    run_files_close(f);
    CHECK(j->sink == NULL);
    job_log_append(j, 1, LOG_STDOUT, 0, "after", 5);
    log = slurp(dir, "attempt-0/rank-1.log");
    CHECK_STR(log, "line of rank 1\n");
    free(log);
    CHECK_INT(j->ranks[1].log.count, 3);
    /* and the lock went with the files: the run can be written again */
    other = job_new("s", tmpdir, 0, names, NULL, per_node, 1, err, sizeof err);
    f = other ? run_files_open(other, err, sizeof err) : NULL;
    CHECK(f != NULL);
    run_files_close(f);
    job_free(other);
    job_free(j);
}

/* --nproc-per-node gpu: 1 rank per node before the preflight, 3 after it. */
static void test_rebind_to_a_new_shape(void)
{
    const char *names[] = { "gpu1" };
    int one[] = { 1 }, three[] = { 3 };
    char err[256] = "";
    struct job *a = job_new("g", tmpdir, 0, names, NULL, one, 1, err, sizeof err);
    struct run_files *f = a ? run_files_open(a, err, sizeof err) : NULL;
    CHECK(f != NULL);
    if (!f) { job_free(a); return; }
    run_files_set_mode(f, 0600);
    job_event_add(a, EV_INFO, -1, -1, "the preflight's event");
    struct job *b = job_new("g", tmpdir, 0, names, NULL, three, 1, err, sizeof err);
    CHECK(b != NULL);
    CHECK_INT(run_files_rebind(f, b, err, sizeof err), 0);
    CHECK(a->sink == NULL && b->sink != NULL);
    CHECK_INT(b->log_mode, 0600);
    job_free(a);
    job_attempt_begin(b, err, sizeof err);
    job_log_append(b, 2, LOG_STDOUT, 0, "rank 2 of 3", 11);
    job_event_add(b, EV_INFO, -1, -1, "the run's event");
    /* still the run's one writer */
    struct job *other = job_new("g", tmpdir, 0, names, NULL, one, 1, err, sizeof err);
    CHECK(other && run_files_open(other, err, sizeof err) == NULL);
    job_free(other);
    run_files_flush(f);
    CHECK(logw_drain(run_files_writer(f), 10000));
    char *dir = xstrdup(b->log_dir);
    char *log = slurp(dir, "attempt-0/rank-2.log");
    CHECK_STR(log, "rank 2 of 3\n");
    free(log);
    char *ev = slurp(dir, "events.jsonl");
    char *first = strstr(ev, "the preflight's event"), *second = strstr(ev, "the run's event");
    CHECK(first && second && first < second);
    free(ev);
    run_files_close(f);
    job_free(b);
    free(dir);
}

static void test_open_errors(void)
{
    int per_node[] = { 1 };
    char err[256] = "";
    struct job *j = job_new("m", NULL, 0, NULL, NULL, per_node, 1, err, sizeof err);
    CHECK(j && run_files_open(j, err, sizeof err) == NULL);   /* in memory only: no directory */
    job_free(j);
    char *file = xasprintf("%s/plain", tmpdir);
    FILE *fp = fopen(file, "w");
    if (fp) fclose(fp);
    j = job_new("m", file, 0, NULL, NULL, per_node, 1, err, sizeof err);
    CHECK(j && run_files_open(j, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot create the log directory") && strstr(err, "--log-dir"));
    CHECK(j && j->sink == NULL);
    job_free(j);
    free(file);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-run-files-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_model_touches_no_disk);
    RUN(test_sink_writes_the_run);
    RUN(test_rebind_to_a_new_shape);
    RUN(test_open_errors);
    tmptree_remove(tmpdir);
    return tap_done();
}
