/* A member's own direct connection, once its agent proved the step's key (srun_step_direct.c):
 * the lines both ways, each sealed with its MAC and number (wire/direct_line.h), so that a line
 * written into the TCP stream by anyone without the key (a spawn request, a forged exit) is
 * never taken: the first line that fails its check closes the connection and fails the member,
 * as a line too long does. The socket is offered to the loop by the member's transport; nothing
 * here blocks. Its lines are bounded as over SSH (PROTOCOL_MAX_LINE, PROTOCOL_BACKLOG_MAX). */
#include "srun_step_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/protocol.h"

/* After its socket ended without the agent's exit status, how long srun has to say how the
 * task ended (a kill, a lost node) before the member ends as "connection closed". */
#define DIRECT_EOF_WAIT_MS 2000

void srun_step_direct_drop(struct member *m)
{
    if (m->dfd >= 0) close(m->dfd);
    m->dfd = -1;
    direct_line_wipe(&m->drx);
    direct_line_wipe(&m->dtx);
}

void srun_step_direct_queue(struct member *m, const char *line, size_t len)
{
    if (m->dfd < 0) return; /* gone: what it was sent is lost with it, as over SSH */
    direct_line_seal(&m->dtx, line, len, &m->dq);
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
    return line_reader_pending(&m->in) >= PROTOCOL_BACKLOG_MAX;
}

/* A line that failed its check: someone without the key wrote into the connection (or it was
 * changed on the way). Nothing more of it is believed: closed, and the node is lost with why. */
static void member_forged(struct srun_step *s, struct member *m)
{
    unsigned long long line_no = (unsigned long long)m->drx.seq + 1;
    m->dforged = true;
    strbuf_reset(&m->dq);
    srun_step_direct_drop(m);
    srun_step_log(s, "ddptop: line %llu of %s's direct connection failed its check (MAC): the connection "
                  "is closed\n", line_no, m->name);
    if (m->ended) return;
    m->ended = true;
    m->failed = true;
    free(m->why);
    m->why = xasprintf("line %llu on the direct connection from the agent on %s failed its check: someone "
                       "without the step's key wrote into the connection, or it was changed on the way; "
                       "ddptop closed it", line_no, m->name);
}

/* Whole lines of m's connection: "TAG LINE", LINE an agent's protocol line or "!STATUS" (its
 * last). A line too long cuts m off; the reader drops its rest. */
static void member_lines(struct srun_step *s, struct member *m)
{
    enum line_got got;
    char *p;
    size_t n;
    int at;
    while ((got = line_reader_next(&m->dr, &p, &n)) != LINE_NONE) {
        m->bytes_in += n + 1;
        if (got == LINE_LONG) {
            srun_step_member_cut(s, m);
        } else if (m->cut || m->dforged) {
            /* dropped unread: the line cut off took its number with it */
        } else if ((at = direct_line_open(&m->drx, p, n)) < 0) {
            member_forged(s, m);
        } else if (n > (size_t)at && p[at] == '!') {
            char st[32];
            snprintf(st, sizeof st, "%.*s", (int)(n - at - 1 < sizeof st - 1 ? n - at - 1 : sizeof st - 1), p + at + 1);
            srun_step_member_exited(m, st);
        } else if (srun_step_member_reads(m)) {
            p[n] = '\n'; /* the line goes on with its end (line_reader.h: p[n] is ours) */
            line_reader_add(&m->in, p + at, n - at + 1);
        }
    }
}

void srun_step_direct_feed(struct srun_step *s, struct member *m, const char *buf, size_t len)
{
    if (m->dforged) return;
    line_reader_add(&m->dr, buf, len);
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
        /* its end: the agent seals whole lines only, so bytes after the last newline are a line
         * cut short (its agent killed while writing): nothing to believe */
        line_reader_reset(&m->dr);
        if (!m->ended) {
            m->deof_ms = mono_ms();
            m->deof_why = r < 0 ? errno : 0;
        }
        srun_step_direct_drop(m);
        m->dmore = false;
    }
    if (m->dfd < 0) m->dmore = false;
deadlines:
    if (!m->direct) return;
    now = mono_ms();
    if (m->ended && m->dfd >= 0) {
        /* srun said how it ended: what its socket still holds comes soon, or never */
        if (!m->dend_ms) m->dend_ms = now;
        if (now - m->dend_ms > DIRECT_EOF_WAIT_MS) srun_step_direct_drop(m);
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
