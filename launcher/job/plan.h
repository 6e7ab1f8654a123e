/* The pure decisions of `ddptop run`, kept apart from the controller's I/O so tests can check
 * them: how many ranks each node gets, the environment of every rank (torchrun's contract
 * plus --env, hostfile keys and --export), the default command, run ids, the job token and the
 * process exit code. Documented for users in docs/run.md. */
#ifndef DDPTOP_JOB_PLAN_H
#define DDPTOP_JOB_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hosts/hostfile.h"
#include "job.h"

/* An ordered list of KEY=VALUE pairs; setting a key that is present replaces its value in
 * place, so the first setter fixes the order and the last one the value. */
struct env_list {
    struct host_env *v;
    size_t n;
};
void env_list_set(struct env_list *l, const char *key, const char *value);
const char *env_list_get(const struct env_list *l, const char *key);
void env_list_unset(struct env_list *l, const char *key);
void env_list_free(struct env_list *l);

/* Ranks on one node. nproc > 0: that many; 0: the hostfile's slots, else 1; -1 ("gpu"): the
 * node's GPU count when known (gpu_count > 0), else slots, else 1. h is NULL for the local
 * node. */
int plan_ranks_per_node(int nproc, const struct host *h, int gpu_count);

/* --nnodes N or MIN:MAX (torchrun's form): N is MIN:N with MIN = N. With n_hosts nodes in the
 * hostfile, 1 <= MIN <= MAX <= n_hosts. Returns 0, or -1 with a message naming the value. */
int plan_parse_nnodes(const char *s, size_t n_hosts, int *min, int *max, char *err, size_t errlen);

/* The roles of n nodes for an attempt (docs/run.md "Spare nodes"): nodes already
 * NODE_EXCLUDED stay so; of the others, the first max in hostfile order are NODE_ACTIVE, the
 * rest NODE_SPARE. Returns how many are active (fewer than max when too few are left). The rank
 * map over the active nodes is job_set_roles'. */
size_t plan_roles(enum node_role *roles, size_t n, int max);

/* The controller's variables whose whole name matches one of the POSIX extended regexes
 * (--export 'NCCL_.*' forwards NCCL_DEBUG, not MY_NCCL_X). envp is environ-style.
 * Returns 0, or -1 with "--export RE: why" in err for a bad regex. */
int plan_exports(const char *const *regex, size_t n_regex, char *const *envp,
                     struct env_list *out, char *err, size_t errlen);

/* Everything one rank's environment depends on. */
struct rank_env_in {
    int rank, local_rank, node, local_world_size, world_size, nnodes;
    const char *master_addr;
    int master_port;
    int attempt, max_restarts;
    const char *run_id, *token;
    const struct env_list *exports;      /* --export matches (lowest precedence) */
    const struct host_env *cli_env;      /* --env K=V in order */
    size_t n_cli_env;
    const struct host *host;             /* hostfile keys of the node; NULL locally */
    /* ddptop's own environment (environ-style; NULL: empty). torchrun reads
     * NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_ASYNC_ERROR_HANDLING and OMP_NUM_THREADS from its
     * own environment and hands them on; ddptop does the same with its own. */
    char *const *launcher_env;
};

/* Builds a rank's environment. Precedence, lowest first: --export, --env, hostfile keys,
 * then ddptop's own variables (plan_contract_vars), which nothing overrides.
 * TORCHELASTIC_ERROR_FILE is left to the agent (one file per rank), so a user value of it is
 * dropped. torchrun's tunables (plan_default_vars) are user choices: the value from --export,
 * --env or the hostfile when one is given, else ddptop's own environment's, else torchrun's
 * default ("1" for both NCCL variables; OMP_NUM_THREADS=1 only when the node runs more than one
 * rank, see plan_omp_defaulted). The flight recorder's settings (plan_trace_vars) follow the
 * same rule. */
void plan_rank_env(const struct rank_env_in *in, struct env_list *out);

/* The user's value of key for a rank: --export, --env, the node's hostfile keys (highest wins),
 * else ddptop's own environment (in->launcher_env; NULL leaves it out); NULL when none sets it. */
