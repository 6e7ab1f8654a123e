/* Transports to a node's agent (transport.h): a thin veneer over ssh_conn for hosts, and a
 * local child on two pipes for the embedded default (no hostfile). The local agent runs in
 * its own process group so a Ctrl-C at the terminal reaches only ddptop, which then stops the
 * ranks in order; if ddptop dies instead, the agent sees end of file on its stdin and kills
 * its ranks (docs/protocol.md). */
#include "transport.h"

#include <stdarg.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/protocol.h"
#include "util/util.h"

enum transport_kind { T_SSH, T_CHILD, T_SRUN };

struct transport {
    enum transport_kind kind;
    struct ssh_conn *ssh;
    struct srun_step *srun;      /* T_SRUN: the step and this node's member of it */
    size_t member;

    /* child */
    char **argv;                 /* what is executed; argv[0] is looked up in PATH */
    char *address;               /* the node's address for its peers (NULL: 127.0.0.1) */
    char *launcher;              /* "pbs_tmrsh" and the like, for messages; NULL: local */
    char *stderr_path;
    pid_t pid;
    bool reaped;
    int status;
    int to_fd, from_fd;          /* its stdin (we write), its stdout (we read) */
    enum transport_state state;
    struct strbuf in, out;
    size_t in_off;               /* lines before this offset were handed out */
    uint64_t bytes_in;           /* agent output received, in all */
    char *err;
    int64_t eof_ms;              /* when its output ended (0: not yet) */
    bool detached;               /* freed without ending the far side */
    bool abandoned;              /* freed ending the far side at once, without waiting */
};

/* Children let go of without being reaped (a detached agent lives on; an abandoned bridge
 * was killed): reaped later, so none stays a zombie. */
static pid_t *orphans;
static size_t n_orphans, cap_orphans;

static void orphan_add(pid_t pid)
{
    if (n_orphans == cap_orphans) {
        cap_orphans = cap_orphans ? cap_orphans * 2 : 16;
        orphans = xrealloc(orphans, cap_orphans * sizeof *orphans);
    }
    orphans[n_orphans++] = pid;
}

void transport_reap_orphans(void)
{
    for (size_t i = 0; i < n_orphans;) {
        pid_t w = waitpid(orphans[i], NULL, WNOHANG);
        if (w == orphans[i] || (w < 0 && errno == ECHILD)) orphans[i] = orphans[--n_orphans];
        else i++;
    }
}

/* How long an agent that closed its output may take to exit before it is reported closed
 * without its exit status. */
#define LOCAL_REAP_WAIT_MS 500

struct transport *transport_ssh_new(const struct host *h, const struct ssh_conn_opts *o)
{
    struct transport *t = xcalloc(1, sizeof *t);
    t->ssh = ssh_conn_new(h, o);
    t->to_fd = t->from_fd = -1;
    return t;
}

struct transport *transport_ssh_attach_new(const struct host *h, const struct ssh_conn_opts *o)
{
    struct transport *t = transport_ssh_new(h, o);
    ssh_conn_set_attach(t->ssh);
    return t;
}

struct transport *transport_child_new(const char *const *argv, const char *address, const char *stderr_path)
{
    struct transport *t = xcalloc(1, sizeof *t);
    size_t n = 0;
    t->kind = T_CHILD;
    while (argv[n]) n++;
    t->argv = xcalloc(n + 1, sizeof *t->argv);
    for (size_t i = 0; i < n; i++) t->argv[i] = xstrdup(argv[i]);
    t->address = address ? xstrdup(address) : NULL;
    t->launcher = n > 1 ? xstrdup(argv[0]) : NULL;
    t->stderr_path = stderr_path ? xstrdup(stderr_path) : NULL;
    t->to_fd = t->from_fd = -1;
    t->state = TRANSPORT_CONNECTING;
    return t;
}

struct transport *transport_local_new(const char *agent_path, const char *stderr_path)
{
    const char *argv[] = {agent_path, NULL};
    return transport_child_new(argv, NULL, stderr_path);
}

struct transport *transport_srun_new(struct srun_step *s, size_t member)
{
    struct transport *t = xcalloc(1, sizeof *t);
    t->kind = T_SRUN;
    t->srun = s;
    t->member = member;
    t->to_fd = t->from_fd = -1;
    return t;
}

