/* The kinds of transport: the ways ddptop starts an agent on each node (`--transport`). Each kind
 * is one file, kind_NAME.c, that fills one `const struct transport_kind`: its name, its own
 * options, which hosts it fits, how it opens a node (or every node in one step), how it deploys
 * the agent, its timeouts, the words the preflight and the events use for it. transport_kinds.c
 * holds the one table that --transport, --help, the choice by the hosts' source and the
 * controller read (after Redis's connection types, connTypeRegister). Adding a kind is a file
 * and a line of that table.
 *
 * Everything outside a kind's file reaches it through its operations and properties: the
 * controller and the preflight never test which kind they have (tests/it_rooms.sh checks it),
 * and hosts/ only says where the hosts come from. */
#ifndef DDPTOP_TRANSPORT_KIND_H
#define DDPTOP_TRANSPORT_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "transport.h"

struct host;
struct hosts_source;
struct ssh_conn_opts;

/* The kinds' own options, at most this many given on one command line. */
#define TRANSPORT_OPTS_MAX 8

/* What the command line said of transports: --transport, the kinds' own options, and the
 * kind chosen for the hosts (transport_opts_choose). Zeroed is empty; strings are argv's. */
struct transport_opts {
    const struct transport_kind *kind; /* the chosen kind; NULL before transport_opts_choose */
    const char *named;                 /* --transport NAME as given, or NULL */
    struct {
        const char *name, *value;
    } given[TRANSPORT_OPTS_MAX];       /* every kind's own options, in the order given */
    size_t n_given;
};

/* What a kind opens nodes with: the command line, the hosts and where things are. */
struct transport_env {
    const struct transport_opts *o;
    const struct host *hosts;        /* NULL: no hosts, this machine alone (n is 1) */
    size_t n;
    const struct ssh_conn_opts *conn; /* the connection's options: deadlines, --agent-dir, SSH's own */
    const char *agent_path;          /* this machine's ddptop-agent */
    const char *stderr_path;         /* where the agents' own stderr goes (NULL: /dev/null) */
    const char *slurm_jobid;         /* the hosts' Slurm job (--jobid, --salloc; NULL: SLURM_JOB_ID) */
    bool pbs;                        /* the hosts are a PBS job's (PBS_NODEFILE) */
    int verbose;                     /* -v: what a kind runs goes to stderr */
};

struct transport_kind {
    const char *name;  /* --transport NAME; upper-cased, the first column of `ddptop check` */
    /* Its words in --transport's help, "srun (one Slurm job step; the default with ...)"; NULL:
     * never named, only chosen by the hosts' source (no hosts: this machine's own agent). */
    const char *help;
    /* Its own options, each taking a value ("--agent-bcast"), NULL-terminated (NULL: none), their
     * lines in --help, and the check of a value (NULL: missing), 0 or -1 with a message
     * (cmd names the subcommand: "see ddptop CMD --help"). transport_opts_get reads them. */
    const char *const *options;
    const char *usage;
    int (*option)(const char *name, const char *value, const char *cmd, char *err, size_t errlen);
    /* How strongly these hosts call for it without --transport: 0 not at all; the highest wins
     * and the table's order breaks a tie. */
    int (*natural)(const struct hosts_source *src);
    /* --transport NAME for these hosts: 0, or -1 with why it does not fit (NULL: it fits any). */
    int (*fits)(const struct hosts_source *src, char *err, size_t errlen);
    /* Node i's transport, its agent started by it (bridge: `ddptop-agent --attach`, a bridge to
     * the agent that waits on the node, docs/protocol.md "Reconnecting"). */
    struct transport *(*open)(const struct transport_env *env, size_t i, bool bridge);
    /* Instead of open, for a kind whose nodes share one step: every node i with need[i], at once,
     * into t[i]. Its nodes' requests then share one stream. */
    void (*open_step)(const struct transport_env *env, const bool *need, bool bridge, struct transport **t);
    /* Said once a run, as an event, before the agents start: how they start (malloc'd; NULL or
     * a NULL result: nothing to say). */
    char *(*announce)(const struct transport_env *env);
    /* Variables of ddptop's own environment the ranks get as they are, NULL-terminated (NULL:
     * none): what the kind's step changed for its agents but the ranks must see unchanged. */
    const char *const *(*rank_vars)(const struct transport_env *env);
    int64_t hello_ms;  /* beyond --timeout, how long an agent may take to greet (a step's start) */
    int idle_ms;       /* the longest the loop sleeps while its nodes are on it (0: 100 ms) */
    /* The preflight's words for a node's link: "through srun", no port of ours (NULL: a login
     * of its own, user@host:port); whether the agent was chosen by the node's `uname -m`
     * (the probe of agent_deploy.h) or is this machine's own. */
    const char *through;
    bool probes;
    bool test_only;    /* a kind for the tests: there only with DDPTOP_TEST_TRANSPORTS=1 */
};

/* --transport NAME and every kind's own options: 1 taken (*i moved past the value), 0 not one
 * of them, -1 with a message. */
int transport_opts_option(struct transport_opts *o, int argc, char **argv, int *i, const char *cmd, char *err,
                          size_t errlen);
/* The kind for the hosts of src, into o->kind: --transport when given (it must fit them), else
 * the kind they call for most. 0, or -1 with a message. */
int transport_opts_choose(struct transport_opts *o, const struct hosts_source *src, char *err, size_t errlen);
/* A kind's own option as last given, or NULL. */
const char *transport_opts_get(const struct transport_opts *o, const char *name);

/* The kind named so (NULL: none, or a test kind outside the tests). */
const struct transport_kind *transport_kind_find(const char *name);
/* Whether its nodes share one step (open_step). */
bool transport_kind_shares_step(const struct transport_kind *k);
/* Opens the transport of every node i with need[i] into t[i], through env->o->kind; nothing is
 * started (transport_start). */
void transport_kind_open(const struct transport_env *env, const bool *need, bool bridge, struct transport **t);
/* The kind's word on how its agents start, said once a run (malloc'd), or NULL. */
char *transport_kind_announce(const struct transport_env *env);
/* The variables of ddptop's environment its ranks get unchanged (NULL-terminated), or NULL. */
const char *const *transport_kind_rank_vars(const struct transport_env *env);
/* How long beyond --timeout an agent may take to greet; the longest the loop may sleep with
 * the kind's nodes on it. */
int64_t transport_kind_hello_ms(const struct transport_kind *k);
int transport_kind_idle_ms(const struct transport_kind *k);
/* --transport's lines of --help, then each kind's own options'. */
void transport_kinds_usage(FILE *f);

#endif