const char *plan_user_value(const struct rank_env_in *in, const char *key);

/* True when plan_rank_env sets OMP_NUM_THREADS=1 by default for this rank, as torchrun does:
 * its node runs more than one rank and neither --export, --env, the node's hostfile keys nor
 * ddptop's own environment sets OMP_NUM_THREADS. The controller says so once per run. */
bool plan_omp_defaulted(const struct rank_env_in *in);

/* True when key is NCCL_ASYNC_ERROR_HANDLING and the value plan_rank_env set is ddptop's
 * default, not the user's: the spawn request sends it as "env_old_torch", which the agent sets
 * only where the node's torch is older than 2.2 (newer ones read TORCH_NCCL_ASYNC_ERROR_HANDLING
 * and warn about the old name). */
bool plan_old_torch_defaulted(const struct rank_env_in *in, const char *key);

/* torchrun's words for that default, printed once (run.py's warning). */
extern const char plan_omp_notice[];

/* The names ddptop sets itself, in the order plan_rank_env adds them (NULL-terminated). */
extern const char *const plan_contract_vars[];
/* torchrun's tunables that the user may set, in the order plan_rank_env adds them when the user
 * did not (NULL-terminated); OMP_NUM_THREADS only on nodes with more than one rank. */
extern const char *const plan_default_vars[];

/* PyTorch's NCCL flight recorder settings that plan_rank_env adds when the user set neither
 * them nor their PyTorch 2.7 names (TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_ON_TIMEOUT,
 * TORCH_FR_DUMP_TEMP_FILE): a buffer of 2000 entries, a dump on NCCL's timeout, and the dump
 * file's prefix plan_trace_default_prefix (NULL-terminated, in that order). */
extern const char *const plan_trace_vars[];
/* NCCL_DEBUG and NCCL_DEBUG_SUBSYS: plan_rank_env sets NCCL_DEBUG=INFO and
 * NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV when the user set neither (plan_user_value), so that
 * NCCL says at init how it set up and nothing per step; a user value of either leaves both as
 * the user has them (NULL-terminated). */
extern const char *const plan_nccl_debug_vars[];
bool plan_nccl_debug_defaulted(const struct rank_env_in *in);
/* "/tmp/ddptop-nccl-RUN_ID/aATTEMPT-rank-": a directory per run on each node (its agent makes
 * it at spawn and removes it when it stayed empty); PyTorch appends the rank. Caller frees. */
char *plan_trace_default_prefix(const char *run_id, int attempt);
/* The prefix the ranks of a built environment dump to (TORCH_FR_DUMP_TEMP_FILE, else
 * TORCH_NCCL_DEBUG_INFO_TEMP_FILE), or NULL. Points into env. */
const char *plan_trace_prefix(const struct env_list *env);

/* The default command (no CMD given): ddptop-train with default arguments and
 * --snapshot RUN_DIR/snapshot.bin. Locally: train_path (absolute, next to ddptop) is run
 * directly. On a remote node: a POSIX sh wrapper that creates RUN_DIR, then runs train_path
 * when it is executable there (same layout) and else `ddptop-train` from PATH; every value
 * travels as a positional parameter, never as shell text. Returns a NULL-terminated malloc'd
 * argv (free with plan_argv_free); *n gets the count. */
char **plan_default_argv(const char *train_path, const char *run_dir, bool remote, size_t *n);
void plan_argv_free(char **argv);

/* A run id for people and directories: "YYYYMMDD-HHMMSS-xxxx" (local time, 4 hex digits). */
char *plan_run_id(int64_t wall_ns, unsigned rnd16);
/* 32 hex digits from /dev/urandom (getrandom as a fallback). Returns 0 or -1. */
int plan_token(char out[33]);

/* The process exit code for the state the job ended in: 0 DONE, 3 the preflight refused
 * (CHECK_FAILED), 1 anything else (failed, stopped, interrupted). */
int plan_exit_code(enum job_state final_state);

#endif
