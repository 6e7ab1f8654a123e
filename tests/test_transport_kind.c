/* Unit tests for launcher/ssh/transport_kinds.c, the table of transport kinds: --transport
 * takes the kinds' names and says which there are when given another; a kind's own option is
 * checked by its kind and read back; without --transport the hosts choose (srun for a Slurm
 * job's, tm for PBS's when pbs_tmrsh is on PATH, else ssh; no hosts: this machine's own
 * agent); a named kind that does not fit the hosts is a usage message; the help text is the
 * one users had before the kinds were a table; a kind for the tests is there only when the
 * tests ask for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hosts/hosts_source.h"
#include "ssh/transport_kind.h"
#include "tap.h"
#include "util/util.h"

static char err[1024];

/* argv[*at] through transport_opts_option. */
static int take(struct transport_opts *o, int argc, char **argv, int at)
{
    int i = at;
    return transport_opts_option(o, argc, argv, &i, "run", err, sizeof err);
}

static void test_options(void)
{
    char *argv[] = {"--transport", "srun", "--transport", "rsh", "--agent-bcast", "always", "--agent-bcast=sometimes",
                    "--json", "--transport"};
    struct transport_opts o = {0};
    CHECK_INT(take(&o, 9, argv, 0), 1);
    CHECK_STR(o.named, "srun");
    CHECK_INT(take(&o, 9, argv, 2), -1);
    CHECK_STR(err, "--transport wants ssh, srun or tm, not 'rsh'");
    CHECK_INT(take(&o, 9, argv, 8), -1);
    CHECK_STR(err, "--transport needs ssh, srun or tm (see ddptop run --help)");
    CHECK_INT(take(&o, 9, argv, 4), 1);
    CHECK_STR(transport_opts_get(&o, "--agent-bcast"), "always");
    CHECK_INT(take(&o, 9, argv, 6), -1);
    CHECK_STR(err, "--agent-bcast wants auto, always or never, not 'sometimes'");
    CHECK_INT(take(&o, 2, (char *[]){"--agent-bcast", NULL}, 0), -1);
    CHECK_STR(err, "--agent-bcast needs auto, always or never (see ddptop run --help)");
    CHECK_INT(take(&o, 9, argv, 7), 0);
    CHECK(transport_opts_get(&o, "--nothing") == NULL);
    /* "local" is chosen by the hosts' absence, never named */
    CHECK_INT(take(&o, 2, (char *[]){"--transport", "local"}, 0), -1);
}

static const char *chosen(struct transport_opts *o, const struct hosts_source *src)
{
    if (transport_opts_choose(o, src, err, sizeof err) < 0) return NULL;
    return o->kind->name;
}

static void test_choice_by_hosts(void)
{
    struct hosts_source slurm = {.slurm = true}, job = {.jobid = "42"}, pbs = {.pbs = true},
                        file = {.hostfile = "h.txt"}, none = {0};
    struct transport_opts o = {0};
    char dir[] = "/tmp/ddptop-test-kinds-XXXXXX", *path = NULL, *tmrsh = NULL;
    const char *old_path = getenv("PATH");
    char *saved = old_path ? xstrdup(old_path) : NULL;
    CHECK_STR(chosen(&o, &slurm), "srun");
    CHECK_STR(chosen(&o, &job), "srun");
    CHECK_STR(chosen(&o, &file), "ssh");
    CHECK_STR(chosen(&o, &none), "local");
    /* --pbs: pbs_tmrsh when PATH has it, else ssh */
    setenv("PATH", "/nonexistent", 1);
    CHECK_STR(chosen(&o, &pbs), "ssh");
    if (mkdtemp(dir)) {
        tmrsh = xasprintf("%s/pbs_tmrsh", dir);
        FILE *f = fopen(tmrsh, "w");
        if (f) fclose(f);
        chmod(tmrsh, 0700);
        path = xasprintf("%s:/nonexistent", dir);
        setenv("PATH", path, 1);
        CHECK_STR(chosen(&o, &pbs), "tm");
        unlink(tmrsh);
        rmdir(dir);
    }
    if (saved) setenv("PATH", saved, 1);
    /* named: it must fit the hosts */
    o.named = "srun";
    CHECK(chosen(&o, &file) == NULL);
    CHECK_STR(err, "--transport srun starts the agents as a step of a Slurm job: give --slurm (inside an "
                   "allocation), --jobid ID or --salloc ARGS");
    o.named = "tm";
    CHECK(chosen(&o, &file) == NULL);
    CHECK_STR(err, "--transport tm is PBS's task manager: it goes with --pbs");
    o.named = "ssh";
    CHECK_STR(chosen(&o, &slurm), "ssh");
    CHECK_STR(chosen(&o, &pbs), "ssh");
    free(saved);
    free(path);
    free(tmrsh);
}

/* The lines of --help, word for word what ssh_cli.c printed before the kinds were a table. */
static void test_usage(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    transport_kinds_usage(f);
    fclose(f);
    CHECK_STR(buf, "  --transport T        how agents start: ssh, srun (one Slurm job step; the default with\n"
                   "                       --slurm, --jobid, --salloc) or tm (PBS's pbs_tmrsh; the default with\n"
                   "                       --pbs when pbs_tmrsh is on PATH). docs/slurm.md\n"
                   "  --agent-bcast WHEN   srun: copy the agent to the nodes (srun --bcast): auto (unless\n"
                   "                       it is on NFS, Lustre, GPFS...), always or never\n");
    free(buf);
}

/* What the controller and the preflight read of each kind, instead of testing which it is. */
static void test_properties(void)
{
    const struct transport_kind *ssh = transport_kind_find("ssh"), *srun = transport_kind_find("srun"),
                                *tm = transport_kind_find("tm"), *local = transport_kind_find("local");
    CHECK(ssh && srun && tm && local);
    if (!ssh || !srun || !tm || !local) return;
    CHECK(!transport_kind_shares_step(ssh) && transport_kind_shares_step(srun) && !transport_kind_shares_step(tm));
    CHECK_INT(transport_kind_hello_ms(srun), 60000);
    CHECK_INT(transport_kind_hello_ms(ssh), 0);
    CHECK_INT(transport_kind_idle_ms(ssh), 100);
    CHECK_INT(transport_kind_idle_ms(local), 1000);
    CHECK(ssh->through == NULL && ssh->probes);
    CHECK_STR(srun->through, "srun");
    CHECK_STR(tm->through, "pbs_tmrsh");
    CHECK(!srun->probes && !tm->probes);
    /* what each says once a run */
    struct transport_opts o = {.kind = srun};
    struct transport_env env = {.o = &o, .slurm_jobid = "77"};
    char *said = transport_kind_announce(&env);
    CHECK_STR(said, "agents started as one step of Slurm job 77 (srun)");
    free(said);
    CHECK(transport_kind_rank_vars(&env) == NULL); /* --jobid: ddptop's environment is not the job's */
    env.slurm_jobid = NULL;
    CHECK(transport_kind_rank_vars(&env) != NULL);
    o.kind = ssh;
    CHECK(transport_kind_announce(&env) == NULL);
    env.pbs = true;
    said = transport_kind_announce(&env);
    CHECK_STR(said, "PBS job: no pbs_tmrsh on PATH, agents started over SSH");
    free(said);
    o.kind = local;
    CHECK(transport_kind_announce(&env) == NULL && transport_kind_rank_vars(&env) == NULL);
}

int main(void)
{
    unsetenv("DDPTOP_TEST_TRANSPORTS");
    RUN(test_options);
    RUN(test_choice_by_hosts);
    RUN(test_usage);
    RUN(test_properties);
    return tap_done();
}
