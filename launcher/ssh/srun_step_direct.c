/* The direct connections of a Slurm step's agents (wire/direct.h): ddptop's listening socket,
 * the handshakes in progress, and each member's own connection once its agent proved the key.
 * srun's I/O forwarding stays for what it alone knows (a task's end, stderr) and for the agents
 * that could not connect (a firewall between the nodes and this host): those speak through srun
 * as before (srun_step_lines.c), nothing else changes for them.
 *
 * Nothing here blocks: the listener and the handshakes are in one epoll set that the step offers
 * to the loop (srun_step_pollfds), a member's socket is offered by its own transport. Everything
 * read is bounded: a handshake line DIRECT_LINE_MAX bytes, at most DIRECT_PENDING_MAX handshakes,
 * each DIRECT_HANDSHAKE_MS; a member's lines as over SSH (PROTOCOL_MAX_LINE, _BACKLOG_MAX). */
#include "srun_step_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/direct.h"
#include "wire/protocol.h"

#define DIRECT_HANDSHAKE_MS 5000
/* After its socket ended without the agent's exit status, how long srun has to say how the
 * task ended (a kill, a lost node) before the member ends as "connection closed". */
#define DIRECT_EOF_WAIT_MS 2000

struct direct_pending {
    int fd;
    int task;              /* from its hello; -1 before */
    char na[DIRECT_NONCE_HEX + 1], nc[DIRECT_NONCE_HEX + 1];
    char buf[DIRECT_LINE_MAX + 1];
    size_t len;
    int64_t deadline_ms;
    char peer[64];
};

static void peer_str(const struct sockaddr_storage *ss, char *out, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
        port = ntohs(s6->sin6_port);
        /* an IPv4 peer on the dual-stack socket: shown as people write it */
        if (strncmp(a, "::ffff:", 7) == 0 && strchr(a + 7, '.')) memmove(a, a + 7, strlen(a + 7) + 1);
    } else if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
        port = ntohs(s4->sin_port);
    }
    snprintf(out, len, "%s:%d", a, port);
}

static void new_key(struct srun_step *s)
{
    util_random(s->dkey, sizeof s->dkey);
    util_hex(s->dkey, sizeof s->dkey, s->dkey_hex);
}

/* A socket on every address of this host (the agents come from srun's side of the network:
 * SLURM_SRUN_COMM_HOST), dual-stack where IPv6 exists. */
