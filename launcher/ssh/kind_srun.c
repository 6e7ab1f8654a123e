/* The srun kind (transport_kind.h): one Slurm job step runs every node's agent (srun_step.h),
 * each node a member of it (transport_srun.c); its requests go addressed through srun's one
 * stdin. The default for a Slurm job's hosts (--slurm, --jobid, --salloc); docs/slurm.md. Its
 * own option: --agent-bcast, whether srun copies the agent to the nodes first. */
#include "transport_kind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts/hostfile.h"
#include "hosts/hosts_source.h"
#include "srun_step.h"
#include "util/cli.h"
#include "util/util.h"

static const char *const srun_options[] = {"--agent-bcast", NULL};

static int srun_option(const char *name, const char *value, const char *cmd, char *err, size_t errlen)
{
    (void)name;
    if (!value) return cli_fail(err, errlen, "--agent-bcast needs auto, always or never (see ddptop %s --help)", cmd);
    if (strcmp(value, "auto") != 0 && strcmp(value, "always") != 0 && strcmp(value, "never") != 0)
        return cli_fail(err, errlen, "--agent-bcast wants auto, always or never, not '%s'", value);
    return 0;
}

static int srun_natural(const struct hosts_source *src)
{
    return hosts_source_slurm(src) ? 2 : 0;
}

static int srun_fits(const struct hosts_source *src, char *err, size_t errlen)
{
    if (!hosts_source_slurm(src))
        return cli_fail(err, errlen, "--transport srun starts the agents as a step of a Slurm job: give "
                        "--slurm (inside an allocation), --jobid ID or --salloc ARGS");
    return 0;
}

/* --agent-bcast: always, never, or auto (unless the agent is on a file system the nodes share). */
static bool bcast_wanted(const struct transport_env *env)
{
    const char *b = transport_opts_get(env->o, "--agent-bcast");
    if (b && strcmp(b, "always") == 0) return true;
    if (b && strcmp(b, "never") == 0) return false;
    return srun_step_needs_bcast(env->agent_path);
}

/* One step for every node in need of an agent: their transports share it. */
static void srun_open_step(const struct transport_env *env, const bool *need, bool bridge, struct transport **t)
{
    const char **names = xcalloc(env->n ? env->n : 1, sizeof *names);
    size_t *idx = xcalloc(env->n ? env->n : 1, sizeof *idx), k = 0;
    struct srun_step_opts so = {.agent_path = env->agent_path, .jobid = env->slurm_jobid,
                                .stderr_path = env->stderr_path, .bcast = bcast_wanted(env), .attach = bridge};
    for (size_t i = 0; i < env->n; i++) {
        if (!need[i]) continue;
        names[k] = env->hosts[i].name;
        idx[k++] = i;
    }
    if (k) {
        struct srun_step *step = srun_step_new(&so, names, k);
        if (env->verbose) {
            char *cmd = srun_step_command(step);
            fprintf(stderr, "ddptop: agents: %s\n", cmd);
            free(cmd);
        }
        for (size_t m = 0; m < k; m++) t[idx[m]] = transport_srun_new(step, m);
    }
    free(names);
    free(idx);
}

static char *srun_announce(const struct transport_env *env)
{
    const char *job = env->slurm_jobid ? env->slurm_jobid : getenv("SLURM_JOB_ID");
    return xasprintf("agents started as one step of Slurm job %s (srun)", job ? job : "?");
}

/* The agents' step has its own values of these (one task per node); the ranks get the job's,
 * as the allocation gave them to ddptop (docs/slurm.md "Environment"). Not with --jobid or
 * --salloc: ddptop's environment is then not that job's. */
static const char *const *srun_rank_vars(const struct transport_env *env)
{
    static const char *const job_vars[] = {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE",
                                           "SLURM_NTASKS_PER_NODE", "SLURM_NNODES", "SLURM_JOB_NAME",
                                           "SLURM_MEM_PER_NODE", "SLURM_CPUS_PER_TASK", NULL};
    return env->slurm_jobid ? NULL : job_vars;
}

const struct transport_kind kind_srun = {
    .name = "srun",
    .help = "srun (one Slurm job step; the default with --slurm, --jobid, --salloc)",
    .options = srun_options,
    .usage = "  --agent-bcast WHEN   srun: copy the agent to the nodes (srun --bcast): auto (unless\n"
             "                       it is on NFS, Lustre, GPFS...), always or never\n",
    .option = srun_option,
    .natural = srun_natural,
    .fits = srun_fits,
    .open_step = srun_open_step,
    .announce = srun_announce,
    .rank_vars = srun_rank_vars,
    .hello_ms = 60000, /* a step's start: scheduling, srun's launch, the copy of --bcast */
    .through = "srun",
};
