/* SSH transport, the agent's lines: once the exec channel runs the agent (ssh_deploy.c), its
 * stdout is read into a buffer of at most PROTOCOL_BACKLOG_MAX unread bytes and handed out as
 * whole lines of at most PROTOCOL_MAX_LINE (wire/protocol.h: the same bounds as a Slurm step's
 * and a child's); past the backlog the channel is not read, so the SSH window stops the agent
 * and the agent stops its ranks' pipes (back-pressure). Its stderr keeps a short tail for
 * messages. Requests are queued and written as the channel takes them; the end of the channel
 * is reported once the lines before it were taken. */
#include "ssh_conn_int.h"

#include <stdlib.h>
#include <string.h>

#include "hosts/hostfile.h"
#include "wire/protocol.h"

/* At most this much is read in one pump: the controller takes about as much of a node's lines
 * in a pass (CTL_READ_BYTES_MAX), so reading on to the backlog's bound (4 MiB) only parked the
 * rest: each node's buffer grew to 8 MiB of pages faulted in afresh, and every byte went cold
 * in it before it was parsed and copied on (issue 32 part 3). The rest is read in the next
 * pass, which comes at once (ssh_conn_pending); a line longer than this grows by this much a
 * pass. */
#define READ_PER_PUMP (256 * 1024)

/* The agent's stdout, as far as the backlog allows. libssh reads its socket 4 KiB per call and
 * a packet is up to 32 KiB: a call that read bytes without finishing a packet returns nothing,
 * and the next one at once takes the rest (a pass of the loop later, the socket would be polled
 * again for bytes already there). Stops when a call read nothing: the socket is empty. */
static void read_stdout(struct ssh_conn *c)
{
    size_t got = 0;
    for (;;) {
        if (line_reader_pending(&c->in) >= PROTOCOL_BACKLOG_MAX || got >= READ_PER_PUMP) {
            c->more_in = true; /* libssh may hold more: ssh_conn_pending */
            return;
        }
        uint64_t before = c->lib_io.in_bytes;
        /* the agent's lines straight into c->in: a copy less of every byte of a flood */
        char *to = line_reader_space(&c->in, 16384);
        int n = ssh_channel_read_nonblocking(c->channel, to, 16384, 0);
        if (n == SSH_ERROR) {
            ssh_conn_fail(c, "check the network and the node's sshd logs", "lost the connection to %s: %s",
                          c->h->name, ssh_get_error(c->session));
            return;
        }
        if (n == 0 && c->lib_io.in_bytes != before) continue;
        if (n <= 0) {
            c->more_in = false; /* libssh's buffer of this stream is empty */
            return;
        }
        line_reader_wrote(&c->in, (size_t)n);
        c->bytes_in += (uint64_t)n;
        got += (size_t)n;
    }
}

/* The agent's stderr: a short tail for messages, read while libssh has some. */
static void read_stderr(struct ssh_conn *c)
{
    char buf[16384];
    uint64_t before = c->lib_io.in_bytes;
    for (;;) {
        int n = ssh_channel_read_nonblocking(c->channel, buf, sizeof buf, 1);
        if (n == SSH_ERROR) {
            ssh_conn_fail(c, "check the network and the node's sshd logs", "lost the connection to %s: %s",
                          c->h->name, ssh_get_error(c->session));
            return;
        }
        if (n <= 0) break;
        strbuf_add(&c->errtail, buf, (size_t)n);
        if (c->errtail.len > 2048) strbuf_consume(&c->errtail, c->errtail.len - 2048);
    }
    /* libssh read its socket for this, and what it read may be the stdout that follows: in
     * its buffer now, where no fd shows it */
    if (c->lib_io.in_bytes != before) c->more_in = true;
}

/* Unread agent output: at most PROTOCOL_BACKLOG_MAX before we stop reading the channel (the
 * SSH window then stops the agent, and the agent stops its ranks' pipes). */
static size_t backlog(const struct ssh_conn *c)
{
    return line_reader_pending(&c->in);
}

static const char *errtail_line(struct ssh_conn *c)
{
    /* the last non-empty line of the remote stderr, for a one-line message */
    while (c->errtail.len && (c->errtail.buf[c->errtail.len - 1] == '\n' ||
                              c->errtail.buf[c->errtail.len - 1] == '\r'))
        c->errtail.buf[--c->errtail.len] = '\0';
    if (!c->errtail.len) return "";
    const char *nl = strrchr(c->errtail.buf, '\n');
    return nl ? nl + 1 : c->errtail.buf;
}

