/* The ranks side of ddptop-agent as the rest of the agent sees it (agent_ranks.h), its top
 * layer: what comes from outside. The run requests (docs/protocol.md, "Run requests" and
 * "Reconnecting"): spawn (checked by agent_ranks_spawn.c, started by agent_ranks.c), signal,
 * stop, stacks (in a child process, answered when it is done), ping and resume; the agent's
 * own signals (a scheduler's warnings, Slurm's SIGTERM, a request to stop); the link's loss
 * and return; and the side's start and end. Each rank's life lives in agent_ranks.c. */
#include "agent_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_child.h"
#include "agent_outbox.h"
#include "agent_ranks_int.h"
#include "agent_stacks.h"
#include "agent_stream.h"
#include "util/evloop.h"
#include "util/util.h"
#include "wire/protocol.h"
#include "wire/signals.h"

#define TERM_TIMEOUT_DEFAULT_MS 10000
#define TERM_TIMEOUT_MAX_MS 3600000L
/* A stack dump runs in a child process of its own, so the loop (heartbeat, rank output) goes on
 * meanwhile; each tool has its time limit (py-spy --native, py-spy when that failed fast, gdb),
 * and the whole dump this long before its child's process group is killed and the answer goes
 * out with what came. */
#define STACKS_DEADLINE_MS \
    (STACKS_TOOL_TIMEOUT_MS / 3 + STACKS_TOOL_TIMEOUT_MS + STACKS_GDB_TIMEOUT_MS + 5000)
#define STACKS_MAX_RUNNING 8
#define STACKS_REAP_RETRY_MS 20
#define STACKS_REAP_LIMIT_MS 2000

/* The ranks a request names ("ranks": [2, 3]; absent: all). Sends the error, returns -1. */
static int req_ranks(struct agent *ag, const cJSON *req, const cJSON *id, const cJSON **list)
{
    const cJSON *e;
    *list = cJSON_GetObjectItemCaseSensitive(req, "ranks");
    if (!*list) return 0;
    if (!cJSON_IsArray(*list)) goto bad;
    cJSON_ArrayForEach(e, *list)
        if (!ranks_is_int_in(e, 0, INT_MAX)) goto bad;
    return 0;
bad:
    agent_send_error(ag, id, "\"ranks\" must be an array of rank numbers");
    return -1;
}

static int listed(const cJSON *list, int rank)
{
    const cJSON *e;
    if (!list) return 1;
    cJSON_ArrayForEach(e, list)
        if (rank_number(e) == rank) return 1;
    return 0;
}

void agent_ranks_signal_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *name = agent_req_str(req, "sig");
    const cJSON *list;
    int sig = name ? signals_parse_request(name) : 0;
    if (!sig) {
        agent_send_error(ag, id, "\"sig\" must be one of CONT, TERM, KILL, INT, HUP, QUIT, USR1, "
                                 "USR2, STOP");
        return;
    }
    if (req_ranks(ag, req, id, &list) < 0) return;
    /* Signals that end a rank make its exit ours (by_us); CONT, USR1 and the like do not. */
    int ending = sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
    cJSON *msg = agent_reply_new(WIRE_EV_SIGNAL, id);
    cJSON_AddBoolToObject(msg, "ok", 1);
    cJSON *done = cJSON_AddArrayToObject(msg, "ranks");
    for (struct agent_rank *r = ranks_all(); r; r = r->next)
        if (listed(list, r->rank) && rank_signal(r, sig, ending) == 0)
            cJSON_AddItemToArray(done, cJSON_CreateNumber(r->rank));
    agent_send(ag, msg);
}

void agent_ranks_stop_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long timeout;
    if (agent_req_int(ag, req, id, "term_timeout_ms", 0, TERM_TIMEOUT_MAX_MS, TERM_TIMEOUT_DEFAULT_MS,
                      &timeout) < 0)
        return;
    ranks_kill_all(SIGTERM); /* not again after Slurm's own SIGTERM: see ranks_kill_all */
    if (ranks_slurm_terminated() && timeout < SLURM_TERM_GRACE_MS) timeout = SLURM_TERM_GRACE_MS;
    ranks_stop_wait(id, mono_ms() + timeout);
}

