/* The session server (session_server.h). Who owns what: the loop owns the pty master, the
 * listening socket, the request socket and every client; a client is freed once it was
 * told to go (detached, dropped, the end) and its queue is out, or its deadline passed.
 * The dashboard is freed only after both its exit status and the end of its output arrived
 * (or END_DRAIN_MS passed: a grandchild may hold the pty open), as tmux does with jobs.
 *
 * Backpressure: typed bytes wait in one queue for the pty (clients are not read while it is
 * full); screen bytes are never held back for a slow client: it gets its own queue, and past
 * CLIENT_QUEUE_MAX it is dropped with a message, so one stuck terminal cannot stall the
 * dashboard or the others. */
#include "session_server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "session_proto.h"
#include "util/evloop.h"
#include "util/util.h"

#define MAX_CLIENTS       32
#define CLIENT_QUEUE_MAX  (1u << 20)   /* 1 MiB of screen bytes: seconds of a busy dashboard */
#define PTY_IN_MAX        (64u << 10)  /* typed bytes waiting for the dashboard */
#define READ_CHUNK        (64u << 10)
#define END_DRAIN_MS      500          /* after the exit: the rest of the output, at most this */
#define CLOSE_GRACE_MS    3000         /* a client told to go: its queue, at most this long */
#define KEY_REDRAW        '\f'         /* Ctrl-L: the dashboard repaints every cell */

struct sclient {
    int fd;
    struct evloop_watch *w;
    struct server *srv;
    unsigned id;                 /* attach order, from 1 */
    bool hello;                  /* SM_HELLO received: it gets screen bytes */
    bool closing;                /* told to go: flush, then close */
    unsigned rows, cols;         /* its terminal's size, 0 unknown */
    unsigned size_seq;           /* when it last set the size (attach or resize) */
    int64_t close_by_ms;
    struct session_queue out;
    uint8_t *in;                 /* a partial frame from it */
    size_t in_len;
};

struct server {
    const struct session_server_args *a;
    int master, listen_fd, ctl_fd;
    struct evloop *el;           /* util/evloop.h: the pty, the sockets, the clients, the signals */
    struct evloop_watch *w_master, *w_listen, *w_ctl;
    bool pty_done;               /* the master read end of file / EIO */
    bool child_done;
    int status;                  /* exit status, 128+N for a signal */
    bool killed;
    int64_t drain_until_ms;
    bool ended;                  /* SM_EXIT went out; no more clients */
    struct session_queue to_pty;
    struct sclient *cl[MAX_CLIENTS];
    size_t n_cl;
    unsigned next_id, last_input_id;
    unsigned size_seq;           /* counts attaches and resizes */
    unsigned sizer_id;           /* the client whose size the pty has */
};

/* ---- clients ---------------------------------------------------------------------------- */

static void client_free(struct server *s, struct sclient *c)
{
    evloop_unwatch(s->el, c->w);
    close(c->fd);
    session_queue_done(&c->out);
    free(c->in);
    free(c);
}

static void client_tell_to_go(struct sclient *c, int type, const void *p, size_t n)
{
    if (c->closing) return;
    if (c->hello) session_queue_frame(&c->out, type, p, n);
    c->closing = true;
    c->close_by_ms = mono_ms() + CLOSE_GRACE_MS;
}

static void client_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx);

static void accept_client(struct server *s)
{
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    uid_t uid;
    /* the directory is 0700 and the socket 0600; this is the check that does not depend
     * on them. Someone else's connection is closed with not a byte said. */
    if (session_peer_uid(fd, &uid) != 0 || uid != getuid()) {
        close(fd);
        return;
    }
    if (s->n_cl == MAX_CLIENTS) {
        close(fd);
        return;
    }
    struct sclient *c = xcalloc(1, sizeof *c);
    c->fd = fd;
    c->id = ++s->next_id;
    c->in = xmalloc(SESSION_HDR + SESSION_FRAME_MAX);
    c->srv = s;
    c->w = evloop_watch(s->el, fd, 0, client_ready, c);   /* its events: set before each poll */
    s->cl[s->n_cl++] = c;
}

