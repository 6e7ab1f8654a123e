/* One Slurm job step running an agent per node (srun_step.h). srun's three pipes are polled by
 * the controller's loop through member 0's transport; every transport's step pumps them, which
 * costs nothing when nothing is there. The options given to srun, and why, are in
 * docs/slurm.md ("What runs where"). */
#include "srun_step_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"
#include "wire/protocol.h"
#include "wire/relay.h"


/* Variables of the surrounding job or step that srun would read as options of the agents' step
 * and that do not fit it: one task per node, all of the node's memory and GPUs, no binding. */
static const char *const srun_input_vars[] = {
    "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK", "SRUN_CPUS_PER_TASK", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
    "SLURM_MEM_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_TRES_PER_TASK", "SLURM_CPUS_PER_GPU",
    "SLURM_DISTRIBUTION", "SLURM_CPU_BIND", "SLURM_EXACT", "SLURM_NTASKS_PER_GPU", "SLURM_BCAST", NULL,
};

/* Where srun --bcast copies the agent on every node: slurmd opens it as the user with O_CREAT
 * and O_TRUNC in /tmp, so a name another user could know beforehand lets them block or
 * redirect the copy by creating it first. 128 random bits instead, given to srun in its
 * environment (SLURM_BCAST), which other users cannot read, not on its command line. One name
 * per step: two jobs never write one file. */
char *srun_step_bcast_target(void)
{
    unsigned char rnd[16];
    char hex[33];
    util_random(rnd, sizeof rnd);
    util_hex(rnd, sizeof rnd, hex);
    return xasprintf("/tmp/ddptop-agent.%s", hex);
}

struct srun_step *srun_step_new(const struct srun_step_opts *o, const char *const *names, size_t n)
{
    struct srun_step *s = xcalloc(1, sizeof *s);
    s->agent_path = xstrdup(o->agent_path);
    s->jobid = o->jobid ? xstrdup(o->jobid) : NULL;
    s->stderr_path = o->stderr_path ? xstrdup(o->stderr_path) : NULL;
    s->attach = o->attach;
    if (o->bcast) s->bcast = srun_step_bcast_target();
    s->m = xcalloc(n ? n : 1, sizeof *s->m);
    s->n = s->refs = n;
    s->to_fd = s->out_fd = s->err_fd = s->log_fd = -1;
    for (size_t i = 0; i < n; i++) {
        s->m[i].name = xstrdup(names[i]);
        s->m[i].task = -1;
        strbuf_init(&s->m[i].piece.line);
        line_reader_init(&s->m[i].in, PROTOCOL_MAX_LINE);
        strbuf_init(&s->m[i].pending);
        strbuf_init(&s->m[i].dq);
        line_reader_init(&s->m[i].dr, (size_t)PROTOCOL_MAX_LINE + DIRECT_LINE_OVERHEAD);
        s->m[i].dfd = -1;
    }
    s->lfd = s->efd = -1;
    srun_step_cache_plan(s);
    strbuf_init(&s->wbuf);
    line_reader_init(&s->olines, PROTOCOL_MAX_LINE);
    line_reader_init(&s->elines, PROTOCOL_MAX_LINE);
    return s;
}

bool srun_step_needs_bcast(const char *path)
{
    /* statfs f_type of the file systems that clusters share between nodes */
    static const unsigned long shared[] = {
        0x6969,      /* NFS */        0x0BD00BD0, /* Lustre */   0x47504653, /* GPFS */
        0x19830326,  /* BeeGFS */     0x00C36400, /* CephFS */   0xFF534D42, /* CIFS */
        0xFE534D42,  /* SMB2 */       0x517B,     /* SMB */      0x5346414F, /* AFS */
        0xAAD7AAEA,  /* PanFS */      0x65735546, /* FUSE */
    };
    struct statfs st;
    if (statfs(path, &st) != 0) return true;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
        if ((unsigned long)st.f_type == shared[i]) return false;
    return true;
}

