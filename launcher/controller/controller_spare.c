/* The job's shape: its rank map (ctl_make_job, from the hosts' slots, --nproc-per-node, the GPU
 * counts or the record of a run taken over), and spare nodes (--nnodes N|MIN:MAX, docs/run.md
 * "Spare nodes"): which nodes an attempt runs on.
 * The job keeps every node of the hostfile; each has a role (job.h node_role): active (in
 * this attempt), spare, or excluded. A node that fails through its own fault during an attempt
 * (lost, its agent gone, a GPU XID or new ECC errors) or in the preflight is excluded before the
 * next attempt, and the first spare in hostfile order takes its place (plan_roles); with no
 * spare left the attempt runs on fewer nodes while --nnodes' MIN allows it, else the job fails.
 * Spares are checked by the preflight with the others (so a spare is known good), then their
 * agents are let go: they are connected again when they take a place. Without --nnodes
 * nothing here acts: every node is active, a failure is the job's as before. A fault is
 * recorded by whoever finds it (ctl_spare_fault); the progress step (controller.c) and the
 * preflight's end decide when the nodes are replaced. */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_report.h"
#include "hosts/hostlist.h"
#include "job/root_cause.h"
#include "record/run_record.h"
#include "util/util.h"
#include "wire/protocol.h"

/* The rank map follows the hostfile's slots (or --nproc-per-node), the GPU counts the preflight
 * found for --nproc-per-node gpu, or the record of a run taken over. */
struct job *ctl_make_job(struct controller *c, const int *gpu_counts, char *err, size_t errlen)
{
    const char **names = xcalloc(c->n, sizeof *names);
    const struct host **hosts = xcalloc(c->n, sizeof *hosts);
    int *rpn = xcalloc(c->n, sizeof *rpn);
    struct job *j;
    const char *run_id = c->job ? c->job->run_id : c->o.run_id;
    for (size_t i = 0; i < c->n; i++) {
        const struct host *h = c->hl ? &c->hl->hosts[i] : NULL;
        names[i] = h ? h->name : "localhost";
        hosts[i] = h;
        rpn[i] = c->adopt ? c->adopt->ranks_per_node[i]
                          : plan_ranks_per_node(c->o.nproc_per_node, h, gpu_counts ? gpu_counts[i] : -1);
    }
    j = job_new(run_id, c->log_root, c->o.max_restarts, names, hosts, rpn, c->n, err, errlen);
    if (j) {   /* the health rules the model applies as the losses come (job/health.h) */
        j->health.on_nan = c->o.on_nan;
        j->health.on_spike = c->o.on_spike;
        j->health.spike_factor = c->o.loss_spike;
        j->health.spike_window = c->o.loss_spike_window > 0 ? c->o.loss_spike_window : HEALTH_SPIKE_WINDOW;
    }
    free(names);
    free(hosts);
    free(rpn);
    return j;
}

bool ctl_spare_on(const struct controller *c)
{
    return c->o.nnodes_max > 0 && c->hl && !c->o.check_only;
}

void ctl_spare_init(struct controller *c)
{
    enum node_role *roles;
    if (!ctl_spare_on(c)) return;
    roles = xcalloc(c->n ? c->n : 1, sizeof *roles);
    for (size_t i = 0; i < c->n; i++) roles[i] = c->job->nodes[i].role;
    plan_roles(roles, c->n, c->o.nnodes_max);
    job_set_roles(c->job, roles, NULL, c->job->attempt);
    free(roles);
}

void ctl_spare_fault(struct controller *c, size_t i, const char *why)
{
    struct cnode *nd = &c->nodes[i];
    if (!ctl_spare_on(c) || !ctl_node_active(c, i) || nd->fault) return;
    nd->fault = xstrdup(why);
}

void ctl_spare_faults_clear(struct controller *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->nodes[i].fault);
        c->nodes[i].fault = NULL;
    }
}

/* Under Slurm, the command that keeps the scheduler from handing the excluded nodes out again
 * (printed, never run: draining needs the operator's rights). */
static void drain_hint(struct controller *c)
{
    bool slurm = c->o.nodes.slurm; /* the hosts are a Slurm job's */
    if (!slurm) return;
    const char **names = xcalloc(c->n ? c->n : 1, sizeof *names);
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->job->nodes[i].role == NODE_EXCLUDED) names[k++] = c->job->nodes[i].name;
    char *set = k ? hostlist_compress(names, k) : NULL;
    if (set)
        job_event_add(c->job, EV_INFO, -1, -1, "to keep Slurm from giving the excluded node%s out again: "
                      "scontrol update nodename=%s state=drain reason=\"ddptop run %s: node failed\"",
                      k > 1 ? "s" : "", set, c->job->run_id);
    free(set);
    free(names);
}

/* The nodes with a fault are excluded (why[i]), the roles planned again. Returns false, with
 * the root cause set, when fewer than MIN nodes are left. */
