/* The controller's life, its top layer (controller_int.h): controller_new (options -> rank map,
 * job model, command), the loop (util/evloop.h: the signals, the front end's input, the agents'
 * fds) and its timers, handing the front end its events and frames, and the final cleanup. One
 * pass of the loop: poll; each node's lines through the message table (controller_agent.c);
 * the timers; the progress step (controller.c), the one place that decides; the events and the
 * frame. The actions a front end or a signal asks for are controller_act.c's. */
#include "controller_int.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts/slurm_job.h"
#include "job/nccl.h"
#include "job/root_cause.h"
#include "record/logw.h"
#include "record/run_record.h"
#include "wire/protocol.h"
#include "util/evloop.h"
#include "util/util.h"

extern char **environ;

/* ---- the front end ------------------------------------------------------------------------ */

/* Hands the events added since the last call to the front end, oldest first. Works on the
 * model's ring without a total counter: growth of count plus movement of head. */
static void events_flush(struct controller *c)
{
    struct job *j = c->job;
    size_t added = (j->ev_count - c->ev_count_seen) + (j->ev_head + j->ev_cap - c->ev_head_seen) % j->ev_cap;
    if (added > j->ev_count) added = j->ev_count;
    for (size_t i = j->ev_count - added; i < j->ev_count; i++) {
        if (c->fe.on_event) c->fe.on_event(c->fe.ctx, j, job_event_at(j, i));
        notify_event(c->notify, j, job_event_at(j, i));
    }
    c->ev_head_seen = j->ev_head;
    c->ev_count_seen = j->ev_count;
}

/* ---- construction ------------------------------------------------------------------------- */

void run_opts_init(struct run_opts *o)
{
    memset(o, 0, sizeof *o);
    node_opts_init(&o->nodes);
    o->log_dir = JOB_LOG_ROOT_DEFAULT;
    o->hang_timeout_s = 300;
    o->on_hang = HANG_ACTION_STACKS;
    o->gpu_interval_ms = 1000;
    o->term_timeout_s = 10;
    o->agent_grace_s = 600;
    o->node_timeout_s = 30;
    o->agent_spool_mb = 256;
    o->straggler_steps = 3;
    /* a NaN loss is the end of the run's usefulness: every step after it is lost (docs/run.md) */
    o->on_nan = HEALTH_STOP;
    o->on_spike = HEALTH_NONE;
    o->loss_spike_window = HEALTH_SPIKE_WINDOW;
    notify_opts_init(&o->notify);
}

void run_opts_done(struct run_opts *o)
{
    node_opts_done(&o->nodes);
    free(o->export_regex);
    notify_opts_done(&o->notify);
    memset(o, 0, sizeof *o);
}


/* A program we ship, next to our own executable (build/ddptop -> build/ddptop-train) or
 * installed in ../libexec/ddptop/; its bare name, found on PATH, when our own path cannot be
 * read. */
static char *exe_sibling(const char *name)
{
    char *p = util_exe_program(name);
    return p ? p : xstrdup(name);
}

