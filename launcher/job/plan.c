/* Rank map, rank environment, default command, run id, token and exit code of `ddptop run`
 * (see plan.h). No I/O except reading /dev/urandom for the token. */
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

void env_list_set(struct env_list *l, const char *key, const char *value)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].value);
            l->v[i].value = xstrdup(value);
            return;
        }
    l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n].key = xstrdup(key);
    l->v[l->n].value = xstrdup(value);
    l->n++;
}

const char *env_list_get(const struct env_list *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) return l->v[i].value;
    return NULL;
}

void env_list_unset(struct env_list *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].key);
            free(l->v[i].value);
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
            l->n--;
            return;
        }
}

void env_list_free(struct env_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int plan_ranks_per_node(int nproc, const struct host *h, int gpu_count)
{
    int slots = h && h->slots > 0 ? h->slots : 0;
    if (nproc > 0) return nproc;
    if (nproc < 0 && gpu_count > 0) return gpu_count;
    return slots ? slots : 1;
}

/* A whole decimal number in [1, 100000] from s up to end, or -1. */
static int nnodes_num(const char *s, const char *end)
{
    long v = 0;
    if (s == end || end - s > 6) return -1;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
    }
    return v >= 1 && v <= 100000 ? (int)v : -1;
}

int plan_parse_nnodes(const char *s, size_t n_hosts, int *min, int *max, char *err, size_t errlen)
{
    const char *colon = strchr(s, ':'), *end = s + strlen(s);
    int lo = nnodes_num(s, colon ? colon : end), hi = colon ? nnodes_num(colon + 1, end) : lo;
    if (lo < 0 || hi < 0) {
        snprintf(err, errlen, "--nnodes wants N or MIN:MAX (whole numbers from 1), not '%s'", s);
        return -1;
    }
    if (lo > hi) {
        snprintf(err, errlen, "--nnodes %s: MIN (%d) is larger than MAX (%d)", s, lo, hi);
        return -1;
    }
    if ((size_t)hi > n_hosts) {
        snprintf(err, errlen, "--nnodes %s: wants %d node%s, the hosts give %zu; give more hosts or a "
                 "smaller --nnodes", s, hi, hi == 1 ? "" : "s", n_hosts);
        return -1;
    }
    *min = lo;
    *max = hi;
    return 0;
}

size_t plan_roles(enum node_role *roles, size_t n, int max)
{
    size_t active = 0;
    for (size_t i = 0; i < n; i++) {
        if (roles[i] == NODE_EXCLUDED) continue;
        roles[i] = max >= 0 && active >= (size_t)max ? NODE_SPARE : NODE_ACTIVE;
        if (roles[i] == NODE_ACTIVE) active++;
    }
    return active;
}

int plan_exports(const char *const *regex, size_t n_regex, char *const *envp,
                     struct env_list *out, char *err, size_t errlen)
{
    regex_t *re = xcalloc(n_regex ? n_regex : 1, sizeof *re);
    size_t ok = 0;
    int rc = 0;
    for (; ok < n_regex; ok++) {
        /* anchored: the user names variables, not substrings of them */
        char *pat = xasprintf("^(%s)$", regex[ok]);
        int e = regcomp(&re[ok], pat, REG_EXTENDED | REG_NOSUB);
        free(pat);
        if (e) {
            char why[200];
            regerror(e, &re[ok], why, sizeof why);
            snprintf(err, errlen, "--export '%s': %s", regex[ok], why);
            rc = -1;
            break;
        }
    }
    for (size_t i = 0; rc == 0 && envp && envp[i]; i++) {
        const char *eq = strchr(envp[i], '=');
        char *name;
        if (!eq || eq == envp[i]) continue;
        name = xstrndup(envp[i], (size_t)(eq - envp[i]));
        for (size_t k = 0; k < n_regex; k++)
            if (regexec(&re[k], name, 0, NULL, 0) == 0) {
                env_list_set(out, name, eq + 1);
                break;
            }
        free(name);
    }
    for (size_t k = 0; k < ok; k++) regfree(&re[k]);
    free(re);
    return rc;
}

const char *const plan_contract_vars[] = {
    "RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "NNODES", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "DDPTOP_JOB_TOKEN", NULL,
};

/* PyTorch up to 2.1 reads NCCL_ASYNC_ERROR_HANDLING, from 2.2 on TORCH_NCCL_ASYNC_ERROR_HANDLING
 * (the old name still works there, with a warning twice per rank); torchrun sets the one its
 * version reads. Both get torchrun's default here; the spawn request carries ddptop's old name
 * apart (plan_old_torch_defaulted) and the agent, which knows its node's torch, sets it only
 * for a torch older than 2.2. */
const char *const plan_default_vars[] = {
    "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", NULL,
};