struct stacks_job {
    pid_t child;
    int reaped, answered;
    int rank;
    pid_t rank_pid;
    cJSON *id;
    struct strbuf got;      /* "TOOL\n" then the raw text, as the child wrote it */
    int64_t deadline_ms;    /* the answer goes out then at the latest */
    int64_t reap_limit_ms;  /* after the answer: SIGKILL the child's group if not reaped by then */
};

static int stacks_running;

static void stacks_job_free(void *ctx)
{
    struct stacks_job *j = ctx;
    if (!j->reaped) {
        /* Teardown, or a child that would not go: no dump helper outlives the agent. */
        kill(-j->child, SIGKILL);
        while (waitpid(j->child, NULL, 0) < 0 && errno == EINTR) {}
    }
    if (!j->answered) stacks_running--;
    cJSON_Delete(j->id);
    strbuf_done(&j->got);
    free(j);
}

/* The child: its own process group (so the deadline kills the tools it runs too), dies with
 * the agent, holds none of the agent's fds but the pipe, then collects and writes the dump. */
static void stacks_child(pid_t agent, pid_t rank_pid, int fd)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != agent) _exit(0);
    if (fd != 3) {
        dup2(fd, 3);
        fd = 3;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC); /* the tools must not hold it: its end of file is the answer */
    util_close_range(4, ~0U);
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
        if (nul > 3) close(nul);
    }
    agent_child_signals();
    struct strbuf text;
    strbuf_init(&text);
    const char *tool = stacks_collect(rank_pid, NULL, &text);
    struct strbuf all;
    strbuf_init(&all);
    strbuf_addf(&all, "%s\n", tool);
    strbuf_add(&all, text.buf ? text.buf : "", text.len);
    for (size_t off = 0; off < all.len; ) {
        ssize_t n = write(fd, all.buf + off, all.len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += (size_t)n;
    }
    _exit(0);
}

static void stacks_answer(struct agent *ag, struct stacks_job *j, int timed_out)
{
    char *text = j->got.buf ? j->got.buf : "";
    char *nl = memchr(text, '\n', j->got.len);
    j->answered = 1;
    stacks_running--;
    if (!nl && timed_out) {
        agent_send_error(ag, j->id, "the stack dump of rank %d did not finish within %d ms (its "
                         "tools were killed); try again, or look at the rank's /proc", j->rank,
                         STACKS_DEADLINE_MS);
        return;
    }
    if (!nl) {
        agent_send_error(ag, j->id, "the stack dump of rank %d failed (its helper process "
                         "ended without output)", j->rank);
        return;
    }
    *nl = '\0';
    struct strbuf clean;
    strbuf_init(&clean);
    stream_sanitize(&clean, nl + 1, j->got.len - (size_t)(nl + 1 - text));
    cJSON *msg = agent_reply_new(WIRE_EV_STACKS, j->id);
    cJSON_AddNumberToObject(msg, "rank", j->rank);
    cJSON_AddNumberToObject(msg, "pid", j->rank_pid);
    cJSON_AddStringToObject(msg, "tool", text);
    cJSON_AddStringToObject(msg, "text", clean.buf ? clean.buf : "");
    agent_send(ag, msg);
    strbuf_done(&clean);
}

static void stacks_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct stacks_job *j = w->ctx;
    int64_t now = mono_ms();
    if (!j->answered) {
        if (revents) {
            char buf[65536];
            ssize_t n = read(w->fd, buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n > 0) {
                if (j->got.len < STACKS_TEXT_MAX + 4096) strbuf_add(&j->got, buf, (size_t)n);
                return;
            }
            stacks_answer(ag, j, 0);
        } else if (now >= j->deadline_ms) {
            kill(-j->child, SIGKILL);
            stacks_answer(ag, j, 1);
        } else {
            return;
        }
        close(w->fd);
        w->fd = -1;
        j->reap_limit_ms = now + STACKS_REAP_LIMIT_MS;
    }
    pid_t p = waitpid(j->child, NULL, WNOHANG);
    if (p == j->child || (p < 0 && errno == ECHILD)) {
        j->reaped = 1;
        agent_watch_del(ag, w);
        return;
    }
    if (now >= j->reap_limit_ms) {
        agent_watch_del(ag, w); /* stacks_job_free kills and reaps it */
        return;
    }
    w->deadline_ms = now + STACKS_REAP_RETRY_MS;
}