struct controller *controller_new(const struct run_opts *o, const struct hostlist *hl,
                                  const struct frontend *fe, char *err, size_t errlen)
{
    struct controller *c = xcalloc(1, sizeof *c);
    char *run_id = NULL;
    c->o = *o;
    c->hl = hl;
    if (fe) c->fe = *fe;
    c->el = evloop_new();
    c->record_state = -1;
    ctl_start_snapshot(c); /* before anything below changes the environment */
    assert(o->nodes.transport.kind); /* chosen by the command line (node_opts_hosts) */
    c->n = hl ? hl->n : 1; /* no hosts: this machine */
    if (c->n == 0) {
        snprintf(err, errlen, "no hosts to run on: give a HOSTFILE with at least one host, or none for this machine");
        goto fail;
    }
    if (o->nnodes_max > 0 && (!hl || (size_t)o->nnodes_max > c->n)) {
        snprintf(err, errlen, "--nnodes %d:%d wants %d node%s, the hosts give %zu%s", o->nnodes_min, o->nnodes_max,
                 o->nnodes_max, o->nnodes_max == 1 ? "" : "s", hl ? c->n : 0,
                 hl ? "; give more hosts or a smaller --nnodes" : " (no HOSTFILE: this machine only)");
        goto fail;
    }
    if (o->run_id && !util_run_id_ok(o->run_id)) {
        snprintf(err, errlen, "--run-id '%s': use 1 to 64 letters, digits, '.', '_' or '-'", o->run_id);
        goto fail;
    }
    if (!o->run_id) {
        char tok[33];
        unsigned rnd = (unsigned)getpid();
        if (plan_token(tok) == 0) sscanf(tok, "%4x", &rnd);
        run_id = plan_run_id(wall_ns(), rnd);
        c->o.run_id = run_id;
    }
    if (plan_token(c->token) < 0) {
        snprintf(err, errlen, "cannot read /dev/urandom for the job token");
        goto fail;
    }
    /* `ddptop check` writes nothing: its job lives in memory only */
    c->log_root = o->check_only ? NULL : util_abs_path(o->log_dir && *o->log_dir ? o->log_dir : JOB_LOG_ROOT_DEFAULT);
    if (o->adopt && (!o->run_id || ctl_adopt_read(c, err, errlen) < 0)) {
        if (!o->run_id) snprintf(err, errlen, "--adopt needs --run-id (it is given by ddptop attach)");
        goto fail;
    }
    c->workdir = util_abs_path(o->workdir && *o->workdir ? o->workdir : ".");
    c->agent_path = o->nodes.ssh.agent_local ? xstrdup(o->nodes.ssh.agent_local) : exe_sibling("ddptop-agent");
    c->train_path = exe_sibling("ddptop-train");
    hosts_source_forget_allocation(); /* not for srun or the ranks */
    if (plan_exports(o->export_regex, o->n_export, environ, &c->exports, err, errlen) < 0) goto fail;
    struct transport_env tenv = ctl_transport_env(c, NULL);
    const char *const *job_vars = transport_kind_rank_vars(&tenv); /* what the kind's step changed */
    for (int i = 0; job_vars && job_vars[i]; i++)
        if (getenv(job_vars[i]) && !env_list_get(&c->exports, job_vars[i]))
            env_list_set(&c->exports, job_vars[i], getenv(job_vars[i]));
    c->metrics = metrics_parser_new(o->loss_regex, err, errlen);
    if (!c->metrics) goto fail;
    /* The tests' own (never set it elsewhere): the launch's spawns spread over at least
     * nodes / N passes, as 1,024 nodes' spawns are on a slow machine (ctl_spawn_more). */
    const char *spn = getenv("DDPTOP_TEST_SPAWN_PASS_NODES");
    c->spawn_pass_nodes = spn ? strtoul(spn, NULL, 10) : 0;
    hang_opts_init(&c->hang);
    c->hang.hang_timeout_s = o->hang_timeout_s;
    c->hang.straggler_steps = o->straggler_steps;
    if (o->nodes.n_cmd) {
        c->user_argv = xcalloc(o->nodes.n_cmd + 1, sizeof *c->user_argv);
        for (size_t k = 0; k < o->nodes.n_cmd; k++) c->user_argv[k] = o->nodes.cmd[k];
    }
    c->job = ctl_make_job(c, NULL, err, errlen);
    if (!c->job) goto fail;
    ctl_spare_init(c);
    if (ctl_metrics_open(c, err, errlen) < 0) goto fail;
    if (c->job->log_dir) {
        c->files = run_files_open(c->job, err, errlen);
        if (!c->files) goto fail;
        run_files_set_mode(c->files, c->o.log_mode ? c->o.log_mode : LOG_MODE_DEFAULT);
    }
    ctl_metrics_announce(c);
    c->o.run_id = NULL; /* the job holds it now */
    free(run_id);
    c->nodes = xcalloc(c->n, sizeof *c->nodes);
    for (size_t i = 0; i < c->n; i++) c->nodes[i].gpu_count = -1;
    c->ranks = xcalloc(c->job->n_ranks ? c->job->n_ranks : 1, sizeof *c->ranks);
    c->interactive = c->fe.input_fd && c->fe.input_fd(c->fe.ctx) >= 0;
    if (!o->check_only) c->notify = notify_new(&o->notify);
    return c;
fail:
    c->o.run_id = NULL;
    free(run_id);
    controller_free(c);
    return NULL;
}

