/* The session client (session_client.h): one poll() loop over the terminal (stdin, and
 * stdout through a queue: a slow terminal does not stop the loop), the server's socket and a
 * signal self-pipe. The terminal's modes are saved before raw mode and put back on every way
 * out, from signal handlers too (tcsetattr is async-signal-safe). What the dashboard set on
 * this terminal (alternate screen, keypad mode, hidden cursor) is undone here when we leave
 * without it: a detach, a lost or killed session; on a normal end the dashboard undid it. */
#include "session_client.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "session_proto.h"
#include "util/util.h"
/* last: term.h defines macros named like common words (lines, columns) */
#include <term.h>

#define KEY_DETACH  0x1c              /* Ctrl-\, as dtach: detach here, without the dashboard */
#define KEY_REPAINT '\f'              /* Ctrl-L */
#define OUT_HIGH    (1u << 20)        /* screen bytes for the terminal: stop reading the server */
#define SRV_HIGH    (64u << 10)       /* typed bytes for the server: stop reading the keyboard */

enum client_end { CE_GOING, CE_EXIT, CE_DETACHED, CE_DETACH_KEY, CE_LOST, CE_HANGUP, CE_SIGNAL };

struct client {
    int fd;
    const char *run_id;
    struct session_queue to_srv, to_out;
    uint8_t *in;                      /* a partial frame from the server */
    size_t in_len;
    bool stdin_open;
    enum client_end end;
    int status, signal;
    bool killed;
    char why[256];
};

/* ---- the terminal --------------------------------------------------------------------------- */

static volatile sig_atomic_t tty_raw;
static struct termios saved_tio;
static int saved_out_flags = -1;
static int sig_fd = -1;

static void terminal_restore(void)
{
    if (tty_raw) {
        tty_raw = 0;
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
    }
    if (saved_out_flags >= 0) {
        fcntl(STDOUT_FILENO, F_SETFL, saved_out_flags);
        saved_out_flags = -1;
    }
}

/* The leave sequence for the crash handler, which may only write() it. */
static char crash_leave[256];
static size_t crash_leave_len;

static void crash_handler(int sig)
{
    if (crash_leave_len && write(STDOUT_FILENO, crash_leave, crash_leave_len) < 0) { /* gone */ }
    terminal_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (sig_fd >= 0 && write(sig_fd, &b, 1) < 0) { /* full: one is enough */ }
    errno = saved;
}

static void signals_install(int fd)
{
    static const int crash[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    static const int relayed[] = { SIGWINCH, SIGHUP, SIGTERM, SIGINT, SIGQUIT };
    struct sigaction sa;
    sig_fd = fd;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = crash_handler;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (size_t i = 0; i < sizeof crash / sizeof *crash; i++) sigaction(crash[i], &sa, NULL);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof relayed / sizeof *relayed; i++) sigaction(relayed[i], &sa, NULL);
}

static void signals_restore(void)
{
    static const int all[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL,
                               SIGWINCH, SIGHUP, SIGTERM, SIGINT, SIGQUIT };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) signal(all[i], SIG_DFL);
    sig_fd = -1;
}

static int terminal_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) != 0) return 0;
    struct termios raw = saved_tio;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) != 0) return -1;
    tty_raw = 1;
    return 0;
}

/* The terminal's sequences for entering and leaving the dashboard's modes, from terminfo
 * ("" when the terminal is unknown to it). */
static struct strbuf *tputs_into;
static int tputs_char(int ch)
{
    char c = (char)ch;
    strbuf_add(tputs_into, &c, 1);
    return ch;
}

static void term_modes(struct strbuf *enter, struct strbuf *leave)
{
    static const char *const on[] = { "smcup", "smkx", "civis" };
    static const char *const off[] = { "rmkx", "cnorm", "sgr0", "rmcup" };
    int err = 0;
    if (!isatty(STDOUT_FILENO) || setupterm(NULL, STDOUT_FILENO, &err) != OK) return;
    for (int k = 0; k < 2; k++) {
        const char *const *caps = k ? off : on;
        size_t n = k ? 4 : 3;
        tputs_into = k ? leave : enter;
        for (size_t i = 0; i < n; i++) {
            char *s = tigetstr(caps[i]);
            if (s && s != (char *)-1) tputs(s, 1, tputs_char);
        }
    }
    tputs_into = NULL;
    del_curterm(cur_term);
    cur_term = NULL;
}

