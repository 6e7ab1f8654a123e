/* Runs on disk (runs.h): listing a log directory, finding one run by id or path, and the
 * attempt and rank log files inside a run. */
#include "runs.h"
#include "logw.h"
#include "run_record.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

char *runs_log_root(const char *dir)
{
    return util_abs_path(dir && *dir ? dir : JOB_LOG_ROOT_DEFAULT);
}

/* A run directory is one with an events.jsonl (job_new writes it first). One we may not
 * look into counts too: listing it says why it cannot be read. */
static bool is_run_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    char *ev = xasprintf("%s/events.jsonl", dir);
    bool yes = stat(ev, &st) == 0 || errno != ENOENT;
    free(ev);
    return yes;
}

static int64_t file_mtime_ns(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* What the writer said it lost (logw.h), else a file that ends in part of a line. */
static void runs_entry_incomplete(struct run_entry *e)
{
    char reason[64], detail[320];
    if (logw_read_incomplete(e->dir, reason, sizeof reason, detail, sizeof detail)) {
        e->incomplete = xstrdup(reason);
        e->incomplete_detail = detail[0] ? xstrdup(detail) : NULL;
    } else if (e->sum.cut_short && e->sum.state != RUN_RUNNING) {
        e->incomplete = xstrdup("events.jsonl ends mid-line");
    }
}

/* What adopt.json says of a run that can no longer be taken over: the controller's name for
 * the way it ended, or INTERRUPTED (its controller died and its agents gave up). */
static const char *record_state(enum run_state s)
{
    return s == RUN_SUCCEEDED ? "DONE" : s == RUN_FAILED ? "FAILED" : s == RUN_STOPPED ? "STOPPED" : "INTERRUPTED";
}

void runs_entry_read(struct run_entry *e, const char *dir, const char *id)
{
    memset(e, 0, sizeof *e);
    e->dir = xstrdup(dir);
    if (!id) {
        const char *slash = strrchr(dir, '/');
        id = slash && slash[1] ? slash + 1 : dir;
    }
    e->id = xstrdup(id);
    e->owner_status = run_owner_check(dir, &e->owner);
    if (run_summary_read(dir, e->owner_status, &e->sum) != 0)
        e->note = xasprintf("cannot read %s/events.jsonl: %s", dir, util_open_read_error(errno));
    else if (e->sum.bad_line)
        e->note = xasprintf("%s/events.jsonl:%ld: %s", dir, e->sum.bad_line, e->sum.bad_why);
    else if (e->owner_status == OWNER_ELSEWHERE && e->sum.state == RUN_RUNNING)
        e->note = xasprintf("its controller (pid %d) is on %s: not checked from here",
                            e->owner.pid, e->owner.host);
    e->orphan_left_s = -1;
    /* a controller on another host may still show it, and restart it (r): that one's record */
    bool ended = e->sum.ended && (e->owner_status == OWNER_GONE || e->owner_status == OWNER_NONE);
    bool dead = e->sum.state == RUN_INTERRUPTED && !e->sum.ended && e->owner_status == OWNER_GONE;
    if (ended || (dead && e->sum.attempts > 0)) {
        /* its agents wait for a controller for their grace, counted from when the dead one
         * was last alive (its log index is touched every second) */
        struct run_record r;
        char err[256];
        if (run_record_read(dir, &r, err, sizeof err) == 0) {
            int64_t last = run_record_last_alive(dir), now = wall_ns();
            long left = r.agent_grace_s - (long)((now - last) / 1000000000);
            bool adoptable = r.adoptable, grace = r.agent_grace_s > 0;
            run_record_free(&r);
            if (!ended && adoptable && grace && last && left > 0) {
                e->sum.state = RUN_ORPHANED;
                e->orphan_left_s = left;
            } else if (adoptable && (ended || (last && left < -RUN_RECORD_FORGET_AFTER_S))) {
                /* nothing can take the run over any more: the environment it kept for that
                 * (API tokens, passwords) goes (a controller that ended the run did it already;
                 * not one that was killed, or a ddptop before issue 28) */
                run_record_forget(dir, record_state(e->sum.state), err, sizeof err);
            }
        }
    }
    runs_entry_incomplete(e);
    /* A run that ended without its end event (a SIGKILL) ran until its controller last
     * wrote: the log index is touched every second */
    if (!e->sum.ended) e->last_alive_ns = run_record_last_alive(dir);
    e->sort_ns = e->sum.start_ns ? e->sum.start_ns : e->owner.started_ns;
    if (!e->sort_ns) {
        char *ev = xasprintf("%s/events.jsonl", dir);
        e->sort_ns = file_mtime_ns(ev);
        free(ev);
    }
}

void runs_entry_free(struct run_entry *e)
{
    free(e->id);
    free(e->dir);
    free(e->note);
    free(e->incomplete);
    free(e->incomplete_detail);
    run_summary_done(&e->sum);
    memset(e, 0, sizeof *e);
}

static int newest_first(const void *a, const void *b)
{
    const struct run_entry *x = a, *y = b;
    if (x->sort_ns != y->sort_ns) return x->sort_ns > y->sort_ns ? -1 : 1;
    return -strcmp(x->id, y->id);
}

int runs_list(const char *log_root, struct run_list *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(log_root);
    if (!d) {
        snprintf(err, errlen, "cannot read the log directory %s: %s (ddptop run writes runs there; "
                 "--log-dir DIR looks elsewhere)", log_root, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *dir = xasprintf("%s/%s", log_root, de->d_name);
        if (is_run_dir(dir)) {
            if (out->n == cap) {
                cap = cap ? cap * 2 : 16;
                out->v = xrealloc(out->v, cap * sizeof *out->v);
            }
            runs_entry_read(&out->v[out->n++], dir, de->d_name);
        }
        free(dir);
    }
    closedir(d);
    if (out->n) qsort(out->v, out->n, sizeof *out->v, newest_first);
    return 0;
}

void runs_list_free(struct run_list *l)
{
    for (size_t i = 0; i < l->n; i++) runs_entry_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

char *runs_find(const char *log_root, const char *run, char *err, size_t errlen)
{
    if (!run || !*run) {
        snprintf(err, errlen, "which run? give its id or its directory (ddptop ls lists them)");
        return NULL;
    }
    if (strchr(run, '/') || strcmp(run, ".") == 0 || strcmp(run, "..") == 0) {
        char *dir = util_abs_path(run);
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
        if (is_run_dir(dir)) return dir;
        snprintf(err, errlen, "'%s' is not a run directory: it has no events.jsonl (ddptop ls "
                 "lists the runs under %s)", run, log_root);
        free(dir);
        return NULL;
    }
    char *dir = xasprintf("%s/%s", log_root, run);
    if (is_run_dir(dir)) return dir;
    free(dir);
    if (is_run_dir(run)) return util_abs_path(run);
    snprintf(err, errlen, "no run '%s' under %s (ddptop ls lists them; --log-dir DIR looks "
             "elsewhere)", run, log_root);
    return NULL;
}

/* PREFIX digits SUFFIX exactly, the digits a number up to 9 of them; -1 otherwise. */
static int numbered_name(const char *name, const char *prefix, const char *suffix)
{
    size_t p = strlen(prefix), k = 0;
    int v = 0;
    if (strncmp(name, prefix, p) != 0) return -1;
    for (name += p; name[k] >= '0' && name[k] <= '9'; k++) {
        if (k == 9) return -1;
        v = v * 10 + (name[k] - '0');
    }
    if (k == 0 || (k > 1 && name[0] == '0') || strcmp(name + k, suffix) != 0) return -1;
    return v;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int *numbered_entries(const char *dir, const char *prefix, const char *suffix, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int *v = NULL;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int k = numbered_name(de->d_name, prefix, suffix);
        if (k < 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        v[(*n)++] = k;
    }
    closedir(d);
    if (*n) qsort(v, *n, sizeof *v, cmp_int);
    return v;
}

int *runs_attempts(const char *dir, size_t *n)
{
    return numbered_entries(dir, "attempt-", "", n);
}

int *runs_rank_logs(const char *dir, int attempt, size_t *n)
{
    char *ad = xasprintf("%s/attempt-%d", dir, attempt);
    int *v = numbered_entries(ad, "rank-", ".log", n);
    free(ad);
    return v;
}
