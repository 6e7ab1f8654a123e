/* The choice of HOSTFILE, --slurm, --jobid, --salloc or --pbs (hosts_source.h), written once for
 * both command lines so that they take the same spellings and say the same things. */
#include "hosts_source.h"

#include <stdlib.h>
#include <string.h>

#include "slurm_job.h"
#include "util/cli.h"
#include "util/util.h"

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

int hosts_source_value_option(struct hosts_source *s, int argc, char **argv, int *i, const char *cmd,
                              char *err, size_t errlen)
{
    const char *val = NULL;
    int rc;
    if ((rc = cli_opt_value(argc, argv, i, "--jobid", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--jobid needs a Slurm job id (see ddptop %s --help)", cmd);
        s->jobid = val;
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--salloc", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--salloc needs salloc's options in one word, e.g. "
                                    "--salloc '-N2 --ntasks-per-node=2 -t 30' (see ddptop %s --help)", cmd);
        s->salloc = val;
        return 1;
    }
    return 0;
}

const char *hosts_source_usage(void)
{
    return "  --slurm              hosts from SLURM_JOB_NODELIST (inside an allocation)\n"
           "  --pbs                hosts from PBS_NODEFILE\n"
           "  --jobid ID           from a login node: the nodes of your running Slurm job ID\n"
           "  --salloc 'ARGS'      ask Slurm for nodes first (salloc ARGS), give them back at the end\n";
}

#define SALLOC_JOBID_VAR "DDPTOP_SALLOC_JOBID"

void hosts_source_forget_allocation(void)
{
    unsetenv(SALLOC_JOBID_VAR);
}

bool hosts_source_given(const struct hosts_source *s)
{
    return s->hostfile || s->slurm || s->pbs || s->jobid || s->salloc;
}

bool hosts_source_slurm(const struct hosts_source *s)
{
    return s->slurm || s->jobid || s->salloc;
}

const char *hosts_source_jobid(const struct hosts_source *s)
{
    return s->allocated ? s->allocated : s->jobid;
}

void hosts_source_release(struct hosts_source *s)
{
    if (s->allocated) slurm_job_cancel(s->allocated);
    free(s->allocated);
    s->allocated = NULL;
}

int hosts_source_load(struct hosts_source *s, struct hostlist *hl, char *err, size_t errlen)
{
    int rc;
    if ((s->hostfile != NULL) + s->slurm + s->pbs + (s->jobid != NULL) + (s->salloc != NULL) != 1)
        return cli_fail(err, errlen, hosts_source_given(s)
                                         ? "give only one of HOSTFILE, --slurm, --jobid, --salloc and --pbs"
                                         : "no hosts: give a HOSTFILE (or --slurm / --pbs inside an allocation)");
    if (s->salloc) {
        /* The dashboard's session runs ddptop again with the same arguments: it takes the
         * allocation made here instead of asking for a second one. */
        const char *made = getenv(SALLOC_JOBID_VAR);
        s->allocated = made && *made ? xstrdup(made) : slurm_job_allocate(s->salloc, err, errlen);
        if (!s->allocated) return -1;
        setenv(SALLOC_JOBID_VAR, s->allocated, 1);
        rc = slurm_job_hosts(s->allocated, hl, err, errlen);
        if (rc < 0) hosts_source_release(s);
    } else if (s->jobid) rc = slurm_job_hosts(s->jobid, hl, err, errlen);
    else if (s->slurm) rc = hostfile_from_slurm(hl, err, errlen);
    else if (s->pbs) rc = hostfile_from_pbs(hl, err, errlen);
    else rc = hostfile_parse(s->hostfile, hl, err, errlen);
    if (rc < 0) return -1;
    if (hl->n == 0)
        return cli_fail(err, errlen, "%s: no hosts in it",
                        s->hostfile ? s->hostfile : s->pbs ? "PBS_NODEFILE" : "the Slurm job's node list");
    return 0;
}
