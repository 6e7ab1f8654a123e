/* Uploading the agent over an exec channel, for nodes whose sshd has no `Subsystem sftp` line
 * (many clusters): the command, its checks and what it says back are agent_upload.c's
 * (agent_deploy.h); here its bytes go over a channel of the session. Runs in the upload
 * thread of ssh_deploy.c, which owns the session (blocking) until it is done; the poll loop's
 * deadline shuts the socket down to end it. */
#include "ssh_conn_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_deploy.h"
#include "hosts/hostfile.h"

/* Sends data on ch, then reads its output to EOF: out gets stdout (where the script sends its
 * own errors too), err the rest of stderr (the login shell's rc files). Both are read, because
 * libssh reports the EOF only once the stderr buffer is drained. Returns NULL or an error. */
static char *exchange(struct ssh_conn *c, ssh_channel ch, const struct strbuf *data,
                      struct strbuf *out, struct strbuf *err, const char *what, int64_t deadline)
{
    char buf[4096];
    size_t off = 0;
    while (off < data->len) {
        size_t chunk = data->len - off < 32768 ? data->len - off : 32768;
        int n = ssh_channel_write(ch, data->buf + off, (uint32_t)chunk);
        if (n < 0 || (n == 0 && mono_ms() >= deadline))
            return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
        off += (size_t)n;
    }
    if (ssh_channel_send_eof(ch) != SSH_OK)
        return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
    /* the writes only queued the bytes: send them now, not a little per read below */
    int64_t left = deadline - mono_ms();
    int rc = ssh_blocking_flush(c->session, left > 0 ? (int)left : 0);
    if (rc == SSH_ERROR)
        return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
    if (rc == SSH_AGAIN) return xasprintf("sending %s to %s timed out", what, c->h->name);
    for (;;) {
        int n = ssh_channel_read_timeout(ch, buf, sizeof buf, 0, 200), k;
        if (n == SSH_ERROR)
            return xasprintf("lost the connection to %s while installing %s: %s", c->h->name, what,
                             ssh_get_error(c->session));
        if (n > 0) agent_upload_tail(out, buf, (size_t)n);
        k = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 1);
        if (k == SSH_ERROR)
            return xasprintf("lost the connection to %s while installing %s: %s", c->h->name, what,
                             ssh_get_error(c->session));
        if (k > 0) agent_upload_tail(err, buf, (size_t)k);
        if (n <= 0 && k <= 0 && (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch))) return NULL;
        if (mono_ms() >= deadline) return xasprintf("installing %s on %s timed out", what, c->h->name);
    }
}

char *ssh_conn_upload_exec(struct ssh_conn *c, const char *local, const char *name, unsigned mode,
                           const char *want_sha256)
{
    struct strbuf data, out, errout;
    char hex[65], *cmd = NULL, *err = NULL;
    ssh_channel ch = NULL;
    /* a little past the poll loop's own deadline for the stage, whose message then wins */
    int64_t deadline = mono_ms() + (int64_t)c->o->timeout_s * 3000 + 2000;

    strbuf_init(&data);
    strbuf_init(&out);
    strbuf_init(&errout);
    if (agent_upload_load(local, &data, hex) < 0) {
        err = xasprintf("cannot read %s: %s", local, strerror(errno));
        goto out;
    }
    if ((err = agent_upload_changed(local, hex, want_sha256, c->h->name)) != NULL) goto out;
    cmd = agent_upload_command(c->remote_dir, name, hex, mode);
    ch = ssh_channel_new(c->session);
    if (!ch || ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, cmd) != SSH_OK) {
        free(c->upload_hint);
        c->upload_hint = xstrdup("check that the node's sshd allows running commands (or enable `Subsystem sftp`)");
        err = xasprintf("cannot run a command on %s to upload %s (it has no sftp subsystem): %s",
                        c->h->name, name, ssh_get_error(c->session));
        goto out;
    }
    err = exchange(c, ch, &data, &out, &errout, name, deadline);
    if (!err)
        err = agent_upload_verdict(&out, &errout, ssh_channel_get_exit_status(ch), c->h->name, c->remote_dir, name,
                                   hex, &c->upload_hint);
out:
    if (ch) {
        if (!err) ssh_channel_close(ch);
        ssh_channel_free(ch);
    }
    free(cmd);
    strbuf_done(&data);
    strbuf_done(&out);
    strbuf_done(&errout);
    return err;
}