/* The latest client to attach or resize sets the pty's size. */
static void pty_resize(struct server *s, struct sclient *c, unsigned rows, unsigned cols)
{
    if (!rows || !cols || rows > 10000 || cols > 10000) return;
    c->rows = rows;
    c->cols = cols;
    c->size_seq = ++s->size_seq;
    s->sizer_id = c->id;
    struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
    ioctl(s->master, TIOCSWINSZ, &ws);     /* the dashboard gets SIGWINCH when it changed */
}

static void repaint(struct server *s)
{
    char k = KEY_REDRAW;
    session_queue_put(&s->to_pty, &k, 1);
}

/* The client whose size the pty had left: the size of the one that set it before. */
static void sizer_gone(struct server *s)
{
    struct sclient *best = NULL;
    for (size_t i = 0; i < s->n_cl; i++) {
        struct sclient *c = s->cl[i];
        if (c->hello && !c->closing && c->size_seq && (!best || c->size_seq > best->size_seq)) best = c;
    }
    s->sizer_id = 0;
    if (!best) return;
    struct winsize ws = { .ws_row = (unsigned short)best->rows, .ws_col = (unsigned short)best->cols };
    s->sizer_id = best->id;
    ioctl(s->master, TIOCSWINSZ, &ws);
    repaint(s);
}

static void client_detach(struct server *s, struct sclient *c, const char *why)
{
    client_tell_to_go(c, SM_DETACHED, why, strlen(why));
    if (c->id == s->sizer_id && !s->ended) sizer_gone(s);
}

/* One frame from client c. false: c broke the protocol. */
static bool client_frame(struct server *s, struct sclient *c, const struct session_frame *f)
{
    switch (f->type) {
    case SM_HELLO:
        if (f->len < 7) return false;
        if (session_get_u16(f->payload) != SESSION_PROTOCOL_VERSION) {
            char why[160];
            c->hello = true;          /* so that it hears why */
            snprintf(why, sizeof why, "this session speaks session protocol %d, your ddptop %u: "
                     "attach with the ddptop that started the run", SESSION_PROTOCOL_VERSION,
                     session_get_u16(f->payload));
            client_detach(s, c, why);
            return true;
        }
        c->hello = true;
        pty_resize(s, c, session_get_u16(f->payload + 2), session_get_u16(f->payload + 4));
        if (!(f->payload[6] & SESSION_HELLO_STARTED)) repaint(s);
        return true;
    case SM_INPUT:
        if (!c->hello) return false;
        session_queue_put(&s->to_pty, f->payload, f->len);
        s->last_input_id = c->id;
        return true;
    case SM_WINSIZE:
        if (f->len < 4) return false;
        pty_resize(s, c, session_get_u16(f->payload), session_get_u16(f->payload + 2));
        return true;
    case SM_REDRAW:
        repaint(s);
        return true;
    default:
        return false;
    }
}

/* What c sent. false: c is gone (end of file, error, a broken frame). */
static bool client_read(struct server *s, struct sclient *c)
{
    ssize_t r = read(c->fd, c->in + c->in_len, SESSION_HDR + SESSION_FRAME_MAX - c->in_len);
    if (r < 0) return errno == EAGAIN || errno == EINTR;
    if (r == 0) return false;
    c->in_len += (size_t)r;
    size_t off = 0, used;
    struct session_frame f;
    int rc = 0;
    while ((rc = session_frame_parse(c->in + off, c->in_len - off, &f, &used)) == 1) {
        if (!client_frame(s, c, &f)) return false;
        off += used;
    }
    if (rc < 0) return false;
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return true;
}

static void broadcast(struct server *s, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < s->n_cl; i++) {
        struct sclient *c = s->cl[i];
        if (!c->hello || c->closing) continue;
        session_queue_frame(&c->out, SM_OUTPUT, p, n);
        if (c->out.len > CLIENT_QUEUE_MAX)
            client_detach(s, c, "this terminal fell too far behind the dashboard and was dropped");
    }
}

