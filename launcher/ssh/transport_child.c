/* A transport over a child process (transport_int.h's ops): a process on two pipes that is
 * the agent (the local kind: no hosts) or starts it on a node (`pbs_tmrsh NODE AGENT`: tm).
 * The agent runs in a session of its own so a Ctrl-C at the terminal reaches only ddptop,
 * which then stops the ranks in order; if ddptop dies instead, the agent sees end of file on
 * its stdin and kills its ranks (docs/protocol.md). Its output is read into a buffer of at
 * most PROTOCOL_BACKLOG_MAX unread bytes (back-pressure: wire/protocol.h) and handed out as
 * whole lines of at most PROTOCOL_MAX_LINE. */
#include "transport_int.h"

#include <stdarg.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/line_reader.h"
#include "wire/protocol.h"
#include "util/util.h"

struct child_transport {
    struct transport base;
    char **argv;                 /* what is executed; argv[0] is looked up in PATH */
    char *address;               /* the node's address for its peers (NULL: 127.0.0.1) */
    char *launcher;              /* "pbs_tmrsh" and the like, for messages; NULL: local */
    char *stderr_path;
    pid_t pid;
    bool reaped;
    int status;
    int to_fd, from_fd;          /* its stdin (we write), its stdout (we read) */
    enum transport_state state;
    struct line_reader in;       /* its stdout (wire/line_reader.h) */
    struct strbuf out;
    uint64_t bytes_in;           /* agent output received, in all */
    char *err;
    int64_t eof_ms;              /* when its output ended (0: not yet) */
};

static const struct transport_ops child_ops;

static struct child_transport *child_of(struct transport *t)
{
    return (struct child_transport *)t;
}

static const struct child_transport *child_of_c(const struct transport *t)
{
    return (const struct child_transport *)t;
}

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