/* argv of srun; the strings live in fmt and nodes until freed. The --bcast target goes to srun
 * in its environment (srun_step_bcast_target); shown is true for the line people read, where it is the
 * equivalent --bcast=PATH. */
static char **srun_argv(const struct srun_step *s, struct strbuf *nodes, char **fmt, bool shown)
{
    char **v = xcalloc(32, sizeof *v);
    int k = 0;
    strbuf_init(nodes);
    for (size_t i = 0; i < s->n; i++) strbuf_addf(nodes, "%s%s", i ? "," : "", s->m[i].name);
    fmt[0] = xasprintf("--nodes=%zu", s->n);
    fmt[1] = xasprintf("--ntasks=%zu", s->n);
    fmt[2] = xasprintf("--nodelist=%s", nodes->buf);
    fmt[3] = s->jobid ? xasprintf("--jobid=%s", s->jobid) : NULL;
    fmt[4] = s->bcast && shown ? xasprintf("--bcast=%s", s->bcast) : NULL;
    v[k++] = "srun";
    if (fmt[3]) v[k++] = fmt[3];
    v[k++] = fmt[0];
    v[k++] = fmt[1];
    v[k++] = "--ntasks-per-node=1";
    v[k++] = fmt[2];
    v[k++] = "--job-name=ddptop-agents";
    v[k++] = "--overlap";        /* beside the ranks' own steps, and sharing the job's CPUs */
    v[k++] = "--mem=0";          /* all of the job's memory on the node, not a share of it */
    v[k++] = "--cpu-bind=none";  /* the ranks bind themselves if they want to */
    v[k++] = "--immediate=60";   /* else srun waits for free resources for ever */
    v[k++] = "--kill-on-bad-exit=0"; /* one node's agent ending is ddptop's to handle */
    v[k++] = "--label";
    v[k++] = "--input=all";
    v[k++] = "--export=ALL";     /* the agents and ranks get ddptop's environment, whatever
                                  * SLURM_EXPORT_ENV (sbatch --export=NONE) says */
    if (fmt[4]) v[k++] = fmt[4];
    if (s->cache_try) {
        /* the node's kept copy, checked first (srun_step_cache.c) */
        v[k++] = "/bin/sh";
        v[k++] = "-c";
        v[k++] = (char *)srun_step_cache_wrapper();
        v[k++] = "ddptop-agent";
        v[k++] = s->sha256;
    } else {
        v[k++] = s->agent_path;
    }
    v[k++] = "--relay";
    if (s->attach) v[k++] = "--attach";
    v[k] = NULL;
    return v;
}

