/* A transport over SSH (transport_int.h's ops, the ssh kind's): a thin veneer over ssh_conn
 * (ssh_conn.h), whose state machine connects, deploys the agent (ssh_deploy.c) and then
 * carries its lines (ssh_stream.c). It alone knows a login: user, port, upload, the login
 * shell's time. */
#include "transport_int.h"

#include <stdlib.h>

#include "util/util.h"

struct ssh_transport {
    struct transport base;
    struct ssh_conn *ssh;
};

static const struct transport_ops ssh_ops;

static struct ssh_conn *conn(const struct transport *t)
{
    return ((const struct ssh_transport *)t)->ssh;
}

struct transport *transport_ssh_new(const struct host *h, const struct ssh_conn_opts *o)
{
    struct ssh_transport *s = xcalloc(1, sizeof *s);
    s->base.ops = &ssh_ops;
    s->ssh = ssh_conn_new(h, o);
    return &s->base;
}

struct transport *transport_ssh_attach_new(const struct host *h, const struct ssh_conn_opts *o)
{
    struct transport *t = transport_ssh_new(h, o);
    ssh_conn_set_attach(conn(t));
    return t;
}

static void ssh_start(struct transport *t)
{
    ssh_conn_start(conn(t));
}

static int ssh_pollfds(struct transport *t, struct pollfd *p, int max)
{
    return max > 0 && ssh_conn_pollfd(conn(t), p) ? 1 : 0;
}

static bool ssh_pending(const struct transport *t)
{
    return ssh_conn_pending(conn(t));
}

static void ssh_pump(struct transport *t, short revents)
{
    ssh_conn_pump(conn(t), revents);
}

static int64_t ssh_deadline_ms(const struct transport *t)
{
    return ssh_conn_deadline_ms(conn(t));
}

static enum transport_state ssh_state(const struct transport *t)
{
    switch (ssh_conn_state(conn(t))) {
    case SSH_CONN_READY: return TRANSPORT_READY;
    case SSH_CONN_CLOSED: return TRANSPORT_CLOSED;
    case SSH_CONN_FAILED: return TRANSPORT_FAILED;
    default: return TRANSPORT_CONNECTING;
    }
}

static bool ssh_connecting(const struct transport *t)
{
    return ssh_conn_connecting(conn(t));
}

static bool ssh_reached(const struct transport *t)
{
    return ssh_conn_reached(conn(t));
}

static const char *ssh_error(const struct transport *t)
{
    return ssh_conn_error(conn(t));
}

static const char *ssh_hint(const struct transport *t)
{
    return ssh_conn_hint(conn(t));
}

static const char *ssh_address(const struct transport *t)
{
    return ssh_conn_address(conn(t));
}

static const char *ssh_user(const struct transport *t)
{
    return ssh_conn_user(conn(t));
}

static int ssh_port(const struct transport *t)
{
    return ssh_conn_port(conn(t));
}

static bool ssh_uploaded(const struct transport *t)
{
    return ssh_conn_uploaded(conn(t));
}

static const char *ssh_upload_method(const struct transport *t)
{
    return ssh_conn_upload_method(conn(t));
}

static int64_t ssh_login_ms(const struct transport *t)
{
    return ssh_conn_login_ms(conn(t));
}

static void ssh_send_line(struct transport *t, const char *line)
{
    ssh_conn_send_line(conn(t), line);
}

static char *ssh_next_line(struct transport *t)
{
    return ssh_conn_next_line(conn(t));
}

static bool ssh_next_line_into(struct transport *t, struct strbuf *out)
{
    return ssh_conn_next_line_into(conn(t), out);
}

static uint64_t ssh_bytes_in(const struct transport *t)
{
    return ssh_conn_bytes_in(conn(t));
}

static void ssh_close(struct transport *t)
{
    ssh_conn_close(conn(t));
}

/* Detached, abandoned or not, the session is disconnected without a word: the far side sees
 * its link drop (an agent that holds ranks then waits for a controller: its grace). */
static void ssh_release(struct transport *t)
{
    ssh_conn_free(conn(t));
    free(t);
}

static const struct transport_ops ssh_ops = {
    .start = ssh_start,
    .pollfds = ssh_pollfds,
    .pump = ssh_pump,
    .state = ssh_state,
    .connecting = ssh_connecting,
    .error = ssh_error,
    .address = ssh_address,
    .send_line = ssh_send_line,
    .next_line = ssh_next_line,
    .next_line_into = ssh_next_line_into,
    .bytes_in = ssh_bytes_in,
    .close = ssh_close,
    .release = ssh_release,
    .deadline_ms = ssh_deadline_ms,
    .pending = ssh_pending,
    .reached = ssh_reached,
    .hint = ssh_hint,
    .user = ssh_user,
    .port = ssh_port,
    .uploaded = ssh_uploaded,
    .upload_method = ssh_upload_method,
    .login_ms = ssh_login_ms,
};
