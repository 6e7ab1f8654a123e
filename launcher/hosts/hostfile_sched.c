/* The scheduler sources of hosts (hostfile.h): --slurm reads SLURM_JOB_NODELIST (Slurm's
 * hostlist syntax) with the slot counts Slurm exports, --pbs reads PBS_NODEFILE (one line per
 * slot). Errors name the variable or file:line and what to do. */
#include "hostfile_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"
#include "util/util.h"

/* Slurm's per-node counts: "4" (every node) or "2(x3),1" (compressed, one per node). */
static int slurm_counts(const char *var, const char *val, const char *listvar, size_t n_hosts, int *slots,
                        char *err, size_t errlen)
{
    const char *p = val;
    size_t k = 0;
    bool single = !strchr(val, ',') && !strchr(val, '(');
    while (*p) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10), times = 1;
        if (end == p || *p == '-' || *p == '+' || errno || v > SLOTS_MAX) goto bad;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            times = strtoul(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times == 0 || times > HOSTS_MAX) goto bad;
            p = end + 1;
        }
        if (*p == ',') p++;
        else if (*p) goto bad;
        for (unsigned long t = 0; t < times && k + t < n_hosts; t++) slots[k + t] = (int)v;
        k += times;
    }
    if (single && k == 1) {
        for (size_t i = 1; i < n_hosts; i++) slots[i] = slots[0];
        return 0;
    }
    if (k == n_hosts) return 0;
    return hostfile_fail(err, errlen, "--slurm: %s=%s gives counts for %zu nodes but "
                "%s has %zu", var, val, k, listvar, n_hosts);
bad:
    return hostfile_fail(err, errlen, "--slurm: %s=%s is not a count such as 4 or 2(x3),1", var, val);
}

int hostfile_from_slurm_values(const char *var, const char *list, const char *cvar, const char *cval,
                               struct hostlist *out, char *err, size_t errlen)
{
    char msg[512];
    memset(out, 0, sizeof *out);
    struct hostfile_parser ps;
    struct line_spec ls;
    memset(&ps, 0, sizeof ps);
    memset(&ls, 0, sizeof ls);
    ps.source = var;
    /* Split at top-level commas only: "gpu[01-02,05],cpu1" is two entries. */
    for (const char *p = list; *p;) {
        size_t len = 0;
        int depth = 0;
        while (p[len] && (p[len] != ',' || depth > 0)) {
            depth += p[len] == '[' ? 1 : p[len] == ']' ? -1 : 0;
            len++;
        }
        if (len > 0) {
            ls.expr = xstrndup(p, len);
            int rc = hostfile_parser_add_spec(&ps, &ls, 0, msg, sizeof msg);
            free(ls.expr);
            ls.expr = NULL;
            if (rc < 0) {
                hostfile_parser_done(&ps, NULL);
                return hostfile_fail(err, errlen, "--slurm: %s=%s: %s", var, list, msg);
            }
        }
        p += len;
        if (*p == ',') p++;
    }
    if (ps.hl.n == 0) {
        hostfile_parser_done(&ps, NULL);
        return hostfile_fail(err, errlen, "--slurm: %s is empty (run inside an allocation: salloc/sbatch)", var);
    }
    if (cval && *cval) {
        int *slots = xcalloc(ps.hl.n, sizeof *slots);
        int rc = slurm_counts(cvar, cval, var, ps.hl.n, slots, err, errlen);
        for (size_t i = 0; rc == 0 && i < ps.hl.n; i++) ps.hl.hosts[i].slots = slots[i];
        free(slots);
        if (rc < 0) {
            hostfile_parser_done(&ps, NULL);
            return -1;
        }
    }
    hostfile_parser_done(&ps, out);
    return 0;
}

int hostfile_from_slurm(struct hostlist *out, char *err, size_t errlen)
{
    static const char var[] = "SLURM_JOB_NODELIST";
    const char *list = getenv(var);
    memset(out, 0, sizeof *out);
    if (!list)
        return hostfile_fail(err, errlen, "--slurm: SLURM_JOB_NODELIST is not set (run inside an "
                    "allocation: salloc/sbatch, or give --jobid ID)");
    /* GPUs on the node are the natural slot count; tasks per node when no GPU was asked for
     * (SLURM_NTASKS_PER_NODE only with --ntasks-per-node; SLURM_TASKS_PER_NODE always). */
    /* SLURM_GPUS_ON_NODE is a step's (sbatch's batch step has it); salloc's shell has only what
     * was asked: SLURM_GPUS_PER_NODE, "2" or typed "a100:2" */
    static const char *const vars[] = {"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_NTASKS_PER_NODE",
                                       "SLURM_TASKS_PER_NODE", NULL};
    const char *cvar = NULL, *cval = NULL;
    for (int i = 0; vars[i] && !cval; i++) {
        const char *v = getenv(vars[i]);
        if (v && i == 1 && strrchr(v, ':')) v = strrchr(v, ':') + 1;
        if (v && *v && strcmp(v, "0") != 0) {
            cvar = vars[i];
            cval = v;
        }
    }
    return hostfile_from_slurm_values(var, list, cvar, cval, out, err, errlen);
}

int hostfile_from_pbs(struct hostlist *out, char *err, size_t errlen)
{
    char msg[512];
    memset(out, 0, sizeof *out);
    const char *path = getenv("PBS_NODEFILE");
    if (!path || !*path)
        return hostfile_fail(err, errlen, "--pbs: PBS_NODEFILE is not set (run inside a PBS job: "
                    "qsub -I or a job script)");
    char *text = hostfile_slurp(path, " (PBS_NODEFILE)", err, errlen);
    if (!text) return -1;
    struct hostfile_parser ps;
    struct line_spec ls;
    memset(&ps, 0, sizeof ps);
    memset(&ls, 0, sizeof ls);
    ps.source = path;
    int line = 0, rc = 0;
    char *end = text + strlen(text);
    for (char *p = text; p < end && rc == 0;) {
        size_t len = strcspn(p, "\n");
        char *next = p + len + (p[len] == '\n'), *save = NULL, *name, *extra;
        line++;
        p[len] = '\0';
        name = strtok_r(p, " \t\r", &save);
        extra = name ? strtok_r(NULL, " \t\r", &save) : NULL;
        p = next;
        if (!name) continue;
        if (extra)
            rc = hostfile_fail(err, errlen, "%s:%d: one host name per line expected, got '%s %s'",
                      path, line, name, extra);
        else if (hostfile_name_check("host name", name, msg, sizeof msg) < 0)
            rc = hostfile_fail(err, errlen, "%s:%d: %s", path, line, msg);
        else {
            /* One line per slot: a repeated name adds a slot to its first entry. */
            size_t first = hostfile_parser_find(&ps, name, 0);
            if (first != SIZE_MAX) {
                ps.hl.hosts[first].slots++;
            } else if (ps.hl.n >= HOSTS_MAX) {
                rc = hostfile_fail(err, errlen, "%s:%d: too many hosts (at most %d)", path, line,
                          HOSTS_MAX);
            } else {
                ls.slots = 1;
                hostfile_parser_add(&ps, name, &ls, line);
            }
        }
    }
    free(text);
    if (rc == 0 && ps.hl.n == 0)
        rc = hostfile_fail(err, errlen, "%s: no hosts (PBS_NODEFILE is empty)", path);
    hostfile_parser_done(&ps, rc == 0 ? out : NULL);
    return rc;
}