void controller_free(struct controller *c)
{
    if (!c) return;
    ctl_stacks_free(c);
    ctl_metrics_close(c);   /* on the loop: before it goes */
    notify_free(c->notify);
    for (size_t i = 0; c->nodes && i < c->n; i++) {
        ctl_exits_release(c, i, false);
        transport_free(c->nodes[i].t);
        wire_client_done(&c->nodes[i].cl);
        free(c->nodes[i].trace_prefix);
    }
    run_files_close(c->files); /* after the last event above, before the job goes */
    if (c->job) job_free(c->job);
    preflight_free(c->pf);
    metrics_parser_free(c->metrics);
    env_list_free(&c->exports);
    ctl_signals_restore(c);
    evloop_free(c->el);
    free(c->rev);
    for (size_t i = 0; i < c->n_start_env; i++) free(c->start_env[i]);
    free(c->start_env);
    free(c->start_cwd);
    if (c->adopt) run_record_free(c->adopt);
    free(c->adopt);
    free(c->nodes);
    free(c->ranks);
    free(c->unesc);
    strbuf_done(&c->line_in);
    free(c->user_argv);
    free(c->log_root);
    free(c->workdir);
    free(c->agent_path);
    free(c->train_path);
    /* after the agents' step ended (transport_free above): the allocation --salloc made */
    if (c->o.nodes.slurm_release && !c->allocation_released && !c->abandon) slurm_job_cancel(c->o.nodes.slurm_jobid);
    free(c);
}

const struct job *controller_job(const struct controller *c)
{
    return c->job;
}

