/* The direct connections of a Slurm step's agents (wire/direct.h): ddptop's listening socket,
 * its key and the handshakes in progress, until a member's agent proved the key and its
 * connection becomes the member's own (srun_step_dlink.c). srun's I/O forwarding stays for what
 * it alone knows (a task's end, stderr) and for the agents that could not connect (a firewall
 * between the nodes and this host): those speak through srun as before (srun_step_lines.c).
 *
 * Nothing here blocks: the listener and the handshakes are in one epoll set that the step offers
 * to the loop (srun_step_pollfds). Everything read is bounded: a handshake line DIRECT_LINE_MAX
 * bytes, each handshake DIRECT_HANDSHAKE_MS, at most the step's size plus 16 at once. Anyone who
 * reaches the port can connect, so a stranger's connections must never keep an agent out: when
 * every place is taken, the oldest handshake that has not shown the key (its hello's HM) is let
 * go for the newcomer, and refusals are counted, not logged one by one (issue 28). */
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

#define DIRECT_HANDSHAKE_MS 5000
/* Connections accepted per pass at most: a flood of them cannot keep the loop from reading the
 * handshakes that already came (an agent's hello is read before it can be let go). */
#define DIRECT_ACCEPT_BATCH 64
/* While the listener stays open, refused connections are summed up at most this often. */
#define DIRECT_REFUSED_SAY_MS 60000

static const char WHY_EVICTED[] = "let go for a newer one: every place was taken, and it had not shown the key";
static const char WHY_FULL[] = "every place was taken by a handshake that had shown the key";
static const char WHY_GREETING[] = "not a ddptop agent's greeting";
static const char WHY_ANSWER[] = "it did not take ddptop's answer";
static const char WHY_PROOF[] = "a malformed proof";
static const char WHY_KEY[] = "it does not hold this step's key";
static const char WHY_TASK[] = "no node of the step is waiting for its task";
static const char WHY_CLOSED[] = "it closed before the handshake ended";
static const char WHY_BROKEN[] = "its connection failed";
static const char WHY_LONG[] = "a handshake line too long";
static const char WHY_SLOW[] = "its handshake took too long";
static const char WHY_LATE[] = "every agent of the step had said where it is";