void ssh_conn_channel_io(struct ssh_conn *c)
{
    while (c->out.len) {
        int n = ssh_channel_write(c->channel, c->out.buf, (uint32_t)c->out.len);
        if (n == SSH_ERROR) {
            ssh_conn_fail(c, NULL, "lost the connection to %s: %s", c->h->name, ssh_get_error(c->session));
            return;
        }
        if (n <= 0) break;
        strbuf_consume(&c->out, (size_t)n);
    }
    read_stdout(c);
    if (c->state == SSH_CONN_FAILED) return;
    read_stderr(c);
    if (c->state == SSH_CONN_FAILED) return;
    /* the first line: the probe's answer (ssh_deploy.c takes it) or the agent's hello */
    if (c->state == SSH_CONN_PROBING && ssh_conn_probe_reply(c)) return;
    if (backlog(c) >= PROTOCOL_BACKLOG_MAX) return; /* EOF and close are seen once it drained */
    /* read_stderr's read of the socket may have taken the agent's last stdout together with
     * the channel's EOF: that output is in libssh's buffer, and the EOF must wait for it (the
     * loop pumps again at once: ssh_conn_pending) */
    if (c->more_in) return;
    if (line_reader_overlong(&c->in)) {
        ssh_conn_fail(c, NULL, PROTOCOL_LONG_LINE_FMT, c->h->name, PROTOCOL_MAX_LINE);
        return;
    }
    if (ssh_channel_is_eof(c->channel) || ssh_channel_is_closed(c->channel)) {
        int status = ssh_channel_is_closed(c->channel) ? ssh_channel_get_exit_status(c->channel) : -1;
        const char *tail = errtail_line(c);
        if (c->state == SSH_CONN_PROBING) {
            /* the loader's words when the probe could not tell (no getconf, another libc) */
            const char *hint = strstr(tail, "GLIBC_")
                                   ? "the node's C library is older than the agent needs (ldd --version there): "
                                     "run nodes with glibc 2.28 or newer, or build the agent on such a node "
                                     "(make PORTABLE=0) and put it beside ddptop as ddptop-agent-ARCH"
                               : strstr(tail, "error while loading shared libraries")
                                   ? "install the library named on the node, or use an agent that needs none "
                                     "(make's portable agents, docs/check.md \"Which nodes\")"
                                   : "run the agent by hand with ssh to see why";
            ssh_conn_fail(c, hint,
                          "starting ddptop-agent on %s failed (exit status %d)%s%s", c->h->name, status,
                          *tail ? ": " : "", tail);
        } else if (c->state == SSH_CONN_READY && !line_reader_ready(&c->in)) {
            /* lines already received stay readable; the caller sees CLOSED after them */
            free(c->err);
            c->err = xasprintf("ddptop-agent on %s exited (status %d)%s%s", c->h->name, status,
                               *tail ? ": " : "", tail);
            c->state = SSH_CONN_CLOSED;
            ssh_conn_teardown(c);
        }
    }
}

void ssh_conn_send_line(struct ssh_conn *c, const char *line)
{
    strbuf_adds(&c->out, line);
    strbuf_add(&c->out, "\n", 1);
    if (c->state == SSH_CONN_READY) ssh_conn_channel_io(c);
}

uint64_t ssh_conn_bytes_in(const struct ssh_conn *c)
{
    return c->bytes_in;
}

char *ssh_conn_next_line(struct ssh_conn *c)
{
    if (c->state != SSH_CONN_READY && c->state != SSH_CONN_CLOSED) return NULL;
    return line_reader_take(&c->in);
}

bool ssh_conn_next_line_into(struct ssh_conn *c, struct strbuf *out)
{
    if (c->state != SSH_CONN_READY && c->state != SSH_CONN_CLOSED) return false;
    return line_reader_next_into(&c->in, out);
}

void ssh_conn_close(struct ssh_conn *c)
{
    if (c->upload_running) return;
    if (c->channel && c->state == SSH_CONN_READY) {
        /* the last requests first (an exit: an agent that holds ranks waits for a controller
         * after a bare end of file); the window of an idle channel takes them */
        while (c->out.len) {
            int n = ssh_channel_write(c->channel, c->out.buf, (uint32_t)c->out.len);
            if (n <= 0) break;
            strbuf_consume(&c->out, (size_t)n);
        }
        ssh_channel_send_eof(c->channel); /* the agent exits at end of its stdin */
        ssh_channel_close(c->channel);
    }
    ssh_conn_teardown(c);
    if (c->state != SSH_CONN_FAILED) c->state = SSH_CONN_CLOSED;
}