static bool replan(struct controller *c, char **why, const char *when)
{
    struct job *j = c->job;
    enum node_role *roles = xcalloc(c->n ? c->n : 1, sizeof *roles);
    bool *was_active = xcalloc(c->n ? c->n : 1, sizeof *was_active);
    size_t active, before = ctl_active_count(c);
    int world_was = j->world_size;
    bool ok;
    for (size_t i = 0; i < c->n; i++) {
        was_active[i] = j->nodes[i].role == NODE_ACTIVE;
        roles[i] = why[i] ? NODE_EXCLUDED : j->nodes[i].role;
    }
    active = plan_roles(roles, c->n, c->o.nnodes_max);
    ok = active >= (size_t)c->o.nnodes_min;
    if (ok) {
        size_t n_was = j->n_ranks;
        int *node_was = xcalloc(n_was ? n_was : 1, sizeof *node_was);
        for (size_t r = 0; r < n_was; r++) node_was[r] = j->ranks[r].node;
        job_set_roles(j, roles, (const char *const *)why, j->attempt);
        /* a rank now on another node hears from another agent, whose numbering of its
         * messages starts again (as for a fresh agent: ctl_link_fresh_agent) */
        for (size_t r = 0; r < j->n_ranks && r < n_was; r++)
            if (j->ranks[r].node != node_was[r]) {
                j->ranks[r].seq_base += j->ranks[r].seq;
                j->ranks[r].seq = 0;
            }
        free(node_was);
    } else {
        /* the model keeps the attempt's map: only the excluded nodes are marked */
        for (size_t i = 0; i < c->n; i++)
            if (why[i]) {
                j->nodes[i].role = NODE_EXCLUDED;
                j->nodes[i].excluded_attempt = j->attempt;
                free(j->nodes[i].excluded);
                j->nodes[i].excluded = xstrdup(why[i]);
            }
        j->generation++;
    }
    /* one event per excluded node, naming the spare that takes its place */
    size_t next_new = 0;
    for (size_t i = 0; i < c->n; i++) {
        const char *spare = NULL;
        if (!why[i]) continue;
        for (; ok && was_active[i] && next_new < c->n; next_new++)
            if (roles[next_new] == NODE_ACTIVE && !was_active[next_new]) {
                spare = j->nodes[next_new++].name;
                break;
            }
        if (spare)
            job_event_add(j, EV_INFO, -1, (int)i, "node %s excluded%s: %s; spare %s takes its place", j->nodes[i].name,
                          when, why[i], spare);
        else
            job_event_add(j, EV_INFO, -1, (int)i, "node %s excluded%s: %s; no spare left", j->nodes[i].name, when,
                          why[i]);
    }
    if (!ok) {
        size_t first = 0;
        while (first < c->n && !why[first]) first++;
        char *sum = xasprintf("node %s excluded (%s); %zu node%s left, --nnodes %d:%d needs at least %d", j->nodes[first].name,
                              why[first], active, active == 1 ? "" : "s", c->o.nnodes_min, c->o.nnodes_max,
                              c->o.nnodes_min);
        job_cause_clear(j);
        root_cause_told(j, (int)first, sum);
        free(sum);
    } else if (active < before || active < (size_t)c->o.nnodes_max) {
        job_event_add(j, EV_INFO, -1, -1, "no spare left: attempt %d runs on %zu node%s, %d rank%s (was %d; --nnodes %d:%d)",
                      j->attempt + (j->state == JOB_CHECKING ? 0 : 1), active, active == 1 ? "" : "s", j->world_size,
                      j->world_size == 1 ? "" : "s", world_was, c->o.nnodes_min, c->o.nnodes_max);
    }
    if (ok) {
        free(c->ranks);
        c->ranks = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *c->ranks);
        for (size_t i = 0; i < c->n; i++)
            if (!ctl_node_active(c, i)) ctl_release_node(c, i);
    }
    drain_hint(c);
    free(roles);
    free(was_active);
    return ok;
}

bool ctl_spare_replace(struct controller *c)
{
    char **why = xcalloc(c->n ? c->n : 1, sizeof *why);
    bool any = false, ok = true;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].fault && ctl_node_active(c, i)) {
            why[i] = c->nodes[i].fault;
            any = true;
        }
    if (any) ok = replan(c, why, c->job->state == JOB_LAUNCHING ? " while connecting" : " after this attempt");
    free(why);
    ctl_spare_faults_clear(c);
    return ok;
}

bool ctl_spare_after_check(struct controller *c, const struct check_report *r, bool *refused)
{
    char **why = xcalloc(c->n ? c->n : 1, sizeof *why);
    bool any = false, ok = true;
    for (size_t i = 0; i < r->n && i < c->n; i++) {
        enum check_kind kind;
        const struct check_result *res = check_row_refusal(&r->rows[i], &kind);
        if (!res) continue;
        if (kind == CHECK_BENCH && res->detail && strstr(res->detail, "median"))
            /* the figure and the median are in the detail */
            why[i] = xasprintf("preflight: measured slow (--bench-min-ratio %g): %s", c->o.nodes.bench_min_ratio,
                               res->detail);
        else if (kind == CHECK_BENCH)   /* not slow: its measurement failed (NCCL's init, dcgmi) */
            why[i] = xasprintf("preflight: its measurement failed (--bench): %s", res->detail ? res->detail : "");
        else
            why[i] = xasprintf("preflight: %s failed%s%s", check_kind_name(kind), res->detail ? ": " : "",
                               res->detail ? res->detail : "");
        any = true;
    }
    if (any) {
        ok = replan(c, why, " by the preflight");
        *refused = !ok;
    }
    for (size_t i = 0; i < c->n; i++) free(why[i]);
    free(why);
    if (ok)
        for (size_t i = 0; i < c->n; i++)
            if (!ctl_node_active(c, i)) ctl_release_node(c, i);
    return ok;
}