bool plan_old_torch_defaulted(const struct rank_env_in *in, const char *key)
{
    return strcmp(key, "NCCL_ASYNC_ERROR_HANDLING") == 0 && !plan_user_value(in, key);
}

const char *const plan_trace_vars[] = {
    "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", NULL,
};

const char plan_omp_notice[] =
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.";

static void set_int(struct env_list *l, const char *key, int v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%d", v);
    env_list_set(l, key, buf);
}

/* The value of key in an environ-style vector, or NULL. */
static const char *envp_get(char *const *envp, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], key, n) == 0 && envp[i][n] == '=') return envp[i] + n + 1;
    return NULL;
}

const char *plan_user_value(const struct rank_env_in *in, const char *key)
{
    const char *v = NULL;
    if (in->exports) v = env_list_get(in->exports, key);
    for (size_t i = 0; i < in->n_cli_env; i++)
        if (strcmp(in->cli_env[i].key, key) == 0) v = in->cli_env[i].value;
    for (size_t i = 0; in->host && i < in->host->n_env; i++)
        if (strcmp(in->host->env[i].key, key) == 0) v = in->host->env[i].value;
    return v ? v : envp_get(in->launcher_env, key);
}

char *plan_trace_default_prefix(const char *run_id, int attempt)
{
    return xasprintf("/tmp/ddptop-nccl-%s/a%d-rank-", run_id, attempt);
}