void agent_ranks_stacks_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(req, "rank");
    int fds[2];
    if (!ranks_is_int_in(rk, 0, INT_MAX)) {
        agent_send_error(ag, id, "\"rank\" must be a rank number");
        return;
    }
    struct agent_rank *r = rank_find(rank_number(rk));
    if (!r || r->have_status || r->starting) {
        agent_send_error(ag, id, "rank %d is not running on this node", rank_number(rk));
        return;
    }
    if (stacks_running >= STACKS_MAX_RUNNING) {
        agent_send_error(ag, id, "%d stack dumps are running on this node already; try again when "
                         "one has answered", stacks_running);
        return;
    }
    if (pipe2(fds, O_CLOEXEC) < 0) {
        agent_send_error(ag, id, "cannot dump the stacks of rank %d: pipe: %s", r->rank, strerror(errno));
        return;
    }
    /* The agent's signal handlers must never run in the child (they write the agent's pipe). */
    sigset_t old;
    agent_child_block(&old);
    pid_t agent = getpid();
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        stacks_child(agent, r->k.rank_pid, fds[1]);
    }
    int fork_errno = errno;
    agent_child_unblock(&old);
    close(fds[1]);
    if (child < 0) {
        close(fds[0]);
        agent_send_error(ag, id, "cannot dump the stacks of rank %d: fork: %s", r->rank, strerror(fork_errno));
        return;
    }
    setpgid(child, child); /* also here, whichever side runs first */
    fd_set_nonblock(fds[0]);
    struct stacks_job *j = xcalloc(1, sizeof *j);
    j->child = child;
    j->rank = r->rank;
    j->rank_pid = r->k.rank_pid;
    j->id = id ? cJSON_Duplicate(id, 1) : NULL;
    strbuf_init(&j->got);
    j->deadline_ms = mono_ms() + STACKS_DEADLINE_MS;
    stacks_running++;
    struct agent_watch *w = agent_watch_add(ag, fds[0], POLLIN, stacks_ready, j, stacks_job_free);
    w->deadline_ms = j->deadline_ms;
}

void agent_ranks_ping_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    ranks_link_ack(req);
    ranks_heartbeat_start();
    agent_send(ag, agent_reply_new(WIRE_EV_PONG, id));
    ranks_status_with_ping();
    ranks_schedule();
}

void agent_ranks_spawn_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    ranks_heartbeat_start();
    struct spawn_req *q = spawn_req_parse(ag, req, id);
    if (!q) return;
    if (ranks_link_config(req, id) < 0) {
        spawn_req_free(q);
        return;
    }
    ranks_spawn_begin(q);
}

static uint64_t from_of(void *ctx, int rank)
{
    char key[24];
    snprintf(key, sizeof key, "%d", rank);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ctx, key);
    long long seq;
    return json_int_in(v, 1, JSON_EXACT_MAX, &seq) ? (uint64_t)seq : 0;
}

/* {"op":"resume","from":{"RANK":seq}}: the controller of this link has each rank's durable
 * messages up to seq; everything later goes again, then the answer. */
void agent_ranks_resume_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(req, "from");
    size_t n = 0, bytes = 0;
    if (from && !cJSON_IsObject(from)) {
        agent_send_error(ag, id, "\"from\" must be an object of rank: seq");
        return;
    }
    if (!outbox_held(agent_outbox(ag))) {
        /* what this link was sent is known to its controller already */
        agent_send_error(ag, id, "resume comes once, after the hello of a new link");
        return;
    }
    outbox_resume(agent_outbox(ag), from_of, (void *)from, &n, &bytes);
    cJSON *m = agent_reply_new(WIRE_EV_RESUME, id);
    cJSON_AddNumberToObject(m, "messages", (double)n);
    cJSON_AddNumberToObject(m, "bytes", (double)bytes);
    agent_send(ag, m);
    ranks_heartbeat_start();
    ranks_schedule();
}

/* ---- the link ---- */

/* The link ended: with a grace the agent goes on without one, unless it holds nothing a
 * controller could want (no rank alive, every message acknowledged). */
