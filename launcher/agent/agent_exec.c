/* Short-lived probe programs for the agent's facts, with a time limit: see agent_exec.h. */
#include "agent_exec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_child.h"

#define EXEC_OUT_CAP 65536

char *agent_exec_resolve(const char *name, const char *path_env)
{
    struct stat st;
    if (!name || !name[0]) return NULL;
    if (strchr(name, '/')) {
        char *p;
        const char *home = getenv("HOME");
        if (name[0] == '~' && name[1] == '/' && home) p = xasprintf("%s%s", home, name + 1);
        else p = xstrdup(name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) return p;
        free(p);
        return NULL;
    }
    if (!path_env) path_env = getenv("PATH");
    if (!path_env) path_env = "/usr/local/bin:/usr/bin:/bin";
    for (const char *d = path_env;; ) {
        const char *end = strchr(d, ':');
        size_t dl = end ? (size_t)(end - d) : strlen(d);
        /* An empty PATH entry means the current directory, as for execvp. */
        char *p = dl ? xasprintf("%.*s/%s", (int)dl, d, name) : xasprintf("./%s", name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) return p;
        free(p);
        if (!end) break;
        d = end + 1;
    }
    return NULL;
}

char *agent_exec_clean(char *s)
{
    while (*s && isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
    return s;
}

int agent_exec_on_path(const char *name, const char *path_env)
{
    char *p = agent_exec_resolve(name, path_env);
    free(p);
    return p != NULL;
}

static void child_exec(char *const argv[], int out_fd, int merge_stderr)
{
    /* Own process group, so a timeout kills the probe's children too. */
    setpgid(0, 0);
    /* The agent ignores SIGPIPE; an ignored signal stays ignored across exec. */
    agent_child_signals();
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) dup2(devnull, 0); /* never the controller's stdin */
    dup2(out_fd, 1);
    if (merge_stderr) dup2(out_fd, 2);
    else if (devnull >= 0) dup2(devnull, 2);
    execvp(argv[0], argv);
    _exit(127);
}

static int wait_status(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 127;
}

static void probe_start(struct agent_probe *p)
{
    int pfd[2];
    strbuf_init(&p->out);
    p->status = 127;
    p->pid = -1;
    p->fd = -1;
    p->got = 0;
    p->timed_out = 0;
    if (pipe2(pfd, O_CLOEXEC) < 0) return;
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return;
    }
    if (pid == 0) child_exec(p->argv, pfd[1], p->merge_stderr);
    setpgid(pid, pid); /* also here: whichever side runs first, the group exists before a kill */
    close(pfd[1]);
    p->pid = pid;
    p->fd = pfd[0];
    p->deadline = mono_ms() + p->timeout_ms;
}

static void probe_read(struct agent_probe *p)
{
    char buf[4096];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) { /* EOF: the probe (and anything it started) closed its output */
        close(p->fd);
        p->fd = -1;
        return;
    }
    if (p->got < EXEC_OUT_CAP) {
        size_t take = (size_t)n < EXEC_OUT_CAP - p->got ? (size_t)n : EXEC_OUT_CAP - p->got;
        strbuf_add(&p->out, buf, take);
        p->got += take;
    }
}

/* Reaps, still bounded by the deadline. The group id stays ours until the leader is reaped,
 * so killing -pid cannot hit an unrelated process. */
static void probe_reap(struct agent_probe *p)
{
    int st = 0;
    if (p->pid < 0) return;
    for (;;) {
        pid_t w = p->timed_out ? 0 : waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) {
            p->status = wait_status(st);
            return;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return;
        if (p->timed_out || mono_ms() >= p->deadline) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
            p->status = -1;
            return;
        }
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

void agent_exec_run_all(struct agent_probe *probes, int n)
{
    struct pollfd pfds[AGENT_EXEC_MAX_PROBES];
    int idx[AGENT_EXEC_MAX_PROBES];
    if (n > AGENT_EXEC_MAX_PROBES) n = AGENT_EXEC_MAX_PROBES;
    for (int i = 0; i < n; i++) probe_start(&probes[i]);
    for (;;) {
        int np = 0;
        int64_t now = mono_ms(), soonest = -1;
        for (int i = 0; i < n; i++) {
            struct agent_probe *p = &probes[i];
            if (p->fd < 0) continue;
            if (now >= p->deadline) {
                p->timed_out = 1;
                close(p->fd);
                p->fd = -1;
                continue;
            }
            if (soonest < 0 || p->deadline < soonest) soonest = p->deadline;
            pfds[np] = (struct pollfd){ .fd = p->fd, .events = POLLIN };
            idx[np++] = i;
        }
        if (!np) break;
        int r = poll(pfds, (nfds_t)np, (int)(soonest - now));
        if (r <= 0) continue; /* EINTR or a deadline: the check above decides */
        for (int k = 0; k < np; k++)
            if (pfds[k].revents) probe_read(&probes[idx[k]]);
    }
    for (int i = 0; i < n; i++) probe_reap(&probes[i]);
}

int agent_exec_capture(char *const argv[], int timeout_ms, int merge_stderr, struct strbuf *out)
{
    struct agent_probe p = { .argv = argv, .timeout_ms = timeout_ms, .merge_stderr = merge_stderr };
    agent_exec_run_all(&p, 1);
    if (p.out.buf) strbuf_add(out, p.out.buf, p.out.len);
    strbuf_done(&p.out);
    return p.status;
}
