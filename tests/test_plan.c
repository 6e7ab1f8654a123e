/* `ddptop run`'s pure decisions: ranks per node, the rank map across a hostfile, every rank's
 * environment (torchrun's contract, and the precedence --export < --env < hostfile keys <
 * ddptop's own variables), the default command (local and the remote sh wrapper, which must
 * never parse a value), run ids, the token, exit codes; and the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "controller/controller.h"
#include "hosts/hostfile.h"
#include "cmd/cmd_run.h"
#include "job/job.h"
#include "job/plan.h"
#include "util/util.h"
#include "tap.h"

static void test_ranks_per_node(void)
{
    struct host h = {.slots = 4};
    struct host none = {0};
    CHECK_INT(plan_ranks_per_node(0, &h, -1), 4);      /* slots */
    CHECK_INT(plan_ranks_per_node(0, &none, -1), 1);   /* no slots: 1 */
    CHECK_INT(plan_ranks_per_node(0, NULL, -1), 1);    /* local */
    CHECK_INT(plan_ranks_per_node(3, &h, 8), 3);       /* --nproc-per-node wins */
    CHECK_INT(plan_ranks_per_node(-1, &h, 8), 8);      /* gpu: the GPU count */
    CHECK_INT(plan_ranks_per_node(-1, &h, 0), 4);      /* gpu, none found: slots */
    CHECK_INT(plan_ranks_per_node(-1, NULL, -1), 1);
}

static struct env_list env_for(const struct hostlist *hl, size_t node, int local_rank, int first_rank,
                               const struct env_list *exports, const struct host_env *cli, size_t n_cli)
{
    struct env_list out = {0};
    struct rank_env_in in = {
        .rank = first_rank + local_rank, .local_rank = local_rank, .node = (int)node,
        .local_world_size = hl->hosts[node].slots, .world_size = 5, .nnodes = (int)hl->n,
        .master_addr = "10.0.0.1", .master_port = 29500, .attempt = 2, .max_restarts = 3,
        .run_id = "r1", .token = "00ff", .exports = exports, .cli_env = cli, .n_cli_env = n_cli,
        .host = &hl->hosts[node],
    };
    plan_rank_env(&in, &out);
    return out;
}

/* Two nodes, 2 + 3 slots: rank 3 is node 1's local rank 1. */
static void test_rank_env_contract(void)
{
    struct hostlist hl;
    char err[256];
    CHECK_INT(hostfile_parse_text("h", "a slots=2\nb slots=3 NCCL_SOCKET_IFNAME=eth1\n", &hl, err, sizeof err), 0);
    struct env_list e = env_for(&hl, 1, 1, 2, NULL, NULL, 0);
    CHECK_STR(env_list_get(&e, "RANK"), "3");
    CHECK_STR(env_list_get(&e, "LOCAL_RANK"), "1");
    CHECK_STR(env_list_get(&e, "GROUP_RANK"), "1");
    CHECK_STR(env_list_get(&e, "NODE_RANK"), "1");
    CHECK_STR(env_list_get(&e, "LOCAL_WORLD_SIZE"), "3");
    CHECK_STR(env_list_get(&e, "WORLD_SIZE"), "5");
    CHECK_STR(env_list_get(&e, "NNODES"), "2");
    CHECK_STR(env_list_get(&e, "MASTER_ADDR"), "10.0.0.1");
    CHECK_STR(env_list_get(&e, "MASTER_PORT"), "29500");
    CHECK_STR(env_list_get(&e, "TORCHELASTIC_RESTART_COUNT"), "2");
    CHECK_STR(env_list_get(&e, "TORCHELASTIC_MAX_RESTARTS"), "3");
    CHECK_STR(env_list_get(&e, "TORCHELASTIC_RUN_ID"), "r1");
    CHECK_STR(env_list_get(&e, "DDPTOP_JOB_TOKEN"), "00ff");
    CHECK_STR(env_list_get(&e, "NCCL_SOCKET_IFNAME"), "eth1");
    CHECK(env_list_get(&e, "TORCHELASTIC_ERROR_FILE") == NULL); /* the agent picks one per rank */
    for (size_t i = 0; plan_contract_vars[i]; i++) CHECK(env_list_get(&e, plan_contract_vars[i]) != NULL);
    env_list_free(&e);
    hostlist_free(&hl);
}

