/* The fork kind, for the tests only (DDPTOP_TEST_TRANSPORTS=1, docs/testing.md): every node's
 * agent deployed and started on this machine through `sh -c`, as a kind that can exec on its
 * nodes would (a `kubectl exec -i POD --` prefix where this one has none): agent_deploy.h's
 * probe and upload over a child's pipes (transport_exec.c), into --agent-dir. The hosts are
 * names only. It is here to show that a kind is this file and one line of transport_kinds.c's
 * table (tests/it_transport_kind.sh). */
#include "transport_kind.h"

#include "hosts/hostfile.h"
#include "ssh_conn.h"

static struct transport *fork_open(const struct transport_env *env, size_t i, bool bridge)
{
    static const char *const prefix[] = {NULL};
    struct transport_exec_opts o = {.agent_local = env->agent_path, .agent_dir = env->conn->agent_dir,
                                    .timeout_s = env->conn->timeout_s, .login_timeout_s = env->conn->login_timeout_s,
                                    .stderr_path = env->stderr_path, .attach = bridge};
    return transport_exec_new(prefix, env->hosts[i].name, NULL, &o);
}

const struct transport_kind kind_fork = {
    .name = "fork",
    .help = "fork (the tests' own: sh -c on this machine)",
    .open = fork_open,
    .through = "sh -c",
    .probes = true,
    .test_only = true,
};
