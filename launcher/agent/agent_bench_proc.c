/* A measuring program run beside the agent's loop (agent_bench_proc.h): the NCCL all-reduce's
 * own process and `dcgmi diag`. Their output is read by a watch in the loop, never blocking it;
 * at the deadline, or when the caller ends it, the program's whole process group is killed
 * (SIGKILL: NCCL can block in a call forever, and only the kernel ends that), so a hung program
 * costs its deadline and nothing more. */
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

#include "util/util.h"

struct bench_proc {
    struct agent_watch *w;
    pid_t pid;
    size_t cap, line_at;     /* the output kept, and where the next unseen line begins */
    int over;                /* more than cap came: the rest was read and dropped */
    struct strbuf out;
    bench_proc_line_fn on_line;
    bench_proc_end_fn on_end;
    void *ctx;
    int ended;               /* on_end called */
};

/* Kills the group and reaps the leader: after SIGKILL the wait is the kernel's, not the
 * program's. The group id stays ours until the leader is reaped. */
static int proc_kill(struct bench_proc *p)
{
    int st = 0;
    if (p->pid <= 0) return -1;
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
    p->pid = -1;
    return st;
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

static void proc_free(void *ctx)
{
    struct bench_proc *p = ctx;
    proc_kill(p);   /* the agent's end, or a caller's kill: nothing of it outlives the watch */
    strbuf_done(&p->out);
    free(p);
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
    if (!revents) {                   /* its time is up */
        proc_kill(p);
        proc_end(ag, p, BENCH_PROC_TIMED_OUT);
        agent_watch_del(ag, w);
        return;
    }
    for (int slice = 0; slice < 64; slice++) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {                 /* its output ended: it exits, or is made to */
            int st = 0;
            pid_t r = waitpid(p->pid, &st, WNOHANG);
            if (r == p->pid) p->pid = -1;
            else st = proc_kill(p);
            lines(ag, p);
            proc_end(ag, p, exit_code(st));
            agent_watch_del(ag, w);
            return;
        }
        size_t take = p->out.len < p->cap ? p->cap - p->out.len : 0;
        if ((size_t)n > take) p->over = 1;
        if (take) strbuf_add(&p->out, buf, (size_t)n < take ? (size_t)n : take);
        lines(ag, p);
        if (p->ended) return;
    }
}

struct bench_proc *agent_bench_proc_start(struct agent *ag, char *const argv[], char *const envp[],
                                          int64_t deadline_ms, size_t cap,
                                          bench_proc_line_fn on_line, bench_proc_end_fn on_end, void *ctx,
                                          char *err, size_t errlen)
{
    int pfd[2];
    pid_t parent = getpid();
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return NULL;
    }
    if (pid == 0) {
        /* its own group, so that the kill reaches what it starts; it dies with the agent */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        signal(SIGPIPE, SIG_DFL);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        dup2(pfd[1], 1);
        util_close_range(3, ~0U);   /* the controller's link and the ranks' pipes stay ours */
        if (envp) execve(argv[0], argv, envp);
        else execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    close(pfd[1]);
    fd_set_nonblock(pfd[0]);
    struct bench_proc *p = xcalloc(1, sizeof *p);
    p->pid = pid;
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
    agent_watch_del(ag, p->w);
}
