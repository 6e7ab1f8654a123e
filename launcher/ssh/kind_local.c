/* The local kind (transport_kind.h): no hosts given, the agent is a child of ddptop on this
 * machine, on two pipes (transport_child.c). Never named by --transport: the hosts' absence
 * chooses it. Pipes hold nothing poll() cannot see, so the loop may sleep a second. */
#include "transport_kind.h"

#include "hosts/hosts_source.h"

static int local_natural(const struct hosts_source *src)
{
    return hosts_source_given(src) ? 0 : 2;
}

static struct transport *local_open(const struct transport_env *env, size_t i, bool bridge)
{
    const char *argv[] = {env->agent_path, bridge ? "--attach" : NULL, NULL};
    (void)i;
    return transport_child_new(argv, NULL, env->stderr_path);
}

const struct transport_kind kind_local = {
    .name = "local",
    .natural = local_natural,
    .open = local_open,
    .idle_ms = 1000,
    .through = "this machine",
};
