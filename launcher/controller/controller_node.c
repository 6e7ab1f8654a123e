/* The node plumbing, the controller's lowest layer (controller_int.h): what it takes to talk
 * to a node's agent and nothing about what it means. Requests and sending (through the node's
 * agent client, wire/client.h, and its transport), opening and connecting the transports
 * through the run's kind of transport (ssh/transport_kind.h, --fanout at once), the spawn and
 * stop requests, and letting agents go. Which nodes run ranks this attempt (their roles, set
 * by controller_spare.c) is read here too, since connecting and spawning follow it.
 *
 * It calls no other file of the controller: whatever follows from a send or a connect (a
 * request given up, a node lost) is for the caller above to do. */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/protocol.h"
#include "util/util.h"

extern char **environ;

static void spawn_send(struct controller *c, size_t node);
static void spawn_forget(struct controller *c, size_t node);

void ctl_send(struct controller *c, size_t node, cJSON *msg)
{
    /* whatever else the agent hears this attempt comes after its spawn, as when every spawn
     * went in one pass (a stop, a stack dump's request) */
    if (c->nodes[node].spawn_due) spawn_send(c, node);
    char *s = wire_line(msg);
    ctl_send_line(c, node, s);
    free(s);
}

void ctl_send_line(struct controller *c, size_t node, const char *line)
{
    if (c->nodes[node].t) transport_send_line(c->nodes[node].t, line);
}

cJSON *ctl_request(struct controller *c, size_t node, const char *op, int tag, int *id)
{
    return wire_client_request(&c->nodes[node].cl, op, tag, id);
}

/* ---- which nodes ---------------------------------------------------------------------------- */

bool ctl_node_usable(const struct cnode *nd)
{
    return nd->t && nd->hello && !nd->lost && !nd->away && !nd->released;
}

bool ctl_node_active(const struct controller *c, size_t i)
{
    return c->job->nodes[i].role == NODE_ACTIVE;
}

size_t ctl_active_count(const struct controller *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) n += ctl_node_active(c, i);
    return n;
}

size_t ctl_first_active(const struct controller *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (ctl_node_active(c, i)) return i;
    return 0;
}

/* ---- connecting ----------------------------------------------------------------------------- */

/* Starting a transport may block: PBS's and Slurm's kinds vfork a launcher, and the loop waits
 * until the child has exec'ed, 20-50 ms each on a loaded machine. 1,024 of them in one pass
 * took 0.8 s, a key waiting meanwhile (issue 32): the starts stop after START_PASS_MS, and the
 * next pass, which does not sleep (starts_pending), goes on. */
#define START_PASS_MS 10

void ctl_start_queued(struct controller *c)
{
    size_t busy = 0, fanout = c->o.nodes.fanout > 0 ? (size_t)c->o.nodes.fanout : 1;
    int64_t from = mono_ms();
    c->starts_pending = false;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].t && !c->nodes[i].queued && transport_connecting(c->nodes[i].t)) busy++;
    for (size_t i = 0; i < c->n && busy < fanout; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!nd->queued) continue;
        if (mono_ms() - from >= START_PASS_MS) {
            c->starts_pending = true;
            break;
        }
        nd->queued = false;
        nd->hello_deadline_ms = 0;
        transport_start(nd->t);
        if (c->pf && c->job->state == JOB_CHECKING)
            preflight_node_connecting(c->pf, i, transport_address(nd->t), transport_port(nd->t));
        busy++;
    }
}

int64_t ctl_hello_timeout_ms(const struct controller *c)
{
    return (int64_t)c->o.nodes.ssh.timeout_s * 1000 + transport_kind_hello_ms(c->o.nodes.transport.kind);
}

static char *agent_log(const struct controller *c)
{
    return c->job->log_dir ? xasprintf("%s/agent.log", c->job->log_dir) : NULL;
}

