/* The ranks side of ddptop-agent, its core and the one owner of each rank's life: a rank is
 * starting from its keeper's fork (a spawn request's ranks are forked a batch per loop pass,
 * agent_ranks_spawn.c hands back each keeper), started or failed at its keeper's first message
 * or its start time limit, and "spawned" answers the request once every rank of it is one or
 * the other; then ended (its keeper's report), reported ("exit", after "spawned" and after both
 * pipes' end) and freed once its keeper is reaped (a small state machine, tmux's job.c's way).
 * Here too: the once-a-second "status" heartbeat, the timer, and the teardown that leaves no
 * rank behind, with the signals that start it. What the ranks print goes out through
 * agent_ranks_out.c; the request handlers are in agent_ranks_ops.c, the messages about one rank
 * in agent_ranks_msg.c, the link's grace in agent_ranks_link.c (agent_ranks_int.h: the layers). */
#include "agent_ranks.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "agent_outbox.h"
#include "agent_proc.h"
#include "agent_ranks_int.h"
#include "agent_sock.h"
#include "util/util.h"
#include "wire/protocol.h"

#define STATUS_EVERY_MS 1000
/* Forking keepers stops for this pass after this long: the loop (heartbeat, output) goes on. */
#define SPAWN_SLICE_MS 40
/* After a rank's exit status, how long anything it left holding its pipes may keep them open
 * before the agent stops waiting for their end of file. */
#define EOF_WAIT_MS 2000
#define REAP_RETRY_MS 100
/* Teardown (stdin EOF, exit, watchdog, signals): SIGTERM, SIGKILL after the grace, and give up
 * waiting for keepers after the limit: all within 5 s of the trigger. */
#define TEARDOWN_GRACE_MS 1000
#define TEARDOWN_LIMIT_MS 2500

static struct {
    struct agent *ag;
    struct agent_rank *list; /* every rank the agent holds, newest first */
    struct spawn_req *spawns; /* not answered yet, in request order */
    struct agent_watch *timer;
    int heartbeat;
    int64_t next_status_ms;
    int64_t last_status_ms;
    int slurm_term;         /* Slurm sent the step SIGTERM: the ranks have it, Slurm's KillWait rules */
    cJSON *stops;           /* ids of stop requests waiting for every exit */
    int64_t kill_at;        /* SIGKILL every rank still running then; 0 none */
    int quitting;
} ranks;

static void rank_try_finish(struct agent_rank *r);
static void status_ready(struct agent *ag, struct agent_watch *w, short revents);

/* ---- a rank's pipes ---- */

static void stream_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct rank_stream *s = w->ctx;
    char buf[65536];
    (void)ag;
    if (!revents) return;
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
        struct agent_rank *r = s->r;
        ranks_out_close(s);
        rank_try_finish(r);
    } else {
        ranks_out_take(s, buf, (size_t)n);
        if (ranks_out_over()) ranks_out_apply_mode(ranks.list);
    }
    ranks_schedule();
}

/* ---- starting: forked, then started or failed ---- */

/* A new rank, starting: takes over the handle's keeper (its fds become watches) and error
 * file. */
static struct agent_rank *rank_add(int rank, int attempt, const struct rank_handle *h, struct spawn_req *q)
{
    struct agent_rank *r = xcalloc(1, sizeof *r);
    r->rank = rank;
    r->attempt = attempt;
    r->k = h->k;
    r->error_file = h->error_file;
    r->error_file_ours = h->error_file_ours;
    r->spawn_wall_ns = h->spawn_wall_ns;
    r->starting = 1;
    r->spawn = q;
    r->start_deadline_ms = mono_ms() + ranks_start_timeout_ms();
    int fds[2] = { h->k.out_fd, h->k.err_fd };
    for (int i = 0; i < 2; i++) {
        struct rank_stream *s = &r->st[i];
        s->r = r;
        s->name = i ? 'e' : 'o';
        s->fd = fds[i];
        stream_init(&s->buf);
        s->w = agent_watch_add(ranks.ag, ranks_out_mode() == OUT_PAUSE ? -1 : s->fd, POLLIN, stream_ready, s, NULL);
    }
    r->status_w = agent_watch_add(ranks.ag, h->k.status_fd, POLLIN, status_ready, r, NULL);
    r->next = ranks.list;
    ranks.list = r;
    return r;
}