static int link_lost(struct agent *ag, void *ctx)
{
    (void)ag;
    (void)ctx;
    if (!ranks_link_away(ranks_unfinished())) return 0;
    ranks_schedule();
    return 1;
}

/* A bridge handed over a new link: say who we are and what we hold; the controller answers
 * with a resume that says what it has. */
static void relinked(struct agent *ag, void *ctx)
{
    (void)ctx;
    cJSON *m = agent_hello_new();
    cJSON_AddBoolToObject(m, "resumed", 1);
    ranks_link_hello(m);
    cJSON *arr = cJSON_AddArrayToObject(m, "ranks");
    for (struct agent_rank *r = ranks_all(); r; r = r->next)
        if (!r->exit_sent) cJSON_AddItemToArray(arr, ranks_hello_entry(r));
    agent_send_urgent(ag, m);
    ranks_schedule();
}

/* ---- the agent's signals ---- */

static int slurm_step;      /* a task of a Slurm step (--relay): Slurm signals the ranks itself */

void agent_ranks_set_slurm_step(int on)
{
    slurm_step = on;
}

/* SIGUSR1/SIGUSR2: a scheduler's warning (Slurm's --signal, a preemption notice). Under Slurm
 * every process of the agents' step got it, the ranks included; elsewhere the agent passes it
 * on. Either way the controller hears of it. */
static void warning_signal(struct agent *ag, int sig)
{
    const char *name = ranks_signal_name(sig);
    int n = 0;
    if (!slurm_step)
        for (struct agent_rank *r = ranks_all(); r; r = r->next)
            if (rank_signal(r, sig, 0) == 0) n++;
    cJSON *m = agent_reply_new(WIRE_EV_NOTICE, NULL);
    cJSON_AddStringToObject(m, "signal", name ? name : "?");
    if (slurm_step)
        cJSON_AddStringToObject(m, "text", "Slurm signalled the agents' step: every rank of the node got it from Slurm");
    else
        cJSON_AddNumberToObject(m, "passed_to", n);
    agent_send(ag, m);
}

/* From the agent's event loop (the handler only wrote the number to its self-pipe). A quitting
 * agent no longer answers signals: it is stopping every rank already. */
static void on_signal(struct evloop *el, int b, void *ctx)
{
    struct agent *ag = ctx;
    (void)el;
    if (ranks_quitting()) return;
    if (b == SIGUSR1 || b == SIGUSR2) {
        warning_signal(ag, b);
        return;
    }
    const char *name = ranks_signal_name(b);
    if (slurm_step && b == SIGTERM) {
        /* scancel, a time limit, preemption: Slurm sent SIGTERM to every process of the step,
         * the ranks too, and SIGKILLs them after its KillWait. Until then the agent goes on
         * serving them (their output, their exits): they may be saving a checkpoint. It does
         * not signal them again; the controller hears why the job ends. */
        if (!ranks_slurm_terminated()) {
            cJSON *m = agent_reply_new(WIRE_EV_NOTICE, NULL);
            cJSON_AddStringToObject(m, "signal", "SIGTERM");
            cJSON_AddStringToObject(m, "text", "Slurm sent SIGTERM to the agents' step (scancel, the job's "
                                    "time limit or a preemption)");
            agent_send(ag, m);
        }
        ranks_slurm_sigterm();
        return;
    }
    agent_send_error(ag, NULL, "the agent got %s; stopping every rank and exiting", name ? name : "a signal");
    agent_quit(ag, 128 + b);
}

/* ---- start and end ---- */

void agent_ranks_init(struct agent *ag)
{
    ranks_init(ag);
    agent_on_link(ag, link_lost, relinked, NULL);
    /* SIGUSR1 and SIGUSR2 last: until they are caught, agent_main ignores them */
    static const int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGUSR2 };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) evloop_signal(agent_evloop(ag), sigs[i], on_signal, ag);
}

void agent_ranks_done(struct agent *ag)
{
    ranks_teardown(ag);
    /* in a Slurm step a time limit's second SIGTERM must not kill the agent before its last
     * line (its exit status) went out */
    signal(SIGTERM, slurm_step ? SIG_IGN : SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGUSR1, SIG_IGN); /* a late warning must not kill the agent while it exits */
    signal(SIGUSR2, SIG_IGN);
}