/* The dashboard asked to detach: the client that typed last (it pressed the key), else the
 * newest one. */
static void detach_requested(struct server *s)
{
    struct sclient *pick = NULL;
    for (size_t i = 0; i < s->n_cl; i++) {
        struct sclient *c = s->cl[i];
        if (!c->hello || c->closing) continue;
        if (c->id == s->last_input_id) {
            pick = c;
            break;
        }
        if (!pick || c->id > pick->id) pick = c;
    }
    if (pick) client_detach(s, pick, "");
}

/* ---- the dashboard's side ------------------------------------------------------------------ */

static void pty_read(struct server *s)
{
    static uint8_t buf[READ_CHUNK];
    for (int rounds = 0; rounds < 4; rounds++) {
        ssize_t r = read(s->master, buf, sizeof buf);
        if (r > 0) {
            broadcast(s, buf, (size_t)r);
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        s->pty_done = true;          /* EIO: no one holds the slave side any more */
        return;
    }
}

static void ctl_read(struct server *s)
{
    char msg[64];
    ssize_t r = recv(s->ctl_fd, msg, sizeof msg - 1, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {                    /* the dashboard is gone */
        evloop_unwatch(s->el, s->w_ctl);
        s->w_ctl = NULL;
        close(s->ctl_fd);
        s->ctl_fd = -1;
        return;
    }
    msg[r] = '\0';
    if (strcmp(msg, "detach") == 0) detach_requested(s);
}

static void child_reap(struct server *s)
{
    int st;
    if (s->child_done || waitpid(s->a->child, &st, WNOHANG) != s->a->child) return;
    s->child_done = true;
    s->killed = WIFSIGNALED(st);
    s->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
    s->drain_until_ms = mono_ms() + END_DRAIN_MS;
}

/* SIGCHLD only wakes the loop (child_reap reaps); kill SERVER stops the job the way Ctrl-C in
 * the dashboard does. */
static void on_signal(struct evloop *el, int signo, void *ctx)
{
    struct server *s = ctx;
    (void)el;
    if ((signo == SIGTERM || signo == SIGINT) && !s->child_done) kill(s->a->child, SIGTERM);
}

static int signals_install(struct server *s)
{
    if (evloop_signal(s->el, SIGCHLD, on_signal, s) != 0 || evloop_signal(s->el, SIGTERM, on_signal, s) != 0 ||
        evloop_signal(s->el, SIGINT, on_signal, s) != 0)
        return -1;
    signal(SIGHUP, SIG_IGN);     /* the terminal that started us is not ours to follow */
    signal(SIGPIPE, SIG_IGN);    /* a client gone mid-write is an error, not our end */
    return 0;
}

/* The dashboard exited and its output is out: the socket goes first (no one attaches to a
 * session that is ending), then every client hears the exit status. */
static void session_end(struct server *s)
{
    uint8_t p[2] = { (uint8_t)s->status, (uint8_t)s->killed };
    unlink(s->a->sock_path);
    evloop_unwatch(s->el, s->w_listen);
    s->w_listen = NULL;
    close(s->listen_fd);
    s->listen_fd = -1;
    s->ended = true;
    for (size_t i = 0; i < s->n_cl; i++) client_tell_to_go(s->cl[i], SM_EXIT, p, sizeof p);
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void clients_flush_and_reap(struct server *s, int64_t now)
{
    size_t o = 0;
    for (size_t i = 0; i < s->n_cl; i++) {
        struct sclient *c = s->cl[i];
        bool gone = session_queue_flush(&c->out, c->fd) < 0;
        if (c->closing && (c->out.len == 0 || now >= c->close_by_ms)) gone = true;
        if (gone) {
            client_free(s, c);
            continue;
        }
        s->cl[o++] = c;
    }
    s->n_cl = o;
}

static int poll_timeout(const struct server *s, int64_t now)
{
    int64_t due = -1;
    if (s->child_done && !s->pty_done) due = s->drain_until_ms;
    for (size_t i = 0; i < s->n_cl; i++)
        if (s->cl[i]->closing && (due < 0 || s->cl[i]->close_by_ms < due)) due = s->cl[i]->close_by_ms;
    if (!s->child_done) return due < 0 ? 1000 : (int)(due > now ? due - now : 0);  /* 1 s: waitpid */
    return due < 0 ? -1 : due > now ? (int)(due - now) : 0;
}

static void master_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    (void)el;
    (void)w;
    if (revents & (POLLIN | POLLHUP | POLLERR)) pty_read(ctx);
}

static void ctl_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    (void)el;
    (void)w;
    (void)revents;
    ctl_read(ctx);
}

static void listen_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    (void)el;
    (void)w;
    if (revents & POLLIN) accept_client(ctx);
}