void transport_child_orphan(pid_t pid)
{
    orphan_add(pid);
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

struct transport *transport_child_new(const char *const *argv, const char *address, const char *stderr_path)
{
    struct child_transport *c = xcalloc(1, sizeof *c);
    size_t n = 0;
    c->base.ops = &child_ops;
    while (argv[n]) n++;
    c->argv = xcalloc(n + 1, sizeof *c->argv);
    for (size_t i = 0; i < n; i++) c->argv[i] = xstrdup(argv[i]);
    c->address = address ? xstrdup(address) : NULL;
    c->launcher = n > 1 ? xstrdup(argv[0]) : NULL;
    c->stderr_path = stderr_path ? xstrdup(stderr_path) : NULL;
    c->to_fd = c->from_fd = -1;
    c->state = TRANSPORT_CONNECTING;
    line_reader_init(&c->in, PROTOCOL_MAX_LINE);
    return &c->base;
}

static void local_fail(struct child_transport *c, enum transport_state st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void local_fail(struct child_transport *c, enum transport_state st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(c->err);
    c->err = xvasprintf(fmt, ap);
    va_end(ap);
    c->state = st;
    if (c->to_fd >= 0) close(c->to_fd);
    c->to_fd = -1;
}

static void local_reap(struct child_transport *c)
{
    if (c->pid > 0 && !c->reaped && waitpid(c->pid, &c->status, WNOHANG) == c->pid) c->reaped = true;
}

/* The child between vfork and exec: it shares the controller's memory, and the controller's
 * thread waits until it execs or exits, so it only makes system calls (no malloc, no stdio
 * buffers) and never returns. */
static void child_exec(char *const *argv, const char *stderr_path, int in_rd, int out_wr)
{
    sigset_t none;
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    int efd = open(stderr_path ? stderr_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    /* A session of its own: a Ctrl-C or the hang-up of ddptop's terminal reaches ddptop only,
     * which stops the ranks in order, and an agent that holds ranks outlives a ddptop that was
     * killed (its grace). */
    setsid();
    /* Our handlers would run here on the controller's memory (its signal pipe): the default
     * before the signals the parent blocked come through. */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)
            sigaction(sig, &dfl, NULL);
    }
    sigaction(SIGPIPE, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(in_rd, 0) < 0 || dup2(out_wr, 1) < 0) _exit(127);
    if (efd >= 0) dup2(efd, 2);
    util_close_range(3, ~0U);
    execvp(argv[0], argv);
    char msg[512];
    int n = snprintf(msg, sizeof msg, "ddptop: cannot execute %s: %s\n", argv[0], strerror(errno));
    if (n > 0) (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(127);
}

pid_t transport_child_spawn(char *const *argv, const char *stderr_path, int *to_fd, int *from_fd, char **err)
{
    int in[2], out[2], e;
    pid_t pid;
    sigset_t all, was;
    if (pipe2(in, O_CLOEXEC) < 0) {
        *err = xasprintf("pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        *err = xasprintf("pipe: %s", strerror(errno));
        return -1;
    }
    /* vfork, not fork: a fork copies the page tables of the whole controller (hundreds of MiB
     * at 1,024 nodes), which took 20% of its time while nodes were started again (issue 32);
     * every signal blocked until the child has put its handlers back to the default */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    pid = vfork();
    if (pid == 0) child_exec(argv, stderr_path, in[0], out[1]);
    e = errno;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        close(in[1]);
        close(out[0]);
        *err = xasprintf("fork: %s", strerror(e));
        return -1;
    }
    /* no setpgid here: done before the child's setsid, it would make that fail */
    *to_fd = in[1];
    *from_fd = out[0];
    fd_set_nonblock(*to_fd);
    fd_set_nonblock(*from_fd);
    return pid;
}

static void child_start(struct transport *t)
{
    struct child_transport *c = child_of(t);
    char *err = NULL;
    if (!c->launcher && access(c->argv[0], X_OK) != 0) {
        local_fail(c, TRANSPORT_FAILED, "cannot execute %s: %s (build it: make)", c->argv[0], strerror(errno));
        return;
    }
    c->pid = transport_child_spawn(c->argv, c->stderr_path, &c->to_fd, &c->from_fd, &err);
    if (c->pid < 0) {
        local_fail(c, TRANSPORT_FAILED, "%s", err);
        free(err);
        return;
    }
    c->state = TRANSPORT_READY;
}

static int child_pollfds(struct transport *t, struct pollfd *p, int max)
{
    struct child_transport *c = child_of(t);
    int n = 0;
    if (c->from_fd >= 0 && n < max && line_reader_pending(&c->in) < PROTOCOL_BACKLOG_MAX)
        p[n++] = (struct pollfd){.fd = c->from_fd, .events = POLLIN};
    if (c->to_fd >= 0 && c->out.len && n < max) p[n++] = (struct pollfd){.fd = c->to_fd, .events = POLLOUT};
    return n;
}

static void local_flush(struct child_transport *c)
{
    while (c->to_fd >= 0 && c->out.len) {
        ssize_t w = write(c->to_fd, c->out.buf, c->out.len);
        if (w > 0) {
            strbuf_consume(&c->out, (size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN) {
                /* the agent is gone; its output (and its exit status) tells the rest */
                close(c->to_fd);
                c->to_fd = -1;
                strbuf_reset(&c->out);
            }
            return;
        }
    }
}

static void local_read(struct child_transport *c)
{
    const size_t chunk = 65536;
    for (int rounds = 0; c->from_fd >= 0 && rounds < 64; rounds++) {
        if (line_reader_pending(&c->in) >= PROTOCOL_BACKLOG_MAX) return; /* back-pressure: see protocol.h */
        ssize_t r = read(c->from_fd, line_reader_space(&c->in, chunk), chunk);
        if (r > 0) {
            line_reader_wrote(&c->in, (size_t)r);
            c->bytes_in += (uint64_t)r;
            /* Less than asked: the pipe was empty, and the read after it would only say EAGAIN
             * (with the longer spells, the loop's reads at 1,024 nodes x 8 ranks went from
             * 8,000 to 2,800 a second, issue 32); poll() tells of the next bytes or the end. */
            if ((size_t)r < chunk) return;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return;
        close(c->from_fd);
        c->from_fd = -1;
    }
}

static void local_closed(struct child_transport *c)
{
    char why[160];
    local_reap(c);
    const char *who = c->launcher ? "the agent" : "the local agent";
    if (!c->reaped) snprintf(why, sizeof why, "%s closed its output", who);
    else if (WIFSIGNALED(c->status))
        snprintf(why, sizeof why, "%s was killed by signal %d (%s)", who, WTERMSIG(c->status),
                 strsignal(WTERMSIG(c->status)));
    else if (c->launcher && WEXITSTATUS(c->status) == 127)
        snprintf(why, sizeof why, "%s could not start the agent (exit status 127): see %s", c->launcher,
                 c->stderr_path ? c->stderr_path : "its messages");
    else snprintf(why, sizeof why, "%s exited with status %d", who, WEXITSTATUS(c->status));
    local_fail(c, TRANSPORT_CLOSED, "%s", why);
}

static void child_pump(struct transport *t, short revents)
{
    struct child_transport *c = child_of(t);
    if (c->state != TRANSPORT_READY) {
        local_reap(c);
        return;
    }
    local_flush(c);
    /* Read only when poll() said so: the loop pumps every node each pass, and 1,024 reads
     * answered EAGAIN each pass (50,000 a second in a trickle of metrics lines) were a good
     * part of the controller's time at 1,024 nodes (issue 32). A pipe left unread (the
     * backlog's bound, the rounds below) is polled again and says so again. */
    if (revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) local_read(c);
    /* the agent exited: report it once its last lines were taken, with its exit status (it
     * closes its output a moment before the kernel lets us reap it) */
    if (c->from_fd < 0 && !line_reader_pending(&c->in)) {
        local_reap(c);
        if (!c->eof_ms) c->eof_ms = mono_ms();
        if (c->reaped || mono_ms() - c->eof_ms >= LOCAL_REAP_WAIT_MS) local_closed(c);
    }
}

static int64_t child_deadline_ms(const struct transport *t)
{
    const struct child_transport *c = child_of_c(t);
    return c->state == TRANSPORT_READY && c->eof_ms ? c->eof_ms + LOCAL_REAP_WAIT_MS : 0;
}

static enum transport_state child_state(const struct transport *t)
{
    return child_of_c(t)->state;
}

static bool child_connecting(const struct transport *t)
{
    return child_of_c(t)->state == TRANSPORT_CONNECTING;
}

static const char *child_error(const struct transport *t)
{
    return child_of_c(t)->err;
}

static const char *child_hint(const struct transport *t)
{
    const struct child_transport *c = child_of_c(t);
    if (c->launcher && c->state == TRANSPORT_CLOSED && c->reaped && WIFEXITED(c->status) &&
        WEXITSTATUS(c->status) == 127)
        return "the agent must be at the same path on every node (a shared file system): docs/slurm.md \"PBS\"";
    return NULL;
}

static const char *child_address(const struct transport *t)
{
    return child_of_c(t)->address;
}

static void child_send_line(struct transport *t, const char *line)
{
    struct child_transport *c = child_of(t);
    if (c->to_fd < 0) return;
    strbuf_adds(&c->out, line);
    strbuf_add(&c->out, "\n", 1);
    local_flush(c);
}

static uint64_t child_bytes_in(const struct transport *t)
{
    return child_of_c(t)->bytes_in;
}

/* No whole line: an agent bug when what waits is longer than any line may be; without a
 * bound this would grow forever. */
static void child_check_long(struct child_transport *c)
{
    if (line_reader_overlong(&c->in)) {
        line_reader_reset(&c->in);
        local_fail(c, TRANSPORT_CLOSED, "the local agent sent a line longer than %d bytes", PROTOCOL_MAX_LINE);
    }
}

static char *child_next_line(struct transport *t)
{
    struct child_transport *c = child_of(t);
    char *line = line_reader_take(&c->in);
    if (!line) child_check_long(c);
    return line;
}

static bool child_next_line_into(struct transport *t, struct strbuf *out)
{
    struct child_transport *c = child_of(t);
    if (line_reader_next_into(&c->in, out)) return true;
    child_check_long(c);
    return false;
}

static void child_close(struct transport *t)
{
    struct child_transport *c = child_of(t);
    if (c->to_fd >= 0) {
        local_flush(c); /* a last request (exit) goes out if the pipe takes it */
        close(c->to_fd);
        c->to_fd = -1;
    }
    if (c->from_fd >= 0) close(c->from_fd);
    c->from_fd = -1;
    if (c->state == TRANSPORT_READY || c->state == TRANSPORT_CONNECTING) {
        free(c->err);
        c->err = xstrdup("closed by ddptop");
        c->state = TRANSPORT_CLOSED;
    }
}

static void child_release(struct transport *t)
{
    struct child_transport *c = child_of(t);
    if (t->detached || t->abandoned) {
        /* detached: the agent (or a bridge holding its link) waits on; our ends of its pipes
         * go, the process stays. abandoned: a bridge that got nowhere is killed. Neither is
         * waited for here: the loop must not block. */
        if (c->to_fd >= 0) close(c->to_fd);
        if (c->from_fd >= 0) close(c->from_fd);
        c->to_fd = c->from_fd = -1;
        if (t->abandoned && c->pid > 0 && !c->reaped) kill(-c->pid, SIGKILL);
        local_reap(c);
        if (c->pid > 0 && !c->reaped) orphan_add(c->pid);
    } else {
        child_close(t);
        /* The agent stops its ranks on end of file, then exits; give it that long. */
        for (int i = 0; i < 300 && c->pid > 0 && !c->reaped; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            local_reap(c);
            if (!c->reaped) nanosleep(&ts, NULL);
        }
        if (c->pid > 0 && !c->reaped) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &c->status, 0);
        }
    }
    line_reader_done(&c->in);
    strbuf_done(&c->out);
    for (size_t i = 0; c->argv && c->argv[i]; i++) free(c->argv[i]);
    free(c->argv);
    free(c->address);
    free(c->launcher);
    free(c->stderr_path);
    free(c->err);
    free(c);
}

static const struct transport_ops child_ops = {
    .start = child_start,
    .pollfds = child_pollfds,
    .pump = child_pump,
    .state = child_state,
    .connecting = child_connecting,
    .error = child_error,
    .address = child_address,
    .send_line = child_send_line,
    .next_line = child_next_line,
    .next_line_into = child_next_line_into,
    .bytes_in = child_bytes_in,
    .close = child_close,
    .release = child_release,
    .deadline_ms = child_deadline_ms,
    .hint = child_hint,
};