static void local_fail(struct transport *t, enum transport_state st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void local_fail(struct transport *t, enum transport_state st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(t->err);
    t->err = xvasprintf(fmt, ap);
    va_end(ap);
    t->state = st;
    if (t->to_fd >= 0) close(t->to_fd);
    t->to_fd = -1;
}

static void local_reap(struct transport *t)
{
    if (t->pid > 0 && !t->reaped && waitpid(t->pid, &t->status, WNOHANG) == t->pid) t->reaped = true;
}

static void child_exec(struct transport *t, int in_rd, int out_wr)
{
    sigset_t none;
    int efd = open(t->stderr_path ? t->stderr_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    /* A session of its own: a Ctrl-C or the hang-up of ddptop's terminal reaches ddptop only,
     * which stops the ranks in order, and an agent that holds ranks outlives a ddptop that was
     * killed (its grace). */
    setsid();
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(in_rd, 0) < 0 || dup2(out_wr, 1) < 0) _exit(127);
    if (efd >= 0) dup2(efd, 2);
    close_range(3, ~0U, 0);
    execvp(t->argv[0], t->argv);
    dprintf(2, "ddptop: cannot execute %s: %s\n", t->argv[0], strerror(errno));
    _exit(127);
}

static void local_start(struct transport *t)
{
    int in[2], out[2];
    if (!t->launcher && access(t->argv[0], X_OK) != 0) {
        local_fail(t, TRANSPORT_FAILED, "cannot execute %s: %s (build it: make)", t->argv[0], strerror(errno));
        return;
    }
    if (pipe2(in, O_CLOEXEC) < 0) {
        local_fail(t, TRANSPORT_FAILED, "pipe: %s", strerror(errno));
        return;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        local_fail(t, TRANSPORT_FAILED, "pipe: %s", strerror(errno));
        return;
    }
    t->pid = fork();
    if (t->pid == 0) child_exec(t, in[0], out[1]);
    close(in[0]);
    close(out[1]);
    if (t->pid < 0) {
        close(in[1]);
        close(out[0]);
        local_fail(t, TRANSPORT_FAILED, "fork: %s", strerror(errno));
        return;
    }
    /* no setpgid here: done before the child's setsid, it would make that fail */
    t->to_fd = in[1];
    t->from_fd = out[0];
    fd_set_nonblock(t->to_fd);
    fd_set_nonblock(t->from_fd);
    t->state = TRANSPORT_READY;
}

void transport_start(struct transport *t)
{
    if (t->kind == T_SRUN) srun_step_start(t->srun);
    else if (t->kind == T_CHILD) local_start(t);
    else ssh_conn_start(t->ssh);
}

int transport_pollfds(struct transport *t, struct pollfd *p, int max)
{
    int n = 0;
    if (t->kind == T_SRUN) return srun_step_pollfds(t->srun, t->member, p, max);
    if (t->kind != T_CHILD) return max > 0 && ssh_conn_pollfd(t->ssh, p) ? 1 : 0;
    if (t->from_fd >= 0 && n < max && t->in.len - t->in_off < PROTOCOL_BACKLOG_MAX)
        p[n++] = (struct pollfd){.fd = t->from_fd, .events = POLLIN};
    if (t->to_fd >= 0 && t->out.len && n < max) p[n++] = (struct pollfd){.fd = t->to_fd, .events = POLLOUT};
    return n;
}

static void local_flush(struct transport *t)
{
    while (t->to_fd >= 0 && t->out.len) {
        ssize_t w = write(t->to_fd, t->out.buf, t->out.len);
        if (w > 0) {
            strbuf_consume(&t->out, (size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN) {
                /* the agent is gone; its output (and its exit status) tells the rest */
                close(t->to_fd);
                t->to_fd = -1;
                strbuf_reset(&t->out);
            }
            return;
        }
    }
}

static void local_read(struct transport *t)
{
    char buf[65536];
    for (int rounds = 0; t->from_fd >= 0 && rounds < 64; rounds++) {
        if (t->in.len - t->in_off >= PROTOCOL_BACKLOG_MAX) return; /* back-pressure: see protocol.h */
        ssize_t r = read(t->from_fd, buf, sizeof buf);
        if (r > 0) {
            strbuf_add(&t->in, buf, (size_t)r);
            t->bytes_in += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return;
        close(t->from_fd);
        t->from_fd = -1;
    }
}

static void local_closed(struct transport *t)
{
    char why[160];
    local_reap(t);
    const char *who = t->launcher ? "the agent" : "the local agent";
    if (!t->reaped) snprintf(why, sizeof why, "%s closed its output", who);
    else if (WIFSIGNALED(t->status))
        snprintf(why, sizeof why, "%s was killed by signal %d (%s)", who, WTERMSIG(t->status),
                 strsignal(WTERMSIG(t->status)));
    else if (t->launcher && WEXITSTATUS(t->status) == 127)
        snprintf(why, sizeof why, "%s could not start the agent (exit status 127): see %s", t->launcher,
                 t->stderr_path ? t->stderr_path : "its messages");
    else snprintf(why, sizeof why, "%s exited with status %d", who, WEXITSTATUS(t->status));
    local_fail(t, TRANSPORT_CLOSED, "%s", why);
}

void transport_step(struct transport *t, short revents)
{
    (void)revents;
    if (t->kind == T_SRUN) {
        srun_step_pump(t->srun);
        return;
    }
    if (t->kind != T_CHILD) {
        ssh_conn_step(t->ssh, revents);
        return;
    }
    if (t->state != TRANSPORT_READY) {
        local_reap(t);
        return;
    }
    local_flush(t);
    local_read(t);
    /* the agent exited: report it once its last lines were taken, with its exit status (it
     * closes its output a moment before the kernel lets us reap it) */
    if (t->from_fd < 0 && t->in_off >= t->in.len) {
        local_reap(t);
        if (!t->eof_ms) t->eof_ms = mono_ms();
        if (t->reaped || mono_ms() - t->eof_ms >= LOCAL_REAP_WAIT_MS) local_closed(t);
    }
}

int64_t transport_deadline_ms(const struct transport *t)
{
    if (t->kind == T_CHILD && t->state == TRANSPORT_READY && t->eof_ms) return t->eof_ms + LOCAL_REAP_WAIT_MS;
    return t->kind != T_SSH ? 0 : ssh_conn_deadline_ms(t->ssh);
}

enum transport_state transport_state(const struct transport *t)
{
    if (t->kind == T_SRUN) {
        switch (srun_step_state(t->srun, t->member)) {
        case SRUN_MEMBER_WAITING: return TRANSPORT_CONNECTING;
        case SRUN_MEMBER_RUNNING: return TRANSPORT_READY;
        case SRUN_MEMBER_CLOSED: return TRANSPORT_CLOSED;
        default: return TRANSPORT_FAILED;
        }
    }
    if (t->kind == T_CHILD) return t->state;
    switch (ssh_conn_state(t->ssh)) {
    case SSH_CONN_READY: return TRANSPORT_READY;
    case SSH_CONN_CLOSED: return TRANSPORT_CLOSED;
    case SSH_CONN_FAILED: return TRANSPORT_FAILED;
    default: return TRANSPORT_CONNECTING;
    }
}

bool transport_connecting(const struct transport *t)
{
    if (t->kind == T_SRUN) return srun_step_state(t->srun, t->member) == SRUN_MEMBER_WAITING;
    return t->kind == T_CHILD ? t->state == TRANSPORT_CONNECTING : ssh_conn_connecting(t->ssh);
}

bool transport_reached(const struct transport *t)
{
    return t->kind != T_SSH || ssh_conn_reached(t->ssh);
}

const char *transport_error(const struct transport *t)
{
    if (t->kind == T_SRUN) return srun_step_error(t->srun, t->member);
    return t->kind == T_CHILD ? t->err : ssh_conn_error(t->ssh);
}

const char *transport_user(const struct transport *t)
{
    const char *u = getenv("USER");
    return t->kind != T_SSH ? (u && *u ? u : "?") : ssh_conn_user(t->ssh);
}

int transport_port(const struct transport *t)
{
    return t->kind != T_SSH ? 0 : ssh_conn_port(t->ssh);
}

bool transport_uploaded(const struct transport *t)
{
    return t->kind == T_SSH && ssh_conn_uploaded(t->ssh);
}

const char *transport_upload_method(const struct transport *t)
{
    return t->kind != T_SSH ? NULL : ssh_conn_upload_method(t->ssh);
}

int64_t transport_login_ms(const struct transport *t)
{
    return t->kind != T_SSH ? -1 : ssh_conn_login_ms(t->ssh);
}

const char *transport_hint(const struct transport *t)
{
    if (t->kind == T_SRUN) return srun_step_hint(t->srun, t->member);
    if (t->kind == T_CHILD && t->launcher && t->state == TRANSPORT_CLOSED && t->reaped && WIFEXITED(t->status) &&
        WEXITSTATUS(t->status) == 127)
        return "the agent must be at the same path on every node (a shared file system): docs/slurm.md \"PBS\"";
    return t->kind == T_CHILD ? NULL : ssh_conn_hint(t->ssh);
}

const char *transport_address(const struct transport *t)
{
    const char *a = t->kind == T_SRUN ? srun_step_address(t->srun, t->member)
                    : t->kind == T_CHILD        ? t->address
                                      : ssh_conn_address(t->ssh);
    return a ? a : "127.0.0.1";
}

void transport_send_line(struct transport *t, const char *line)
{
    if (t->kind == T_SRUN) {
        srun_step_send(t->srun, t->member, line);
        return;
    }
    if (t->kind != T_CHILD) {
        ssh_conn_send_line(t->ssh, line);
        return;
    }
    if (t->to_fd < 0) return;
    strbuf_adds(&t->out, line);
    strbuf_add(&t->out, "\n", 1);
    local_flush(t);
}

uint64_t transport_bytes_in(const struct transport *t)
{
    if (t->kind == T_SRUN) return srun_step_bytes_in(t->srun, t->member);
    return t->kind == T_CHILD ? t->bytes_in : ssh_conn_bytes_in(t->ssh);
}

char *transport_next_line(struct transport *t)
{
    char *line;
    if (t->kind == T_SRUN) return srun_step_next_line(t->srun, t->member);
    if (t->kind != T_CHILD) return ssh_conn_next_line(t->ssh);
    line = strbuf_take_line(&t->in, &t->in_off);
    if (!line && t->in.len - t->in_off > (size_t)PROTOCOL_MAX_LINE + 1024) {
        /* an agent bug; without a bound this would grow forever */
        t->in_off = t->in.len;
        local_fail(t, TRANSPORT_CLOSED, "the local agent sent a line longer than %d bytes", PROTOCOL_MAX_LINE);
    }
    return line;
}

void transport_close(struct transport *t)
{
    if (t->kind == T_SRUN) {
        srun_step_close(t->srun, t->member);
        return;
    }
    if (t->kind != T_CHILD) {
        ssh_conn_close(t->ssh);
        return;
    }
    if (t->to_fd >= 0) {
        local_flush(t); /* a last request (exit) goes out if the pipe takes it */
        close(t->to_fd);
        t->to_fd = -1;
    }
    if (t->from_fd >= 0) close(t->from_fd);
    t->from_fd = -1;
    if (t->state == TRANSPORT_READY || t->state == TRANSPORT_CONNECTING) {
        free(t->err);
        t->err = xstrdup("closed by ddptop");
        t->state = TRANSPORT_CLOSED;
    }
}

void transport_detach(struct transport *t)
{
    t->detached = true;
}

void transport_abandon(struct transport *t)
{
    t->abandoned = true;
}

void transport_free(struct transport *t)
{
    if (!t) return;
    if (t->kind == T_CHILD && (t->detached || t->abandoned)) {
        /* detached: the agent (or a bridge holding its link) waits on; our ends of its pipes
         * go, the process stays. abandoned: a bridge that got nowhere is killed. Neither is
         * waited for here: the loop must not block. */
        if (t->to_fd >= 0) close(t->to_fd);
        if (t->from_fd >= 0) close(t->from_fd);
        t->to_fd = t->from_fd = -1;
        if (t->abandoned && t->pid > 0 && !t->reaped) kill(-t->pid, SIGKILL);
        local_reap(t);
        if (t->pid > 0 && !t->reaped) orphan_add(t->pid);
    } else if (t->kind == T_CHILD) {
        transport_close(t);
        /* The agent stops its ranks on end of file, then exits; give it that long. */
        for (int i = 0; i < 300 && t->pid > 0 && !t->reaped; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            local_reap(t);
            if (!t->reaped) nanosleep(&ts, NULL);
        }
        if (t->pid > 0 && !t->reaped) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &t->status, 0);
        }
    } else if (t->kind == T_SRUN) {
        if (t->detached) srun_step_detach(t->srun, t->member);
        if (t->abandoned) srun_step_abandon(t->srun);
        srun_step_release(t->srun, t->member);
    } else {
        ssh_conn_free(t->ssh);
    }
    strbuf_done(&t->in);
    strbuf_done(&t->out);
    for (size_t i = 0; t->argv && t->argv[i]; i++) free(t->argv[i]);
    free(t->argv);
    free(t->address);
    free(t->launcher);
    free(t->stderr_path);
    free(t->err);
    free(t);
}