const char *plan_trace_prefix(const struct env_list *env)
{
    const char *v = env_list_get(env, "TORCH_FR_DUMP_TEMP_FILE");
    return v && *v ? v : env_list_get(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
}

/* PyTorch's NCCL flight recorder: a ring of the last collectives per rank, dumped to
 * TEMP_FILE<rank> when NCCL's watchdog times out, which the hang action fetches (docs/run.md,
 * "Hangs"). Every value the user gave wins; so does PyTorch 2.7's newer name of either, which
 * PyTorch reads first: ddptop then leaves its older name unset, and reads the dump where the
 * user's value says. */
static void trace_defaults(const struct rank_env_in *in, struct env_list *out)
{
    static const char *const newer[] = { "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_ON_TIMEOUT",
                                         "TORCH_FR_DUMP_TEMP_FILE" };
    for (size_t i = 0; plan_trace_vars[i]; i++) {
        const char *key = plan_trace_vars[i], *v = plan_user_value(in, key), *nv = plan_user_value(in, newer[i]);
        if (nv) {
            env_list_set(out, newer[i], nv);
            if (v) env_list_set(out, key, v);
            continue;
        }
        if (v) {
            env_list_set(out, key, v);
        } else if (i == 2) {
            char *prefix = plan_trace_default_prefix(in->run_id, in->attempt);
            env_list_set(out, key, prefix);
            free(prefix);
        } else {
            env_list_set(out, key, i == 0 ? "2000" : "1");
        }
    }
}

/* NCCL's debug output, at the least that says how NCCL set up (docs/run.md, "NCCL's own
 * account"): INFO for the subsystems NCCL itself prints by default at INFO (src/debug.cc,
 * 2.23 on; before, INIT and ENV, and BOOTSTRAP was unknown and is ignored). INIT gives the
 * version, the NET/IB or NET/Socket "Using" line, the network, every channel's "via
 * P2P/SHM/NET" line and Init START/COMPLETE; BOOTSTRAP the bootstrap interface (INIT before
 * 2.23); ENV the NCCL_* settings NCCL read. None of them prints per collective. A user value of
 * either variable wins and leaves the other as the user has it. */
const char *const plan_nccl_debug_vars[] = { "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", NULL };
static const char *const nccl_debug_defaults[] = { "INFO", "INIT,BOOTSTRAP,ENV" };

bool plan_nccl_debug_defaulted(const struct rank_env_in *in)
{
    return !plan_user_value(in, "NCCL_DEBUG") && !plan_user_value(in, "NCCL_DEBUG_SUBSYS");
}

static void nccl_debug_defaults_set(const struct rank_env_in *in, struct env_list *out)
{
    bool dflt = plan_nccl_debug_defaulted(in);
    for (size_t i = 0; plan_nccl_debug_vars[i]; i++) {
        const char *v = plan_user_value(in, plan_nccl_debug_vars[i]);
        if (v) env_list_set(out, plan_nccl_debug_vars[i], v);
        else if (dflt) env_list_set(out, plan_nccl_debug_vars[i], nccl_debug_defaults[i]);
    }
}

bool plan_omp_defaulted(const struct rank_env_in *in)
{
    return in->local_world_size > 1 && !plan_user_value(in, "OMP_NUM_THREADS");
}

void plan_rank_env(const struct rank_env_in *in, struct env_list *out)
{
    if (in->exports)
        for (size_t i = 0; i < in->exports->n; i++) env_list_set(out, in->exports->v[i].key, in->exports->v[i].value);
    for (size_t i = 0; i < in->n_cli_env; i++) env_list_set(out, in->cli_env[i].key, in->cli_env[i].value);
    if (in->host)
        for (size_t i = 0; i < in->host->n_env; i++) env_list_set(out, in->host->env[i].key, in->host->env[i].value);
    env_list_unset(out, "TORCHELASTIC_ERROR_FILE");
    set_int(out, "RANK", in->rank);
    set_int(out, "LOCAL_RANK", in->local_rank);
    set_int(out, "GROUP_RANK", in->node);
    set_int(out, "NODE_RANK", in->node);
    /* One role, torchrun's default "default", holding every rank: role rank and size are the
     * global ones. */
    set_int(out, "ROLE_RANK", in->rank);
    env_list_set(out, "ROLE_NAME", "default");
    set_int(out, "LOCAL_WORLD_SIZE", in->local_world_size);
    set_int(out, "WORLD_SIZE", in->world_size);
    set_int(out, "GROUP_WORLD_SIZE", in->nnodes);  /* one agent per node, as torchrun */
    set_int(out, "ROLE_WORLD_SIZE", in->world_size);
    set_int(out, "NNODES", in->nnodes);
    env_list_set(out, "MASTER_ADDR", in->master_addr);
    set_int(out, "MASTER_PORT", in->master_port);
    set_int(out, "TORCHELASTIC_RESTART_COUNT", in->attempt);
    set_int(out, "TORCHELASTIC_MAX_RESTARTS", in->max_restarts);
    env_list_set(out, "TORCHELASTIC_RUN_ID", in->run_id);
    /* "True" tells torch's env:// rendezvous that the launcher already serves the store at
     * MASTER_ADDR:MASTER_PORT, so every rank, rank 0 too, only connects to it (torchrun's static
     * rendezvous, where node 0's agent hosts it). No ddptop process serves a store there: rank 0
     * does (torch's TCPStore, or ddptop-train's own), as under torchrun's c10d rendezvous, which
     * sets "False". With "True" rank 0 would wait for a server nobody starts. */
    env_list_set(out, "TORCHELASTIC_USE_AGENT_STORE", "False");
    env_list_set(out, "DDPTOP_JOB_TOKEN", in->token);
    for (size_t i = 0; plan_default_vars[i]; i++) {
        const char *key = plan_default_vars[i], *v = plan_user_value(in, key);
        bool omp = strcmp(key, "OMP_NUM_THREADS") == 0;
        if (v) env_list_set(out, key, v);
        else if (!omp || plan_omp_defaulted(in)) env_list_set(out, key, "1");
    }
    trace_defaults(in, out);
    nccl_debug_defaults_set(in, out);
}

/* $0 names the program in sh's own messages ("ddptop-train: not found"). */
static const char remote_wrapper[] =
    "mkdir -p -- \"$1\" || exit 127; t=$2; shift 2; "
    "if [ -x \"$t\" ]; then exec \"$t\" \"$@\"; fi; exec ddptop-train \"$@\"";

char **plan_default_argv(const char *train_path, const char *run_dir, bool remote, size_t *n)
{
    char **argv = xcalloc(10, sizeof *argv);
    size_t k = 0;
    if (remote) {
        argv[k++] = xstrdup("sh");
        argv[k++] = xstrdup("-c");
        argv[k++] = xstrdup(remote_wrapper);
        argv[k++] = xstrdup("ddptop-train");
        argv[k++] = xstrdup(run_dir);
    }
    argv[k++] = xstrdup(train_path);
    argv[k++] = xstrdup("--snapshot");
    argv[k++] = xasprintf("%s/snapshot.bin", run_dir);
    argv[k] = NULL;
    *n = k;
    return argv;
}

void plan_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}

char *plan_run_id(int64_t wall, unsigned rnd16)
{
    time_t t = (time_t)(wall / 1000000000LL);
    struct tm tm;
    char buf[32];
    localtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    return xasprintf("%s-%04x", buf, rnd16 & 0xffff);
}

int plan_token(char out[33])
{
    unsigned char rnd[16];
    size_t got = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < sizeof rnd) {
        ssize_t r = read(fd, rnd + got, sizeof rnd - got);
        if (r <= 0 && errno != EINTR) break;
        if (r > 0) got += (size_t)r;
    }
    if (fd >= 0) close(fd);
    if (got < sizeof rnd && getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return -1;
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    return 0;
}

int plan_exit_code(enum job_state final_state)
{
    switch (final_state) {
    case JOB_DONE: return 0;
    case JOB_CHECK_FAILED: return 3;
    default: return 1;
    }
}
