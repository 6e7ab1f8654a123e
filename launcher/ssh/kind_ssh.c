/* The ssh kind (transport_kind.h): every node logged in to over SSH (transport_ssh.c over
 * ssh_conn.h), the agent deployed by the probe and uploaded by SFTP or over exec
 * (agent_deploy.h). The default for a hostfile, and for PBS hosts without pbs_tmrsh. Its
 * options are the SSH options of ssh_cli.c, which every kind reads for its deadlines. */
#include "transport_kind.h"

#include "hosts/hostfile.h"
#include "hosts/hosts_source.h"
#include "util/util.h"

static int ssh_natural(const struct hosts_source *src)
{
    return hosts_source_given(src) ? 1 : 0; /* any hosts; a source of their own says more */
}

static struct transport *ssh_open(const struct transport_env *env, size_t i, bool bridge)
{
    return bridge ? transport_ssh_attach_new(&env->hosts[i], env->conn) : transport_ssh_new(&env->hosts[i], env->conn);
}

/* --pbs falls back to SSH without pbs_tmrsh: the user should know which it was */
static char *ssh_announce(const struct transport_env *env)
{
    return env->pbs ? xstrdup("PBS job: no pbs_tmrsh on PATH, agents started over SSH") : NULL;
}

const struct transport_kind kind_ssh = {
    .name = "ssh",
    .help = "ssh",
    .natural = ssh_natural,
    .open = ssh_open,
    .announce = ssh_announce,
    .probes = true,
};
