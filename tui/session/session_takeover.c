/* `ddptop attach RUN` when RUN has no session (session.h): the run ended (its final screen
 * goes to `ddptop view`, through the entry's view), its controller still lives elsewhere (said so), or its controller is
 * gone and its agents wait for one (docs/run.md "Taking a run over"): then ddptop starts again
 * with the run's recorded command line, directory and environment and --adopt, in a session of
 * its own on a terminal, or printing lines like `ddptop run --headless` without one. */
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/run_record.h"
#include "record/runs.h"
#include "session_proto.h"
#include "util/util.h"

extern char **environ;

/* The run's directory: under --log-dir, else where its start noted it, else ./ddptop-logs. */
static char *find_dir(const char *run, const char *log_dir, char **root, char *err, size_t errlen)
{
    char *dir = NULL;
    if (!log_dir && (dir = session_find_run(run)) != NULL) {
        char *slash = strrchr(dir, '/');
        *root = slash && slash != dir ? xstrndup(dir, (size_t)(slash - dir)) : xstrdup("/");
        return dir;
    }
    *root = runs_log_root(log_dir);
    dir = runs_find(*root, run, err, errlen);
    return dir;
}

static int view_ended(const char *root, const char *run, int (*view)(int argc, char **argv))
{
    char *argv[] = {"--log-dir", (char *)root, (char *)run, NULL};
    return view(3, argv);
}

/* The run's environment, as it started (its exports to a restart's ranks, its PATH, its
 * variables for hosts and Slurm), but this terminal's and this login's own: the SSH agent,
 * Kerberos tickets, the terminal and its size, the display. The recorded ones belonged to a
 * session that may be gone. */
static void take_env(const struct run_record *r)
{
    static const char *const own[] = {"SSH_AUTH_SOCK", "KRB5CCNAME", "TERM", "COLORTERM", "DISPLAY",
                                      "XDG_RUNTIME_DIR", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY",
                                      "COLUMNS", "LINES", "TMUX", NULL};
    char *keep[sizeof own / sizeof own[0]] = {0};
    for (int i = 0; own[i]; i++) {
        const char *v = getenv(own[i]);
        if (v) keep[i] = xasprintf("%s=%s", own[i], v);
    }
    clearenv();
    for (size_t i = 0; i < r->n_env; i++) {
        size_t klen = strcspn(r->env[i], "=");
        bool mine = false;
        for (int k = 0; own[k] && !mine; k++) mine = strlen(own[k]) == klen && strncmp(own[k], r->env[i], klen) == 0;
        if (!mine) putenv(xstrdup(r->env[i])); /* putenv keeps the string */
    }
    for (int i = 0; own[i]; i++)
        if (keep[i]) putenv(keep[i]);
}

int session_takeover(const char *run, const char *log_dir, bool headless, bool force,
                     int (*run_again)(int argc, char **argv), int (*view)(int argc, char **argv))
{
    char err[1024];
    char *root = NULL, *dir = find_dir(run, log_dir, &root, err, sizeof err);
    if (!dir) {
        if (log_dir) fprintf(stderr, "ddptop attach: no session of run %s, and %s\n", run, err);
        free(root);
        return log_dir ? 1 : -1;
    }
    struct run_entry e;
    runs_entry_read(&e, dir, run);
    int rc = 1;
    if (e.sum.ended) {
        fprintf(stderr, "ddptop attach: run %s has ended (%s): showing it (ddptop view)\n", run,
                run_state_name(e.sum.state));
        runs_entry_free(&e);
        rc = isatty(STDOUT_FILENO) && !headless ? view_ended(root, run, view) : 0;
        goto out;
    }
    if (e.owner_status == OWNER_ALIVE) {
        fprintf(stderr, "ddptop attach: run %s has no session, but its controller (pid %d) is alive (a --headless "
                "run?): it cannot be taken over while it lives; ddptop logs -f %s follows it\n", run, e.owner.pid, run);
        runs_entry_free(&e);
        goto out;
    }
    if (e.owner_status == OWNER_ELSEWHERE && !force) {
        fprintf(stderr, "ddptop attach: run %s is controlled from host %s, which cannot be checked from here; if "
                "that host is down, ddptop attach --force %s takes the run over\n", run, e.owner.host, run);
        runs_entry_free(&e);
        goto out;
    }
    runs_entry_free(&e);
    struct run_record r;
    if (run_record_read(dir, &r, err, sizeof err) < 0) {
        fprintf(stderr, "ddptop attach: run %s cannot be taken over: %s\n", run, err);
        goto out;
    }
    if (!r.adoptable) {
        /* the run ended, or runs_entry_read found its agents' grace long over */
        fprintf(stderr, "ddptop attach: run %s cannot be taken over: its record (adopt.json) says %s and holds no "
                "environment any more (the run ended, or its controller died and its agents stopped waiting: "
                "--agent-grace %d s, over more than %d s ago); ddptop view %s shows it\n", run, r.state,
                r.agent_grace_s, RUN_RECORD_FORGET_AFTER_S, run);
        run_record_free(&r);
        goto out;
    }
    int64_t alive = run_record_last_alive(dir), now = wall_ns();
    long long ago = alive && alive < now ? (long long)((now - alive) / 1000000000) : 0;
    if (r.agent_grace_s == 0)
        fprintf(stderr, "ddptop attach: run %s ran with --agent-grace 0: its agents stopped the ranks when its "
                "controller went; trying anyway\n", run);
    else if (ago > r.agent_grace_s)
        fprintf(stderr, "ddptop attach: run %s's controller was last heard of %lld s ago, longer than its agents "
                "wait (--agent-grace %d): they have likely stopped the ranks; trying anyway\n", run, ago,
                r.agent_grace_s);
    else
        fprintf(stderr, "ddptop attach: run %s's controller is gone (last heard of %lld s ago); taking the run "
                "over: reconnecting to its agents\n", run, ago);
    /* the run's own world: its environment and directory */
    if (chdir(r.cwd) != 0) {
        fprintf(stderr, "ddptop attach: cannot change to the run's directory %s: %s\n", r.cwd, strerror(errno));
        run_record_free(&r);
        goto out;
    }
    take_env(&r);
    char **argv = xcalloc(r.argc + 6, sizeof *argv);
    int n = 0;
    argv[n++] = "ddptop";
    argv[n++] = "run";
    argv[n++] = "--adopt";           /* before the recorded "-- CMD", which is the ranks' */
    if (headless) argv[n++] = "--headless";
    for (size_t i = 0; i < r.argc; i++) argv[n++] = xstrdup(r.argv[i]);
    argv[n] = NULL;
    run_record_free(&r);
    rc = run_again(n, argv);
out:
    free(dir);
    free(root);
    return rc;
}
