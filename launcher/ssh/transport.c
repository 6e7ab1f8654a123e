/* The generic part of transport.h: every call goes through the transport's ops table
 * (transport_int.h), each filled by one file (transport_ssh.c, transport_child.c,
 * transport_srun.c); the optional entries one leaves out get their defaults here. Nothing
 * here knows which there are. */
#include "transport_int.h"

#include <stdlib.h>

#include "util/util.h"

void transport_start(struct transport *t)
{
    t->ops->start(t);
}

int transport_pollfds(struct transport *t, struct pollfd *p, int max)
{
    return max > 0 ? t->ops->pollfds(t, p, max) : 0;
}

void transport_pump(struct transport *t, short revents)
{
    t->ops->pump(t, revents);
}

bool transport_pending(const struct transport *t)
{
    return t->ops->pending && t->ops->pending(t);
}

int64_t transport_deadline_ms(const struct transport *t)
{
    return t->ops->deadline_ms ? t->ops->deadline_ms(t) : 0;
}

enum transport_state transport_state(const struct transport *t)
{
    return t->ops->state(t);
}

bool transport_connecting(const struct transport *t)
{
    return t->ops->connecting(t);
}

bool transport_reached(const struct transport *t)
{
    return !t->ops->reached || t->ops->reached(t);
}

const char *transport_error(const struct transport *t)
{
    return t->ops->error(t);
}

const char *transport_hint(const struct transport *t)
{
    return t->ops->hint ? t->ops->hint(t) : NULL;
}

const char *transport_address(const struct transport *t)
{
    const char *a = t->ops->address(t);
    return a ? a : "127.0.0.1";
}

const char *transport_user(const struct transport *t)
{
    const char *u = getenv("USER");
    return t->ops->user ? t->ops->user(t) : u && *u ? u : "?";
}

int transport_port(const struct transport *t)
{
    return t->ops->port ? t->ops->port(t) : 0;
}

bool transport_uploaded(const struct transport *t)
{
    return t->ops->uploaded && t->ops->uploaded(t);
}

const char *transport_upload_method(const struct transport *t)
{
    return t->ops->upload_method ? t->ops->upload_method(t) : NULL;
}

int64_t transport_login_ms(const struct transport *t)
{
    return t->ops->login_ms ? t->ops->login_ms(t) : -1;
}

void transport_send_line(struct transport *t, const char *line)
{
    t->ops->send_line(t, line);
}

bool transport_next_line_into(struct transport *t, struct strbuf *out)
{
    if (t->ops->next_line_into) return t->ops->next_line_into(t, out);
    char *line = t->ops->next_line(t);
    if (!line) return false;
    strbuf_reset(out);
    strbuf_adds(out, line);
    free(line);
    return true;
}

uint64_t transport_bytes_in(const struct transport *t)
{
    return t->ops->bytes_in(t);
}

void transport_close(struct transport *t)
{
    t->ops->close(t);
}

void transport_detach(struct transport *t)
{
    t->detached = true;
}

void transport_abandon(struct transport *t)
{
    t->abandoned = true;
}

void transport_free(struct transport *t)
{
    if (t) t->ops->release(t);
}
