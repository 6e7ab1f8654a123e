/* Unit tests for launcher/hosts/hosts_source.c: the HOSTFILE / --slurm / --jobid / --salloc /
 * --pbs choice that `ddptop check` and `ddptop run` share. Exactly one source is read; two hostfiles, two kinds
 * of source or none are a usage message (the same words from both command lines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts/hosts_source.h"
#include "tap.h"

static char err[1024];

static void test_options(void)
{
    struct hosts_source s = {0};
    CHECK(!hosts_source_given(&s));
    CHECK(!hosts_source_option(&s, "--slurmx"));
    CHECK(!hosts_source_option(&s, "--json"));
    CHECK(!hosts_source_given(&s));
    CHECK(hosts_source_option(&s, "--pbs"));
    CHECK(s.pbs && !s.slurm);
    CHECK(hosts_source_given(&s));
    CHECK(hosts_source_option(&s, "--slurm"));
    CHECK(s.slurm);
}

static void test_two_hostfiles(void)
{
    struct hosts_source s = {0};
    CHECK_INT(hosts_source_file(&s, "a.txt", err, sizeof err), 0);
    CHECK_INT(hosts_source_file(&s, "b.txt", err, sizeof err), -1);
    CHECK_STR(err, "two hostfiles given ('a.txt' and 'b.txt'); put the command after --");
    CHECK_STR(s.hostfile, "a.txt");
}

static void test_load_needs_exactly_one(void)
{
    struct hosts_source none = {0}, two = { .hostfile = "a.txt", .slurm = true };
    struct hosts_source three = { .hostfile = "a.txt", .slurm = true, .pbs = true };
    struct hostlist hl = {0};
    CHECK_INT(hosts_source_load(&none, &hl, err, sizeof err), -1);
    CHECK_STR(err, "no hosts: give a HOSTFILE (or --slurm / --pbs inside an allocation)");
    CHECK_INT(hosts_source_load(&two, &hl, err, sizeof err), -1);
    CHECK_STR(err, "give only one of HOSTFILE, --slurm, --jobid, --salloc and --pbs");
    CHECK_INT(hosts_source_load(&three, &hl, err, sizeof err), -1);
    CHECK_STR(err, "give only one of HOSTFILE, --slurm, --jobid, --salloc and --pbs");
    CHECK_INT(hl.n, 0);
}

static void test_load_each_source(void)
{
    char dir[] = "/tmp/ddptop-test-hs.XXXXXX", path[128];
    struct hostlist hl = {0};
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/hosts.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("gpu[1-2] slots=2\n", f);
    fclose(f);

    struct hosts_source file = { .hostfile = path };
    CHECK_INT(hosts_source_load(&file, &hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n == 2) CHECK_STR(hl.hosts[1].name, "gpu2");
    hostlist_free(&hl);

    /* the reader's own message comes through as it is */
    struct hosts_source missing = { .hostfile = "/nonexistent/ddptop-hosts" };
    CHECK_INT(hosts_source_load(&missing, &hl, err, sizeof err), -1);
    CHECK(strncmp(err, "/nonexistent/ddptop-hosts: cannot read:", 39) == 0);

    struct hosts_source slurm = { .slurm = true };
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_GPUS_ON_NODE");
    unsetenv("SLURM_NTASKS_PER_NODE");
    CHECK_INT(hosts_source_load(&slurm, &hl, err, sizeof err), -1);
    CHECK(strncmp(err, "--slurm: SLURM_JOB_NODELIST is not set", 38) == 0);
    setenv("SLURM_JOB_NODELIST", "node[7-9]", 1);
    CHECK_INT(hosts_source_load(&slurm, &hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 3);
    hostlist_free(&hl);
    unsetenv("SLURM_JOB_NODELIST");

    snprintf(path, sizeof path, "%s/nodefile", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("n1\nn1\nn2\n", f);
    fclose(f);
    setenv("PBS_NODEFILE", path, 1);
    struct hosts_source pbs = { .pbs = true };
    CHECK_INT(hosts_source_load(&pbs, &hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n == 2) CHECK_INT(hl.hosts[0].slots, 2);
    hostlist_free(&hl);
    unsetenv("PBS_NODEFILE");

    unlink(path);
    snprintf(path, sizeof path, "%s/hosts.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* --jobid and --salloc (how their agents start is the transport kinds': test_transport_kind). */
static void test_slurm_options(void)
{
    char *argv[] = {"--jobid", "42", "--salloc", "-N2 -t 5", "--transport", "srun", "--jobid"};
    int argc = 7, i = 0;
    struct hosts_source s = {0}, file = {.hostfile = "h.txt"};
    CHECK_INT(hosts_source_value_option(&s, argc, argv, &i, "run", err, sizeof err), 1);
    CHECK_INT(i, 1);
    CHECK_STR(s.jobid, "42");
    CHECK(hosts_source_given(&s) && hosts_source_slurm(&s));
    CHECK_STR(hosts_source_jobid(&s), "42");
    i = 2;
    CHECK_INT(hosts_source_value_option(&s, argc, argv, &i, "run", err, sizeof err), 1);
    CHECK_STR(s.salloc, "-N2 -t 5");
    i = 4;
    CHECK_INT(hosts_source_value_option(&s, argc, argv, &i, "run", err, sizeof err), 0); /* not hosts' */
    i = 6;
    CHECK_INT(hosts_source_value_option(&s, argc, argv, &i, "check", err, sizeof err), -1);
    CHECK_STR(err, "--jobid needs a Slurm job id (see ddptop check --help)");
    i = 0;
    CHECK_INT(hosts_source_value_option(&file, 1, (char *[]){"--json"}, &i, "run", err, sizeof err), 0);
    CHECK(strstr(hosts_source_usage(), "--salloc 'ARGS'") != NULL);
}

int main(void)
{
    RUN(test_options);
    RUN(test_two_hostfiles);
    RUN(test_load_needs_exactly_one);
    RUN(test_load_each_source);
    RUN(test_slurm_options);
    return tap_done();
}
