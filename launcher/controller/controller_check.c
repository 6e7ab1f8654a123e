/* The preflight as the job's first state (CHECKING): the agents connect through the
 * same transports the run will use, and as each one greets, check/preflight.c asks it its
 * questions through the node's agent client. When every node is done the report decides, in
 * the progress step (controller.c): `ddptop check` ends there; `ddptop run` launches on the
 * same connections, or, when ssh, env or tcp failed, refuses (CHECK_FAILED) until the user
 * launches anyway or quits. What is here is the preflight's own part: its step, the rank map
 * by the GPUs it found, its event, and a node's greeting or loss handed to it. Keys and
 * signals work throughout, since nothing here blocks the loop. */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_report.h"
#include "job/nccl.h"
#include "util/util.h"

static cJSON *pf_request(void *ctx, size_t node, const char *op, int tag)
{
    return ctl_request(ctx, node, op, tag, NULL);
}

static void pf_send(void *ctx, size_t node, cJSON *msg)
{
    ctl_send(ctx, node, msg);
}

void ctl_check_begin(struct controller *c)
{
    struct preflight_io io = {.ctx = c, .request = pf_request, .send = pf_send};
    c->pf = preflight_new(&c->o.nodes, c->hl->hosts, c->n, &io);
    job_checking(c->job);
    ctl_connect_nodes(c, NULL);   /* nothing was asked of any node yet */
}

void ctl_check_node_up(struct controller *c, size_t i, const cJSON *hello)
{
    struct transport *t = c->nodes[i].t;
    struct preflight_link l = {.user = transport_user(t), .address = transport_address(t),
                               .port = transport_port(t), .uploaded = transport_uploaded(t),
                               .upload_method = transport_upload_method(t),
                               .login_ms = transport_login_ms(t)};
    preflight_node_up(c->pf, i, &l, hello);
}

void ctl_check_node_down(struct controller *c, size_t i, const char *why, const char *hint)
{
    struct cnode *nd = &c->nodes[i];
    nd->lost = true;
    if (nd->t) transport_close(nd->t);
    preflight_node_down(c->pf, i, why, hint);
    job_node_unreachable(c->job, i, why);
}

int64_t ctl_check_deadline_ms(const struct controller *c)
{
    return c->pf ? preflight_deadline_ms(c->pf) : 0;
}

/* --nproc-per-node gpu: the rank map follows the GPU counts the preflight found. */
static void remap_by_gpus(struct controller *c)
{
    int *gpus = xcalloc(c->n ? c->n : 1, sizeof *gpus);
    char err[512];
    struct job *nj;
    bool same;
    for (size_t i = 0; i < c->n; i++) gpus[i] = c->nodes[i].gpu_count = preflight_gpu_count(c->pf, i);
    if (c->o.nproc_per_node >= 0) {
        free(gpus);
        return;
    }
    nj = ctl_make_job(c, gpus, err, sizeof err);
    if (nj) { /* the roles and why the excluded are stay (--nnodes) */
        enum node_role *roles = xcalloc(c->n ? c->n : 1, sizeof *roles);
        const char **whys = xcalloc(c->n ? c->n : 1, sizeof *whys);
        for (size_t i = 0; i < c->n; i++) {
            roles[i] = c->job->nodes[i].role;
            whys[i] = c->job->nodes[i].excluded;
        }
        job_set_roles(nj, roles, whys, -1);
        free(roles);
        free(whys);
    }
    same = nj && nj->n_ranks == c->job->n_ranks;
    for (size_t i = 0; nj && same && i < c->n; i++) same = nj->nodes[i].n_ranks == c->job->nodes[i].n_ranks;
    /* the run's files follow the new shape (the writer starts again for its ranks) */
    if (nj && !same && run_files_rebind(c->files, nj, err, sizeof err) != 0) {
        job_event_add(c->job, EV_INFO, -1, -1, "the run's files stopped: %s", err);
        job_free(nj);
        nj = NULL;
    }
    if (nj && !same) {
        for (size_t i = 0; i < c->n; i++)
            if (c->job->nodes[i].state == NODE_READY) job_node_ready(nj, i);
        job_free(c->job);
        c->job = nj;
        free(c->ranks);
        c->ranks = xcalloc(c->job->n_ranks ? c->job->n_ranks : 1, sizeof *c->ranks);
        c->ev_head_seen = c->ev_count_seen = 0;
    } else if (nj) {
        job_free(nj);
    }
    free(gpus);
}

/* Every node is done: the report goes to the front end; `ddptop check` has its exit code. */
static void check_done(struct controller *c)
{
    const struct check_report *r = preflight_report(c->pf);
    if (c->fe.on_check) c->fe.on_check(c->fe.ctx, r);
    if (c->o.check_only) c->check_exit = check_report_exit_code(r);
}

bool ctl_check_step(struct controller *c)
{
    int64_t now = mono_ms();
    ctl_start_queued(c);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        enum transport_state st;
        if (nd->hello || nd->queued || nd->lost || !nd->t) continue;
        st = transport_state(nd->t);
        if (st == TRANSPORT_FAILED || st == TRANSPORT_CLOSED) {
            ctl_check_node_down(c, i, transport_error(nd->t) ? transport_error(nd->t) : "connection closed",
                                transport_hint(nd->t));
        } else if (st == TRANSPORT_READY) {
            if (!nd->hello_deadline_ms) nd->hello_deadline_ms = now + ctl_hello_timeout_ms(c);
            else if (now >= nd->hello_deadline_ms)
                ctl_check_node_down(c, i, "the agent did not greet in time",
                                    "run ddptop-agent by hand on the node to see why");
        }
    }
    preflight_step(c->pf, now);
    if (preflight_take_dirty(c->pf)) {
        if (c->fe.on_check_progress) c->fe.on_check_progress(c->fe.ctx, preflight_report(c->pf));
        if (c->interactive && c->fe.on_check) c->fe.on_check(c->fe.ctx, preflight_report(c->pf));
        c->job->generation++;
    }
    if (!preflight_done(c->pf)) return false;
    check_done(c);
    return true;
}

bool ctl_check_settle(struct controller *c)
{
    const struct check_report *r = preflight_report(c->pf);
    bool refused = false;
    /* ssh, env or tcp failures and a node measured slow refuse the launch; the others only warn */
    for (size_t i = 0; i < r->n; i++) {
        enum check_kind kind;
        if (check_row_refusal(&r->rows[i], &kind)) refused = true;
    }
    remap_by_gpus(c);
    for (size_t i = 0; i < c->n && i < c->job->n_nodes; i++) {   /* NCCL's odd ones out (job/nccl.h) */
        char ifs[256];
        int ib;
        preflight_nccl_expect(c->pf, i, ifs, sizeof ifs, &ib);
        nccl_expect(c->job, i, ifs, ib);
    }
    return refused;
}

void ctl_check_say(struct controller *c, bool refused)
{
    size_t pass, warn, fail;
    check_report_summary(preflight_report(c->pf), &pass, &warn, &fail);
    const char *why = c->o.nodes.bench
        ? ": launch refused (ssh, env or tcp failed, or a node measured slow; --nnodes MIN:MAX lets spares "
          "take their place, --no-check skips the checks)"
        : ": launch refused (ssh, env or tcp failed; --no-check skips the checks)";
    job_event_add(c->job, EV_INFO, -1, -1, "preflight: %zu host%s pass, %zu warn, %zu fail%s", pass,
                  pass == 1 ? "" : "s", warn, fail, refused ? why : "");
}

const struct check_report *controller_check_report(const struct controller *c)
{
    return c->pf ? preflight_report(c->pf) : NULL;
}
