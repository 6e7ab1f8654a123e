/* The SSH options of `ddptop check` and `ddptop run` (ssh_cli.h). A file named by -i or -F
 * must be readable now: a typo is a usage error before anything connects. */
#include "ssh_cli.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "util/cli.h"
#include "util/util.h"

#define TAKE(lng, shrt)                                                                  \
    (rc = cli_opt_value(argc, argv, i, lng, shrt, &val)) < 0                                 \
        ? cli_fail(err, errlen, "%s needs a value (see ddptop %s --help)", lng, cmd) : rc

int ssh_cli_option(const char *cmd, int argc, char **argv, int *i, struct ssh_conn_opts *o, char *err,
                   size_t errlen)
{
    const char *val = NULL;
    int rc;
    if (strcmp(argv[*i], "--accept-new-hosts") == 0) {
        o->accept_new_hosts = true;
        return 1;
    }
    if ((rc = TAKE("--known-hosts", NULL)) != 0) {
        if (rc > 0) o->known_hosts = val;
        return rc;
    }
    if ((rc = TAKE("--identity", "-i")) != 0) {
        if (rc > 0 && access(val, R_OK) != 0)
            return cli_fail(err, errlen, "-i %s: %s", val, strerror(errno));
        if (rc > 0) o->identity = val;
        return rc;
    }
    if ((rc = TAKE("--ssh-config", "-F")) != 0) {
        if (rc > 0 && access(val, R_OK) != 0)
            return cli_fail(err, errlen, "-F %s: %s", val, strerror(errno));
        if (rc > 0) o->ssh_config = val;
        return rc;
    }
    if ((rc = TAKE("--agent-dir", NULL)) != 0) {
        if (rc > 0 && !*val) return cli_fail(err, errlen, "--agent-dir wants a directory");
        if (rc > 0) o->agent_dir = val;
        return rc;
    }
    if ((rc = TAKE("--timeout", NULL)) != 0) {
        if (rc > 0) return cli_parse_int("--timeout", val, 1, 3600, &o->timeout_s, err, errlen) < 0 ? -1 : 1;
        return rc;
    }
    if ((rc = TAKE("--login-timeout", NULL)) != 0) {
        if (rc > 0) return cli_parse_int("--login-timeout", val, 1, 3600, &o->login_timeout_s, err, errlen) < 0 ? -1 : 1;
        return rc;
    }
    return 0;
}

void ssh_cli_usage(FILE *f)
{
    fputs("  --known-hosts FILE   host keys to verify against (default ~/.ssh/known_hosts)\n"
          "  --accept-new-hosts   add unknown host keys to that file (changed keys are always refused)\n"
          "  -i, --identity FILE  private key to try first (also the hostfile key identity=FILE)\n"
          "  -F, --ssh-config FILE  ssh config to read instead of ~/.ssh/config\n"
          "  --agent-dir DIR      where the agent lives on the nodes (default ~/.cache/ddptop); yours,\n"
          "                       writable by you alone, not a link (else refused)\n"
          "  --timeout SEC        deadline of each connection stage (default 10)\n"
          "  --login-timeout SEC  deadline of the login shell's start on a node, from the command\n"
          "                       sent to the agent's first line (default 60; slow ~/.bashrc)\n",
          f);
}

char *ssh_cli_local_agent(void)
{
    return util_exe_program("ddptop-agent");
}

