/* A measuring program run beside the agent's loop (agent_bench_proc.h): the NCCL all-reduce's
 * own process and `dcgmi diag`. Nothing here blocks the loop: its output is read by a watch;
 * its exit is looked for with waitid(WNOHANG) on a timer, never waited for. A program that
 * closed its output may still be exiting (a CUDA program's teardown comes after its last
 * write): it has until its deadline. At the deadline, or when the caller ends it, its whole
 * process group is killed (SIGKILL: NCCL can block in a call forever, and only the kernel ends
 * that) and the end is reported at once; a killed GPU program may take seconds to go, or hang
 * in the driver for ever, so it is reaped later by the same timer, and the struct goes only
 * then. The agent waits for its children by number only (never waitpid(-1)), so nobody else
 * reaps ours, and the leader's group id stays ours until we do. */
#include "agent_bench_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_child.h"
#include "util/util.h"

/* How often an exiting program is looked at; a killed one from this up to REAP_MAX_MS. */
#define EXIT_POLL_MS 50
#define REAP_MAX_MS 1000

extern char **environ;

struct bench_proc {
    struct agent_watch *w;   /* the output's, then (fd -1) the timer's that looks for the exit */
    pid_t pid;               /* -1 once reaped */
    int64_t deadline_ms;     /* the caller's: killed then */
    int killed;              /* SIGKILL sent: only the reaping is left */
    int reap_ms;             /* the timer's step while reaping */
    size_t cap, line_at;     /* the output kept, and where the next unseen line begins */
    int over;                /* more than cap came: the rest was read and dropped */
    struct strbuf out;
    bench_proc_line_fn on_line;
    bench_proc_end_fn on_end;
    void *ctx;
    int ended;               /* on_end called */
};

static void exit_tick(struct agent *ag, struct agent_watch *w, short revents);

/* SIGKILL to the group and the leader, once; the leader is not waited for here. */
static void proc_kill(struct bench_proc *p)
{
    if (p->pid <= 0 || p->killed) return;
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
    p->killed = 1;
    p->reap_ms = EXIT_POLL_MS;
}

static int exit_code(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 127;
}

static void proc_end(struct agent *ag, struct bench_proc *p, int status)
{
    if (p->ended) return;
    p->ended = 1;
    if (p->on_end) p->on_end(ag, p->ctx, status, p->out.buf ? p->out.buf : "", p->over);
}

/* The reaped program's watch deleted, or the agent's end (agent_free). Never blocks: what is
 * not reaped by then is killed and left to the kernel (it dies with us: PR_SET_PDEATHSIG). */
static void proc_free(void *ctx)
{
    struct bench_proc *p = ctx;
    if (p->pid > 0) {
        proc_kill(p);
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) p->pid = -1;
    }
    strbuf_done(&p->out);
    free(p);
}

/* From the output's watch to a timer's (no fd): the pipe closed, p carried over. */
static void to_timer(struct agent *ag, struct bench_proc *p, int64_t due_ms)
{
    if (p->w->fd >= 0) {
        struct agent_watch *old = p->w;
        old->ctx = NULL;   /* p is the new watch's now: deleting this one must not free it */
        agent_watch_del(ag, old);
        p->w = agent_watch_add(ag, -1, 0, exit_tick, p, proc_free);
    }
    p->w->deadline_ms = due_ms;
}

/* Whether it has exited; then whatever it left running in its group is killed (the group id
 * is ours until the leader is reaped: it was only peeked at) and it is reaped, *st its status
 * (-1: not ours to wait for). */
static int reap(struct bench_proc *p, int *st)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    *st = -1;
    if (p->pid <= 0) return 1;
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno != ECHILD) return 0;
        p->pid = -1;
        return 1;
    }
    if (si.si_pid != p->pid) return 0;
    kill(-p->pid, SIGKILL);
    while (waitpid(p->pid, st, 0) < 0 && errno == EINTR) {}   /* a zombie: at once */
    p->pid = -1;
    return 1;
}

/* Has it exited? Reports the end (unless reported already) and deletes the watch; at the
 * deadline kills it and reports that; else looks again later. */
static void exit_look(struct agent *ag, struct bench_proc *p)
{
    int st;
    if (reap(p, &st)) {
        proc_end(ag, p, st >= 0 ? exit_code(st) : 127);
        agent_watch_del(ag, p->w);   /* frees p */
        return;
    }
    int64_t now = mono_ms();
    if (!p->ended && now >= p->deadline_ms) {
        proc_kill(p);
        proc_end(ag, p, BENCH_PROC_TIMED_OUT);
    }
    if (p->killed) {
        to_timer(ag, p, now + p->reap_ms);
        p->reap_ms = p->reap_ms * 2 > REAP_MAX_MS ? REAP_MAX_MS : p->reap_ms * 2;
    } else {
        to_timer(ag, p, now + EXIT_POLL_MS < p->deadline_ms ? now + EXIT_POLL_MS : p->deadline_ms);
    }
}