static int listen_any(int *port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), off = 0;
    if (fd >= 0) {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    if (listen(fd, 4096) != 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

void srun_step_direct_open(struct srun_step *s)
{
    const char *off = getenv("DDPTOP_SRUN_DIRECT");
    struct epoll_event ev = {.events = EPOLLIN};
    if (s->lfd >= 0 || s->direct_off) return;
    if (off && strcmp(off, "0") == 0) {
        s->direct_off = true;
        srun_step_log(s, "ddptop: DDPTOP_SRUN_DIRECT=0: the agents speak through srun's I/O only\n");
        return;
    }
    s->efd = epoll_create1(EPOLL_CLOEXEC);
    s->lfd = s->efd >= 0 ? listen_any(&s->dport) : -1;
    ev.data.fd = s->lfd;
    if (s->lfd < 0 || epoll_ctl(s->efd, EPOLL_CTL_ADD, s->lfd, &ev) != 0) {
        srun_step_log(s, "ddptop: no socket for the agents' direct connections (%s): they speak through srun's I/O\n",
                      strerror(errno));
        srun_step_direct_close(s);
        s->direct_off = true;
        return;
    }
    new_key(s);
}

void srun_step_direct_env(const struct srun_step *s)
{
    char port[16];
    if (s->lfd < 0) {
        unsetenv(DIRECT_ENV_PORT);
        unsetenv(DIRECT_ENV_KEY);
        return;
    }
    snprintf(port, sizeof port, "%d", s->dport);
    setenv(DIRECT_ENV_PORT, port, 1);
    setenv(DIRECT_ENV_KEY, s->dkey_hex, 1);
}

static void pending_drop(struct srun_step *s, size_t i, const char *why)
{
    struct direct_pending *p = &s->pend[i];
    if (why) srun_step_log(s, "ddptop: a direct connection from %s was refused: %s\n", p->peer, why);
    epoll_ctl(s->efd, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    s->pend[i] = s->pend[--s->npend];
}

static void accept_all(struct srun_step *s)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        struct epoll_event ev = {.events = EPOLLIN};
        struct direct_pending *p;
        if (fd < 0) return;
        if (s->npend >= s->n + 16 || s->npend >= DIRECT_PENDING_MAX) {
            close(fd); /* more than the step's agents can be: not ours */
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ev.data.fd = fd;
        if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        if (s->npend == s->pend_cap) {
            s->pend_cap = s->pend_cap ? 2 * s->pend_cap : 16;
            s->pend = xrealloc(s->pend, s->pend_cap * sizeof *s->pend);
        }
        p = &s->pend[s->npend++];
        memset(p, 0, sizeof *p);
        p->fd = fd;
        p->task = -1;
        p->deadline_ms = mono_ms() + DIRECT_HANDSHAKE_MS;
        peer_str(&ss, p->peer, sizeof p->peer);
    }
}

static bool send_line(int fd, const char *line)
{
    size_t n = strlen(line);
    /* a handshake line fits any socket's empty buffer: it goes whole or the peer is broken */
    return send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n;
}

/* One whole handshake line of pending i, and rest bytes that came after it (the agent's first
 * lines may follow its proof in one segment); returns false when it was dropped or handed over. */
static bool pending_line(struct srun_step *s, size_t i, const char *line, const char *rest, size_t rest_len)
{
    struct direct_pending *p = &s->pend[i];
    char mac[DIRECT_MAC_HEX + 1], want[65], out[DIRECT_LINE_MAX];
    const char *greeting;
    struct member *m;
    if (p->task < 0) {
        unsigned char rnd[DIRECT_NONCE_HEX / 2];
        if (direct_hello_parse(line, &p->task, p->na) != 0) {
            p->task = -1;
            pending_drop(s, i, "not a ddptop agent's greeting");
            return false;
        }
        util_random(rnd, sizeof rnd);
        util_hex(rnd, sizeof rnd, p->nc);
        direct_mac(s->dkey, "controller", p->task, p->na, p->nc, want);
        snprintf(out, sizeof out, "%s %s\n", p->nc, want);
        if (!send_line(p->fd, out)) {
            pending_drop(s, i, "it did not take ddptop's answer");
            return false;
        }
        return true;
    }
    if (direct_proof_parse(line, mac, &greeting) != 0) {
        pending_drop(s, i, "a malformed proof");
        return false;
    }
    direct_mac(s->dkey, "agent", p->task, p->na, p->nc, want);
    if (!direct_mac_equal(mac, want)) {
        pending_drop(s, i, "it does not hold this step's key");
        return false;
    }
    m = srun_step_announce(s, p->task, greeting, p->fd);
    if (!m) {
        pending_drop(s, i, "no node of the step is waiting for its task");
        return false;
    }
    srun_step_log(s, "ddptop: %s (task %d) speaks over its direct connection from %s\n", m->name, p->task, p->peer);
    epoll_ctl(s->efd, EPOLL_CTL_DEL, p->fd, NULL);
    if (rest_len) srun_step_direct_feed(s, m, rest, rest_len);
    s->pend[i] = s->pend[--s->npend];
    return false; /* handed over: no longer pending */
}

static void pending_read(struct srun_step *s, size_t i)
{
    struct direct_pending *p = &s->pend[i];
    ssize_t r = recv(p->fd, p->buf + p->len, DIRECT_LINE_MAX - p->len, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pending_drop(s, i, r == 0 ? "it closed before the handshake ended" : strerror(errno));
        return;
    }
    p->len += (size_t)r;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (!nl) break;
        *nl = '\0';
        size_t used = (size_t)(nl - p->buf) + 1;
        char line[DIRECT_LINE_MAX + 1];
        memcpy(line, p->buf, used);
        if (!pending_line(s, i, line, p->buf + used, p->len - used)) return; /* p is another's now */
        p = &s->pend[i];
        memmove(p->buf, p->buf + used, p->len - used);
        p->len -= used;
    }
    if (p->len >= DIRECT_LINE_MAX) pending_drop(s, i, "a handshake line too long");
}

/* Whether an agent may still connect: a member neither announced nor ended. */
static bool anyone_expected(const struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->m[i].announced && !s->m[i].ended && !s->m[i].closed_by_us) return true;
    return false;
}

void srun_step_direct_accept(struct srun_step *s)
{
    struct epoll_event ev[64];
    int64_t now;
    if (s->efd < 0) return;
    int k = epoll_wait(s->efd, ev, 64, 0);
    for (int j = 0; j < k; j++) {
        if (ev[j].data.fd == s->lfd) {
            accept_all(s);
            continue;
        }
        for (size_t i = 0; i < s->npend; i++)
            if (s->pend[i].fd == ev[j].data.fd) {
                pending_read(s, i);
                break;
            }
    }
    now = mono_ms();
    for (size_t i = 0; i < s->npend;)
        if (now > s->pend[i].deadline_ms) pending_drop(s, i, "its handshake took too long");
        else i++;
    /* every agent said where it is (directly or through srun): nobody else is let in */
    if (s->lfd >= 0 && !s->cache_try && !anyone_expected(s)) {
        epoll_ctl(s->efd, EPOLL_CTL_DEL, s->lfd, NULL);
        close(s->lfd);
        s->lfd = -1;
    }
    if (s->lfd < 0 && s->npend == 0) {
        close(s->efd);
        s->efd = -1;
    }
}

static void member_sock_close(struct member *m)
{
    if (m->dfd >= 0) close(m->dfd);
    m->dfd = -1;
}

void srun_step_direct_queue(struct member *m, const char *line, size_t len)
{
    if (m->dfd < 0) return; /* gone: what it was sent is lost with it, as over SSH */
    strbuf_add(&m->dq, line, len);
    strbuf_add(&m->dq, "\n", 1);
    srun_step_direct_flush(m);
}