/* Forks the keeper of the request's i-th rank (or refuses the rank). */
static void spawn_fork_one(struct spawn_req *q, int i)
{
    int rank = spawn_req_rank(q, i);
    struct agent_rank *old = rank_find(rank);
    struct rank_handle h;
    if (old) {
        spawn_refuse(q, i, old->k.rank_pid);
        return;
    }
    if (spawn_fork(q, i, &h) < 0) return;
    struct agent_rank *r = q->slot[i].r = rank_add(rank, q->attempt, &h, q);
    for (int k = 0; k < 2; k++) {
        if (h.say[k]) rank_say(r, h.say[k]);
        free(h.say[k]);
    }
    if (q->doomed) rank_signal(r, SIGKILL, 1);
}

/* The rank could not start: why goes out as a line on its stderr and into "spawned"; its exit
 * (after "spawned") has code 127. */
static void rank_start_failed(struct agent_rank *r, const char *why)
{
    r->starting = 0;
    free(r->start_error);
    r->start_error = xstrdup(why);
    r->have_status = 1;
    r->wait_status = 127 << 8; /* exited 127, as a shell reports a command it cannot run */
    r->exit_ns = mono_ns();
    r->by_us = 0;
    /* On the rank's stderr, where the person reading its log looks for why it ended. */
    rank_say_at(r, why, r->exit_ns);
}

/* A starting rank's first keeper message: STARTED, or FAILED (or nonsense). */
static void rank_first_msg(struct agent_rank *r, const struct keeper_msg *m)
{
    char err[512];
    struct spawn_req *q = r->spawn;
    if (m->kind == KEEPER_STARTED) {
        r->starting = 0;
        r->k.rank_pid = m->a;
        oom_follow(&r->cg, r->k.rank_pid);
        /* A stop came while it started: the signal it missed, and the end is ours. */
        if (r->doomed) kill(-r->k.rank_pid, SIGKILL);
        return;
    }
    if (m->kind == KEEPER_FAILED && q)
        keeper_failed_text(q->argv[0], q->workdir, m, err, sizeof err);
    else
        snprintf(err, sizeof err, "its keeper process reported nothing sensible before the rank started");
    rank_start_failed(r, err);
}

int ranks_start_timeout_ms(void)
{
    static int ms;
    if (!ms) {
        const char *t = getenv("DDPTOP_TEST_RANK_START_MS");
        long v = t ? strtol(t, NULL, 10) : 0;
        ms = v > 0 && v <= 3600000 ? (int)v : SPAWN_START_TIMEOUT_MS;
    }
    return ms;
}

static void rank_check_start_timeout(struct agent_rank *r, int64_t now_ms)
{
    char err[512];
    if (!r->starting || now_ms < r->start_deadline_ms) return;
    snprintf(err, sizeof err, "'%s' did not start within %d ms (its keeper was killed)",
             r->spawn ? r->spawn->argv[0] : "?", ranks_start_timeout_ms());
    /* Its rank follows by PDEATHSIG; the keeper is reaped at its status pipe's end. */
    kill(r->k.keeper_pid, SIGKILL);
    rank_start_failed(r, err);
}

/* Answers the request once every rank of it is forked and started or failed, then lets their
 * exits out. */
static void spawn_resolved(struct spawn_req *q)
{
    if (!spawn_req_resolved(q)) return;
    agent_send(ranks.ag, spawn_req_answer(q));
    for (struct spawn_req **pp = &ranks.spawns; *pp; pp = &(*pp)->next_q)
        if (*pp == q) {
            *pp = q->next_q;
            break;
        }
    /* Announcing may free a rank: collect them first. */
    int k = 0;
    struct agent_rank **rs = xcalloc((size_t)q->n + 1, sizeof *rs);
    for (int i = 0; i < q->n; i++)
        if (q->slot[i].r) rs[k++] = q->slot[i].r;
    spawn_req_free(q);
    for (int i = 0; i < k; i++) {
        rs[i]->spawn = NULL;
        rank_try_finish(rs[i]);
    }
    free(rs);
}

/* The next batch of keepers, and the requests now answerable. */
static void spawn_pump(void)
{
    int64_t until = mono_ms() + SPAWN_SLICE_MS;
    for (struct spawn_req *q = ranks.spawns, *next; q; q = next) {
        next = q->next_q;
        while (q->next < q->n && mono_ms() < until) {
            spawn_fork_one(q, q->next);
            q->next++;
        }
        if (q->next < q->n) return;
        spawn_resolved(q); /* may free q */
    }
}