struct transport_env ctl_transport_env(const struct controller *c, const char *stderr_path)
{
    return (struct transport_env){.o = &c->o.nodes.transport, .hosts = c->hl ? c->hl->hosts : NULL, .n = c->n,
                                  .conn = &c->o.nodes.ssh, .agent_path = c->agent_path, .stderr_path = stderr_path,
                                  .slurm_jobid = c->o.nodes.slurm_jobid, .pbs = c->o.nodes.pbs,
                                  .verbose = c->o.verbose};
}

void ctl_open_nodes(struct controller *c, const bool *need, bool bridge)
{
    char *errlog = agent_log(c);
    struct transport_env env = ctl_transport_env(c, errlog);
    struct transport **t = xcalloc(c->n ? c->n : 1, sizeof *t);
    for (size_t i = 0; i < c->n; i++) {
        if (!need[i]) continue;
        transport_free(c->nodes[i].t);
        c->nodes[i].t = NULL;
    }
    transport_kind_open(&env, need, bridge, t);
    for (size_t i = 0; i < c->n; i++)
        if (need[i]) c->nodes[i].t = t[i];
    free(t);
    free(errlog);
}

void ctl_connect_nodes(struct controller *c, bool *renewed)
{
    if (!c->transport_noticed) {
        struct transport_env env = ctl_transport_env(c, NULL);
        char *said = transport_kind_announce(&env);
        c->transport_noticed = true;
        if (said) job_event_add(c->job, EV_INFO, -1, -1, "%s", said);
        free(said);
    }
    bool *need = xcalloc(c->n ? c->n : 1, sizeof *need);
    for (size_t i = 0; i < c->n; i++) {
        /* the preflight checks spares too; an attempt connects its active nodes only */
        bool wanted = c->job->state == JOB_CHECKING ? c->job->nodes[i].role != NODE_EXCLUDED : ctl_node_active(c, i);
        need[i] = wanted && (!c->nodes[i].t || c->nodes[i].lost || c->nodes[i].released || c->nodes[i].away);
    }
    for (size_t i = 0; i < c->n; i++) {
        /* a node still unreachable gets a fresh agent: its old one stops its ranks itself */
        if (need[i] && c->nodes[i].t) transport_detach(c->nodes[i].t);
    }
    ctl_open_nodes(c, need, false);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (renewed) renewed[i] = need[i];
        if (!need[i]) continue;
        wire_client_reset(&nd->cl); /* answers on the old connection never come */
        spawn_forget(c, i); /* the last attempt's, for an agent that is gone */
        nd->queued = true;
        nd->hello = nd->lost = nd->released = nd->away = nd->bridge = nd->holds_ranks = false;
        nd->last_msg_ms = nd->quiet_from_ms = mono_ms();
        job_node_connecting(c->job, i);
    }
    free(need);
    ctl_start_queued(c);
}

/* ---- spawning, stopping --------------------------------------------------------------------- */

/* Where node i is reached: its transport's address, or (while it has none: away, its spawn
 * still due) the one it had. */
static const char *node_address(const struct controller *c, size_t i)
{
    if (c->nodes[i].t) return transport_address(c->nodes[i].t);
    return c->job->nodes[i].addr ? c->job->nodes[i].addr : "127.0.0.1";
}

struct rank_env_in ctl_rank_env_in(const struct controller *c, size_t i, int k)
{
    const struct job *j = c->job;
    const struct node_info *ni = &j->nodes[i];
    return (struct rank_env_in){
        .rank = ni->first_rank + k, .local_rank = k, .node = ni->node_rank, .local_world_size = ni->n_ranks,
        .world_size = j->world_size, .nnodes = (int)ctl_active_count(c),
        /* the first active node: node 0 unless it was excluded (--nnodes) */
        .master_addr = node_address(c, ctl_first_active(c)),
        .master_port = c->o.nodes.master_port, .attempt = j->attempt, .max_restarts = j->max_restarts,
        .run_id = j->run_id, .token = c->token, .exports = &c->exports, .cli_env = c->o.nodes.env,
        .n_cli_env = c->o.nodes.n_env, .host = c->hl ? &c->hl->hosts[i] : NULL,
        .launcher_env = environ,
    };
}

