/* The relay between a Slurm step's standard input/output and the agent's loop (agent_relay.h).
 * A thread with blocking I/O is enough here: it only copies bytes, and the agent's loop, which
 * must never block, talks to it through two pipes like it talks to SSH. */
#include "agent_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_direct.h"
#include "agent_selfcache.h"
#include "util/util.h"
#include "wire/relay.h"

static struct {
    int task;            /* SLURM_PROCID: the lines for "task K" with K == task are ours */
    int sock;            /* the direct connection to ddptop (wire/direct.h), or -1: srun's I/O */
    int sock_out_ok;     /* its sending side still works (else the agent's lines are dropped) */
    struct direct_line_key tx, rx; /* the keys of its lines (wire/direct_line.h): ours, ddptop's */
    struct strbuf part;  /* the agent's bytes after its last whole line (only whole lines are
                          * sealed); touched by the relay's thread, then by agent_relay_finish */
    struct strbuf sealed; /* what goes on the connection, sealed lines (kept: one per read) */
    int64_t ack_every;   /* ms between two acknowledging empty lines (acknowledge()) */
    int64_t acked_ms;    /* the last one */
    int to_agent;        /* write end of the agent's stdin; -1 once closed */
    int from_agent;      /* read end of the agent's stdout */
    pthread_t thread;
    int running;
} relay = {.to_agent = -1, .from_agent = -1, .sock = -1};

/* srun --bcast put this copy in /tmp for this step alone. It goes as soon as the controller
 * says that every node's agent has started (RELAY_UNLINK), so that an agent killed later
 * leaves nothing behind, and at the latest when the agent exits. (Not at start: where nodes
 * share /tmp, another node may not have started it yet.) Written before the relay thread
 * starts, only read after. */
static char bcast_copy[4096];

static void close_to_agent(void)
{
    if (relay.to_agent >= 0) close(relay.to_agent);
    relay.to_agent = -1;
}

/* The controller's lines: ours go to the agent, without the address. Returns how many were
 * requests for other tasks (srun copies every line to every node). */
static int from_controller(struct strbuf *in)
{
    size_t off = 0;
    char *line;
    int others = 0;
    while ((line = strbuf_take_line(in, &off)) != NULL) {
        int task;
        const char *rest;
        if (relay_address(line, &task, &rest) == 0 && task != relay.task) others++;
        else if (relay_address(line, &task, &rest) == 0) {
            if (strcmp(rest, RELAY_EOF) == 0) {
                close_to_agent();
            } else if (strcmp(rest, RELAY_UNLINK) == 0) {
                if (bcast_copy[0]) unlink(bcast_copy); /* the exit's unlink then finds nothing */
            } else if (relay.to_agent >= 0) {
                size_t n = strlen(rest);
                /* the agent's loop drains its stdin: a full pipe only means it is busy */
                if (util_write_all(relay.to_agent, rest, n) < 0 || util_write_all(relay.to_agent, "\n", 1) < 0)
                    close_to_agent();
            }
        }
        free(line);
    }
    strbuf_consume(in, off);
    return others;
}

/* The agent's lines, cut into pieces. */
static int from_agent(struct strbuf *in)
{
    size_t off = 0;
    char *line;
    struct strbuf out;
    int rc;
    strbuf_init(&out);
    while ((line = strbuf_take_line(in, &off)) != NULL) {
        relay_frame(line, strlen(line), &out);
        free(line);
    }
    strbuf_consume(in, off);
    /* one write per piece: slurmstepd then never holds part of one when the agent exits */
    rc = 0;
    for (size_t off2 = 0; rc == 0 && off2 < out.len;) {
        const char *nl = memchr(out.buf + off2, '\n', out.len - off2);
        size_t n = (size_t)(nl - (out.buf + off2)) + 1;
        rc = util_write_all(STDOUT_FILENO, out.buf + off2, n);
        off2 += n;
    }
    strbuf_done(&out);
    return rc;
}

/* srun sends the controller's lines to every node's slurmstepd over TCP without TCP_NODELAY,
 * so a small message that follows one not yet acknowledged waits for the acknowledgement,
 * which slurmstepd delays by up to 40 ms when it has nothing to send back: a request for one
 * node, which every other node also receives and does not answer, held the next request 40 ms
 * on its way to those nodes (issue 22). After a read of requests for other tasks, one empty
 * line on stdout (the controller reads it as nothing) makes slurmstepd send, and the
 * acknowledgement rides with it. Not after our own requests (our agent's answer carries it)
 * nor after the controller's own empty lines (they would answer each other). Up to 16 nodes
 * after every such read (a 5 ms window let the next request wait: measured); beyond, at most
 * one per 5 ms per 16 nodes, as the controller's (srun_step.c). */
