/* Hostfile parsing: `[user@]host[:port] [slots=N] [key=value ...]` lines, hostlists such as
 * gpu[01-04,07], IPv6 as [::1]:2222, DeepSpeed hostfiles as-is; and the scheduler sources
 * --slurm (SLURM_JOB_NODELIST) and --pbs (PBS_NODEFILE). Format: docs/hostfile.md. */
#ifndef DDPTOP_HOSTFILE_H
#define DDPTOP_HOSTFILE_H

#include <stddef.h>

/* An environment variable a hostfile line sets for that node (a key in upper case,
 * e.g. NCCL_SOCKET_IFNAME=eth1). */
struct host_env {
    char *key;
    char *value;
};

struct host {
    char *name;       /* the host as written after hostlist expansion, e.g. "gpu03", "::1";
                         used in messages and as the ~/.ssh/config alias */
    char *user;       /* NULL: from ~/.ssh/config or the local user */
    int port;         /* 0: from ~/.ssh/config or 22 */
    int slots;        /* 0: not given (ranks default to 1 per node, or --nproc-per-node) */
    char *identity;   /* identity=FILE key, NULL if not given */
    struct host_env *env;
    size_t n_env;
    const char *source; /* file name (or "SLURM_JOB_NODELIST" / PBS file) for messages */
    int line;           /* 1-based line in source, 0 when not from a file */
};

struct hostlist {
    struct host *hosts;
    size_t n;
};

/* Each returns 0 and fills *out, or -1 and writes one message to err (at most errlen bytes)
 * of the form "FILE:LINE: what is wrong (what to do)". */
int hostfile_parse(const char *path, struct hostlist *out, char *err, size_t errlen);
/* Parses text as if read from a file named `source` (used by tests and by the file reader). */
int hostfile_parse_text(const char *source, const char *text, struct hostlist *out,
                        char *err, size_t errlen);
/* Slurm: hosts from SLURM_JOB_NODELIST (Slurm's hostlist syntax, e.g. "gpu[01-03,07],cpu1"),
 * slots from SLURM_GPUS_ON_NODE, else SLURM_NTASKS_PER_NODE (e.g. "4" or "4(x2),2"). */
/* The same from values the caller read (ddptop --jobid asks scontrol): var names the list in
 * messages; cvar/cval the per-node counts ("4", "2(x3),1"), cval NULL for none. */
int hostfile_from_slurm_values(const char *var, const char *list, const char *cvar, const char *cval,
                               struct hostlist *out, char *err, size_t errlen);
int hostfile_from_slurm(struct hostlist *out, char *err, size_t errlen);
/* PBS: PBS_NODEFILE lists one line per slot; consecutive or repeated names add up to slots. */
int hostfile_from_pbs(struct hostlist *out, char *err, size_t errlen);

void hostlist_free(struct hostlist *hl);
/* The value of KEY for host h (hostfile env), or NULL. */
const char *host_env_get(const struct host *h, const char *key);

#endif