static int64_t spawn_deadline(void)
{
    for (struct spawn_req *q = ranks.spawns; q; q = q->next_q)
        if (q->next < q->n) return mono_ms();
    return 0;
}

void ranks_spawn_begin(struct spawn_req *q)
{
    /* Later requests queue behind earlier ones, so ranks start in request order. */
    struct spawn_req **pp = &ranks.spawns;
    while (*pp) pp = &(*pp)->next_q;
    *pp = q;
    spawn_pump();
    ranks_schedule();
}

/* ---- ended, reported, freed ---- */

static void rank_free(struct agent_rank *r)
{
    for (struct agent_rank **pp = &ranks.list; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    for (int i = 0; i < 2; i++) {
        if (r->st[i].w) {
            r->st[i].w->fd = r->st[i].fd;
            agent_watch_del(ranks.ag, r->st[i].w);
        }
        stream_done(&r->st[i].buf);
    }
    if (r->status_w) agent_watch_del(ranks.ag, r->status_w);
    if (r->error_file && r->error_file_ours) unlink(r->error_file);
    free(r->error_file);
    free(r->start_error);
    free(r);
}

static void check_stopped(void)
{
    if (!ranks.stops || ranks_unfinished()) return;
    cJSON *id;
    cJSON_ArrayForEach(id, ranks.stops)
        agent_send(ranks.ag, agent_reply_new(WIRE_EV_STOPPED, cJSON_IsNull(id) ? NULL : id));
    cJSON_Delete(ranks.stops);
    ranks.stops = NULL;
    ranks.kill_at = 0;
}

static void rank_reap_keeper(struct agent_rank *r)
{
    if (r->keeper_reaped) return;
    pid_t w = waitpid(r->k.keeper_pid, NULL, WNOHANG);
    if (w == r->k.keeper_pid || (w < 0 && errno == ECHILD)) r->keeper_reaped = 1;
}

/* Sends the exit message once both pipes ended and the status is known; frees the rank once its
 * keeper is reaped too. */
static void rank_try_finish(struct agent_rank *r)
{
    if (r->spawn) return; /* its spawn is not answered yet: no exit before "spawned" */
    if (!r->exit_sent && r->have_status && !r->st[0].w && !r->st[1].w) {
        ranks_out_say_dropped(r);
        char *say = NULL;
        char *error_text = ranks_error_file_text(r, &say);
        if (say) rank_say(r, say); /* why the file was ignored, where its log is read */
        free(say);
        struct outbox *ob = agent_outbox(ranks.ag);
        uint64_t seq = outbox_next_seq(ob, r->rank);
        cJSON *msg = ranks_exit_msg(r, error_text);
        free(error_text);
        cJSON_AddNumberToObject(msg, "q", (double)seq);
        char *line = cJSON_PrintUnformatted(msg);
        cJSON_Delete(msg);
        if (!line) util_fatal("out of memory printing an exit message");
        agent_send_durable(ranks.ag, r->rank, seq, line, strlen(line));
        free(line);
        r->exit_sent = 1;
    }
    if (r->exit_sent && r->keeper_reaped) {
        rank_free(r);
        check_stopped();
    } else if (r->exit_sent) {
        check_stopped();
    }
}

/* Whether the rank's end was ours: it died after our first stopping signal (the keeper saw it
 * dead no earlier than we sent it) and not by a signal we never sent (a SIGSEGV of its own
 * that merely raced our stop). */
static int ended_by_us(const struct agent_rank *r)
{
    if (!r->sig_ns) return 0;
    if (r->dead_ns && r->dead_ns < r->sig_ns) return 0;
    if (!r->keeper_died && WIFSIGNALED(r->wait_status)) {
        int s = WTERMSIG(r->wait_status);
        if (s < 1 || s > 63 || !(r->sig_mask & (1ull << s))) return 0;
    }
    return 1;
}

static void rank_take_msg(struct agent_rank *r, const struct keeper_msg *m)
{
    if (r->starting) {
        rank_first_msg(r, m);
        return;
    }
    if (m->kind != KEEPER_EXITED || r->have_status) return;
    r->have_status = 1;
    r->wait_status = m->a;
    r->exit_cpu_s = (double)m->b / 1e6;
    r->dead_ns = m->c;
    r->exit_ns = mono_ns();
    r->by_us = ended_by_us(r);
}

/* Reads what the keeper said; at its end of file the keeper is gone. */
static void rank_read_status(struct agent_rank *r)
{
    struct keeper_msg m;
    int got;
    while (r->status_w && (got = keeper_read_msg(r->status_w->fd, &m)) != 0) {
        if (got > 0) {
            rank_take_msg(r, &m);
            continue;
        }
        agent_watch_del(ranks.ag, r->status_w);
        r->status_w = NULL;
        if (r->starting) {
            rank_start_failed(r, "its keeper process died before the rank started");
        } else if (!r->have_status) {
            r->have_status = 1;
            r->keeper_died = 1;
            r->exit_ns = mono_ns();
            r->by_us = r->sig_ns != 0;
        }
        rank_reap_keeper(r);
    }
}

static void status_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct agent_rank *r = w->ctx;
    struct spawn_req *q = r->spawn;
    (void)ag;
    if (!revents) return;
    rank_read_status(r);
    /* Answering the spawn announces its ranks, r among them (it may be freed then). */
    if (q && !r->starting) spawn_resolved(q);
    else if (!q) rank_try_finish(r);
    ranks_schedule();
}