static void test_rank_env_precedence(void)
{
    struct hostlist hl;
    char err[256];
    char *envp[] = {"NCCL_DEBUG=WARN", "NCCL_IB_HCA=mlx5", "MY_NCCL_X=1", "A=exported", "B=exported", "C=exported",
                    "RANK=99", NULL};
    const char *re[] = {"NCCL_.*", "A|B|C", "RANK"};
    struct env_list exports = {0};
    struct host_env cli[] = {{"B", "cli"}, {"C", "cli"}, {"WORLD_SIZE", "1000"}, {"TORCHELASTIC_ERROR_FILE", "/x"}};
    CHECK_INT(hostfile_parse_text("h", "n0 slots=1 C=hostfile\n", &hl, err, sizeof err), 0);
    CHECK_INT(plan_exports(re, 3, envp, &exports, err, sizeof err), 0);
    CHECK_INT((int)exports.n, 6);                       /* anchored: MY_NCCL_X not taken */
    CHECK(env_list_get(&exports, "MY_NCCL_X") == NULL);
    struct env_list e = env_for(&hl, 0, 0, 0, &exports, cli, 4);
    CHECK_STR(env_list_get(&e, "NCCL_DEBUG"), "WARN");  /* exported */
    CHECK_STR(env_list_get(&e, "A"), "exported");
    CHECK_STR(env_list_get(&e, "B"), "cli");            /* --env over --export */
    CHECK_STR(env_list_get(&e, "C"), "hostfile");       /* hostfile over --env */
    CHECK_STR(env_list_get(&e, "RANK"), "0");           /* ddptop's own over everything */
    CHECK_STR(env_list_get(&e, "WORLD_SIZE"), "5");
    CHECK(env_list_get(&e, "TORCHELASTIC_ERROR_FILE") == NULL);
    env_list_free(&e);
    env_list_free(&exports);
    CHECK_INT(plan_exports((const char *[]){"NCCL_("}, 1, envp, &exports, err, sizeof err), -1);
    CHECK(strstr(err, "--export 'NCCL_('") != NULL);
    env_list_free(&exports);
    hostlist_free(&hl);
}

/* Rank r of a 2-node x 2-rank job on hl's first two hosts. */
static struct rank_env_in in_2x2(const struct hostlist *hl, int r)
{
    return (struct rank_env_in){
        .rank = r, .local_rank = r % 2, .node = r / 2, .local_world_size = 2, .world_size = 4, .nnodes = 2,
        .master_addr = "10.0.0.1", .master_port = 29500, .attempt = 1, .max_restarts = 2, .run_id = "r1",
        .token = "00ff", .host = &hl->hosts[r / 2],
    };
}

/* Every key torchrun's LocalElasticAgent gives a worker, with torchrun's values, for each rank
 * of 2 nodes x 2 ranks: one role ("default") of all 4 ranks, 2 agents (nodes). */