void srun_step_direct_flush(struct member *m)
{
    while (m->dfd >= 0 && m->dq.len) {
        ssize_t w = send(m->dfd, m->dq.buf, m->dq.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            strbuf_consume(&m->dq, (size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN) strbuf_reset(&m->dq); /* the read side sees the end */
            return;
        }
    }
}

static bool backlogged(const struct member *m)
{
    return m->in.len - m->in_off >= PROTOCOL_BACKLOG_MAX;
}

/* Whole lines of m's connection: an agent's protocol line, or "!STATUS" (its last). */
static void member_lines(struct srun_step *s, struct member *m)
{
    size_t off = 0;
    while (off < m->dr.len) {
        const char *p = m->dr.buf + off, *nl = memchr(p, '\n', m->dr.len - off);
        size_t n = nl ? (size_t)(nl - p) : m->dr.len - off;
        if (n > (size_t)PROTOCOL_MAX_LINE) {
            srun_step_member_cut(s, m);
            m->dskip = true;
        }
        if (!nl) break;
        if (m->dskip) {
            m->dskip = false; /* the end of the line that was too long */
        } else if (n && p[0] == '!') {
            char st[32];
            snprintf(st, sizeof st, "%.*s", (int)(n - 1 < sizeof st - 1 ? n - 1 : sizeof st - 1), p + 1);
            srun_step_member_exited(m, st);
        } else if (srun_step_member_reads(m)) {
            strbuf_add(&m->in, p, n + 1);
        }
        m->bytes_in += n + 1;
        off += n + 1;
    }
    if (m->dskip) off = m->dr.len; /* what is left of a line too long is not kept */
    strbuf_consume(&m->dr, off);
}

void srun_step_direct_feed(struct srun_step *s, struct member *m, const char *buf, size_t len)
{
    strbuf_add(&m->dr, buf, len);
    member_lines(s, m);
}

void srun_step_direct_pump(struct srun_step *s, struct member *m)
{
    char buf[65536];
    int64_t now;
    if (m->dfd < 0) goto deadlines;
    srun_step_direct_flush(m);
    m->dmore = true; /* unless a read below finds nothing, or the end */
    for (int rounds = 0; m->dfd >= 0 && rounds < 16 && !backlogged(m); rounds++) {
        ssize_t r = recv(m->dfd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0) {
            srun_step_direct_feed(s, m, buf, (size_t)r);
            continue;
        }
        if (r < 0 && (errno == EINTR)) continue;
        if (r < 0 && errno == EAGAIN) {
            m->dmore = false;
            break;
        }
        /* its end: a last line without its newline is a line */
        if (m->dr.len && !m->dskip) srun_step_direct_feed(s, m, "\n", 1);
        strbuf_reset(&m->dr);
        m->dskip = false;
        if (!m->ended) {
            m->deof_ms = mono_ms();
            m->deof_why = r < 0 ? errno : 0;
        }
        member_sock_close(m);
        m->dmore = false;
    }
deadlines:
    if (!m->direct) return;
    now = mono_ms();
    if (m->ended && m->dfd >= 0) {
        /* srun said how it ended: what its socket still holds comes soon, or never */
        if (!m->dend_ms) m->dend_ms = now;
        if (now - m->dend_ms > DIRECT_EOF_WAIT_MS) member_sock_close(m);
    }
    if (!m->ended && m->deof_ms && now - m->deof_ms > DIRECT_EOF_WAIT_MS) {
        m->ended = true;
        free(m->why);
        m->why = xasprintf("the direct connection from the agent on %s ended (%s) without its exit status, and "
                           "srun did not say why", m->name, m->deof_why ? strerror(m->deof_why) : "closed");
    }
}

int srun_step_direct_pollfds(const struct srun_step *s, const struct member *m, struct pollfd *p, int max)
{
    int n = 0;
    (void)s;
    if (m->dfd >= 0 && max > 0) {
        short ev = backlogged(m) ? 0 : POLLIN;
        if (m->dq.len) ev |= POLLOUT;
        if (ev) p[n++] = (struct pollfd){.fd = m->dfd, .events = ev};
    }
    return n;
}

void srun_step_direct_reset(struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        member_sock_close(m);
        m->direct = m->dskip = false;
        m->deof_ms = m->dend_ms = 0;
        strbuf_reset(&m->dq);
        strbuf_reset(&m->dr);
    }
    while (s->npend) pending_drop(s, s->npend - 1, NULL);
    if (s->lfd >= 0) new_key(s); /* the agents of the step given up cannot come back */
}

void srun_step_direct_close(struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++) {
        srun_step_direct_flush(&s->m[i]); /* the last requests, if the socket takes them */
        member_sock_close(&s->m[i]);
    }
    while (s->npend && s->efd >= 0) pending_drop(s, s->npend - 1, NULL);
    if (s->lfd >= 0) close(s->lfd);
    if (s->efd >= 0) close(s->efd);
    s->lfd = s->efd = -1;
    free(s->pend);
    s->pend = NULL;
    s->npend = s->pend_cap = 0;
}
