/* `ddptop view RUN` (cmd_view.h): finds the run as `ddptop logs` does (record/runs.h), refuses a
 * run whose controller is still at work (attach to it instead: two dashboards of one run
 * would disagree), reads the run back into a job model (record/run_replay.h) and shows it in the
 * dashboard with no controller behind it. The loop here is util/evloop.h's, much smaller than
 * the controller's: the terminal and the signals (SIGWINCH, and the signals that end us), a
 * frame when the dashboard wants one, never a blocking call. */
#include <curses.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dashboard.h"
#include "record/run_owner.h"
#include "record/run_replay.h"
#include "record/runs.h"
#include "util/cli.h"
#include "util/evloop.h"
#include "util/util.h"
#include "cmd_view.h"
#include "cmd.h"
/* last: term.h defines macros named like common words (lines, columns) */
#include <term.h>

struct view_opts {
    const char *run, *log_dir, *theme;
};

void cmd_view_usage(FILE *f)
{
    fputs("usage: ddptop view RUN [--log-dir DIR] [--theme NAME]\n"
          "\n"
          "The dashboard on a finished run, read back from its log directory: final rank\n"
          "states, the loss chart, events, every attempt's logs (search, [ and ]), and the\n"
          "GPU view (G) when the run kept GPU samples. Read-only: r, K, s and d do nothing;\n"
          "q quits at once.\n"
          "\n"
          "  RUN            a run id as ddptop ls shows it, or a run's directory\n"
          "  --log-dir DIR  where the runs are (default ./" JOB_LOG_ROOT_DEFAULT ", as ddptop run)\n"
          "  --theme NAME   default, light, high-contrast, mono, or a .theme file\n"
          "\n"
          "A run that is still running is refused (exit status 1): ddptop attach RUN shows its\n"
          "live dashboard. No such run, or no terminal: exit status 2.\n", f);
}

static int parse(int argc, char **argv, struct view_opts *o, char *err, size_t errlen)
{
    const char *val;
    int rc;
    *o = (struct view_opts){ 0 };
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return 1;
        if ((rc = cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val)) != 0) {
            if (rc < 0 || !*val) return cli_fail(err, errlen, "--log-dir needs a directory (see ddptop view --help)");
            o->log_dir = val;
        } else if ((rc = cli_opt_value(argc, argv, &i, "--theme", NULL, &val)) != 0) {
            if (rc < 0 || !*val) return cli_fail(err, errlen, "--theme needs a name or a .theme file");
            o->theme = val;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail(err, errlen, "unknown option '%s' (see ddptop view --help)", a);
        } else if (o->run) {
            return cli_fail(err, errlen, "one run at a time ('%s' and '%s')", o->run, a);
        } else {
            o->run = a;
        }
    }
    if (!o->run) return cli_fail(err, errlen, "which run? give its id or its directory (ddptop ls lists them)");
    return 0;
}

/* ---- the loop ----------------------------------------------------------------------------- */

struct view_loop {
    struct dashboard *d;
    bool end;      /* a signal that ends us, or the terminal went */
    bool failed;   /* poll() failed */
};

static void on_signal(struct evloop *el, int signo, void *ctx)
{
    struct view_loop *v = ctx;
    (void)el;
    if (signo == SIGWINCH) dashboard_resized(v->d);
    else if (signo == SIGQUIT) dashboard_notice(v->d, "view of a finished run: Ctrl-\\ does nothing");
    else v->end = true;
}

static void on_keys(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct view_loop *v = ctx;
    (void)el;
    (void)w;
    if (v->end) return;                               /* a signal in the same turn ends us first */
    if (revents & POLLIN) dashboard_read_keys(v->d);
    else if (revents & (POLLHUP | POLLERR | POLLNVAL)) v->end = true;  /* the terminal went */
}

static int signals_catch(struct evloop *el, struct view_loop *v)
{
    static const int sigs[] = { SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (evloop_signal(el, sigs[i], on_signal, v) != 0) return -1;
    return 0;
}

static int view_loop(struct dashboard *d, const struct job *j)
{
    struct view_loop v = { .d = d };
    struct evloop *el = evloop_new();
    int rc = 0;
    if (signals_catch(el, &v) != 0) rc = -1;
    evloop_watch(el, STDIN_FILENO, POLLIN, on_keys, &v);
    while (rc == 0) {
        int wait = dashboard_tick(d, j);
        if (wait < 0 || evloop_run_once(el, wait) < 0) rc = -1;
        else if (v.end || dashboard_quit_asked(d)) break;
    }
    int saved = errno;
    evloop_free(el);   /* the signals' default actions back */
    errno = saved;
    return rc;
}

/* The all-ranks log (a) in the live view is in arrival order; files do not keep it: each
 * attempt's lines, one of each rank in turn. Only attempts that have lines are visited (the
 * attempt's number is no count of work: a run's files may say attempt 1000000). */
static void merged_fill(struct dashboard *d, const struct job *j)
{
    size_t *at = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *at);
    for (;;) {
        int a = -1;
        for (size_t r = 0; r < j->n_ranks; r++) {
            const struct log_line *l = log_ring_at(&j->ranks[r].log, at[r]);
            if (l && (a < 0 || l->attempt < a)) a = l->attempt;
        }
        if (a < 0) break;
        for (bool more = true; more;) {
            more = false;
            for (size_t r = 0; r < j->n_ranks; r++) {
                const struct log_line *l = log_ring_at(&j->ranks[r].log, at[r]);
                if (!l || l->attempt != a) continue;
                dashboard_merged_add(d, j, (int)r, l);
                at[r]++;
                more = true;
            }
        }
    }
    free(at);
}