cJSON *ctl_spawn_request(struct controller *c, size_t i, int *id)
{
    struct job *j = c->job;
    struct node_info *ni = &j->nodes[i];
    cJSON *m = ctl_request(c, i, WIRE_OP_SPAWN, WIRE_TAG_SPAWN, id), *argv, *ranks;
    bool remote = c->hl != NULL; /* hosts named: the nodes are other machines */
    cJSON_AddNumberToObject(m, "attempt", j->attempt);
    if (remote) job_node_address(j, i, transport_address(c->nodes[i].t));   /* a peer's address finds it */
    argv = cJSON_AddArrayToObject(m, "argv");
    if (c->user_argv) {
        for (size_t k = 0; c->user_argv[k]; k++) cJSON_AddItemToArray(argv, cJSON_CreateString(c->user_argv[k]));
    } else {
        size_t n;
        char **d = plan_default_argv(c->train_path, j->log_dir, remote, &n);
        for (size_t k = 0; k < n; k++) cJSON_AddItemToArray(argv, cJSON_CreateString(d[k]));
        plan_argv_free(d);
    }
    cJSON_AddStringToObject(m, "workdir", c->workdir);
    cJSON_AddNumberToObject(m, "watchdog_ms", WATCHDOG_MS);
    /* the agent keeps the ranks this long without us, and can be found again (its socket is
     * named after the run and the node) */
    cJSON_AddNumberToObject(m, "grace_ms", (double)c->o.agent_grace_s * 1000);
    cJSON_AddNumberToObject(m, "spool_bytes", (double)c->o.agent_spool_mb * 1048576.0);
    cJSON_AddStringToObject(m, "run", j->run_id);
    cJSON_AddNumberToObject(m, "node", (double)i);
    ranks = cJSON_AddArrayToObject(m, "ranks");
    struct rank_env_in in = ctl_rank_env_in(c, i, 0); /* its node's count: once a node, not a rank */
    for (int k = 0; k < ni->n_ranks; k++) {
        struct env_list env = {0};
        cJSON *r = cJSON_CreateObject(), *e;
        in.rank = ni->first_rank + k;
        in.local_rank = k;
        plan_rank_env(&in, &env);
        if (k == 0) { /* the same for every rank of a node: run id, attempt, the node's keys */
            const char *prefix = plan_trace_prefix(&env);
            free(c->nodes[i].trace_prefix);
            c->nodes[i].trace_prefix = prefix && prefix[0] == '/' ? xstrdup(prefix) : NULL;
        }
        cJSON_AddNumberToObject(r, "rank", in.rank);
        cJSON_AddNumberToObject(r, "local_rank", k);
        e = cJSON_AddObjectToObject(r, "env");
        /* ddptop's NCCL_DEBUG goes as a default: the agent drops it where the node's own
         * environment or NCCL's configuration files set NCCL_DEBUG(_SUBSYS) */
        bool dflt = plan_nccl_debug_defaulted(&in);
        c->job->nccl_debug_default = dflt;
        cJSON *d = dflt ? cJSON_AddObjectToObject(r, "env_default") : NULL;
        /* ddptop's own NCCL_ASYNC_ERROR_HANDLING only where the node's torch reads it (older
         * than 2.2; the agent knows its torch); a user's value goes as it is */
        cJSON *old = NULL;
        for (size_t v = 0; v < env.n; v++) {
            bool nccl = false;
            for (size_t q = 0; dflt && plan_nccl_debug_vars[q]; q++)
                nccl = nccl || strcmp(env.v[v].key, plan_nccl_debug_vars[q]) == 0;
            if (plan_old_torch_defaulted(&in, env.v[v].key)) {
                if (!old) old = cJSON_AddObjectToObject(r, "env_old_torch");
                cJSON_AddStringToObject(old, env.v[v].key, env.v[v].value);
                continue;
            }
            cJSON_AddStringToObject(nccl ? d : e, env.v[v].key, env.v[v].value);
        }
        env_list_free(&env);
        cJSON_AddItemToArray(ranks, r);
    }
    return m;
}

