/* The per-rank keeper process and the rank's exec: see agent_keeper.h. Everything after fork()
 * runs in the child of a single-threaded agent, and ends in _exit() or execvp(). */
#include "agent_keeper.h"

#define KEEPER_PIPE_SIZE (512 * 1024)

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_child.h"
#include "util/util.h"

extern char **environ;

/* How often a keeper checks that its agent is still its parent, besides PDEATHSIG. */
#define KEEPER_PARENT_CHECK_S 1

static void keeper_send(int fd, int kind, int a, int64_t b, int64_t c)
{
    struct keeper_msg m = { .kind = kind, .a = a, .b = b, .c = c };
    ssize_t n;
    do n = write(fd, &m, sizeof m); while (n < 0 && errno == EINTR);
}

/* Closes every fd except keep[0..2] (moved to 3 or above first, so that 0-2 can take
 * /dev/null): neither the keeper nor the rank may hold the agent's stdin/stdout, its listeners
 * or another rank's pipes. */
static void keeper_close_others(int keep[3])
{
    for (int i = 0; i < 3; i++)
        if (keep[i] < 3) keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, 3);
    int sorted[3] = { keep[0], keep[1], keep[2] };
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (sorted[j] < sorted[i]) {
                int t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    unsigned lo = 3;
    for (int i = 0; i < 3; i++) {
        if ((unsigned)sorted[i] > lo) util_close_range(lo, (unsigned)sorted[i] - 1);
        lo = (unsigned)sorted[i] + 1;
    }
    util_close_range(lo, ~0U);
    int nul = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++)
        if (nul != fd) dup2(nul, fd);
    if (nul > 2) close(nul);
}

/* The rank: its own process group, the pipes on stdout/stderr, the request's environment and
 * working directory, then execvp. Failures go back to the keeper over report_fd (CLOEXEC, so a
 * successful exec closes it: the keeper reads end of file). */
static void rank_exec(const struct keeper_spec *spec, pid_t agent, int out_w, int err_w,
                      int report_fd)
{
    int rep[2];
    setpgid(0, 0);
    /* Dies with its keeper even if the keeper is SIGKILLed before it could kill the group. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Lets the agent's gdb (its child) attach where Yama restricts ptrace to descendants. */
    prctl(PR_SET_PTRACER, (unsigned long)agent, 0, 0, 0);
    dup2(out_w, 1);
    dup2(err_w, 2);
    /* The agent ignores SIGPIPE, the keeper SIGUSR1/2 and blocks what it waits for; an ignored
     * or blocked signal stays so across exec. */
    agent_child_signals();
    if (spec->workdir && spec->workdir[0] && chdir(spec->workdir) < 0) {
        rep[0] = KEEPER_STAGE_CHDIR;
        rep[1] = errno;
    } else {
        environ = (char **)spec->envp; /* so execvp searches the rank's PATH */
        execvp(spec->argv[0], spec->argv);
        rep[0] = KEEPER_STAGE_EXEC;
        rep[1] = errno;
    }
    ssize_t n = write(report_fd, rep, sizeof rep);
    (void)n;
    _exit(127);
}

/* Kills the rank's group, reaps the rank and reports its status. The rank is only peeked at
 * (WNOWAIT) before the kill: an unreaped leader keeps its group id reserved, so the kill cannot
 * reach an unrelated process that reused the id. */
static void keeper_finish(int status_fd, pid_t rank)
{
    siginfo_t si;
    struct rusage ru;
    int st = 0;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)rank, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {}
    int64_t seen_dead = mono_ns();
    kill(-rank, SIGKILL); /* whatever the rank left running in its group */
    memset(&ru, 0, sizeof ru);
    while (wait4(rank, &st, 0, &ru) < 0 && errno == EINTR) {}
    int64_t cpu_us = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                     ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    keeper_send(status_fd, KEEPER_EXITED, st, cpu_us, seen_dead);
    _exit(0);
}