static void acknowledge(int others, ssize_t got)
{
    int64_t now;
    if (!others || got >= 4096) return;
    now = mono_ms();
    if (now - relay.acked_ms < relay.ack_every) return;
    relay.acked_ms = now;
    util_write_all(STDOUT_FILENO, "\n", 1);
}

/* ddptop's lines on the direct connection, each with its MAC (wire/direct_line.h): its own,
 * unaddressed; "!eof" and "!unlink" as through srun. Returns -1 at the first line that fails its
 * check: whoever wrote it does not hold the step's key (a spawn request written into the TCP
 * stream), so nothing more of the connection is believed. */
static int from_direct(struct strbuf *in)
{
    size_t off = 0;
    while (off < in->len) {
        char *p = in->buf + off, *nl = memchr(p, '\n', in->len - off);
        int at;
        if (!nl) break;
        *nl = '\0';
        off += (size_t)(nl - p) + 1;
        if ((at = direct_line_open(&relay.rx, p, (size_t)(nl - p))) < 0) {
            fprintf(stderr, "ddptop-agent: line %llu from ddptop on the direct connection failed its check "
                    "(someone without the step's key wrote into it): the connection is closed\n",
                    (unsigned long long)relay.rx.seq + 1);
            strbuf_reset(in);
            return -1;
        }
        p += at;
        if (strcmp(p, RELAY_EOF) == 0) {
            close_to_agent();
        } else if (strcmp(p, RELAY_UNLINK) == 0) {
            if (bcast_copy[0]) unlink(bcast_copy);
        } else if (relay.to_agent >= 0) {
            size_t n = strlen(p);
            if (util_write_all(relay.to_agent, p, n) < 0 || util_write_all(relay.to_agent, "\n", 1) < 0)
                close_to_agent();
        }
    }
    strbuf_consume(in, off);
    return 0;
}

/* The agent's bytes on the direct connection: its whole lines, each sealed with its MAC; the
 * rest waits for its newline. Once the connection broke they are dropped (ddptop is gone, or
 * sees the node lost). */
static void to_direct(const char *p, size_t n)
{
    const char *nl;
    if (!relay.sock_out_ok || n == 0) return;
    strbuf_reset(&relay.sealed);
    if (relay.part.len) {
        /* a line begun in an earlier read: its end is this read's first newline */
        size_t k;
        nl = memchr(p, '\n', n);
        k = nl ? (size_t)(nl - p) + 1 : n;
        strbuf_add(&relay.part, p, k);
        p += k;
        n -= k;
        if (!nl) return;
        direct_line_seal(&relay.tx, relay.part.buf, relay.part.len - 1, &relay.sealed);
        strbuf_reset(&relay.part);
    }
    while ((nl = memchr(p, '\n', n)) != NULL) {
        direct_line_seal(&relay.tx, p, (size_t)(nl - p), &relay.sealed);
        n -= (size_t)(nl - p) + 1;
        p = nl + 1;
    }
    strbuf_add(&relay.part, p, n);
    /* the agent ignores SIGPIPE (agent_main.c): a closed peer is an error here */
    if (relay.sealed.len && util_write_all(relay.sock, relay.sealed.buf, relay.sealed.len) < 0) relay.sock_out_ok = 0;
}

/* The direct connection is over, or cannot be believed: closed both ways (ddptop then sees its
 * end; the agent, its stdin ending, as when ddptop is gone). */
static void direct_end(void)
{
    shutdown(relay.sock, SHUT_RDWR);
    relay.sock_out_ok = 0;
    close_to_agent();
}

/* The keys wiped: at the end, and in every child forked from the agent (pthread_atfork), which
 * would otherwise hold a copy all its life (a rank's keeper lives on without exec). */
static void relay_forget(void)
{
    direct_line_wipe(&relay.tx);
    direct_line_wipe(&relay.rx);
}