/* ---- ranks ---- */

struct agent_rank *ranks_all(void)
{
    return ranks.list;
}

struct agent_rank *rank_find(int rank)
{
    /* A rank whose exit went out is gone for the controller, though its keeper may not be
     * reaped yet: a restart's spawn right after "stopped" must not meet it. */
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (r->rank == rank && !r->exit_sent) return r;
    return NULL;
}

int rank_signal(struct agent_rank *r, int sig, int by_us)
{
    if (r->have_status || r->keeper_reaped) return -1;
    int stopping = by_us && sig != SIGCONT;
    if (r->starting) {
        /* Not started yet: it is killed as soon as its keeper reports the exec. */
        if (stopping) {
            r->doomed = 1;
            r->sig_mask |= 1ull << SIGKILL;
            if (!r->sig_ns) r->sig_ns = mono_ns();
        }
        return 0;
    }
    if (stopping && sig > 0 && sig < 64) {
        /* A rank already dead (a zombie its keeper has not reaped yet) did not die of this. */
        struct proc_stat ps;
        int dead = proc_stat_read(r->k.rank_pid, &ps) == 0 && (ps.state == 'Z' || ps.state == 'X');
        if (!dead) {
            r->sig_mask |= 1ull << sig;
            if (!r->sig_ns) r->sig_ns = mono_ns();
        }
    }
    /* A rank that left its group (setsid of its own) is still reached by its pid. */
    if (kill(-r->k.rank_pid, sig) < 0 && errno == ESRCH) return kill(r->k.rank_pid, sig);
    return 0;
}

int ranks_kill_all(int sig)
{
    int n = 0;
    for (struct spawn_req *q = ranks.spawns; q; q = q->next_q) q->doomed = 1;
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        if (r->have_status) continue;
        /* after Slurm's SIGTERM a second one could cut a rank's checkpoint short */
        if (sig == SIGTERM && ranks.slurm_term) {
            n++;
            continue;
        }
        if (sig == SIGTERM) rank_signal(r, SIGCONT, 1); /* a stopped rank cannot act on TERM */
        rank_signal(r, sig, 1);
        n++;
    }
    return n;
}

int ranks_unfinished(void)
{
    /* a rank whose exit went out keeps its slot until its keeper is reaped: "stopped" waits
     * for that too, or a restart's spawn right after it finds the rank "still running" */
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (!r->exit_sent || !r->keeper_reaped) return 1;
    return 0;
}

static int ranks_live(void)
{
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (!r->have_status) return 1;
    return 0;
}

