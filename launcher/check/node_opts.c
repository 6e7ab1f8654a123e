/* The options both command lines take about the nodes (node_opts.h): defaults, --env, --mesh,
 * the hosts and the kind of transport, and their release. */
#include "node_opts.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check_mesh.h"
#include "util/cli.h"
#include "util/util.h"
#include "wire/nccl_env.h"

void node_opts_init(struct node_opts *o)
{
    memset(o, 0, sizeof *o);
    o->fanout = 64;
    o->ssh.timeout_s = 10;
    o->ssh.login_timeout_s = 60;
    o->max_skew_ms = 500;
    o->master_port = 29500;
    o->mesh_seed = -1;
    o->bench_seconds = 1.0;
    o->bench_min_ratio = 0.5;
    o->bench_nccl_mib = 256;
}

void node_opts_done(struct node_opts *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        free(o->env[i].key);
        free(o->env[i].value);
    }
    free(o->env);
    free((char *)o->ssh.agent_local);
    memset(o, 0, sizeof *o);
}

int node_opts_hosts(struct node_opts *o, struct hosts_source *src, struct hostlist *hl, char *err, size_t errlen)
{
    if (transport_opts_choose(&o->transport, src, err, errlen) < 0 || hosts_source_load(src, hl, err, errlen) < 0)
        return -1;
    if (hosts_source_jobid(src)) o->slurm_jobid = xstrdup(hosts_source_jobid(src)); /* see check.h */
    o->slurm_release = src->allocated != NULL;
    o->slurm = hosts_source_slurm(src);
    o->pbs = src->pbs;
    free(src->allocated); /* from here the controller gives it back (controller_free) */
    src->allocated = NULL;
    return 0;
}

/* The NCCL variables of --env so far other than key, each counted once (as they are sent). */
static size_t nccl_keys(const struct node_opts *o, const char *key)
{
    size_t n = 0;
    for (size_t k = 0; k < o->n_env; k++) {
        bool seen = !wire_nccl_env_is_nccl(o->env[k].key) || strcmp(o->env[k].key, key) == 0;
        for (size_t j = 0; j < k && !seen; j++) seen = strcmp(o->env[j].key, o->env[k].key) == 0;
        n += !seen;
    }
    return n;
}

int node_opts_add_env(struct node_opts *o, const char *kv, char *err, size_t errlen)
{
    const char *eq = strchr(kv, '=');
    size_t kl = eq ? (size_t)(eq - kv) : 0;
    if (!eq || kl == 0) return cli_fail(err, errlen, "--env wants KEY=VALUE, not '%s'", kv);
    for (size_t k = 0; k < kl; k++) {
        char ch = kv[k];
        bool ok = ch == '_' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (k && ch >= '0' && ch <= '9');
        if (!ok) return cli_fail(err, errlen, "--env %s: '%.*s' is not a variable name", kv, (int)kl, kv);
    }
    /* an NCCL variable goes to the agents' NCCL measurement too (check --bench, run --bench):
     * one the agent would refuse is this typo, said now, not a node's NCCL failure later */
    char *key = xstrndup(kv, kl);
    const char *bad = wire_nccl_env_is_nccl(key) ? wire_nccl_env_bad(key, eq + 1) : NULL;
    if (!bad && wire_nccl_env_is_nccl(key) && nccl_keys(o, key) >= WIRE_NCCL_ENV_MAX)
        bad = "there are at most " WIRE_NCCL_ENV_MAX_TEXT " NCCL variables";
    if (bad) {
        cli_fail(err, errlen, "--env %s: %s", key, bad);
        free(key);
        return -1;
    }
    o->env = xrealloc(o->env, (o->n_env + 1) * sizeof *o->env);
    o->env[o->n_env].key = key;
    o->env[o->n_env].value = xstrdup(eq + 1);
    o->n_env++;
    return 0;
}

int node_opts_mesh_option(struct node_opts *o, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *val = NULL;
    int rc, seed;
    if ((rc = cli_opt_value(argc, argv, i, "--mesh", NULL, &val)) != 0) {
        int m = rc < 0 ? -1 : check_mesh_mode_parse(val);
        if (m < 0) return cli_fail(err, errlen, "--mesh wants full, sample or auto%s%s%s", val ? ", not '" : "",
                                   val ? val : "", val ? "'" : "");
        o->mesh = m;
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--mesh-seed", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--mesh-seed needs a value (the \"seed\" of a --json report)");
        if (cli_parse_int("--mesh-seed", val, 0, 2147483647, &seed, err, errlen) < 0) return -1;
        o->mesh_seed = seed;
        return 1;
    }
    return 0;
}

/* a number in [lo, hi] for opt, or -1 with a message */
static int parse_real(const char *opt, const char *val, double lo, double hi, double *out, char *err, size_t errlen)
{
    char *end;
    double v = val ? strtod(val, &end) : 0;
    if (!val || !*val || *end || !(v >= lo && v <= hi))
        return cli_fail(err, errlen, "%s wants a number from %g to %g%s%s%s", opt, lo, hi, val ? ", not '" : "",
                        val ? val : "", val ? "'" : "");
    *out = v;
    return 0;
}

int node_opts_bench_option(struct node_opts *o, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *val = NULL;
    int rc;
    if (strcmp(argv[*i], "--bench") == 0) {
        o->bench = true;
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--bench-seconds", NULL, &val)) != 0) {
        if (parse_real("--bench-seconds", rc < 0 ? NULL : val, 0.1, 10, &o->bench_seconds, err, errlen) < 0) return -1;
        o->bench = true;
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--bench-min-ratio", NULL, &val)) != 0) {
        if (parse_real("--bench-min-ratio", rc < 0 ? NULL : val, 0.01, 0.99, &o->bench_min_ratio, err, errlen) < 0)
            return -1;
        o->bench = true;
        return 1;
    }
    if ((rc = cli_opt_value(argc, argv, i, "--bench-nccl-mib", NULL, &val)) != 0) {
        double mib;
        /* 0: the NCCL part off (the TCP, GPU and memory parts still run) */
        if (parse_real("--bench-nccl-mib", rc < 0 ? NULL : val, 0, 16384, &mib, err, errlen) < 0) return -1;
        o->bench_nccl_mib = (int)mib;
        o->bench = true;
        return 1;
    }
    if (strcmp(argv[*i], "--bench-dcgmi") == 0) {
        o->bench_dcgmi = o->bench = true;
        return 1;
    }
    return 0;
}