static void *relay_main(void *arg)
{
    struct strbuf cin, ain, din;
    char buf[65536];
    int stdin_open = 1, sock_open = relay.sock >= 0;
    (void)arg;
    strbuf_init(&cin);
    strbuf_init(&ain);
    strbuf_init(&din);
    for (;;) {
        struct pollfd p[3] = {{.fd = relay.from_agent, .events = POLLIN},
                              {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
                              {.fd = sock_open ? relay.sock : -1, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[2].revents) {
            ssize_t r = recv(relay.sock, buf, sizeof buf, 0);
            if (r > 0) {
                strbuf_add(&din, buf, (size_t)r);
                /* ddptop sends requests, not floods: a line without its end this long is not its */
                if (from_direct(&din) < 0 || din.len > (1u << 20)) {
                    sock_open = 0;
                    direct_end();
                }
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                /* ddptop or the connection is gone: as srun's stdin ending */
                sock_open = 0;
                close_to_agent();
            }
        }
        if (p[1].revents) {
            ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
            if (r > 0) {
                strbuf_add(&cin, buf, (size_t)r);
                acknowledge(from_controller(&cin), r);
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                /* srun's stdin ended (ddptop is gone): the agent stops its ranks on its EOF */
                stdin_open = 0;
                close_to_agent();
            }
        }
        if (p[0].revents) {
            ssize_t r = read(relay.from_agent, buf, sizeof buf);
            if (r > 0 && relay.sock >= 0) {
                to_direct(buf, (size_t)r);
            } else if (r > 0) {
                strbuf_add(&ain, buf, (size_t)r);
                if (from_agent(&ain) < 0) break; /* srun's stdout is gone */
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                break; /* the agent closed its output: it is done */
            }
        }
    }
    close_to_agent();
    strbuf_done(&cin);
    strbuf_done(&ain);
    strbuf_done(&din);
    return NULL;
}

static int addr_of_fd_toward(const char *host, char *buf, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    int fd, ok = -1;
    if (!host || !*host || getaddrinfo(host, "9", &hints, &res) != 0) return -1;
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    /* connect() on a UDP socket sends nothing: it only picks the route and the source */
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && ntohl(me.sin_addr.s_addr) >> 24 != 127 &&
        inet_ntop(AF_INET, &me.sin_addr, buf, (socklen_t)len))
        ok = 0;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return ok;
}

void agent_relay_address(char *buf, size_t len)
{
    struct ifaddrs *ifa = NULL;
    snprintf(buf, len, "-");
    if (addr_of_fd_toward(getenv("SLURM_SRUN_COMM_HOST"), buf, len) == 0) return;
    if (addr_of_fd_toward(getenv("SLURM_LAUNCH_NODE_IPADDR"), buf, len) == 0) return;
    if (getifaddrs(&ifa) != 0) return;
    for (struct ifaddrs *a = ifa; a; a = a->ifa_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)a->ifa_addr;
        if (!sin || sin->sin_family != AF_INET || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK))
            continue;
        if (inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)len)) break;
    }
    freeifaddrs(ifa);
}

/* The agents' step's own variables: the ranks are not its tasks (a rank's own srun, or a
 * framework that reads SLURM_PROCID, would take them for theirs). The job's variables stay;
 * the job-level values of the counts come back from ddptop with each spawn. */
static void scrub_step_env(void)
{
    static const char *const vars[] = {
        "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASK_PID", "SLURM_STEPID",
        "SLURM_GTIDS", "SLURM_SRUN_COMM_HOST", "SLURM_SRUN_COMM_PORT", "SLURM_LAUNCH_NODE_IPADDR",
        "SLURM_CPU_BIND", "SLURM_CPU_BIND_LIST", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_VERBOSE",
        "SLURM_DISTRIBUTION", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_LABELIO",
        "SLURM_OVERLAP", "SLURM_KILL_BAD_EXIT", "SLURM_MEM_PER_NODE", "SLURM_NNODES", "SLURM_JOB_NAME",
        "SLURM_IMMEDIATE", "SLURM_CPUS_PER_TASK", "SLURM_STEP_LAUNCHER_PORT",
        "SLURM_BCAST", /* the agent's copy: a rank's own srun must not copy its program there */
        NULL,
    };
    extern char **environ;
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    for (size_t i = 0; environ && environ[i];) {
        if (strncmp(environ[i], "SLURM_STEP_", 11) == 0) {
            char *name = xstrndup(environ[i], strcspn(environ[i], "="));
            unsetenv(name);
            free(name);
        } else {
            i++;
        }
    }
}

/* Why this agent could not make its direct connection (said in its hello), or "". */
static char direct_note[400];

const char *agent_relay_note(void)
{
    return direct_note[0] ? direct_note : NULL;
}

/* Whether this agent keeps a copy of itself for the job's later steps (said in its greeting). */
static bool kept;