/* At 1,024 nodes x 8 ranks the spawn requests took 190 ms of CPU on the developers' machine
 * (8,192 environments made and printed), and a key waits for the end of the pass they are sent
 * in (issue 32): spawn_all marks them due, and each pass sends them for a few ms. Their order
 * for each agent stays as if all went at once: ctl_send sends a node's due spawn before
 * anything else to that node; the pings (ctl_send_line) may go before it, as they did before
 * the spawn. */
void ctl_spawn_due(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    if (!nd->spawn_due) c->spawns_due++;
    nd->spawn_due = true;
    nd->spawn_id = 0;  /* an answer to the last attempt's spawn is not this one's */
}

/* A due spawn that will not be sent (or is being sent now) is no longer counted. */
static void spawn_forget(struct controller *c, size_t i)
{
    if (!c->nodes[i].spawn_due) return;
    c->nodes[i].spawn_due = false;
    c->spawns_due--;
}

static void spawn_send(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    spawn_forget(c, i);
    /* Away or lost since spawn_all: as if its link had dropped the spawn. The resume of a node
     * that comes back sends it again (controller_link.c: a spawn id, no answer, no rank
     * started); a lost node's attempt ends. Sent now, it would reach a bridge before its
     * attach line, or a transport renewed for the next attempt. */
    if (!ctl_node_usable(nd)) {
        nd->spawn_id = wire_client_begin(&nd->cl, WIRE_TAG_SPAWN);
        return;
    }
    ctl_send(c, i, ctl_spawn_request(c, i, &nd->spawn_id));
}

bool ctl_spawn_more(struct controller *c, int64_t budget_ms)
{
    int64_t from = mono_ms();
    size_t sent = 0;
    for (size_t k = 0; c->spawns_due && k < c->n; k++) {
        size_t i = (c->spawn_next + k) % c->n;
        if (!c->nodes[i].spawn_due) continue;
        spawn_send(c, i);
        if (mono_ms() - from >= budget_ms || ++sent == c->spawn_pass_nodes) {
            c->spawn_next = (i + 1) % c->n;
            return c->spawns_due > 0;
        }
    }
    c->spawn_next = 0;
    return c->spawns_due > 0;
}

void ctl_send_stop(struct controller *c, size_t i)
{
    cJSON *m = ctl_request(c, i, WIRE_OP_STOP, WIRE_TAG_STOP, &c->nodes[i].stop_id);
    cJSON_AddNumberToObject(m, "term_timeout_ms", (double)c->o.term_timeout_s * 1000);
    ctl_send(c, i, m);
}

/* ---- letting go ----------------------------------------------------------------------------- */

/* Every agent is told to exit (an agent with a grace waits for us otherwise) and its
 * transport closed; a node still unreachable is left to its agent's grace. abandon: nobody
 * is told anything, every agent waits (ddptop attach can take the run over). */
void ctl_release_node(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    if (!nd->t || nd->released) return;
    spawn_forget(c, i); /* never sent: nothing to start only to stop */
    if (ctl_node_usable(nd)) {
        int id;
        ctl_send(c, i, ctl_request(c, i, WIRE_OP_EXIT, WIRE_TAG_NONE, &id));
    }
    transport_close(nd->t);
    nd->released = true;
    nd->holds_ranks = false;
}

void ctl_release_all(struct controller *c, bool abandon)
{
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!nd->t || nd->released) continue;
        if (abandon || (nd->away && !nd->lost)) {
            if (nd->spawn_due) spawn_send(c, i); /* the record says its ranks run: the agent keeps them */
            transport_detach(nd->t);
            continue;
        }
        ctl_release_node(c, i);
    }
}
