/* The tm kind (transport_kind.h): PBS's task manager starts each node's agent, `pbs_tmrsh NODE
 * AGENT`, a child on two pipes (transport_child.c); the agent must be at the same path on
 * every node (a shared file system: docs/slurm.md "PBS"). The default with --pbs when
 * pbs_tmrsh is on PATH. */
#include "transport_kind.h"

#include "hosts/hostfile.h"
#include "hosts/hosts_source.h"
#include "util/cli.h"
#include "util/util.h"

static int tm_natural(const struct hosts_source *src)
{
    return src->pbs && util_in_path("pbs_tmrsh") ? 2 : 0;
}

static int tm_fits(const struct hosts_source *src, char *err, size_t errlen)
{
    if (!src->pbs) return cli_fail(err, errlen, "--transport tm is PBS's task manager: it goes with --pbs");
    return 0;
}

static struct transport *tm_open(const struct transport_env *env, size_t i, bool bridge)
{
    const char *name = env->hosts[i].name;
    const char *argv[] = {"pbs_tmrsh", name, env->agent_path, bridge ? "--attach" : NULL, NULL};
    return transport_child_new(argv, name, env->stderr_path);
}

static char *tm_announce(const struct transport_env *env)
{
    (void)env;
    return xstrdup("PBS job: agents started with pbs_tmrsh (PBS's task manager)");
}

const struct transport_kind kind_tm = {
    .name = "tm",
    .help = "tm (PBS's pbs_tmrsh; the default with --pbs when pbs_tmrsh is on PATH)",
    .natural = tm_natural,
    .fits = tm_fits,
    .open = tm_open,
    .announce = tm_announce,
    .through = "pbs_tmrsh",
};
