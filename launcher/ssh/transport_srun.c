/* A transport as a member of a Slurm step (transport_int.h's ops, the srun kind's): one
 * node's member of a step that runs every node's agent (srun_step.h). The step is shared: any
 * member's step pumps it all, only the first member not yet released offers its fds
 * (srun_step_pollfds), and the step is freed when its last member is released. */
#include "transport_int.h"

#include <stdlib.h>

#include "util/util.h"

struct srun_transport {
    struct transport base;
    struct srun_step *step;
    size_t member;
};

static const struct transport_ops srun_ops;

static struct srun_transport *member_of(const struct transport *t)
{
    return (struct srun_transport *)t;
}

struct transport *transport_srun_new(struct srun_step *s, size_t member)
{
    struct srun_transport *m = xcalloc(1, sizeof *m);
    m->base.ops = &srun_ops;
    m->step = s;
    m->member = member;
    return &m->base;
}

static void member_start(struct transport *t)
{
    srun_step_start(member_of(t)->step);
}

static int member_pollfds(struct transport *t, struct pollfd *p, int max)
{
    return srun_step_pollfds(member_of(t)->step, member_of(t)->member, p, max);
}

/* The step's shared pipes and handshakes by the member that offers them (the first one not
 * released, srun_step_pollfds): once a pass, not once per node (1,024 nodes made 3,000 reads
 * that found nothing every pass). Its own connection on its revents (srun_step.h). */
static void member_pump(struct transport *t, short revents)
{
    struct srun_transport *m = member_of(t);
    if (srun_step_owner(m->step, m->member)) srun_step_pump(m->step);
    srun_step_member_pump(m->step, m->member, revents);
}

static enum transport_state member_state(const struct transport *t)
{
    switch (srun_step_state(member_of(t)->step, member_of(t)->member)) {
    case SRUN_MEMBER_WAITING: return TRANSPORT_CONNECTING;
    case SRUN_MEMBER_RUNNING: return TRANSPORT_READY;
    case SRUN_MEMBER_CLOSED: return TRANSPORT_CLOSED;
    default: return TRANSPORT_FAILED;
    }
}

static bool member_connecting(const struct transport *t)
{
    return srun_step_state(member_of(t)->step, member_of(t)->member) == SRUN_MEMBER_WAITING;
}

static const char *member_error(const struct transport *t)
{
    return srun_step_error(member_of(t)->step, member_of(t)->member);
}

static const char *member_hint(const struct transport *t)
{
    return srun_step_hint(member_of(t)->step, member_of(t)->member);
}

static const char *member_address(const struct transport *t)
{
    return srun_step_address(member_of(t)->step, member_of(t)->member);
}

static void member_send_line(struct transport *t, const char *line)
{
    srun_step_send(member_of(t)->step, member_of(t)->member, line);
}

static char *member_next_line(struct transport *t)
{
    return srun_step_next_line(member_of(t)->step, member_of(t)->member);
}

static uint64_t member_bytes_in(const struct transport *t)
{
    return srun_step_bytes_in(member_of(t)->step, member_of(t)->member);
}

static void member_close(struct transport *t)
{
    srun_step_close(member_of(t)->step, member_of(t)->member);
}

/* detached: once every member let go, srun is left running with the agents; abandoned (a
 * step of bridges that got nowhere): srun is then killed at once, not waited for. */
static void member_release(struct transport *t)
{
    struct srun_transport *m = member_of(t);
    if (t->detached) srun_step_detach(m->step, m->member);
    if (t->abandoned) srun_step_abandon(m->step);
    srun_step_release(m->step, m->member);
    free(m);
}

static const struct transport_ops srun_ops = {
    .start = member_start,
    .pollfds = member_pollfds,
    .pump = member_pump,
    .state = member_state,
    .connecting = member_connecting,
    .error = member_error,
    .address = member_address,
    .send_line = member_send_line,
    .next_line = member_next_line,
    .bytes_in = member_bytes_in,
    .close = member_close,
    .release = member_release,
    .hint = member_hint,
};