static void client_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct sclient *c = ctx;
    struct server *s = c->srv;
    (void)el;
    (void)w;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && !c->closing && !client_read(s, c)) {
        c->closing = true;       /* gone: nothing more to say to it */
        c->close_by_ms = 0;
        c->out.len = 0;
        if (c->id == s->sizer_id) sizer_gone(s);
    }
}

/* What each fd waits for this turn: the pty's input only while keys wait for it, a client's
 * output while it has some, its input while the keys' queue has room. */
static void events_set(struct server *s)
{
    if (s->pty_done) evloop_watch_pause(s->w_master, true);
    else evloop_watch_set_events(s->w_master, POLLIN | (s->to_pty.len ? POLLOUT : 0));
    for (size_t k = 0; k < s->n_cl; k++) {
        struct sclient *c = s->cl[k];
        short ev = c->out.len ? POLLOUT : 0;
        if (!c->closing && s->to_pty.len < PTY_IN_MAX) ev |= POLLIN;
        evloop_watch_set_events(c->w, ev);
    }
}

int session_server_run(const struct session_server_args *a)
{
    struct server s = { .a = a, .master = a->master, .listen_fd = a->listen_fd, .ctl_fd = a->ctl_fd };
    s.el = evloop_new();
    if (signals_install(&s) != 0) {
        evloop_free(s.el);
        return 1;
    }
    fd_set_nonblock(s.master);
    fd_set_nonblock(s.listen_fd);
    /* in the order a turn answers them: the signals (first always), the pty, the dashboard's
     * requests, new clients, then the clients (those accepted in a turn are polled from the next) */
    s.w_master = evloop_watch(s.el, s.master, POLLIN, master_ready, &s);
    if (s.ctl_fd >= 0) s.w_ctl = evloop_watch(s.el, s.ctl_fd, POLLIN, ctl_ready, &s);
    if (s.listen_fd >= 0) s.w_listen = evloop_watch(s.el, s.listen_fd, POLLIN, listen_ready, &s);
    for (;;) {
        int64_t now = mono_ms();
        child_reap(&s);
        if (s.child_done && !s.ended && (s.pty_done || now >= s.drain_until_ms)) session_end(&s);
        clients_flush_and_reap(&s, now);
        if (s.ended && s.n_cl == 0) break;
        events_set(&s);
        bool master_polled = !s.pty_done;
        if (evloop_run_once(s.el, poll_timeout(&s, now)) < 0) break;
        if (master_polled && s.to_pty.len && !s.pty_done && session_queue_flush(&s.to_pty, s.master) < 0)
            s.to_pty.len = 0;            /* the dashboard no longer reads: drop the keys */
    }
    for (size_t k = 0; k < s.n_cl; k++) client_free(&s, s.cl[k]);
    if (!s.ended) unlink(a->sock_path);
    if (s.listen_fd >= 0) close(s.listen_fd);
    if (s.ctl_fd >= 0) close(s.ctl_fd);
    close(s.master);
    session_queue_done(&s.to_pty);
    evloop_free(s.el);
    return s.status;
}