static void note_bcast_copy(void)
{
    const char *want = getenv("DDPTOP_AGENT_UNLINK");
    ssize_t n = readlink("/proc/self/exe", bcast_copy, sizeof bcast_copy - 1);
    bcast_copy[n > 0 ? n : 0] = '\0';
    const char *sha = getenv("DDPTOP_AGENT_SHA256");
    if (!want || strcmp(want, "1") != 0 || strncmp(bcast_copy, "/tmp/ddptop-agent.", 18) != 0) bcast_copy[0] = '\0';
    /* a later step of the job runs this copy instead of copying again (agent_selfcache.h);
     * before the greeting, so that a node that greeted holds it */
    kept = bcast_copy[0] && sha && agent_selfcache_keep(sha);
    unsetenv("DDPTOP_AGENT_UNLINK");
    unsetenv("DDPTOP_AGENT_SHA256");
}

int agent_relay_start(int *in_fd, int *out_fd, char *err, size_t errlen)
{
    const char *task = getenv("SLURM_PROCID"), *name = getenv("SLURMD_NODENAME");
    char host[256] = "", addr[64], *end;
    int a[2], b[2];
    struct strbuf hello;
    long t = task ? strtol(task, &end, 10) : -1;
    if (!task || *end || t < 0) {
        snprintf(err, errlen, "--relay runs as a task of a Slurm step (SLURM_PROCID is not set): it "
                 "is started by ddptop --transport srun, not by hand");
        return -1;
    }
    relay.task = (int)t;
    {
        /* read before scrub_step_env() removes it */
        const char *nn = getenv("SLURM_NNODES");
        long n = nn ? strtol(nn, NULL, 10) : 0;
        relay.ack_every = n > 16 ? 5 * (n / 16) : 0;
        relay.acked_ms = -1000000;
    }
    if (!name || !*name) {
        gethostname(host, sizeof host - 1);
        name = host;
    }
    agent_relay_address(addr, sizeof addr);
    note_bcast_copy();
    strbuf_init(&hello);
    strbuf_addf(&hello, "=%s %s%s", name, addr, kept ? " kept" : "");
    {
        /* the greeting goes over the direct connection when there is one (wire/direct.h);
         * while the step's variables are still there (SLURM_SRUN_COMM_HOST) */
        char why[256];
        relay.sock = agent_direct_connect(relay.task, hello.buf, &relay.tx, &relay.rx, why, sizeof why);
        relay.sock_out_ok = relay.sock >= 0;
        if (relay.sock >= 0) pthread_atfork(NULL, NULL, relay_forget);
        strbuf_init(&relay.part);
        strbuf_init(&relay.sealed);
        if (relay.sock < 0 && why[0]) {
            fprintf(stderr, "ddptop-agent: no direct connection to ddptop (%s): speaking through srun's I/O\n", why);
            snprintf(direct_note, sizeof direct_note, "no direct connection to ddptop (%s): its lines go "
                     "through srun's I/O, slower", why);
        }
    }
    scrub_step_env();
    if (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (relay.sock < 0) {
        strbuf_add(&hello, "\n", 1);
        util_write_all(STDOUT_FILENO, hello.buf, hello.len);
    }
    strbuf_done(&hello);
    *in_fd = a[0];
    relay.to_agent = a[1];
    relay.from_agent = b[0];
    *out_fd = b[1];
    if (pthread_create(&relay.thread, NULL, relay_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the relay thread");
        return -1;
    }
    relay.running = 1;
    return 0;
}

void agent_relay_finish(int in_fd, int out_fd, int status)
{
    char last[32];
    int n;
    close(in_fd);  /* a relay blocked writing to the agent gets EPIPE and lets go */
    close(out_fd); /* the relay forwards the rest, then sees end of file */
    if (relay.running) pthread_join(relay.thread, NULL);
    relay.running = 0;
    close(relay.from_agent);
    if (bcast_copy[0]) unlink(bcast_copy);
    n = snprintf(last, sizeof last, "!%d", status);
    if (relay.sock >= 0 && relay.sock_out_ok) {
        /* on its own line, whatever the agent's last bytes were */
        if (relay.part.len) to_direct("\n", 1);
        last[n] = '\n';
        to_direct(last, (size_t)n + 1);
    }
    if (relay.sock >= 0) {
        int ok = relay.sock_out_ok;
        close(relay.sock);
        relay.sock = -1;
        strbuf_done(&relay.part);
        strbuf_done(&relay.sealed);
        relay_forget();
        if (ok) return;
    }
    /* framed like a piece, so that a cut one is still read whole */
    {
        struct strbuf f;
        strbuf_init(&f);
        relay_frame(last, (size_t)n, &f);
        util_write_all(STDOUT_FILENO, f.buf, f.len);
        strbuf_done(&f);
    }
}