char *srun_step_command(const struct srun_step *s)
{
    struct strbuf nodes, out;
    char *fmt[5] = {0};
    char **v = srun_argv(s, &nodes, fmt, true);
    strbuf_init(&out);
    for (int i = 0; v[i]; i++) {
        if (i) strbuf_add(&out, " ", 1);
        /* quoted only where a shell needs it: the line is for people to read and paste */
        if (v[i][0] && v[i][strspn(v[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=,:@%+-")] == '\0')
            strbuf_adds(&out, v[i]);
        else
            strbuf_add_shell_quoted(&out, v[i]);
    }
    for (int i = 0; i < 5; i++) free(fmt[i]);
    free(v);
    strbuf_done(&nodes);
    return out.buf ? out.buf : xstrdup("");
}

static void fail_all(struct srun_step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_all(struct srun_step *s, const char *fmt, ...)
{
    va_list ap;
    char why[512];
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        if (m->ended) continue;
        m->ended = true;
        m->failed = !m->announced;
        free(m->why);
        m->why = xstrdup(why);
    }
}

static void child_exec(struct srun_step *s, int in_rd, int out_wr, int err_wr)
{
    struct strbuf nodes;
    char *fmt[5] = {0};
    char **v = srun_argv(s, &nodes, fmt, false);
    sigset_t none;
    setpgid(0, 0); /* a Ctrl-C at the terminal is ddptop's to act on, not srun's */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    for (int i = 0; srun_input_vars[i]; i++) unsetenv(srun_input_vars[i]);
    if (s->bcast) {
        /* srun copies the agent there (--bcast); the agent removes the copy (agent_relay.c) */
        setenv("SLURM_BCAST", s->bcast, 1);
        setenv("DDPTOP_AGENT_UNLINK", "1", 1);
        /* the agents keep a copy by this name for the job's later steps (agent_selfcache.h) */
        if (s->sha256) setenv("DDPTOP_AGENT_SHA256", s->sha256, 1);
    }
    srun_step_direct_env(s);
    if (dup2(in_rd, 0) < 0 || dup2(out_wr, 1) < 0 || dup2(err_wr, 2) < 0) _exit(127);
    util_close_range(3, ~0U);
    execvp(v[0], v);
    dprintf(2, "srun: fatal: cannot execute srun: %s\n", strerror(errno));
    _exit(127);
}

void srun_step_start(struct srun_step *s)
{
    int in[2], out[2], err[2];
    if (s->started) return;
    s->started = true;
    if (s->stderr_path && s->log_fd < 0) s->log_fd = open(s->stderr_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    srun_step_direct_open(s);
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        fail_all(s, "pipe: %s", strerror(errno));
        s->exited = s->reaped = true;
        return;
    }
    s->pid = fork();
    if (s->pid == 0) child_exec(s, in[0], out[1], err[1]);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (s->pid < 0) {
        close(in[1]);
        close(out[0]);
        close(err[0]);
        fail_all(s, "fork: %s", strerror(errno));
        s->exited = s->reaped = true;
        return;
    }
    setpgid(s->pid, s->pid);
    s->to_fd = in[1];
    s->out_fd = out[0];
    s->err_fd = err[0];
    fd_set_nonblock(s->to_fd);
    fd_set_nonblock(s->out_fd);
    fd_set_nonblock(s->err_fd);
}

int srun_step_pollfds(struct srun_step *s, size_t m, struct pollfd *p, int max)
{
    /* its own direct connection; then what the step shares */
    int n = srun_step_direct_pollfds(s, &s->m[m], p, max);
    /* offered once: by the first member not yet released (member 0 may be on a new step) */
    if (!srun_step_owner(s, m)) return n;
    if (s->efd >= 0 && n < max) p[n++] = (struct pollfd){.fd = s->efd, .events = POLLIN};
    if (s->out_fd >= 0 && n < max && !srun_step_backlogged(s))
        p[n++] = (struct pollfd){.fd = s->out_fd, .events = POLLIN};
    if (s->err_fd >= 0 && n < max) p[n++] = (struct pollfd){.fd = s->err_fd, .events = POLLIN};
    if (s->to_fd >= 0 && s->wbuf.len && n < max) p[n++] = (struct pollfd){.fd = s->to_fd, .events = POLLOUT};
    return n;
}

/* Reads what srun wrote on one of its pipes into the members (srun_step_feed); its stdout
 * only while no member holds PROTOCOL_BACKLOG_MAX bytes not taken (back-pressure: srun, then
 * slurmstepd, then the relays wait, as an SSH window makes the agents wait). */
/* Returns the bytes read. */
static size_t read_lines(struct srun_step *s, enum srun_stream from)
{
    char buf[65536];
    size_t got = 0;
    int *fd = from == SRUN_STDOUT ? &s->out_fd : &s->err_fd;
    for (int rounds = 0; *fd >= 0 && rounds < 64; rounds++) {
        if (from == SRUN_STDOUT && s->backlog_hit) {
            if (srun_step_backlogged(s)) return got;
            s->backlog_hit = false;
        }
        ssize_t r = read(*fd, buf, sizeof buf);
        if (r > 0) {
            srun_step_feed(s, from, buf, (size_t)r);
            got += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return got;
        close(*fd);
        *fd = -1;
        /* a last line without its newline is a line */
        if (line_reader_pending(from == SRUN_STDOUT ? &s->olines : &s->elines) > 0) srun_step_feed(s, from, "\n", 1);
    }
    return got;
}

/* srun carries the agents' output from each node's slurmstepd over TCP, where a small write
 * that follows an unacknowledged one waits for the acknowledgement (Nagle), and srun, with
 * nothing to send back, delays that by up to 40 ms: an agent's second message of a burst (a
 * rank's first line after the spawn answer, the third connect answer) came 40 ms late. A
 * write on srun's stdin reaches every node's slurmstepd and carries the acknowledgement with
 * it: after a small read with nothing of ours to send, one empty line (the relays ignore it).
 * Up to 16 nodes after every such read (a window of 5 ms let a node whose message came just
 * after another's wait the 40 ms: measured, issue 22); beyond, at most one per POKE_MS per 16
 * nodes, so that a big step is not flooded. */
#define POKE_MS 5
#define POKE_SMALL 4096

static void poke(struct srun_step *s, size_t got)
{
    int64_t now, every = s->n > 16 ? POKE_MS * (int64_t)(s->n / 16) : 0;
    if (!got || got >= POKE_SMALL || s->wbuf.len || s->to_fd < 0 || s->close_when_flushed) return;
    now = mono_ms();
    if (now - s->poked_ms < every) return;
    s->poked_ms = now;
    strbuf_add(&s->wbuf, "\n", 1);
}

static void close_if_flushed(struct srun_step *s)
{
    if (s->close_when_flushed && !s->wbuf.len && s->to_fd >= 0) {
        close(s->to_fd);
        s->to_fd = -1;
    }
}

void srun_step_flush(struct srun_step *s)
{
    while (s->to_fd >= 0 && s->wbuf.len) {
        ssize_t w = write(s->to_fd, s->wbuf.buf, s->wbuf.len);
        if (w > 0) {
            strbuf_consume(&s->wbuf, (size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN) {
                close(s->to_fd);
                s->to_fd = -1;
                strbuf_reset(&s->wbuf);
            }
            return;
        }
    }
}

static void reap(struct srun_step *s)
{
    if (s->pid > 0 && !s->reaped && waitpid(s->pid, &s->status, WNOHANG) == s->pid) s->reaped = true;
    if (s->tried_pid > 0 && waitpid(s->tried_pid, NULL, WNOHANG) == s->tried_pid) s->tried_pid = 0;
}

/* Once every node's agent has started (announced itself) or ended, none needs the --bcast
 * copy: each agent is told to remove it (RELAY_UNLINK), so that one killed later leaves nothing
 * in its node's /tmp. Not before: where nodes share /tmp, one copy serves them all. */
static void drop_bcast_copies(struct srun_step *s)
{
    if (!s->bcast || s->bcast_dropped) return;
    for (size_t i = 0; i < s->n; i++)
        if (!s->m[i].announced && !s->m[i].ended) return;
    s->bcast_dropped = true;
    srun_step_cache_note(s);
    for (size_t i = 0; i < s->n; i++) {
        struct member *me = &s->m[i];
        if (me->task >= 0 && !me->ended && !me->closed_by_us)
            srun_step_queue(s, me, RELAY_UNLINK, strlen(RELAY_UNLINK));
    }
    srun_step_flush(s);
}

void srun_step_pump(struct srun_step *s)
{
    if (!s->started || s->exited) return;
    srun_step_flush(s);
    close_if_flushed(s);
    srun_step_direct_accept(s);
    poke(s, read_lines(s, SRUN_STDOUT));
    read_lines(s, SRUN_STDERR);
    if (s->cache_try && !srun_step_cache_settle(s)) return;
    drop_bcast_copies(s);
    srun_step_flush(s);
    if (s->out_fd >= 0 || s->err_fd >= 0) return;
    reap(s);
    if (!s->reaped) return;
    /* what the agents said last on their own connections (their exit statuses) before srun's end
     * speaks for them */
    for (size_t i = 0; i < s->n; i++)
        if (!s->m[i].released) srun_step_direct_pump(s, &s->m[i]);
    s->exited = true;
    if (s->to_fd >= 0) close(s->to_fd);
    s->to_fd = -1;
    if (WIFSIGNALED(s->status))
        fail_all(s, "srun (the agents' step) was killed by signal %d%s%s", WTERMSIG(s->status),
                 s->srun_err[0] ? ": " : "", s->srun_err);
    else if (s->srun_err[0])
        fail_all(s, "%s", s->srun_err);
    else
        fail_all(s, "srun (the agents' step) exited with status %d", WEXITSTATUS(s->status));
}

void srun_step_member_pump(struct srun_step *s, size_t m, short revents)
{
    struct member *me = &s->m[m];
    if (me->released) return;
    if (me->dfd >= 0 && !(revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) && !me->dmore) {
        srun_step_direct_flush(me); /* what was queued since: no POLLOUT was asked for it */
        return;
    }
    srun_step_direct_pump(s, me);
}

bool srun_step_owner(const struct srun_step *s, size_t m)
{
    for (size_t i = 0; i < m; i++)
        if (!s->m[i].released) return false;
    return true;
}

enum srun_member_state srun_step_state(const struct srun_step *s, size_t m)
{
    const struct member *me = &s->m[m];
    if (!s->started) return SRUN_MEMBER_WAITING;
    if (me->closed_by_us) return SRUN_MEMBER_CLOSED;
    if (s->cache_try) return SRUN_MEMBER_RUNNING; /* the step may still start again */
    /* its last lines are handed out before it is reported gone, those srun still holds while
     * another member's backlog stops us reading included (unless it is cut off) */
    if (me->ended && !line_reader_pending(&me->in) && me->dfd < 0 && (me->cut || me->dforged || s->out_fd < 0 || !srun_step_backlogged(s)))
        return me->failed ? SRUN_MEMBER_FAILED : SRUN_MEMBER_CLOSED;
    return SRUN_MEMBER_RUNNING;
}

const char *srun_step_error(const struct srun_step *s, size_t m)
{
    const struct member *me = &s->m[m];
    if (me->closed_by_us) return "closed by ddptop";
    if (me->cut) return me->why;
    if (me->failed && me->last_err[0] && me->why && !strstr(me->why, me->last_err)) return me->last_err;
    return me->why;
}

const char *srun_step_hint(const struct srun_step *s, size_t m)
{
    const struct member *me = &s->m[m];
    const char *why = srun_step_error(s, m);
    if (!me->failed || !why) return NULL;
    if (strstr(why, "execve") || strstr(why, "No such file"))
        return "the agent must be at the same path on every node: keep ddptop's build directory on "
               "a file system every node mounts (docs/slurm.md)";
    if (strstr(why, "cannot execute srun"))
        return "run ddptop where Slurm's commands are installed, or use --transport ssh";
    if (strstr(why, "Unable to create step") || strstr(why, "Requested nodes are busy") || strstr(why, "Invalid job id"))
        return "ddptop starts its agents as a step of the allocation: check the job with squeue -j "
               "(--jobid must name a running job of yours)";
    return NULL;
}

const char *srun_step_address(const struct srun_step *s, size_t m)
{
    return s->m[m].addr[0] ? s->m[m].addr : s->m[m].name;
}

void srun_step_send(struct srun_step *s, size_t m, const char *line)
{
    struct member *me = &s->m[m];
    if (me->closed_by_us || me->ended) return;
    if (me->task < 0 || s->cache_try) {
        strbuf_adds(&me->pending, line);
        strbuf_add(&me->pending, "\n", 1);
        return;
    }
    /* at once: holding requests to write a pass's together made the preflight slower through
     * srun (measured, issue 22) */
    srun_step_queue(s, me, line, strlen(line));
    srun_step_flush(s);
}

char *srun_step_next_line(struct srun_step *s, size_t m)
{
    struct member *me = &s->m[m];
    if (s->cache_try) return NULL; /* held until every node greeted (srun_step_cache.c) */
    return line_reader_take(&me->in);
}

uint64_t srun_step_bytes_in(const struct srun_step *s, size_t m)
{
    return s->m[m].bytes_in;
}

static bool all_closed(const struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->m[i].closed_by_us && !s->m[i].released && !s->m[i].ended) return false;
    return true;
}

void srun_step_close(struct srun_step *s, size_t m)
{
    struct member *me = &s->m[m];
    if (me->closed_by_us) return;
    me->closed_by_us = true;
    if (me->task >= 0 && !me->ended) srun_step_queue(s, me, RELAY_EOF, strlen(RELAY_EOF));
    srun_step_flush(s);
    /* the last one closes srun's stdin once what is queued went out: every task sees end of
     * file, the step ends */
    if (all_closed(s)) s->close_when_flushed = true;
    close_if_flushed(s);
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Waits up to ms for srun to exit, reading what it still says so it never blocks on a pipe. */
void srun_step_wait_exit(struct srun_step *s, int ms)
{
    for (int i = 0; i < ms / 10 && !s->reaped; i++) {
        read_lines(s, SRUN_STDOUT);
        read_lines(s, SRUN_STDERR);
        reap(s);
        if (!s->reaped) nap_ms(10);
    }
}

void srun_step_detach(struct srun_step *s, size_t m)
{
    (void)m;
    if (s) s->detached = true;
}

void srun_step_abandon(struct srun_step *s)
{
    if (s) s->abandoned = true;
}

static void step_free(struct srun_step *s)
{
    srun_step_flush(s); /* the last requests (an exit), if the pipe takes them */
    srun_step_direct_close(s);
    if (s->to_fd >= 0) close(s->to_fd);
    s->to_fd = -1;
    if (s->pid > 0 && !s->reaped && s->detached && !s->abandoned) {
        /* srun stays with the agents that wait for a controller (it drops their output, a
         * measured srun behaviour: docs/slurm-facts.md 2); it ends when they do */
        reap(s);
    } else if (s->pid > 0 && !s->reaped && s->abandoned) {
        kill(-s->pid, SIGKILL); /* a step of bridges only: Slurm ends its tasks */
        reap(s);
    } else if (s->pid > 0 && !s->reaped) {
        /* the agents stop their ranks on end of file and exit; srun follows */
        srun_step_wait_exit(s, 4000);
        if (!s->reaped) kill(s->pid, SIGTERM); /* srun passes it to the tasks */
        srun_step_wait_exit(s, 3000);
        if (!s->reaped) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, &s->status, 0);
        }
    }
    if (s->tried_pid > 0 && waitpid(s->tried_pid, NULL, WNOHANG) != s->tried_pid) {
        kill(-s->tried_pid, SIGKILL); /* agents without ranks: Slurm ends its tasks */
        waitpid(s->tried_pid, NULL, 0);
    }
    if (s->out_fd >= 0) close(s->out_fd);
    if (s->err_fd >= 0) close(s->err_fd);
    if (s->log_fd >= 0) close(s->log_fd);
    for (size_t i = 0; i < s->n; i++) {
        free(s->m[i].name);
        free(s->m[i].why);
        strbuf_done(&s->m[i].piece.line);
        line_reader_done(&s->m[i].in);
        strbuf_done(&s->m[i].pending);
        strbuf_done(&s->m[i].dq);
        line_reader_done(&s->m[i].dr);
    }
    strbuf_done(&s->wbuf);
    line_reader_done(&s->olines);
    line_reader_done(&s->elines);
    free(s->m);
    free(s->agent_path);
    free(s->jobid);
    free(s->stderr_path);
    free(s->bcast);
    free(s->sha256);
    free(s);
}

void srun_step_release(struct srun_step *s, size_t m)
{
    if (!s || s->m[m].released) return;
    srun_step_close(s, m);
    s->m[m].released = true;
    if (--s->refs == 0) step_free(s);
}
