/* The choice of HOSTFILE, --slurm or --pbs (hosts_source.h), written once for both command
 * lines so that they take the same spellings and say the same things. */
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
    if ((rc = cli_opt_value(argc, argv, i, "--agent-bcast", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--agent-bcast needs auto, always or never (see ddptop %s --help)", cmd);
        if (strcmp(val, "auto") == 0) s->agent_bcast = 0;
        else if (strcmp(val, "always") == 0) s->agent_bcast = 1;
        else if (strcmp(val, "never") == 0) s->agent_bcast = -1;
        else return cli_fail(err, errlen, "--agent-bcast wants auto, always or never, not '%s'", val);
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--transport", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--transport needs ssh, srun or tm (see ddptop %s --help)", cmd);
        if (strcmp(val, "ssh") == 0) s->via = HOSTS_VIA_SSH;
        else if (strcmp(val, "srun") == 0) s->via = HOSTS_VIA_SRUN;
        else if (strcmp(val, "tm") == 0) s->via = HOSTS_VIA_TM;
        else return cli_fail(err, errlen, "--transport wants ssh, srun or tm, not '%s'", val);
        return 1;
    }
    return 0;
}

int hosts_source_via(const struct hosts_source *s, char *err, size_t errlen)
{
    switch (s->via) {
    case HOSTS_VIA_SRUN:
        if (!hosts_source_slurm(s))
            return cli_fail(err, errlen, "--transport srun starts the agents as a step of a Slurm job: give "
                            "--slurm (inside an allocation), --jobid ID or --salloc ARGS");
        return HOSTS_VIA_SRUN;
    case HOSTS_VIA_TM:
        if (!s->pbs) return cli_fail(err, errlen, "--transport tm is PBS's task manager: it goes with --pbs");
        return HOSTS_VIA_TM;
    case HOSTS_VIA_SSH:
        return HOSTS_VIA_SSH;
    default:
        break;
    }
    if (hosts_source_slurm(s)) return HOSTS_VIA_SRUN;
    if (s->pbs) return util_in_path("pbs_tmrsh") ? HOSTS_VIA_TM : HOSTS_VIA_SSH;
    return HOSTS_VIA_SSH;
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