struct direct_pending {
    int fd;
    int task;              /* from its hello; -1 before */
    bool vouched;          /* its hello's HM was right (no other handshake vouched for its task):
                            * a key holder's, never let go for a newcomer */
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

/* Once nobody can connect any more, the key is of no use: no copy of it stays (srun's own
 * environment holds it for the step's life, which is Slurm's way of passing it). */
static void key_wipe(struct srun_step *s)
{
    explicit_bzero(s->dkey, sizeof s->dkey);
    explicit_bzero(s->dkey_hex, sizeof s->dkey_hex);
}

/* The refusals counted since the last summary, in one line of the step's log. */
static void refused_say(struct srun_step *s)
{
    struct direct_refusals *r = &s->refused;
    struct strbuf b;
    if (!r->total) return;
    strbuf_init(&b);
    for (int k = 0; k < DIRECT_REFUSAL_KINDS && r->why[k]; k++)
        if (r->count[k]) strbuf_addf(&b, "%s%lu: %s", b.len ? "; " : "", r->count[k], r->why[k]);
    srun_step_log(s, "ddptop: %lu more direct connection%s refused (%s), the last from %s\n", r->total,
                  r->total == 1 ? " was" : "s were", b.buf ? b.buf : "", r->last_peer);
    strbuf_done(&b);
    r->total = 0;
    memset(r->count, 0, sizeof r->count);
    r->said_ms = mono_ms();
}

/* A refusal: the first in full at once (a wrong key on one node is worth its line), the rest
 * counted for refused_say. */
static void refused_note(struct srun_step *s, const char *peer, const char *why)
{
    struct direct_refusals *r = &s->refused;
    int k;
    if (!r->first_said) {
        r->first_said = true;
        r->said_ms = mono_ms();
        srun_step_log(s, "ddptop: a direct connection from %s was refused: %s (more are counted and "
                      "summed up)\n", peer, why);
        return;
    }
    for (k = 0; k < DIRECT_REFUSAL_KINDS - 1 && r->why[k] && r->why[k] != why; k++) {}
    if (!r->why[k]) r->why[k] = why;
    else if (r->why[k] != why) r->why[k] = "other"; /* the last slot takes what did not fit */
    r->count[k]++;
    r->total++;
    snprintf(r->last_peer, sizeof r->last_peer, "%s", peer);
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

/* why: one of the WHY_ strings, or NULL (closed without a word: the step ends or starts again). */
static void pending_drop(struct srun_step *s, size_t i, const char *why)
{
    struct direct_pending *p = &s->pend[i];
    if (why) refused_note(s, p->peer, why);
    epoll_ctl(s->efd, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    s->pend[i] = s->pend[--s->npend];
}

/* Every place is taken: the oldest handshake that has not shown the key goes, so that no number
 * of strangers' connections (idle, or a hello without the key) keeps an agent out. Returns false
 * when every one has shown it (more agents than places: cannot be, the places are the step's
 * size plus 16). */
static bool pending_make_room(struct srun_step *s)
{
    size_t victim = s->npend;
    for (size_t i = 0; i < s->npend; i++)
        if (!s->pend[i].vouched && (victim == s->npend || s->pend[i].deadline_ms < s->pend[victim].deadline_ms))
            victim = i;
    if (victim == s->npend) return false;
    pending_drop(s, victim, WHY_EVICTED);
    return true;
}

static void pending_read(struct srun_step *s, size_t i);

static void accept_some(struct srun_step *s)
{
    for (int k = 0; k < DIRECT_ACCEPT_BATCH; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        struct epoll_event ev = {.events = EPOLLIN};
        struct direct_pending *p;
        char peer[64];
        if (fd < 0) return;
        peer_str(&ss, peer, sizeof peer);
        if ((s->npend >= s->n + 16 || s->npend >= DIRECT_PENDING_MAX) && !pending_make_room(s)) {
            refused_note(s, peer, WHY_FULL);
            close(fd);
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
        memcpy(p->peer, peer, sizeof p->peer);
        /* an agent's hello follows its connect at once: read it now, before a flood behind it
         * in the backlog could make this the oldest handshake without the key */
        pending_read(s, s->npend - 1);
    }
}

/* Whether a hello with the right HM for task may vouch for its handshake: a task of the step
 * that no member took and no other handshake vouched for (HM can be sent again by whoever saw
 * it: one place per task at most is kept that way). */
static bool task_vouchable(const struct srun_step *s, int task, size_t self)
{
    if (task < 0 || (size_t)task >= s->n) return false;
    for (size_t i = 0; i < s->n; i++)
        if (s->m[i].task == task) return false;
    for (size_t i = 0; i < s->npend; i++)
        if (i != self && s->pend[i].vouched && s->pend[i].task == task) return false;
    return true;
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
    struct direct_link link;
    struct member *m;
    if (p->task < 0) {
        unsigned char rnd[DIRECT_NONCE_HEX / 2];
        if (direct_hello_parse(line, &p->task, p->na, mac) != 0) {
            p->task = -1;
            pending_drop(s, i, WHY_GREETING);
            return false;
        }
        /* a wrong HM is still answered: the agent with a wrong key then refuses our proof and
         * says so (its agent.log line), and the handshake fails at its proof */
        direct_mac(s->dkey, "hello", p->task, p->na, NULL, want);
        p->vouched = direct_mac_equal(mac, want) && task_vouchable(s, p->task, i);
        util_random(rnd, sizeof rnd);
        util_hex(rnd, sizeof rnd, p->nc);
        direct_mac(s->dkey, "controller", p->task, p->na, p->nc, want);
        snprintf(out, sizeof out, "%s %s\n", p->nc, want);
        if (!send_line(p->fd, out)) {
            pending_drop(s, i, WHY_ANSWER);
            return false;
        }
        return true;
    }
    if (direct_proof_parse(line, mac, &greeting) != 0) {
        pending_drop(s, i, WHY_PROOF);
        return false;
    }
    direct_mac(s->dkey, "agent", p->task, p->na, p->nc, want);
    if (!direct_mac_equal(mac, want)) {
        pending_drop(s, i, WHY_KEY);
        return false;
    }
    /* the lines' keys before the member takes the connection: what was sent to it before its
     * task was known goes out sealed as it is announced */
    link.fd = p->fd;
    direct_line_init(&link.rx, s->dkey, DIRECT_ROLE_AGENT_LINES, p->task, p->na, p->nc);
    direct_line_init(&link.tx, s->dkey, DIRECT_ROLE_CONTROLLER_LINES, p->task, p->na, p->nc);
    m = srun_step_announce(s, p->task, greeting, &link);
    direct_line_wipe(&link.rx);
    direct_line_wipe(&link.tx);
    if (!m) {
        pending_drop(s, i, WHY_TASK);
        return false;
    }
    srun_step_log(s, "ddptop: %s (task %d) speaks over its direct connection from %s\n", m->name, p->task, p->peer);
    epoll_ctl(s->efd, EPOLL_CTL_DEL, p->fd, NULL);
    if (rest_len) srun_step_direct_feed(s, m, rest, rest_len); /* rest lies in p: before it goes */
    s->pend[i] = s->pend[--s->npend];
    return false; /* handed over: no longer pending */
}

static void pending_read(struct srun_step *s, size_t i)
{
    struct direct_pending *p = &s->pend[i];
    ssize_t r = recv(p->fd, p->buf + p->len, DIRECT_LINE_MAX - p->len, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pending_drop(s, i, r == 0 ? WHY_CLOSED : WHY_BROKEN);
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
    if (p->len >= DIRECT_LINE_MAX) pending_drop(s, i, WHY_LONG);
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
            accept_some(s); /* the rest of a flood: its epoll event comes again */
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
        if (now > s->pend[i].deadline_ms) pending_drop(s, i, WHY_SLOW);
        else i++;
    /* every agent said where it is (directly or through srun): nobody else is let in */
    if (s->lfd >= 0 && !s->cache_try && !anyone_expected(s)) {
        epoll_ctl(s->efd, EPOLL_CTL_DEL, s->lfd, NULL);
        close(s->lfd);
        s->lfd = -1;
        /* the handshakes still going are not our agents': they end with the key */
        while (s->npend) pending_drop(s, s->npend - 1, WHY_LATE);
        key_wipe(s);
    }
    if (s->refused.total && (s->lfd < 0 || now - s->refused.said_ms >= DIRECT_REFUSED_SAY_MS)) refused_say(s);
    if (s->lfd < 0 && s->npend == 0) {
        close(s->efd);
        s->efd = -1;
    }
}

void srun_step_direct_reset(struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        srun_step_direct_drop(m);
        m->direct = m->dforged = false;
        m->deof_ms = m->dend_ms = 0;
        strbuf_reset(&m->dq);
        line_reader_reset(&m->dr);
    }
    while (s->npend) pending_drop(s, s->npend - 1, NULL);
    if (s->lfd >= 0) new_key(s); /* the agents of the step given up cannot come back */
}

void srun_step_direct_close(struct srun_step *s)
{
    for (size_t i = 0; i < s->n; i++) {
        srun_step_direct_flush(&s->m[i]); /* the last requests, if the socket takes them */
        srun_step_direct_drop(&s->m[i]);
    }
    while (s->npend && s->efd >= 0) pending_drop(s, s->npend - 1, NULL);
    refused_say(s);
    if (s->lfd >= 0) close(s->lfd);
    if (s->efd >= 0) close(s->efd);
    s->lfd = s->efd = -1;
    key_wipe(s);
    free(s->pend);
    s->pend = NULL;
    s->npend = s->pend_cap = 0;
}