static void winsize_of(unsigned *rows, unsigned *cols)
{
    struct winsize ws;
    *rows = *cols = 0;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void send_hello(struct client *c, unsigned flags)
{
    uint8_t p[7];
    unsigned rows, cols;
    winsize_of(&rows, &cols);
    session_put_u16(p, SESSION_PROTOCOL_VERSION);
    session_put_u16(p + 2, rows);
    session_put_u16(p + 4, cols);
    p[6] = (uint8_t)flags;
    session_queue_frame(&c->to_srv, SM_HELLO, p, sizeof p);
}

static void send_winsize(struct client *c)
{
    uint8_t p[4];
    unsigned rows, cols;
    winsize_of(&rows, &cols);
    if (!rows || !cols) return;
    session_put_u16(p, rows);
    session_put_u16(p + 2, cols);
    session_queue_frame(&c->to_srv, SM_WINSIZE, p, sizeof p);
}

static void signals_read(struct client *c, int fd)
{
    unsigned char b[32];
    ssize_t r;
    while ((r = read(fd, b, sizeof b)) > 0)
        for (ssize_t i = 0; i < r && c->end == CE_GOING; i++) {
            if (b[i] == SIGWINCH) {
                send_winsize(c);
            } else if (b[i] == SIGHUP) {
                c->end = CE_HANGUP;
            } else {
                c->end = CE_SIGNAL;
                c->signal = b[i];
            }
        }
}

static void keyboard_read(struct client *c)
{
    uint8_t buf[4096];
    ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {                    /* a script's stdin ran out: keep watching */
        c->stdin_open = false;
        return;
    }
    uint8_t *k = memchr(buf, KEY_DETACH, (size_t)r);
    size_t n = k ? (size_t)(k - buf) : (size_t)r;
    /* Ctrl-L (the dashboard repaints) also gives the session this terminal's size: the way
     * back for a terminal smaller than the one that attached last */
    if (memchr(buf, KEY_REPAINT, n)) send_winsize(c);
    if (n) session_queue_frame(&c->to_srv, SM_INPUT, buf, n);
    if (k) c->end = CE_DETACH_KEY;
}

static void server_frame(struct client *c, const struct session_frame *f)
{
    switch (f->type) {
    case SM_OUTPUT:
        session_queue_put(&c->to_out, f->payload, f->len);
        break;
    case SM_DETACHED:
        snprintf(c->why, sizeof c->why, "%.*s", (int)f->len, (const char *)f->payload);
        c->end = CE_DETACHED;
        break;
    case SM_EXIT:
        c->status = f->len >= 1 ? f->payload[0] : 1;
        c->killed = f->len >= 2 && f->payload[1];
        c->end = CE_EXIT;
        break;
    default:                         /* a client's message from the server: ignore it */
        break;
    }
}

static void server_read(struct client *c)
{
    ssize_t r = read(c->fd, c->in + c->in_len, SESSION_HDR + SESSION_FRAME_MAX - c->in_len);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        c->end = CE_LOST;
        return;
    }
    c->in_len += (size_t)r;
    size_t off = 0, used;
    struct session_frame f;
    int rc = 0;
    while (c->end == CE_GOING &&
           (rc = session_frame_parse(c->in + off, c->in_len - off, &f, &used)) == 1) {
        server_frame(c, &f);
        off += used;
    }
    if (c->end == CE_GOING && rc < 0) c->end = CE_LOST;
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

static void client_loop(struct client *c, int sigr)
{
    while (c->end == CE_GOING) {
        struct pollfd p[4];
        int n = 0;
        p[n++] = (struct pollfd){ .fd = sigr, .events = POLLIN };
        p[n++] = (struct pollfd){ .fd = c->fd, .events = (short)((c->to_out.len < OUT_HIGH ? POLLIN : 0) |
                                                                 (c->to_srv.len ? POLLOUT : 0)) };
        p[n++] = (struct pollfd){ .fd = STDOUT_FILENO, .events = c->to_out.len ? POLLOUT : 0 };
        if (c->stdin_open && c->to_srv.len < SRV_HIGH)
            p[n++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
        if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR) {
            c->end = CE_LOST;
            break;
        }
        if (p[0].revents) signals_read(c, sigr);
        if (c->end == CE_GOING && p[1].revents & (POLLIN | POLLHUP | POLLERR)) server_read(c);
        if (n > 3 && c->end == CE_GOING && (p[3].revents & (POLLIN | POLLHUP | POLLERR))) keyboard_read(c);
        if (session_queue_flush(&c->to_srv, c->fd) < 0 && c->end == CE_GOING) c->end = CE_LOST;
        if (session_queue_flush(&c->to_out, STDOUT_FILENO) < 0 && c->end == CE_GOING)
            c->end = CE_HANGUP;          /* the terminal is gone */
    }
}

/* What is left for the terminal, written out before the modes go back. */
static void out_drain(struct client *c, const struct strbuf *leave)
{
    if (c->end == CE_HANGUP) return;
    if (saved_out_flags >= 0) fcntl(STDOUT_FILENO, F_SETFL, saved_out_flags);
    bool undo = c->end != CE_EXIT || c->killed;
    if (undo && leave->len) session_queue_put(&c->to_out, leave->buf, leave->len);
    for (int tries = 0; c->to_out.len && tries < 1000; tries++)
        if (session_queue_flush(&c->to_out, STDOUT_FILENO) < 0) break;
}

static int report(const struct client *c)
{
    const char *r = c->run_id;
    switch (c->end) {
    case CE_EXIT:
        if (c->killed)
            fprintf(stderr, "ddptop: the dashboard of run %s was killed by %s; its agents stop every "
                    "rank (exit %d)\n", r, strsignal(c->status - 128), c->status);
        return c->status;
    case CE_DETACHED:
        if (c->why[0]) fprintf(stderr, "ddptop: %s\n", c->why);
        /* fall through */
    case CE_DETACH_KEY:
        fprintf(stderr, "ddptop: detached from run %s; the job goes on. ddptop attach %s to come back\n",
                r, r);
        return 0;
    case CE_SIGNAL:
        fprintf(stderr, "ddptop: %s: detached from run %s; the job goes on. ddptop attach %s to come "
                "back\n", strsignal(c->signal), r, r);
        return 128 + c->signal;
    case CE_HANGUP:
        return 128 + SIGHUP;
    case CE_LOST:
    case CE_GOING:
        break;
    }
    fprintf(stderr, "ddptop: lost the session of run %s: its server ended without an exit status\n", r);
    return 1;
}

int session_client_run(int fd, const char *run_id, unsigned flags)
{
    struct client c = { .fd = fd, .run_id = run_id, .stdin_open = true, .end = CE_GOING };
    struct strbuf enter, leave;
    int sp[2];
    strbuf_init(&enter);
    strbuf_init(&leave);
    if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "ddptop: cannot make a pipe: %s\n", strerror(errno));
        close(fd);
        return 1;
    }
    term_modes(&enter, &leave);
    if (leave.len < sizeof crash_leave) {
        memcpy(crash_leave, leave.buf, leave.len);
        crash_leave_len = leave.len;
    }
    c.in = xmalloc(SESSION_HDR + SESSION_FRAME_MAX);
    fd_set_nonblock(fd);
    signals_install(sp[1]);
    if (terminal_raw() != 0) fprintf(stderr, "ddptop: cannot put the terminal in raw mode: %s\n", strerror(errno));
    saved_out_flags = fcntl(STDOUT_FILENO, F_GETFL);
    if (saved_out_flags >= 0) fcntl(STDOUT_FILENO, F_SETFL, saved_out_flags | O_NONBLOCK);
    /* a later client: the dashboard's modes for this terminal, then the server repaints */
    if (!(flags & SESSION_HELLO_STARTED)) session_queue_put(&c.to_out, enter.buf, enter.len);
    send_hello(&c, flags);

    client_loop(&c, sp[0]);

    session_queue_flush(&c.to_srv, c.fd);
    out_drain(&c, &leave);
    terminal_restore();
    signals_restore();
    crash_leave_len = 0;
    int rc = report(&c);
    close(c.fd);
    close(sp[0]);
    close(sp[1]);
    free(c.in);
    session_queue_done(&c.to_srv);
    session_queue_done(&c.to_out);
    strbuf_done(&enter);
    strbuf_done(&leave);
    return rc;
}