static void draw(struct controller *c)
{
    if (c->fe.on_tick) {
        int ms = c->fe.on_tick(c->fe.ctx, c->job);
        c->fe_due_ms = ms >= 0 ? mono_ms() + ms : 0;
    }
    c->drawn_generation = c->job->generation;
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* In a flood the agents hold what they sent until the log writer's sync puts it on disk and
 * the acknowledgement comes back: with a sync a second, each held a second or two of output,
 * all of it in memory touched for the first time (the kernel zeroing fresh pages: half of
 * the agent's time in the log bench, issue 22). While the nodes send at least this much
 * between two syncs, the next sync is asked as soon as the last one is done, but not within
 * FLOOD_SYNC_MS of it (with 32 ranks or more a sync is a syncfs of the log directory's file
 * system, which others may share); a trickle (1,024 nodes x 8 ranks at a metrics line a second:
 * under 1 MB a second) keeps the one a second. */
#define FLOOD_SYNC_BYTES (4u << 20)
#define FLOOD_SYNC_MS 200

static void logs_sync(struct controller *c)
{
    c->in_since_sync = 0;
    c->sync_ms = mono_ms();
    c->sync_gen = logw_durable_gen(run_files_writer(c->files));
    run_files_flush(c->files);
}

static void timers(struct controller *c)
{
    int64_t now = mono_ms();
    if (c->in_since_sync >= FLOOD_SYNC_BYTES && now - c->sync_ms >= FLOOD_SYNC_MS &&
        logw_durable_gen(run_files_writer(c->files)) != c->sync_gen)
        logs_sync(c);
    /* the log writer's sync just moved the durable marks: the ping (with its acknowledgements)
     * goes now rather than up to a second later, and the agents let that output go sooner (in
     * a flood they hold about a second of it less, memory each fills afresh) */
    uint64_t gen = logw_durable_gen(run_files_writer(c->files));
    if (gen != c->durable_gen) c->next_ping_ms = now;
    if (now >= c->next_ping_ms) {
        struct strbuf ping;
        c->durable_gen = gen;
        c->next_ping_ms = now + PING_EVERY_MS;
        strbuf_init(&ping);
        for (size_t i = 0; i < c->n; i++) {
            struct cnode *nd = &c->nodes[i];
            if (!ctl_node_usable(nd)) continue; /* controller_link.c watches the silence */
            strbuf_reset(&ping);
            strbuf_addf(&ping, "{\"op\":\"%s\",\"id\":%d", WIRE_OP_PING, wire_client_begin(&nd->cl, WIRE_TAG_PING));
            ctl_link_ack(c, i, &ping); /* what the log index holds: the agent lets it go */
            strbuf_adds(&ping, "}");
            ctl_send_line(c, i, ping.buf);
        }
        strbuf_done(&ping);
    }
    if (now >= c->next_link_ms) {
        c->next_link_ms = now + LINK_CHECK_MS;
        ctl_link_check(c, now);
        transport_reap_orphans();
    }
    if (now >= c->next_tick_ms) {
        c->next_tick_ms = now + TICK_EVERY_MS;
        if (job_is_running(c->job) || job_is_stopping(c->job)) {
            /* stalls and stragglers */
            if ((hang_check(c->job, &c->hang, now) & HANG_STALL) && job_is_running(c->job)) ctl_hang_stalled(c);
        }
        root_cause_tick(c->job, now); /* a failure's class, once the others' lines are in */
        nccl_tick(c->job, now);   /* NCCL's odd ones out, once enough ranks said their part */
        logs_sync(c);
    }
}

/* How long the next poll() may sleep: until the first of the controller's deadlines. They are
 * merged here each pass, not set as the event loop's timers (evloop_timer_add), because the
 * timers above must run after the pass has read the nodes' lines (a node whose message is
 * already waiting is not silent, a ping follows the acknowledgements those lines allow), and
 * a timer's callback runs inside the poll turn, before them; most of these deadlines also
 * move with every pass (the nodes' greetings, a stop's, the transports', the front end's). */
static int loop_timeout(struct controller *c, bool any_node)
{
    int64_t now = mono_ms(), wake = now + (any_node ? transport_kind_idle_ms(c->o.nodes.transport.kind) : 1000);
    if ((c->more_lines && !c->writer_full) || c->spawns_due) return 0;
    if (c->starts_pending && (c->job->state == JOB_CHECKING || c->job->state == JOB_LAUNCHING)) return 0;
    if (c->writer_full && now + 50 < wake) wake = now + 50; /* watch the writer's queue go down */
    if (c->next_ping_ms < wake) wake = c->next_ping_ms;
    if ((job_is_running(c->job) || job_is_stopping(c->job)) && c->next_link_ms < wake) wake = c->next_link_ms;
    if (c->next_tick_ms < wake) wake = c->next_tick_ms;
    if (job_is_stopping(c->job) && c->stop_deadline_ms < wake) wake = c->stop_deadline_ms;
    if (c->job->state == JOB_CHECKING) {
        int64_t d = ctl_check_deadline_ms(c);
        if (d && d < wake) wake = d;
    }
    if (c->fe_due_ms && c->fe_due_ms < wake) wake = c->fe_due_ms;
    int64_t nd = notify_next_ms(c->notify);
    if (nd && nd < wake) wake = nd;
    for (size_t i = 0; i < c->n; i++) {
        int64_t d = c->nodes[i].t ? transport_deadline_ms(c->nodes[i].t) : 0;
        if (d && d < wake) wake = d;
        if (c->nodes[i].hello_deadline_ms && !c->nodes[i].hello && c->nodes[i].hello_deadline_ms < wake)
            wake = c->nodes[i].hello_deadline_ms;
        if (c->nodes[i].hold_until_ms && c->nodes[i].hold_until_ms < wake) wake = c->nodes[i].hold_until_ms;
    }
    return wake > now ? (int)(wake - now) : 0;
}

static bool loop_done(const struct controller *c)
{
    return c->abandon ||
           (c->quit && (job_is_ended(c->job) || c->job->state == JOB_CHECK_FAILED || c->job->state == JOB_CHECKING));
}

/* Right after poll(), before anything it woke us for (util/evloop.h's wake hook). */
static void on_wake(struct evloop *el, const struct evloop_wake *wk, void *ctx)
{
    struct controller *c = ctx;
    (void)el;
    /* Slept far past what was asked (SIGSTOP, Ctrl-Z, a machine starved of CPU): that silence
     * of the nodes was ours. The same for a pass that took that long. */
    /* the pass: from the last wake to this poll, so that a stop anywhere in it counts (from its
     * end it missed a SIGSTOP that came while the pass ran) */
    int64_t after = wk->woke_ms, overslept = after - wk->polled_ms - wk->timeout_ms,
            pass = wk->polled_ms - c->last_woke_ms;
    bool stalled = overslept > LOOP_GAP_MS || (c->last_woke_ms && pass > LOOP_GAP_MS);
    c->last_woke_ms = after;
    if (overslept > LOOP_GAP_MS) ctl_link_stalled(c, after - wk->polled_ms);
    else if (stalled) ctl_link_stalled(c, pass);
    /* The log writer's queue is long (a log directory that stalls): the agents' lines wait in
     * their transports, which stop reading, and the agents spool; we hear again below LOW. */
    size_t backlog = logw_backlog(run_files_writer(c->files));
    if (!c->writer_full && backlog > WRITER_HIGH) {
        c->writer_full = true;
        job_event_add(c->job, EV_INFO, -1, -1, "the log directory is slow: %zu MiB wait to be written; reading "
                      "the nodes waits, and ranks that print a lot wait on their output meanwhile", backlog >> 20);
    } else if (c->writer_full && backlog < WRITER_LOW) {
        c->writer_full = false;
    }
    /* the nodes' silence and a stop's or a greeting's slowness are then ours */
    if (c->writer_full && c->last_pass_ms && !stalled) ctl_link_hold(c, after - c->last_pass_ms);
}

static void on_input(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct controller *c = ctx;
    (void)el;
    (void)w;
    (void)revents;
    if (c->fe.on_input) c->fe.on_input(c->fe.ctx, c);
}

/* A node's fd: its revents are gathered (ctx is its slot of c->rev), the transport stepped
 * once per pass with all of them. */
static void on_node(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    (void)el;
    (void)w;
    *(short *)ctx |= revents;
}

/* The loop's watches made what this pass polls: the front end's input, and each node's
 * transport's fds, or none while the agents' messages gather (quiet). The pollfd array is
 * rebuilt only when an fd changes; events and pauses are written in place. True when a node's
 * transport is on the loop: then it sleeps at most its kind's idle_ms (libssh may hold bytes
 * that poll() cannot see). */
static bool watches_sync(struct controller *c, bool quiet)
{
    int in_fd = c->fe.input_fd ? c->fe.input_fd(c->fe.ctx) : -1;
    bool any_node = false;
    c->in_w = evloop_watch_update(c->el, c->in_w, in_fd, POLLIN, on_input, c);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        struct pollfd p[TRANSPORT_POLLFDS_MAX];
        int k = 0;
        if (nd->t && !nd->queued) {
            any_node = true;
            if (!quiet) k = transport_pollfds(nd->t, p, TRANSPORT_POLLFDS_MAX);
        }
        for (int m = 0; m < TRANSPORT_POLLFDS_MAX; m++)
            nd->ew[m] = evloop_watch_update(c->el, nd->ew[m], m < k ? p[m].fd : -1, m < k ? p[m].events : 0,
                                            on_node, &c->rev[i]);
    }
    return any_node;
}

/* While agents stream (10,240 lines/s from 1,024 ranks), waking for every few lines costs
 * more than the lines themselves (poll, recv and a context switch each time): after a wake-up
 * that brought agent messages, the agents' descriptors stay out of the poll set for this long,
 * and the next read takes what piled up meanwhile. Keys and signals still wake at once. */
#define COALESCE_MS 20
/* ... and longer with many nodes, where a pass costs a poll() of every node's descriptors and
 * a walk over every node whatever it brings: 1 ms per 16 nodes (64 ms at 1,024), at most
 * COALESCE_MAX_MS, so that lines still reach the dashboard within its frame (at most 10 a
 * second, tui/dashboard.c) and the headless printer well inside its fold window (500 ms).
 * At 1,024 nodes x 8 ranks the loop's poll() calls went from 105 to 69 a second (issue 32). */
#define COALESCE_NODES_PER_MS 16
#define COALESCE_MAX_MS 80
/* A node that sent this much in one pass is streaming output, not trickling metrics. */
#define STREAMING_BYTES 16384
/* Below this much from all nodes in the last 250-500 ms, waking per message costs nothing
 * worth saving, and a spell would only delay lines: the ranks' first lines after a launch
 * came in 20 ms steps (issue 22). 64 ranks with 10 metrics lines a second (the CPU bench,
 * performance.md) are above it, as are 1,024 nodes x 8 ranks at a line a second. */
#define COALESCE_MIN_BYTES 8192
#define RATE_WINDOW_MS 250

/* A key waits for the end of the pass it came in, and in the flood of 8,192 first lines on a
 * starved machine a pass over 1,024 nodes took up to a second (issue 32). So a pass that has
 * read the nodes for PASS_NODES_MS looks at the front end's input every PASS_CHECK_NODES
 * nodes, and ends there when a key waits: the next pass answers it first and goes on from the
 * node where this one stopped. Only then: every pass costs a walk over all the nodes (their
 * watches, deadlines), so passes cut short for nothing would cost more than they save. */
#define PASS_NODES_MS 25
#define PASS_CHECK_NODES 32

static bool key_waits(struct controller *c)
{
    struct pollfd p = { .fd = c->fe.input_fd ? c->fe.input_fd(c->fe.ctx) : -1, .events = POLLIN };
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* Counts what a pass read; true when the nodes send enough for a spell to pay. */
static bool nodes_busy(struct controller *c, uint64_t got)
{
    int64_t now = mono_ms();
    if (now - c->in_win_ms >= RATE_WINDOW_MS) {
        c->in_prev_bytes = now - c->in_win_ms < 2 * RATE_WINDOW_MS ? c->in_win_bytes : 0;
        c->in_win_bytes = 0;
        c->in_win_ms = now;
    }
    c->in_win_bytes += got;
    return c->in_win_bytes + c->in_prev_bytes >= COALESCE_MIN_BYTES;
}

static int64_t spell_ms(const struct controller *c)
{
    size_t ms = c->n / COALESCE_NODES_PER_MS;
    return ms < COALESCE_MS ? COALESCE_MS : ms > COALESCE_MAX_MS ? COALESCE_MAX_MS : (int64_t)ms;
}

static void loop_once(struct controller *c, int64_t *quiet_until_ms)
{
    int64_t now = mono_ms();
    bool quiet = !c->more_lines && *quiet_until_ms > now;
    bool any_node = watches_sync(c, quiet);
    int timeout = loop_timeout(c, any_node);
    uint64_t gen;
    if (quiet && timeout > *quiet_until_ms - now) timeout = (int)(*quiet_until_ms - now);
    /* bytes a transport read already and no fd shows (transport_pending): no sleep */
    for (size_t i = 0; timeout && !quiet && !c->writer_full && i < c->n; i++)
        if (c->nodes[i].t && !c->nodes[i].queued && transport_pending(c->nodes[i].t)) timeout = 0;
    /* the wake hook, the signals, the input, then the nodes' revents into c->rev */
    if (evloop_run_once(c->el, timeout) < 0) return;
    /* After a quiet spell the next pass polls the agents first: pumping a connection without
     * its revents would read only what libssh already buffered, and the SSH window would let
     * a node send just a trickle per spell. */
    if (!quiet) {
        bool streaming = false;
        uint64_t got = 0;
        int64_t pass_ms = mono_ms();
        size_t k;
        gen = c->job->generation;
        c->more_lines = false;
        for (k = 0; k < c->n; k++) {
            size_t i = (c->pump_from + k) % c->n;
            struct cnode *nd = &c->nodes[i];
            uint64_t before;
            if ((k + 1) % PASS_CHECK_NODES == 0 && mono_ms() - pass_ms >= PASS_NODES_MS && key_waits(c)) {
                c->more_lines = true; /* the rest next pass: their revents come again */
                break;
            }
            if (!nd->t || nd->queued) continue;
            before = transport_bytes_in(nd->t);
            transport_pump(nd->t, c->rev[i]);
            got += transport_bytes_in(nd->t) - before;
            c->in_since_sync += transport_bytes_in(nd->t) - before;
            if (transport_bytes_in(nd->t) - before >= STREAMING_BYTES) streaming = true;
            if (!c->writer_full) ctl_agent_lines(c, i);
        }
        c->pump_from = c->n ? (c->pump_from + k) % c->n : 0;
        /* messages came: let the next ones gather (the model's generation moves on every one),
         * unless a node is streaming: its SSH window would then cap it at a window a spell.
         * Not while the preflight or the launch go on: those are request/answer round trips, and
         * a spell after each answer cost the preflight 20 ms a round trip (issue 22); nor
         * while the nodes send little (nodes_busy) */
        bool handshaking = c->job->state == JOB_CHECKING || c->job->state == JOB_LAUNCHING;
        bool busy = nodes_busy(c, got);
        *quiet_until_ms = c->job->generation != gen && !streaming && !handshaking && busy ? mono_ms() + spell_ms(c) : 0;
    }
    memset(c->rev, 0, (c->n ? c->n : 1) * sizeof *c->rev);
    timers(c);
    ctl_progress(c);       /* the one place that decides (controller.c) */
    notify_tick(c->notify, c->job); /* before the events: a command's failure is one */
    events_flush(c);
    logw_kick(run_files_writer(c->files)); /* the rank bytes this pass queued, to the writer now */
    if (c->job->generation != c->drawn_generation || (c->fe_due_ms && mono_ms() >= c->fe_due_ms)) draw(c);
    c->last_pass_ms = mono_ms();
}

int controller_run(struct controller *c)
{
    int64_t quiet_until_ms = 0;
    int rc;
    if (!c->rev) c->rev = xcalloc(c->n ? c->n : 1, sizeof *c->rev);
    if (ctl_signals_install(c) < 0) {
        job_event_add(c->job, EV_INFO, -1, -1, "cannot create the signal pipe: %s", strerror(errno));
        events_flush(c);
    }
    evloop_on_wake(c->el, on_wake, c);
    c->next_ping_ms = c->next_tick_ms = mono_ms();
    if (c->o.adopt) {
        ctl_adopt_begin(c);
    } else if (c->job->state == JOB_CHECKING) {
        if (c->o.check_only || (c->hl && !c->o.no_check)) ctl_check_begin(c); /* no hosts: no preflight */
        else ctl_launch_begin(c);
    }
    while (!loop_done(c)) loop_once(c, &quiet_until_ms);
    /* a refused preflight ends here, when the user quits (or at once, headless) */
    if (c->job->state == JOB_CHECK_FAILED) ctl_record_end(c);
    /* ranks were stopped (or the job ended) before we got here: the agents exit; unless the
     * run is left to them (abandon), when they wait for ddptop attach */
    ctl_release_all(c, c->abandon);
    /* the end's notifications (and any still running) get at most --notify-timeout */
    events_flush(c);
    notify_drain(c->notify, c->job);
    run_files_flush(c->files);
    /* the final screen and line say whether the record on disk is whole */
    run_files_settle(c->files, 5000);
    events_flush(c);
    draw(c);
    ctl_signals_restore(c);
    rc = plan_exit_code(c->job->state);
    if (c->o.check_only) rc = c->pf && preflight_done(c->pf) ? c->check_exit : 130;
    return rc;
}