void ranks_stop_wait(const cJSON *id, int64_t kill_at_ms)
{
    if (!ranks.stops) ranks.stops = cJSON_CreateArray();
    cJSON_AddItemToArray(ranks.stops, id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    if (ranks_live() && (!ranks.kill_at || kill_at_ms < ranks.kill_at)) ranks.kill_at = kill_at_ms;
    check_stopped();
    ranks_schedule();
}

void ranks_heartbeat_start(void)
{
    if (ranks.heartbeat) return;
    ranks.heartbeat = 1;
    ranks.next_status_ms = mono_ms() + STATUS_EVERY_MS;
}

/* ---- status, timer ---- */

static void send_status(void);

/* The heartbeat goes with the answer to the controller's ping (in the same write, read in one
 * read there), and the timer's own only when pings stop coming: with 1,024 agents that is a
 * wake-up a second fewer in each, and a read fewer for the controller (issue 32). */
#define STATUS_WITH_PING_MS (STATUS_EVERY_MS * 4 / 5)

void ranks_status_with_ping(void)
{
    int64_t now = mono_ms();
    if (!ranks.heartbeat || ranks.quitting || now - ranks.last_status_ms < STATUS_WITH_PING_MS) return;
    send_status();
    outbox_trim(agent_outbox(ranks.ag));
    ranks.next_status_ms = now + STATUS_EVERY_MS + STATUS_EVERY_MS / 2;
}

static void send_status(void)
{
    int64_t now = mono_ms();
    ranks.last_status_ms = now;
    cJSON *msg = agent_reply_new(WIRE_EV_STATUS, NULL);
    ranks_add_mono_ns(msg, mono_ns());
    cJSON *arr = cJSON_AddArrayToObject(msg, "ranks");
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        if (!r->exit_sent && !r->spawn) cJSON_AddItemToArray(arr, ranks_status_entry(r, now));
        /* a rank that moved itself to another cgroup is followed there */
        if (!r->have_status && !r->starting && r->k.rank_pid > 0) oom_follow(&r->cg, r->k.rank_pid);
    }
    agent_send(ranks.ag, msg);
}

static int64_t eof_wait_until(const struct agent_rank *r)
{
    int64_t t = r->exit_ns / 1000000;
    if (r->last_out_ms > t) t = r->last_out_ms;
    return t + EOF_WAIT_MS;
}

/* Whether a rank's pipe still holds output not read yet: the wait for its end of file is only
 * over once it is empty. The rank's last writes may lie there unread for as long as output was
 * paused (a slow or stopped controller), the rank gone meanwhile: closing the pipe then would
 * lose them silently, neither sent nor counted as dropped. */
