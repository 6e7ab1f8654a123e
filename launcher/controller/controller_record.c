/* The run's record (record/run_record.h: adopt.json), what `ddptop attach` needs to take the
 * run over when its controller is gone (controller_adopt.c): written when an attempt begins and
 * whenever the job's state changes, with the command line to run again, the directory and
 * environment it started in (taken at construction, before anything changes them) and each
 * rank's numbering. A leaf of the controller: it reads, and writes through the log writer. */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/logw.h"
#include "record/run_record.h"
#include "util/cli.h"
#include "util/util.h"

extern char **environ;

static const char *after_name(enum after_stop a)
{
    return a == AFTER_RESTART ? "restart" : a == AFTER_QUIT ? "quit" : "end";
}

/* The command line to run again: ours, with the run id, without what only the first start
 * needs (--detach: attach makes its own session; --salloc: the allocation exists, --jobid
 * names it; --adopt: added by attach). */
static void record_argv(const struct controller *c, struct run_record *r)
{
    const struct run_opts *o = &c->o;
    const char *jobid = o->nodes.slurm_jobid ? o->nodes.slurm_jobid : "?", *val;
    r->argv = xcalloc((size_t)o->argc + 4, sizeof *r->argv);
    bool have_id = false;
    int i = 0;
    for (; i < o->argc && strcmp(o->argv[i], "--") != 0; i++) {
        const char *a = o->argv[i];
        int k = i;
        if (strcmp(a, "--detach") == 0 || strcmp(a, "--adopt") == 0) continue;
        if (cli_opt_value(o->argc, (char **)o->argv, &k, "--salloc", NULL, &val) > 0) {
            r->argv[r->argc++] = xstrdup("--jobid");
            r->argv[r->argc++] = xstrdup(jobid);
            i = k; /* its value too */
            continue;
        }
        if (cli_opt_value(o->argc, (char **)o->argv, &k, "--run-id", NULL, &val) > 0) have_id = true;
        r->argv[r->argc++] = xstrdup(a);
    }
    if (!have_id) {
        r->argv[r->argc++] = xstrdup("--run-id");
        r->argv[r->argc++] = xstrdup(c->job->run_id);
    }
    for (; i < o->argc; i++) r->argv[r->argc++] = xstrdup(o->argv[i]); /* "--" and the command */
}

void ctl_record_write(struct controller *c)
{
    struct job *j = c->job;
    struct run_record r = {0};
    if (!c->files || c->o.check_only) return;
    record_argv(c, &r);
    r.cwd = c->start_cwd;
    /* The environment (API tokens, passwords in variables) and the job token are what a
     * takeover restores: kept only while there is a run to take over. An ended run's record
     * says how it ended and holds neither; a restart from the final screen writes them again. */
    r.adoptable = !job_is_ended(j);
    if (r.adoptable) {
        r.env = c->start_env;
        r.n_env = c->n_start_env;
        r.token = c->token;
    }
    r.attempt = j->attempt;
    r.state = (char *)job_state_name(j->state);
    c->record_state = (int)j->state;
    r.after = job_is_stopping(j) ? (char *)after_name(c->after) : NULL;
    r.auto_restart = c->auto_restart;
    r.agent_grace_s = c->o.agent_grace_s;
    r.n_nodes = j->n_nodes;
    r.ranks_per_node = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *r.ranks_per_node);
    r.hosts = xcalloc(j->n_nodes + 1, sizeof *r.hosts);
    for (size_t i = 0; i < j->n_nodes; i++) {
        r.ranks_per_node[i] = j->nodes[i].n_ranks;
        r.hosts[i] = j->nodes[i].name;
    }
    r.n_ranks = j->n_ranks;
    r.rank_base = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *r.rank_base);
    for (size_t k = 0; k < j->n_ranks; k++) r.rank_base[k] = j->ranks[k].seq_base;
    r.slurm_jobid = (char *)c->o.nodes.slurm_jobid;
    r.slurm_release = c->o.nodes.slurm_release && !c->allocation_released;
    r.written_ns = wall_ns();
    char *text = run_record_json(&r);
    logw_replace(run_files_writer(c->files), RUN_RECORD_FILE, text, strlen(text));
    free(text);
    for (size_t i = 0; i < r.argc; i++) free(r.argv[i]);
    free(r.argv);
    free(r.ranks_per_node);
    free(r.hosts);
    free(r.rank_base);
}

void ctl_start_snapshot(struct controller *c)
{
    size_t n = 0;
    while (environ && environ[n]) n++;
    c->start_env = xcalloc(n + 1, sizeof *c->start_env);
    for (size_t i = 0; i < n; i++) c->start_env[i] = xstrdup(environ[i]);
    c->n_start_env = n;
    char *cwd = getcwd(NULL, 0);
    c->start_cwd = cwd ? cwd : xstrdup("/");
}