static void exit_tick(struct agent *ag, struct agent_watch *w, short revents)
{
    (void)revents;
    exit_look(ag, w->ctx);
}

static void lines(struct agent *ag, struct bench_proc *p)
{
    for (;;) {
        char *nl = p->out.len > p->line_at ? memchr(p->out.buf + p->line_at, '\n', p->out.len - p->line_at) : NULL;
        if (!nl) return;
        *nl = '\0';
        if (p->on_line) p->on_line(ag, p->ctx, p->out.buf + p->line_at);
        *nl = '\n';
        p->line_at = (size_t)(nl - p->out.buf) + 1;
        if (p->ended) return;
    }
}

static void proc_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct bench_proc *p = w->ctx;
    char buf[4096];
    if (!revents) {                   /* its time is up, its output still open */
        proc_kill(p);
        proc_end(ag, p, BENCH_PROC_TIMED_OUT);
        exit_look(ag, p);
        return;
    }
    for (int slice = 0; slice < 64; slice++) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {                 /* its output ended: it exits, or is made to at the deadline */
            lines(ag, p);
            if (!p->ended) exit_look(ag, p);
            return;
        }
        size_t take = p->out.len < p->cap ? p->cap - p->out.len : 0;
        if ((size_t)n > take) p->over = 1;
        if (take) strbuf_add(&p->out, buf, (size_t)n < take ? (size_t)n : take);
        lines(ag, p);
        if (p->ended) return;         /* on_line ended it (agent_bench_proc_kill): the timer reaps */
    }
}

/* In the child: argv[0], or the program open on exec_fd (fexecve). Never returns. */
static void child_exec(char *const argv[], char *const envp[], int exec_fd, pid_t parent, int out_fd)
{
    /* its own group, so that the kill reaches what it starts; it dies with the agent */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    agent_child_signals();
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 2);
    }
    dup2(out_fd, 1);
    if (exec_fd < 0) {
        util_close_range(3, ~0U);   /* the controller's link and the ranks' pipes stay ours */
        if (envp) execve(argv[0], argv, envp);
        else execv(argv[0], argv);
        _exit(127);
    }
    /* fexecve of a script hands its interpreter /dev/fd/3: that fd must survive the exec (a
     * binary's is closed by it: CLOEXEC does not matter there, but a script needs it open) */
    if (exec_fd != 3 && dup2(exec_fd, 3) < 0) _exit(127);
    util_close_range(4, ~0U);
    fcntl(3, F_SETFD, 0);
    fexecve(3, argv, envp ? envp : environ);
    _exit(127);
}

struct bench_proc *agent_bench_proc_start(struct agent *ag, char *const argv[], char *const envp[], int exec_fd,
                                          int64_t deadline_ms, size_t cap,
                                          bench_proc_line_fn on_line, bench_proc_end_fn on_end, void *ctx,
                                          char *err, size_t errlen)
{
    int pfd[2];
    sigset_t old;
    pid_t parent = getpid();
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return NULL;
    }
    agent_child_block(&old);   /* the agent's handlers must never run in the child */
    pid_t pid = fork();
    if (pid == 0) child_exec(argv, envp, exec_fd, parent, pfd[1]);
    int fork_errno = errno;
    agent_child_unblock(&old);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(fork_errno));
        close(pfd[0]);
        close(pfd[1]);
        return NULL;
    }
    setpgid(pid, pid);
    close(pfd[1]);
    fd_set_nonblock(pfd[0]);
    struct bench_proc *p = xcalloc(1, sizeof *p);
    p->pid = pid;
    p->deadline_ms = deadline_ms;
    p->cap = cap;
    p->on_line = on_line;
    p->on_end = on_end;
    p->ctx = ctx;
    strbuf_init(&p->out);
    p->w = agent_watch_add(ag, pfd[0], POLLIN, proc_ready, p, proc_free);
    p->w->deadline_ms = deadline_ms;
    return p;
}

void agent_bench_proc_kill(struct agent *ag, struct bench_proc *p)
{
    if (!p || p->ended) return;
    proc_kill(p);
    proc_end(ag, p, BENCH_PROC_KILLED);
    /* the pipe goes now; p stays with the timer until reaped, so this is safe from on_line
     * (lines() still holds p) */
    to_timer(ag, p, mono_ms() + p->reap_ms);
}