static int pipe_holds_output(int fd)
{
    int n = 0;
    return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

#define SOONER(d, t) do { int64_t t_ = (t); if (t_ && (!(d) || t_ < (d))) (d) = t_; } while (0)

void ranks_schedule(void)
{
    if (!ranks.timer) return;
    int64_t now = mono_ms(), d = ranks.heartbeat && !ranks.quitting ? ranks.next_status_ms : 0;
    SOONER(d, ranks.kill_at);
    if (!ranks.quitting) {
        for (struct agent_rank *r = ranks.list; r; r = r->next) {
            for (int i = 0; i < 2; i++) {
                if (!r->st[i].w) continue;
                if (ranks_out_mode() == OUT_READ) SOONER(d, stream_deadline(&r->st[i].buf));
                SOONER(d, r->st[i].rest_until);
                if (r->have_status && ranks_out_mode() != OUT_PAUSE) SOONER(d, eof_wait_until(r));
            }
            if (!r->status_w && !r->keeper_reaped) SOONER(d, now + REAP_RETRY_MS);
            if (r->starting) SOONER(d, r->start_deadline_ms);
        }
        SOONER(d, spawn_deadline());
        SOONER(d, ranks_link_deadline());
        SOONER(d, ranks_out_deadline(now));
    }
    ranks.timer->deadline_ms = d;
}

static void tick_ranks(int64_t now)
{
    for (struct agent_rank *r = ranks.list, *next; r; r = next) {
        next = r->next;
        for (int i = 0; i < 2; i++) {
            struct rank_stream *s = &r->st[i];
            if (!s->w) continue;
            if (s->rest_until && s->rest_until <= now) {
                s->rest_until = 0;
                ranks_out_watch_fd(s);
            }
            /* While output is paused the rest of a waiting line is likely in the pipe already:
             * it is not cut as a partial line for a wait that is ours. */
            int64_t due = ranks_out_mode() != OUT_READ ? 0 : stream_deadline(&s->buf);
            if (due && due <= now) ranks_out_flush(s);
            /* Something the rank left behind (in another group) still holds its pipes. */
            if (r->have_status && ranks_out_mode() != OUT_PAUSE && !s->rest_until && eof_wait_until(r) <= now &&
                !pipe_holds_output(s->fd))
                ranks_out_close(s);
        }
        if (!r->status_w) rank_reap_keeper(r);
        if (r->starting) rank_check_start_timeout(r, now);
        rank_try_finish(r);
    }
}

/* The stop's (or the teardown's) time is up: SIGKILL for every rank still running (their
 * keepers' reports read first, so that one that ended meanwhile is not counted as killed). */
static void kill_when_due(int64_t now)
{
    if (!ranks.kill_at || now < ranks.kill_at) return;
    for (struct agent_rank *r = ranks.list; r; r = r->next) rank_read_status(r);
    ranks_kill_all(SIGKILL);
    ranks.kill_at = 0;
}

static void tick(struct agent *ag, struct agent_watch *w, short revents)
{
    int64_t now = mono_ms();
    (void)w;
    (void)revents;
    (void)ag;
    kill_when_due(now);
    if (ranks.quitting) {
        ranks_schedule();
        return;
    }
    enum out_mode was = ranks_out_mode();
    ranks_out_apply_mode(ranks.list);
    if (was == OUT_PAUSE && ranks_out_mode() != OUT_PAUSE)
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            for (int i = 0; i < 2; i++) stream_rewait(&r->st[i].buf, now);
    tick_ranks(now);
    spawn_pump(); /* the next batch of keepers, and spawns now answerable */
    if (ranks_link_check(now, ranks_live())) return; /* the watchdog or the grace ended the agent */
    if (ranks.heartbeat && now >= ranks.next_status_ms) {
        send_status();
        outbox_trim(agent_outbox(ranks.ag));
        ranks.next_status_ms += STATUS_EVERY_MS;
        if (ranks.next_status_ms <= now) ranks.next_status_ms = now + STATUS_EVERY_MS;
    }
    ranks_schedule();
}

/* ---- start and teardown ---- */

static void on_quit(struct agent *ag, void *ctx)
{
    (void)ag;
    (void)ctx;
    if (ranks.quitting) return;
    ranks.quitting = 1;
    if (ranks_kill_all(SIGTERM)) {
        int64_t grace = mono_ms() + (ranks.slurm_term ? SLURM_TERM_GRACE_MS : TEARDOWN_GRACE_MS);
        if (!ranks.kill_at || grace < ranks.kill_at) ranks.kill_at = grace;
    }
    ranks_schedule();
}

int ranks_quitting(void)
{
    return ranks.quitting;
}

int ranks_slurm_terminated(void)
{
    return ranks.slurm_term;
}

void ranks_slurm_sigterm(void)
{
    ranks.slurm_term = 1;
}

void ranks_init(struct agent *ag)
{
    ranks.ag = ag;
    ranks_out_init(ag);
    ranks_link_init(ag);
    ranks.timer = agent_watch_add(ag, -1, 0, tick, NULL, NULL);
    agent_on_quit(ag, on_quit, NULL);
}

static int all_keepers_reaped(void)
{
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        rank_reap_keeper(r);
        if (!r->keeper_reaped) return 0;
    }
    return 1;
}

void ranks_teardown(struct agent *ag)
{
    on_quit(ag, NULL);
    agent_sock_close(ag); /* no bridge finds this agent any more */
    int64_t give_up = (ranks.kill_at ? ranks.kill_at : mono_ms()) + TEARDOWN_LIMIT_MS;
    while (!all_keepers_reaped()) {
        int64_t now = mono_ms();
        /* Ranks that report their start now are doomed already: they get SIGKILL there. */
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            if (r->starting) rank_read_status(r);
        kill_when_due(now);
        if (now >= give_up) {
            /* A keeper stuck (a rank in D state?): kill it; its rank's PDEATHSIG follows. */
            for (struct agent_rank *r = ranks.list; r; r = r->next) {
                if (r->keeper_reaped) continue;
                kill(r->k.keeper_pid, SIGKILL);
                if (r->k.rank_pid > 0) kill(-r->k.rank_pid, SIGKILL);
                while (waitpid(r->k.keeper_pid, NULL, 0) < 0 && errno == EINTR) {}
                r->keeper_reaped = 1;
            }
            break;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    while (ranks.list) rank_free(ranks.list);
    while (ranks.spawns) {
        struct spawn_req *q = ranks.spawns;
        ranks.spawns = q->next_q;
        spawn_req_free(q);
    }
    spawn_done();
    agent_nodedir_remove(); /* the error files' directory, with what the ranks left there */
    if (ranks.timer) agent_watch_del(ag, ranks.timer);
    ranks.timer = NULL;
    cJSON_Delete(ranks.stops);
    ranks.stops = NULL;
    ranks_out_done();
}