/* ---- the command -------------------------------------------------------------------------- */

/* A run whose controller is alive and recorded no end: refused (exit 1). */
static bool still_running(const char *name, const char *dir)
{
    struct run_owner o;
    enum run_owner_status st = run_owner_check(dir, &o);
    struct run_summary s;
    run_summary_read(dir, st, &s);
    bool live = s.state == RUN_RUNNING;
    run_summary_done(&s);
    if (!live) return false;
    if (st == OWNER_ELSEWHERE)
        fprintf(stderr, "ddptop view: run %s is still running, on %s (pid %d): ddptop attach %s there "
                "shows its dashboard; ddptop logs -f %s follows its logs\n", name, o.host, o.pid, name, name);
    else
        fprintf(stderr, "ddptop view: run %s is still running (pid %d): ddptop attach %s shows its "
                "dashboard; ddptop logs -f %s follows its logs\n", name, o.pid, name, name);
    return true;
}

static int show(const struct view_opts *o, const char *dir)
{
    char err[1024];
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "ddptop view: needs a terminal (ddptop logs %s prints the run's logs, "
                "ddptop logs %s --events its events)\n", o->run, o->run);
        return 2;
    }
    int term_err = 0;
    if (setupterm(NULL, STDOUT_FILENO, &term_err) != OK) {
        const char *t = getenv("TERM");
        fprintf(stderr, "ddptop view: the terminal '%s' is unknown to terminfo (set TERM, e.g. "
                "TERM=xterm-256color; ddptop logs %s prints the logs)\n", t ? t : "", o->run);
        return 2;
    }
    del_curterm(cur_term);
    struct run_owner owner;
    struct run_replay r;
    if (run_replay_load(dir, NULL, run_owner_check(dir, &owner), &r, err, sizeof err) != 0) {
        fprintf(stderr, "ddptop view: %s\n", err);
        return 2;
    }
    struct dashboard *d = dashboard_new(o->theme, err, sizeof err);
    if (!d) {
        run_replay_done(&r);
        fprintf(stderr, "ddptop view: %s\n", err);
        return 2;
    }
    dashboard_view_only(d, r.job);
    merged_fill(d, r.job);
    if (r.state == RUN_INTERRUPTED)
        dashboard_notice(d, "run %s was interrupted: its controller ended before the run did", r.job->run_id);
    else if (r.sum.bad_line)      /* the first line not believed, and why (run_summary.h) */
        dashboard_notice(d, "%sevents.jsonl:%ld: %s; %ld line%s not taken (ddptop logs %s --events)",
                         r.state == RUN_UNKNOWN ? "state unknown: " : "", r.sum.bad_line, r.sum.bad_why,
                         r.bad_lines, r.bad_lines == 1 ? "" : "s", o->run);
    else if (r.state == RUN_UNKNOWN || r.bad_lines)
        dashboard_notice(d, "%s%ld line%s of events.jsonl or gpu.jsonl not understood (ddptop logs %s --events)",
                         r.state == RUN_UNKNOWN ? "state unknown: " : "", r.bad_lines,
                         r.bad_lines == 1 ? "" : "s", o->run);
    int rc = 0;
    if (view_loop(d, r.job) != 0) rc = 1;
    dashboard_free(d);
    if (rc) fprintf(stderr, "ddptop view: cannot use the terminal: %s\n", strerror(errno));
    run_replay_done(&r);
    return rc;
}

int cmd_view_main(int argc, char **argv)
{
    struct view_opts o;
    char err[1024];
    int rc = parse(argc, argv, &o, err, sizeof err);
    if (rc > 0) {
        cmd_view_usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "ddptop view: %s\n", err);
        return 2;
    }
    char *root = runs_log_root(o.log_dir);
    char *dir = runs_find(root, o.run, err, sizeof err);
    free(root);
    if (!dir) {
        fprintf(stderr, "ddptop view: %s\n", err);
        return 2;
    }
    rc = still_running(o.run, dir) ? 1 : show(&o, dir);
    free(dir);
    return rc;
}

static int view_main(int argc, char **argv)
{
    return cmd_view_main(argc - 1, argv + 1);
}

const struct cmd_entry cmd_view_entry = {
    .name = "view",
    .args = "RUN [--log-dir DIR]",
    .summary = "a finished run's dashboard",
    .main = view_main,
    .usage = cmd_view_usage,
};