static void test_rank_env_torchrun_keys(void)
{
    struct hostlist hl;
    char err[256];
    CHECK_INT(hostfile_parse_text("h", "a slots=2\nb slots=2\n", &hl, err, sizeof err), 0);
    for (int r = 0; r < 4; r++) {
        struct rank_env_in in = in_2x2(&hl, r);
        struct env_list e = {0};
        char want[12];   /* an int, for GCC -O1 of make asan */
        plan_rank_env(&in, &e);
        snprintf(want, sizeof want, "%d", r);
        CHECK_STR(env_list_get(&e, "RANK"), want);
        CHECK_STR(env_list_get(&e, "ROLE_RANK"), want);          /* the only role holds every rank */
        snprintf(want, sizeof want, "%d", r % 2);
        CHECK_STR(env_list_get(&e, "LOCAL_RANK"), want);
        snprintf(want, sizeof want, "%d", r / 2);
        CHECK_STR(env_list_get(&e, "GROUP_RANK"), want);
        CHECK_STR(env_list_get(&e, "ROLE_NAME"), "default");     /* torchrun's --role default */
        CHECK_STR(env_list_get(&e, "LOCAL_WORLD_SIZE"), "2");
        CHECK_STR(env_list_get(&e, "WORLD_SIZE"), "4");
        CHECK_STR(env_list_get(&e, "ROLE_WORLD_SIZE"), "4");
        CHECK_STR(env_list_get(&e, "GROUP_WORLD_SIZE"), "2");    /* agents = nodes */
        CHECK_STR(env_list_get(&e, "TORCHELASTIC_USE_AGENT_STORE"), "False");
        CHECK_STR(env_list_get(&e, "TORCHELASTIC_RESTART_COUNT"), "1");
        CHECK_STR(env_list_get(&e, "TORCHELASTIC_MAX_RESTARTS"), "2");
        CHECK_STR(env_list_get(&e, "NCCL_ASYNC_ERROR_HANDLING"), "1");
        CHECK_STR(env_list_get(&e, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
        CHECK_STR(env_list_get(&e, "OMP_NUM_THREADS"), "1");
        CHECK(plan_omp_defaulted(&in));
        for (size_t i = 0; plan_contract_vars[i]; i++) CHECK(env_list_get(&e, plan_contract_vars[i]) != NULL);
        for (size_t i = 0; plan_default_vars[i]; i++) CHECK(env_list_get(&e, plan_default_vars[i]) != NULL);
        env_list_free(&e);
    }
    /* ddptop's own variables stay its own: a user ROLE_NAME or agent store would break the
     * rendezvous or lie about the job. */
    struct host_env cli[] = {{"ROLE_NAME", "trainer"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                             {"GROUP_WORLD_SIZE", "9"}};
    struct rank_env_in in = in_2x2(&hl, 3);
    struct env_list e = {0};
    in.cli_env = cli;
    in.n_cli_env = 3;
    plan_rank_env(&in, &e);
    CHECK_STR(env_list_get(&e, "ROLE_NAME"), "default");
    CHECK_STR(env_list_get(&e, "TORCHELASTIC_USE_AGENT_STORE"), "False");
    CHECK_STR(env_list_get(&e, "GROUP_WORLD_SIZE"), "2");
    env_list_free(&e);
    hostlist_free(&hl);
}

static const char *omp_of(struct rank_env_in *in, struct env_list *e)
{
    env_list_free(e);
    plan_rank_env(in, e);
    return env_list_get(e, "OMP_NUM_THREADS");
}

/* OMP_NUM_THREADS=1 only where torchrun sets it: more than one rank on the node and no value
 * from the user, wherever the user put one. */
static void test_rank_env_omp(void)
{
    struct hostlist hl;
    char err[256];
    struct env_list e = {0}, exports = {0};
    CHECK_INT(hostfile_parse_text("h", "a slots=2\nb slots=2 OMP_NUM_THREADS=2\nc slots=1\n", &hl, err, sizeof err), 0);
    struct rank_env_in in = in_2x2(&hl, 1);
    CHECK_STR(omp_of(&in, &e), "1");                             /* node a, 2 ranks, nobody set it */
    CHECK(plan_omp_defaulted(&in));
    in = in_2x2(&hl, 2);
    CHECK_STR(omp_of(&in, &e), "2");                             /* node b's hostfile key */
    CHECK(!plan_omp_defaulted(&in));

    in = in_2x2(&hl, 0);                                         /* one rank on the node: untouched */
    in.local_world_size = 1;
    CHECK(omp_of(&in, &e) == NULL);
    CHECK(!plan_omp_defaulted(&in));
    char *launcher_env[] = {"PATH=/bin", "OMP_NUM_THREADS=6", "NCCL_ASYNC_ERROR_HANDLING=0", NULL};
    in.launcher_env = launcher_env;
    CHECK_STR(omp_of(&in, &e), "6");                             /* ddptop's own value handed on */

    in = in_2x2(&hl, 0);
    in.launcher_env = launcher_env;
    CHECK_STR(omp_of(&in, &e), "6");                             /* set in ddptop's environment: kept */
    CHECK(!plan_omp_defaulted(&in));
    CHECK_STR(env_list_get(&e, "NCCL_ASYNC_ERROR_HANDLING"), "0");       /* the same for NCCL's */
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
    struct host_env cli[] = {{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
    in.cli_env = cli;
    in.n_cli_env = 2;
    CHECK_STR(omp_of(&in, &e), "8");                             /* --env over ddptop's environment */
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");

    char *envp[] = {"OMP_NUM_THREADS=3", NULL};
    CHECK_INT(plan_exports((const char *[]){"OMP_.*"}, 1, envp, &exports, err, sizeof err), 0);
    in = in_2x2(&hl, 0);
    in.exports = &exports;
    CHECK_STR(omp_of(&in, &e), "3");                             /* --export */
    CHECK(!plan_omp_defaulted(&in));
    in.cli_env = cli;
    in.n_cli_env = 1;
    CHECK_STR(omp_of(&in, &e), "8");                             /* --env over --export */
    in = in_2x2(&hl, 2);
    in.cli_env = cli;
    in.n_cli_env = 1;
    CHECK_STR(omp_of(&in, &e), "2");                             /* hostfile over --env */

    CHECK(strstr(plan_omp_notice, "Setting OMP_NUM_THREADS environment variable for each process to be 1") != NULL);
    env_list_free(&e);
    env_list_free(&exports);
    hostlist_free(&hl);
}

static void test_default_argv_local(void)
{
    size_t n;
    char **a = plan_default_argv("/opt/ddptop/ddptop-train", "/logs/run1", false, &n);
    CHECK_INT((int)n, 3);
    CHECK_STR(a[0], "/opt/ddptop/ddptop-train");
    CHECK_STR(a[1], "--snapshot");
    CHECK_STR(a[2], "/logs/run1/snapshot.bin");
    CHECK(a[3] == NULL);
    plan_argv_free(a);
}

/* The remote wrapper, run by a real sh: creates the run directory, execs the binary when it
 * exists, and hostile paths stay data (no file is created by an injected command). */
static void test_default_argv_remote_is_inert(void)
{
    char dir[] = "/tmp/ddptop-plan-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *run_dir = malloc(strlen(dir) + 64), *pwned = malloc(strlen(dir) + 16), *fake = malloc(strlen(dir) + 16);
    sprintf(run_dir, "%s/r$(touch PWNED);`touch PWNED`'\"x", dir);
    sprintf(pwned, "%s/PWNED", dir);
    sprintf(fake, "%s/fake-train", dir);
    FILE *f = fopen(fake, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "#!/bin/sh\necho \"$@\" > \"$(dirname \"$2\")/args\"\n");
        fclose(f);
    }
    chmod(fake, 0755);
    size_t n;
    char **a = plan_default_argv(fake, run_dir, true, &n);
    CHECK_STR(a[0], "sh");
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(99);
        execvp(a[0], a);
        _exit(98);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(access(run_dir, F_OK) == 0);                  /* mkdir -p of the hostile name */
    char *args = xasprintf("%s/args", run_dir);
    CHECK(access(args, F_OK) == 0);                     /* the binary ran with --snapshot PATH */
    CHECK(access(pwned, F_OK) != 0);                    /* nothing injected ran */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# cleanup failed\n");
    plan_argv_free(a);
    free(args);
    free(run_dir);
    free(pwned);
    free(fake);
}

static void test_run_id_and_token(void)
{
    char *id = plan_run_id(1700000000LL * 1000000000LL, 0xabcd);
    CHECK(strlen(id) == strlen("20231114-221320-abcd"));
    CHECK(strstr(id, "-abcd") != NULL);
    CHECK(util_run_id_ok(id));
    free(id);
    CHECK(util_run_id_ok("exp_1.2-a"));
    CHECK(!util_run_id_ok(""));
    CHECK(!util_run_id_ok(".."));
    CHECK(!util_run_id_ok("a/b"));
    CHECK(!util_run_id_ok("a b"));
    CHECK(!util_run_id_ok("$(x)"));
    char t1[33], t2[33];
    CHECK_INT(plan_token(t1), 0);
    CHECK_INT(plan_token(t2), 0);
    CHECK_INT((int)strlen(t1), 32);
    CHECK(strspn(t1, "0123456789abcdef") == 32);
    CHECK(strcmp(t1, t2) != 0);
}

/* The NCCL flight recorder settings: ddptop's defaults, a per-run and per-attempt dump prefix,
 * every user value kept, and PyTorch 2.7's newer names respected. */
static void test_rank_env_flight_recorder(void)
{
    struct hostlist hl;
    char err[256];
    CHECK_INT(hostfile_parse_text("h", "a slots=2\nb slots=2 TORCH_NCCL_TRACE_BUFFER_SIZE=50\n", &hl, err, sizeof err), 0);
    struct rank_env_in in = in_2x2(&hl, 0);
    struct env_list e = {0};
    plan_rank_env(&in, &e);
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_TRACE_BUFFER_SIZE"), "2000");
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_DUMP_ON_TIMEOUT"), "1");
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/tmp/ddptop-nccl-r1/a1-rank-");
    CHECK_STR(plan_trace_prefix(&e), "/tmp/ddptop-nccl-r1/a1-rank-");
    CHECK(env_list_get(&e, "TORCH_FR_DUMP_TEMP_FILE") == NULL);
    for (size_t i = 0; plan_trace_vars[i]; i++) CHECK(env_list_get(&e, plan_trace_vars[i]) != NULL);
    env_list_free(&e);

    in = in_2x2(&hl, 2);                  /* node b's hostfile key, --env, ddptop's environment */
    struct host_env cli[] = {{"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/scratch/fr/rank"}};
    char *launcher_env[] = {"TORCH_NCCL_DUMP_ON_TIMEOUT=0", NULL};
    in.cli_env = cli;
    in.n_cli_env = 1;
    in.launcher_env = launcher_env;
    plan_rank_env(&in, &e);
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_TRACE_BUFFER_SIZE"), "50");
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_DUMP_ON_TIMEOUT"), "0");
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/scratch/fr/rank");
    CHECK_STR(plan_trace_prefix(&e), "/scratch/fr/rank");
    env_list_free(&e);

    /* The newer name wins in PyTorch: ddptop then sets no older one of its own, and reads the
     * dumps where the newer one says. */
    struct host_env newer[] = {{"TORCH_FR_DUMP_TEMP_FILE", "/fr/x_"}, {"TORCH_FR_BUFFER_SIZE", "10"}};
    in = in_2x2(&hl, 0);
    in.cli_env = newer;
    in.n_cli_env = 2;
    plan_rank_env(&in, &e);
    CHECK(env_list_get(&e, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == NULL);
    CHECK(env_list_get(&e, "TORCH_NCCL_TRACE_BUFFER_SIZE") == NULL);
    CHECK_STR(env_list_get(&e, "TORCH_NCCL_DUMP_ON_TIMEOUT"), "1");
    CHECK_STR(plan_trace_prefix(&e), "/fr/x_");
    env_list_free(&e);
    char *p = plan_trace_default_prefix("run-7", 0);
    CHECK_STR(p, "/tmp/ddptop-nccl-run-7/a0-rank-");
    free(p);
    hostlist_free(&hl);
}

/* NCCL_DEBUG=INFO with the init subsystems when the user set neither variable; a user value of
 * either (hostfile key, --env, --export, ddptop's own environment) leaves both as given. */
static void test_rank_env_nccl_debug(void)
{
    struct hostlist hl;
    char err[256];
    CHECK_INT(hostfile_parse_text("h", "a slots=2\nb slots=2 NCCL_DEBUG_SUBSYS=ALL\n", &hl, err, sizeof err), 0);
    struct rank_env_in in = in_2x2(&hl, 0);
    struct env_list e = {0};
    plan_rank_env(&in, &e);
    CHECK(plan_nccl_debug_defaulted(&in));
    CHECK_STR(env_list_get(&e, "NCCL_DEBUG"), "INFO");
    CHECK_STR(env_list_get(&e, "NCCL_DEBUG_SUBSYS"), "INIT,BOOTSTRAP,ENV");
    env_list_free(&e);

    in = in_2x2(&hl, 2);                  /* node b sets the subsystems only: no NCCL_DEBUG */
    plan_rank_env(&in, &e);
    CHECK(!plan_nccl_debug_defaulted(&in));
    CHECK(env_list_get(&e, "NCCL_DEBUG") == NULL);
    CHECK_STR(env_list_get(&e, "NCCL_DEBUG_SUBSYS"), "ALL");
    env_list_free(&e);

    const char *users[] = { "WARN", "", "TRACE" };
    for (int k = 0; k < 3; k++) {
        in = in_2x2(&hl, 1);
        struct host_env cli[] = {{"NCCL_DEBUG", (char *)users[k]}};
        char launcher_kv[32];
        snprintf(launcher_kv, sizeof launcher_kv, "NCCL_DEBUG=%s", users[k]);
        char *launcher_env[] = {launcher_kv, NULL};
        if (k == 2) in.launcher_env = launcher_env;   /* ddptop's own environment */
        else { in.cli_env = cli; in.n_cli_env = 1; }   /* --env */
        plan_rank_env(&in, &e);
        CHECK_STR(env_list_get(&e, "NCCL_DEBUG"), users[k]);
        CHECK(env_list_get(&e, "NCCL_DEBUG_SUBSYS") == NULL);
        env_list_free(&e);
    }
    hostlist_free(&hl);
}

static void test_exit_codes(void)
{
    CHECK_INT(plan_exit_code(JOB_DONE), 0);
    CHECK_INT(plan_exit_code(JOB_FAILED), 1);
    CHECK_INT(plan_exit_code(JOB_STOPPED), 1);
    CHECK_INT(plan_exit_code(JOB_CHECK_FAILED), 3);
}

static int parse(const char *line, struct run_opts *o, struct hostlist *hl, char *err, size_t errlen)
{
    static char buf[1024];
    static char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    return cmd_run_parse(argc, argv, o, hl, err, errlen);
}

static void test_cli(void)
{
    struct run_opts o;
    struct hostlist hl;
    char err[512];
    CHECK_INT(parse("--headless --no-check --nproc-per-node gpu --max-restarts 2 --run-id x1 --env A=1 --export NCCL_.* "
                    "--hang-timeout 0 --term-timeout 3 --master-port 29777 --log-dir /tmp/l --workdir /w -- echo hi",
                    &o, &hl, err, sizeof err), 0);
    CHECK(hl.n == 0 && o.headless && o.no_check);
    CHECK_STR(o.nodes.transport.kind ? o.nodes.transport.kind->name : "", "local"); /* no hosts */
    CHECK_INT(o.nproc_per_node, -1);
    CHECK_INT(o.max_restarts, 2);
    CHECK_STR(o.run_id, "x1");
    CHECK_INT((int)o.nodes.n_env, 1);
    CHECK_INT((int)o.n_export, 1);
    CHECK_INT(o.hang_timeout_s, 0);
    CHECK_INT(o.on_hang, HANG_ACTION_STACKS);   /* the default */
    CHECK_INT(o.term_timeout_s, 3);
    CHECK_INT(o.nodes.master_port, 29777);
    CHECK_STR(o.log_dir, "/tmp/l");
    CHECK_STR(o.workdir, "/w");
    CHECK_INT((int)o.nodes.n_cmd, 2);
    CHECK_STR(o.nodes.cmd[0], "echo");
    hostlist_free(&hl);
    run_opts_done(&o);

    CHECK_INT(parse("", &o, &hl, err, sizeof err), 0); /* defaults */
    CHECK(hl.n == 0 && o.nodes.transport.kind && strcmp(o.nodes.transport.kind->name, "local") == 0);
    CHECK_INT(o.nproc_per_node, 0);
    CHECK_INT(o.max_restarts, 0);
    CHECK_INT(o.hang_timeout_s, 300);
    CHECK_INT(o.term_timeout_s, 10);
    CHECK_INT(o.straggler_steps, 3);
    CHECK_INT(o.nodes.master_port, 29500);
    CHECK_STR(o.log_dir, "ddptop-logs");
    hostlist_free(&hl);
    run_opts_done(&o);

    static const char *const bad[] = {
        "--nproc-per-node 0", "--nproc-per-node cpu", "--master-port 70000", "--max-restarts -1", "--run-id a/b",
        "--env =x", "--env 1A=x", "--export (", "--loss-regex (", "--bogus", "--", "--log-dir", "a b",
        "--hang-timeout x", "--slurm --pbs", "--on-hang", "--on-hang kill", "--on-hang STOP",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = parse(bad[k], &o, &hl, err, sizeof err);
        if (rc != -1) printf("#   '%s' accepted\n", bad[k]);
        CHECK_INT(rc, -1);
        CHECK(err[0] != '\0');
        hostlist_free(&hl);
        run_opts_done(&o);
    }
}

/* --on-hang: each action, and a wrong one named in the message with the allowed values. */
static void test_cli_on_hang(void)
{
    static const struct { const char *arg, *name; enum hang_action want; } ok[] = {
        { "--on-hang none", "none", HANG_ACTION_NONE }, { "--on-hang stacks", "stacks", HANG_ACTION_STACKS },
        { "--on-hang restart --max-restarts 2", "restart", HANG_ACTION_RESTART },
        { "--on-hang=stop", "stop", HANG_ACTION_STOP },
    };
    struct run_opts o;
    struct hostlist hl;
    char err[512];
    for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
        CHECK_INT(parse(ok[k].arg, &o, &hl, err, sizeof err), 0);
        CHECK_INT(o.on_hang, ok[k].want);
        CHECK_STR(hang_action_name(o.on_hang), ok[k].name);
        hostlist_free(&hl);
        run_opts_done(&o);
    }
    CHECK_INT(parse("--on-hang kill", &o, &hl, err, sizeof err), -1);
    CHECK_STR(err, "--on-hang wants none, stacks, restart or stop, not 'kill'");
    hostlist_free(&hl);
    run_opts_done(&o);
    CHECK_INT(parse("--on-hang", &o, &hl, err, sizeof err), -1);
    CHECK(strstr(err, "--on-hang needs a value") != NULL);
    hostlist_free(&hl);
    run_opts_done(&o);
    enum hang_action a = HANG_ACTION_STOP;
    CHECK_INT(hang_action_parse(NULL, &a), -1);
    CHECK_INT(hang_action_parse("", &a), -1);
    CHECK_INT(a, HANG_ACTION_STOP);
}

/* --on-nan, --loss-spike, --on-spike: the defaults (a NaN stops, spikes off), each action, the
 * window, and the errors naming the option. */
static void test_cli_health(void)
{
    struct run_opts o;
    struct hostlist hl;
    char err[512];
    CHECK_INT(parse("", &o, &hl, err, sizeof err), 0);
    CHECK(o.on_nan == HEALTH_STOP && o.on_spike == HEALTH_NONE && o.loss_spike == 0);
    CHECK_INT(o.loss_spike_window, HEALTH_SPIKE_WINDOW);
    hostlist_free(&hl);
    run_opts_done(&o);
    CHECK_INT(parse("--on-nan restart --max-restarts 1 --loss-spike 2.5:50 --on-spike=stop", &o, &hl, err, sizeof err), 0);
    CHECK(o.on_nan == HEALTH_RESTART && o.on_spike == HEALTH_STOP && o.loss_spike == 2.5 && o.loss_spike_window == 50);
    hostlist_free(&hl);
    run_opts_done(&o);
    CHECK_INT(parse("--on-nan none --loss-spike 3", &o, &hl, err, sizeof err), 0);
    CHECK(o.on_nan == HEALTH_NONE && o.loss_spike == 3 && o.loss_spike_window == HEALTH_SPIKE_WINDOW);
    hostlist_free(&hl);
    run_opts_done(&o);
    static const struct { const char *arg, *msg; } bad[] = {
        { "--on-nan stacks", "--on-nan wants none, stop or restart, not 'stacks'" },
        { "--on-spike kill --loss-spike 3", "--on-spike wants none, stop or restart, not 'kill'" },
        { "--on-spike restart", "--on-spike restart needs the rule: --loss-spike X[:N] (see ddptop run --help)" },
        { "--loss-spike 0.5", NULL }, { "--loss-spike", NULL }, { "--on-nan", NULL },
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        err[0] = '\0';
        CHECK_INT(parse(bad[k].arg, &o, &hl, err, sizeof err), -1);
        if (bad[k].msg) CHECK_STR(err, bad[k].msg);
        else CHECK(strncmp(err, bad[k].arg, strcspn(bad[k].arg, " ")) == 0);
        hostlist_free(&hl);
        run_opts_done(&o);
    }
}

/* --nnodes: roles (the first MAX usable nodes in hostfile order are active, the rest spares,
 * excluded ones stay out) and the rank map over the active nodes. */
static void test_roles_and_rank_map(void)
{
    enum node_role ro[5] = {NODE_ACTIVE, NODE_ACTIVE, NODE_ACTIVE, NODE_ACTIVE, NODE_ACTIVE};
    const char *names[5] = {"n0", "n1", "n2", "n3", "n4"};
    int rpn[5] = {2, 2, 4, 2, 2};
    char e[256];
    struct job *j = job_new("r0", NULL, 0, names, NULL, rpn, 5, e, sizeof e);
    CHECK_INT(j->world_size, 12);   /* no roles: every node, today's map */
    CHECK_INT(j->nodes[4].first_rank, 10);
    CHECK_INT(plan_roles(ro, 5, 3), 3);
    CHECK(ro[0] == NODE_ACTIVE && ro[2] == NODE_ACTIVE && ro[3] == NODE_SPARE && ro[4] == NODE_SPARE);
    job_set_roles(j, ro, NULL, 0);
    CHECK_INT(j->world_size, 8);
    CHECK_INT(j->nodes[1].first_rank, 2); CHECK_INT(j->nodes[2].first_rank, 4);
    CHECK_INT(j->nodes[2].node_rank, 2); CHECK_INT(j->nodes[3].node_rank, -1); CHECK_INT(j->nodes[3].n_ranks, 0);
    /* node 0 fails: node 1 becomes node rank 0 (MASTER_ADDR's), the first spare joins */
    ro[0] = NODE_EXCLUDED;
    CHECK_INT(plan_roles(ro, 5, 3), 3);
    CHECK(ro[0] == NODE_EXCLUDED && ro[3] == NODE_ACTIVE && ro[4] == NODE_SPARE);
    job_set_roles(j, ro, NULL, 0);
    CHECK_INT(j->world_size, 8);
    CHECK_INT(j->nodes[0].node_rank, -1); CHECK_INT(j->nodes[1].node_rank, 0); CHECK_INT(j->nodes[1].first_rank, 0);
    CHECK_INT(j->nodes[2].first_rank, 2); CHECK_INT(j->nodes[3].node_rank, 2); CHECK_INT(j->nodes[3].first_rank, 6);
    /* a middle node fails, then another: no spare left, fewer nodes, a smaller world */
    ro[2] = NODE_EXCLUDED;
    CHECK_INT(plan_roles(ro, 5, 3), 3);
    job_set_roles(j, ro, NULL, 1);
    CHECK_INT(j->world_size, 6);
    CHECK_INT(j->nodes[4].first_rank, 4); CHECK_INT(j->nodes[4].node_rank, 2);
    ro[1] = NODE_EXCLUDED;
    CHECK_INT(plan_roles(ro, 5, 3), 2);
    job_set_roles(j, ro, NULL, 2);
    CHECK_INT(j->world_size, 4);
    CHECK_INT(j->nodes[3].first_rank, 0); CHECK_INT(j->nodes[3].node_rank, 0);
    CHECK_INT(j->nodes[4].first_rank, 2); CHECK_INT(j->nodes[4].node_rank, 1);
    CHECK_INT(j->ranks[3].node, 4); CHECK_INT(j->ranks[3].local_rank, 1);
    job_free(j);

    int lo, hi;
    char err[256];
    CHECK_INT(plan_parse_nnodes("3", 4, &lo, &hi, err, sizeof err), 0);
    CHECK(lo == 3 && hi == 3);
    CHECK_INT(plan_parse_nnodes("2:4", 4, &lo, &hi, err, sizeof err), 0);
    CHECK(lo == 2 && hi == 4);
    CHECK_INT(plan_parse_nnodes("5", 4, &lo, &hi, err, sizeof err), -1);
    CHECK(strstr(err, "the hosts give 4") != NULL);
    CHECK_INT(plan_parse_nnodes("3:2", 4, &lo, &hi, err, sizeof err), -1);
    CHECK(strstr(err, "MIN (3) is larger than MAX (2)") != NULL);
    CHECK_INT(plan_parse_nnodes("0", 4, &lo, &hi, err, sizeof err), -1);
    CHECK_INT(plan_parse_nnodes("2:", 4, &lo, &hi, err, sizeof err), -1);
    CHECK_INT(plan_parse_nnodes("x", 4, &lo, &hi, err, sizeof err), -1);
    CHECK(strstr(err, "N or MIN:MAX") != NULL);
}

/* The model keeps every node; job_set_roles moves the rank map and keeps ranks' history. */
static void test_job_set_roles(void)
{
    const char *names[4] = {"n0", "n1", "n2", "n3"};
    int rpn[4] = {2, 2, 2, 2};
    char err[256];
    struct job *j = job_new("r1", NULL, 2, names, NULL, rpn, 4, err, sizeof err);
    enum node_role ro[4] = {NODE_ACTIVE, NODE_ACTIVE, NODE_ACTIVE, NODE_ACTIVE};
    CHECK_INT(j->world_size, 8);
    plan_roles(ro, 4, 3);
    job_set_roles(j, ro, NULL, 0);
    CHECK_INT(j->world_size, 6);
    CHECK_INT((int)j->n_ranks, 6);
    CHECK_INT((int)j->n_nodes, 4);
    CHECK_INT(j->nodes[3].n_ranks, 0);
    CHECK(j->nodes[3].role == NODE_SPARE);
    const char *why[4] = {"lost (agent killed)", NULL, NULL, NULL};
    ro[0] = NODE_EXCLUDED;
    plan_roles(ro, 4, 3);
    job_set_roles(j, ro, why, 0);
    CHECK_INT(j->world_size, 6);
    CHECK_STR(j->nodes[0].excluded, "lost (agent killed)");
    CHECK_INT(j->nodes[0].excluded_attempt, 0);
    CHECK_INT(j->nodes[1].node_rank, 0);
    CHECK_INT(j->ranks[0].node, 1);
    CHECK_INT(j->ranks[5].node, 3);
    CHECK_INT(j->ranks[5].local_rank, 1);
    ro[1] = NODE_EXCLUDED;
    plan_roles(ro, 4, 3);
    job_set_roles(j, ro, NULL, 1);
    CHECK_INT(j->world_size, 4);
    CHECK_INT(j->ranks[0].node, 2);
    CHECK_STR(job_rank_host(j, 3), "n3");
    job_free(j);
}

int main(void)
{
    RUN(test_roles_and_rank_map);
    RUN(test_job_set_roles);
    RUN(test_ranks_per_node);
    RUN(test_rank_env_contract);
    RUN(test_rank_env_precedence);
    RUN(test_rank_env_torchrun_keys);
    RUN(test_rank_env_omp);
    RUN(test_rank_env_flight_recorder);
    RUN(test_rank_env_nccl_debug);
    RUN(test_default_argv_local);
    RUN(test_default_argv_remote_is_inert);
    RUN(test_run_id_and_token);
    RUN(test_exit_codes);
    RUN(test_cli);
    RUN(test_cli_on_hang);
    RUN(test_cli_health);
    return tap_done();
}
