/* One --notify command (notify_proc.h). Forked, not posix_spawn'd, for the session of its own
 * (setsid: a Ctrl-C on ddptop's terminal must not kill the notification of the run's end, and
 * the group is what a timeout kills) and for closing every other descriptor of ours (the
 * agents' pipes and sockets: a notify command that held them would keep an agent's end from
 * being seen). The controller has a writer thread: the child does only async-signal-safe
 * calls, with everything it needs made before the fork. */
#include "notify_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

#define OUT_TAIL      1024          /* the end of its output kept, for the failure's message */
#define READ_PER_PUMP (64u << 10)   /* a chatty command cannot hold a pass of the loop */

struct notify_proc {
    pid_t pid;
    bool reaped;
    bool killed, timed_out;
    int in_fd, out_fd;
    char *input;
    size_t len, off;
    int64_t deadline_ms;
    char tail[OUT_TAIL];
    size_t tail_len;
};

static void child_exec(char *const *argv, char *const *env, int in_rd, int out_wr)
{
    static const int dflt[] = {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD};
    sigset_t none;
    setsid();
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++) signal(dflt[i], SIG_DFL); /* ignored ones stay so */
    if (dup2(in_rd, 0) < 0 || dup2(out_wr, 1) < 0 || dup2(out_wr, 2) < 0) _exit(127);
    util_close_range(3, ~0U);
    execve("/bin/sh", argv, env);
    _exit(127);
}

struct notify_proc *notify_proc_start(const char *cmd, char *const *env, const char *input, size_t len,
                                      int64_t deadline_ms, char *err, size_t errlen)
{
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return NULL;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(in[0]);
        close(in[1]);
        return NULL;
    }
    pid_t pid = fork();
    if (pid == 0) child_exec(argv, env, in[0], out[1]);
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(in[1]);
        close(out[0]);
        return NULL;
    }
    struct notify_proc *p = xcalloc(1, sizeof *p);
    p->pid = pid;
    p->in_fd = in[1];
    p->out_fd = out[0];
    fd_set_nonblock(p->in_fd);
    fd_set_nonblock(p->out_fd);
    p->input = xmalloc(len ? len : 1);
    memcpy(p->input, input, len);
    p->len = len;
    p->deadline_ms = deadline_ms;
    return p;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* As much of its stdin as the pipe takes; then end of file. A command that does not read it
 * and exits closes the pipe: EPIPE (SIGPIPE is ignored by ddptop) ends the feeding. */
static void feed(struct notify_proc *p)
{
    while (p->in_fd >= 0 && p->off < p->len) {
        ssize_t w = write(p->in_fd, p->input + p->off, p->len - p->off);
        if (w > 0) p->off += (size_t)w;
        else if (w < 0 && errno == EINTR) continue;
        else if (w < 0 && errno == EAGAIN) return;
        else close_fd(&p->in_fd);
    }
    close_fd(&p->in_fd);
}

static void keep_tail(struct notify_proc *p, const char *b, size_t n)
{
    if (n >= OUT_TAIL) {
        memcpy(p->tail, b + n - OUT_TAIL, OUT_TAIL);
        p->tail_len = OUT_TAIL;
        return;
    }
    if (p->tail_len + n > OUT_TAIL) {
        size_t drop = p->tail_len + n - OUT_TAIL;
        memmove(p->tail, p->tail + drop, p->tail_len - drop);
        p->tail_len -= drop;
    }
    memcpy(p->tail + p->tail_len, b, n);
    p->tail_len += n;
}

static void read_out(struct notify_proc *p)
{
    char buf[8192];
    size_t got = 0;
    while (p->out_fd >= 0 && got < READ_PER_PUMP) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n > 0) {
            keep_tail(p, buf, (size_t)n);
            got += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return;
        } else {
            close_fd(&p->out_fd);
        }
    }
}

/* Its output's last non-empty line, made printable (it goes into an event and on a screen). */
static void last_line(const struct notify_proc *p, char *out, size_t outlen)
{
    size_t end = p->tail_len, start;
    while (end && (p->tail[end - 1] == '\n' || p->tail[end - 1] == '\r' || p->tail[end - 1] == ' ')) end--;
    start = end;
    while (start && p->tail[start - 1] != '\n') start--;
    size_t k = 0;
    for (size_t i = start; i < end && k + 1 < outlen; i++) {
        unsigned char ch = (unsigned char)p->tail[i];
        out[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    out[k] = '\0';
}

void notify_proc_kill(struct notify_proc *p)
{
    if (!p || p->reaped) return;
    /* the group id is ours until the leader is reaped: -pid reaches nothing else */
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
    p->killed = true;
}

/* Its status, once it exited: the rest of its group killed first (what it left running in the
 * background), while the unreaped leader still holds the group's id. */
static bool reap(struct notify_proc *p, int *status, bool *lost)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    *lost = false;
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno == EINTR) return false;
        *lost = true; /* ECHILD: someone reaped it (SIGCHLD ignored); its group is gone with it */
        return true;
    }
    if (si.si_pid != p->pid) return false;
    kill(-p->pid, SIGKILL);
    while (waitpid(p->pid, status, 0) < 0) {
        if (errno != EINTR) {
            *lost = true;
            break;
        }
    }
    return true;
}

bool notify_proc_pump(struct notify_proc *p, int64_t now, struct notify_end *end)
{
    int status = 0;
    bool lost;
    if (p->reaped) return true;
    feed(p);
    read_out(p);
    if (!p->killed && now >= p->deadline_ms) {
        p->timed_out = true;
        notify_proc_kill(p);
    }
    if (!reap(p, &status, &lost)) return false;
    p->reaped = true;
    read_out(p);
    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    memset(end, 0, sizeof *end);
    end->timed_out = p->timed_out;
    end->exit_code = -1;
    if (!lost && WIFEXITED(status)) end->exit_code = WEXITSTATUS(status);
    else if (!lost && WIFSIGNALED(status)) end->signo = WTERMSIG(status);
    last_line(p, end->last_line, sizeof end->last_line);
    return true;
}

void notify_proc_free(struct notify_proc *p)
{
    if (!p) return;
    if (!p->reaped) {
        notify_proc_kill(p);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    free(p->input);
    free(p);
}
