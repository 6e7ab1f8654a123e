/* The choice of HOSTFILE, --slurm or --pbs (hosts_source.h), written once for both command
 * lines so that they take the same spellings and say the same things. */
#include "hosts_source.h"

#include <string.h>

#include "util/cli.h"

bool hosts_source_option(struct hosts_source *s, const char *arg)
{
    if (strcmp(arg, "--slurm") == 0) s->slurm = true;
    else if (strcmp(arg, "--pbs") == 0) s->pbs = true;
    else return false;
    return true;
}

int hosts_source_file(struct hosts_source *s, const char *path, char *err, size_t errlen)
{
    if (s->hostfile)
        return cli_fail(err, errlen, "two hostfiles given ('%s' and '%s'); put the command after --",
                        s->hostfile, path);
    s->hostfile = path;
    return 0;
}

bool hosts_source_given(const struct hosts_source *s)
{
    return s->hostfile || s->slurm || s->pbs;
}

int hosts_source_load(const struct hosts_source *s, struct hostlist *hl, char *err, size_t errlen)
{
    int rc;
    if ((s->hostfile != NULL) + s->slurm + s->pbs != 1)
        return cli_fail(err, errlen, hosts_source_given(s)
                                         ? "give only one of HOSTFILE, --slurm and --pbs"
                                         : "no hosts: give a HOSTFILE (or --slurm / --pbs inside an allocation)");
    if (s->slurm) rc = hostfile_from_slurm(hl, err, errlen);
    else if (s->pbs) rc = hostfile_from_pbs(hl, err, errlen);
    else rc = hostfile_parse(s->hostfile, hl, err, errlen);
    if (rc < 0) return -1;
    if (hl->n == 0)
        return cli_fail(err, errlen, "%s: no hosts in it",
                        s->hostfile ? s->hostfile : s->slurm ? "SLURM_JOB_NODELIST" : "PBS_NODEFILE");
    return 0;
}