static void keeper_main(const struct keeper_spec *spec, pid_t agent, int out_w, int err_w,
                        int status_w)
{
    /* TERM/HUP/INT/CHLD arrive blocked (the agent blocked them around fork): the agent's
     * handlers must never run here, and sigtimedwait below takes them in order. */
    sigset_t wait_set;
    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGCHLD);
    sigaddset(&wait_set, SIGTERM);
    sigaddset(&wait_set, SIGHUP);
    sigaddset(&wait_set, SIGINT);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    /* a scheduler's warning to every process of a Slurm step is the rank's business, not ours */
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != agent) _exit(0); /* the agent died before PDEATHSIG was armed */
    int keep[3] = { out_w, err_w, status_w };
    keeper_close_others(keep);
    out_w = keep[0];
    err_w = keep[1];
    status_w = keep[2];

    int rep[2];
    if (pipe2(rep, O_CLOEXEC) < 0) {
        keeper_send(status_w, KEEPER_FAILED, KEEPER_STAGE_SETUP, errno, 0);
        _exit(0);
    }
    pid_t rank = fork();
    if (rank < 0) {
        keeper_send(status_w, KEEPER_FAILED, KEEPER_STAGE_FORK, errno, 0);
        _exit(0);
    }
    if (rank == 0) {
        close(rep[0]);
        rank_exec(spec, agent, out_w, err_w, rep[1]);
    }
    setpgid(rank, rank); /* also here, whichever side runs first */
    close(out_w);
    close(err_w);
    close(rep[1]);
    int why[2];
    ssize_t n;
    do n = read(rep[0], why, sizeof why); while (n < 0 && errno == EINTR);
    close(rep[0]);
    if (n == (ssize_t)sizeof why) {
        while (waitpid(rank, NULL, 0) < 0 && errno == EINTR) {}
        keeper_send(status_w, KEEPER_FAILED, why[0], why[1], 0);
        _exit(0);
    }
    keeper_send(status_w, KEEPER_STARTED, (int)rank, 0, 0);

    for (;;) {
        struct timespec ts = { KEEPER_PARENT_CHECK_S, 0 };
        int sig = sigtimedwait(&wait_set, NULL, &ts);
        if (sig == SIGCHLD) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)rank, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rank)
                keeper_finish(status_w, rank);
            continue; /* stopped/continued, or a straggler's child */
        }
        if (sig == SIGTERM && getppid() == agent) {
            /* Not PDEATHSIG: someone signalled every process of the agent's Slurm step (scancel,
             * a time limit). The rank got the same SIGTERM (a second one could cut its
             * checkpoint short); it has until the scheduler's SIGKILL (KillWait) or the agent's
             * own teardown to finish. */
            continue;
        }
        if (sig > 0 || getppid() != agent) {
            /* The agent died (PDEATHSIG) or someone told the keeper to go: the rank goes too. */
            kill(-rank, SIGKILL);
            keeper_finish(status_w, rank);
        }
    }
}

int keeper_read_msg(int fd, struct keeper_msg *m)
{
    ssize_t n;
    do n = read(fd, m, sizeof *m); while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n != (ssize_t)sizeof *m) return -1; /* writes are atomic: a short read is the end */
    return 1;
}

void keeper_failed_text(const char *argv0, const char *workdir, const struct keeper_msg *m,
                        char *err, size_t errlen)
{
    const char *e = strerror((int)m->b);
    switch (m->a) {
    case KEEPER_STAGE_CHDIR:
        snprintf(err, errlen, "cannot change to workdir '%s': %s", workdir ? workdir : "", e);
        break;
    case KEEPER_STAGE_EXEC:
        snprintf(err, errlen, "cannot execute '%s': %s", argv0, e);
        break;
    case KEEPER_STAGE_FORK:
        snprintf(err, errlen, "cannot start the rank: fork: %s", e);
        break;
    default:
        snprintf(err, errlen, "cannot start the rank's keeper: %s", e);
    }
}

int keeper_fork(const struct keeper_spec *spec, struct keeper *k, char *err, size_t errlen)
{
    int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, st[2] = { -1, -1 };
    sigset_t block, old;

    k->keeper_pid = k->rank_pid = -1;
    k->out_fd = k->err_fd = k->status_fd = -1;
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "cannot start the rank: pipe: %s", strerror(errno));
        goto close_pipes;
    }
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t agent = getpid();
    pid_t pid = fork();
    if (pid == 0) keeper_main(spec, agent, out[1], errp[1], st[1]);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start the rank's keeper: fork: %s", strerror(fork_errno));
        goto close_pipes;
    }
    close(out[1]);
    close(errp[1]);
    close(st[1]);
    /* Room for what a rank prints while its stream rests between reads (agent_ranks.c,
     * STREAM_REST_MS): 512 KiB in 2 ms is 256 MB/s before the rank waits on a write. Best effort:
     * past the user's pipe quota the kernel refuses, and the default 64 KiB stays. Pages are
     * taken only as output waits in the pipe. */
    (void)fcntl(out[0], F_SETPIPE_SZ, KEEPER_PIPE_SIZE);
    (void)fcntl(errp[0], F_SETPIPE_SZ, KEEPER_PIPE_SIZE);
    fd_set_nonblock(st[0]);
    fd_set_nonblock(out[0]);
    fd_set_nonblock(errp[0]);
    k->keeper_pid = pid;
    k->out_fd = out[0];
    k->err_fd = errp[0];
    k->status_fd = st[0];
    return 0;
close_pipes:
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0) close(out[i]);
        if (errp[i] >= 0) close(errp[i]);
        if (st[i] >= 0) close(st[i]);
    }
    return -1;
}
