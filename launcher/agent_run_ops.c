/* The run requests of ddptop-agent: spawn, signal, stop, stacks, ping (docs/protocol.md, "Run
 * requests"). A request is checked whole before anything starts, so a bad one starts nothing;
 * the rank's lifecycle after spawn lives in agent_run.c. */
#include "agent_run.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_run_int.h"
#include "agent_stacks.h"
#include "agent_stream.h"
#include "util.h"

extern char **environ;

#define SPAWN_START_TIMEOUT_MS 10000
#define SPAWN_MAX_RANKS 1024
#define WATCHDOG_MAX_MS 86400000L
#define TERM_TIMEOUT_DEFAULT_MS 10000
#define TERM_TIMEOUT_MAX_MS 3600000L
#define ERROR_FILE_VAR "TORCHELASTIC_ERROR_FILE"

static int is_int_in(const cJSON *v, double lo, double hi)
{
    /* Range first: converting an out-of-range double to an integer is undefined. */
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           v->valuedouble == (double)(long long)v->valuedouble;
}

/* Checks the request's "ranks" (and each "env"); sends the error and returns -1 when wrong. */
static int spawn_check_ranks(struct agent *ag, const cJSON *id, const cJSON *ranks)
{
    int n = cJSON_GetArraySize(ranks), i = 0;
    const cJSON *o;
    if (!cJSON_IsArray(ranks) || n < 1 || n > SPAWN_MAX_RANKS) {
        agent_send_error(ag, id, "\"ranks\" must be an array of 1 to %d rank objects", SPAWN_MAX_RANKS);
        return -1;
    }
    cJSON_ArrayForEach(o, ranks) {
        const cJSON *rk = cJSON_GetObjectItemCaseSensitive(o, "rank");
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "env"), *e;
        if (!cJSON_IsObject(o) || !is_int_in(rk, 0, INT_MAX)) {
            agent_send_error(ag, id, "ranks[%d] must be an object with \"rank\", an integer from 0 to %d",
                             i, INT_MAX);
            return -1;
        }
        for (const cJSON *p = ranks->child; p != o; p = p->next)
            if (cJSON_GetObjectItemCaseSensitive(p, "rank")->valuedouble == rk->valuedouble) {
                agent_send_error(ag, id, "rank %d appears twice in \"ranks\"", (int)rk->valuedouble);
                return -1;
            }
        if (env && !cJSON_IsObject(env)) {
            agent_send_error(ag, id, "ranks[%d].env must be an object of strings", i);
            return -1;
        }
        cJSON_ArrayForEach(e, env) {
            if (!e->string[0] || strchr(e->string, '=')) {
                agent_send_error(ag, id, "ranks[%d].env: '%.64s' is not a variable name", i, e->string);
                return -1;
            }
            if (!cJSON_IsString(e) && !cJSON_IsNull(e)) {
                agent_send_error(ag, id, "ranks[%d].env.%.64s must be a string or null", i, e->string);
                return -1;
            }
        }
        i++;
    }
    return 0;
}

static int env_key_is(const char *entry, const char *key)
{
    size_t n = strlen(key);
    return strncmp(entry, key, n) == 0 && entry[n] == '=';
}

/* The rank's environment: the agent's, with the request's env applied (null removes), plus
 * TORCHELASTIC_ERROR_FILE=own_err when own_err is set. Strings the vector owns are listed in
 * owned (freed with free_env). */
static char **build_env(const cJSON *env, const char *own_err, char ***owned)
{
    size_t n_env = 0, n_req = (size_t)cJSON_GetArraySize(env), k = 0, o = 0;
    while (environ && environ[n_env]) n_env++;
    char **v = xcalloc(n_env + n_req + 2, sizeof *v);
    *owned = xcalloc(n_req + 2, sizeof **owned);
    for (size_t i = 0; i < n_env; i++) {
        int drop = own_err && env_key_is(environ[i], ERROR_FILE_VAR);
        const cJSON *e;
        cJSON_ArrayForEach(e, env) drop = drop || env_key_is(environ[i], e->string);
        if (!drop) v[k++] = environ[i];
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, env) {
        if (!cJSON_IsString(e)) continue;
        int dup = 0; /* cJSON keeps duplicate keys; the last one wins, as in a shell */
        for (const cJSON *f = e->next; f; f = f->next) dup = dup || strcmp(f->string, e->string) == 0;
        if (!dup) v[k++] = (*owned)[o++] = xasprintf("%s=%s", e->string, e->valuestring);
    }
    if (own_err) v[k++] = (*owned)[o++] = xasprintf("%s=%s", ERROR_FILE_VAR, own_err);
    return v;
}

static void free_env(char **v, char **owned)
{
    for (size_t i = 0; owned[i]; i++) free(owned[i]);
    free(owned);
    free(v);
}

static cJSON *spawn_one(const cJSON *ro, long attempt, char *const *argv, const char *workdir)
{
    int rank = (int)cJSON_GetObjectItemCaseSensitive(ro, "rank")->valuedouble;
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(ro, "env");
    cJSON *ans = cJSON_CreateObject();
    char err[512];
    cJSON_AddNumberToObject(ans, "rank", rank);
    struct run_rank *old = run_rank_find(rank);
    if (old) {
        cJSON_AddStringToObject(ans, "error", "this rank is still running on this node (stop it first)");
        cJSON_AddNumberToObject(ans, "pid", old->k.rank_pid);
        return ans;
    }
    /* The rank's error file: the controller's when its env names one (even null: then none),
     * else a node-local file named after this agent, the attempt and the rank. */
    char *errfile = NULL;
    int ours = 0;
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(env, ERROR_FILE_VAR);
    if (cJSON_IsString(given)) {
        errfile = xstrdup(given->valuestring);
    } else if (!given) {
        const char *tmp = getenv("TMPDIR");
        errfile = xasprintf("%s/ddptop-%d-a%ld-r%d.error.json", tmp && tmp[0] ? tmp : "/tmp",
                            (int)getpid(), attempt, rank);
        unlink(errfile);
        ours = 1;
    }
    char **owned;
    char **envp = build_env(env, ours ? errfile : NULL, &owned);
    struct keeper_spec spec = { .argv = argv, .envp = envp, .workdir = workdir,
                                .start_timeout_ms = SPAWN_START_TIMEOUT_MS };
    struct keeper k;
    int64_t t0 = wall_ns();
    int rc = keeper_start(&spec, &k, err, sizeof err);
    free_env(envp, owned);
    if (rc < 0) {
        cJSON_AddStringToObject(ans, "error", err);
        if (ours) unlink(errfile);
        free(errfile);
        return ans;
    }
    run_rank_add(rank, (int)attempt, &k, errfile, ours, t0);
    cJSON_AddNumberToObject(ans, "pid", k.rank_pid);
    return ans;
}

void agent_run_spawn_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *argv = cJSON_GetObjectItemCaseSensitive(req, "argv"), *a;
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(req, "workdir");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(req, "ranks"), *ro;
    long attempt, watchdog;
    int argc = cJSON_GetArraySize(argv), i = 0;

    run_heartbeat_start();
    if (!cJSON_IsArray(argv) || argc < 1) {
        agent_send_error(ag, id, "\"argv\" must be a non-empty array of strings");
        return;
    }
    cJSON_ArrayForEach(a, argv) {
        if (!cJSON_IsString(a) || (i++ == 0 && !a->valuestring[0])) {
            agent_send_error(ag, id, "\"argv\" must be a non-empty array of strings");
            return;
        }
    }
    if (wd && !cJSON_IsString(wd) && !cJSON_IsNull(wd)) {
        agent_send_error(ag, id, "\"workdir\" must be a string");
        return;
    }
    if (agent_req_int(ag, req, id, "attempt", 0, INT_MAX, 0, &attempt) < 0 ||
        agent_req_int(ag, req, id, "watchdog_ms", 0, WATCHDOG_MAX_MS, 0, &watchdog) < 0 ||
        spawn_check_ranks(ag, id, ranks) < 0)
        return;

    char **av = xcalloc((size_t)argc + 1, sizeof *av);
    i = 0;
    cJSON_ArrayForEach(a, argv) av[i++] = a->valuestring;
    run_set_watchdog(watchdog);
    cJSON *msg = agent_reply_new("spawned", id);
    cJSON *out = cJSON_AddArrayToObject(msg, "ranks");
    cJSON_ArrayForEach(ro, ranks)
        cJSON_AddItemToArray(out, spawn_one(ro, attempt, av, cJSON_IsString(wd) ? wd->valuestring : NULL));
    free(av);
    agent_send(ag, msg);
    run_schedule();
}

/* The ranks a request names ("ranks": [2, 3]; absent: all). Sends the error, returns -1. */
static int req_ranks(struct agent *ag, const cJSON *req, const cJSON *id, const cJSON **list)
{
    const cJSON *e;
    *list = cJSON_GetObjectItemCaseSensitive(req, "ranks");
    if (!*list) return 0;
    if (!cJSON_IsArray(*list)) goto bad;
    cJSON_ArrayForEach(e, *list)
        if (!is_int_in(e, 0, INT_MAX)) goto bad;
    return 0;
bad:
    agent_send_error(ag, id, "\"ranks\" must be an array of rank numbers");
    return -1;
}

static int listed(const cJSON *list, int rank)
{
    const cJSON *e;
    if (!list) return 1;
    cJSON_ArrayForEach(e, list)
        if ((int)e->valuedouble == rank) return 1;
    return 0;
}

void agent_run_signal_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *name = agent_req_str(req, "sig");
    const cJSON *list;
    int sig = name ? run_signal_parse(name) : 0;
    if (!sig) {
        agent_send_error(ag, id, "\"sig\" must be one of CONT, TERM, KILL, INT, HUP, QUIT, USR1, "
                                 "USR2, STOP");
        return;
    }
    if (req_ranks(ag, req, id, &list) < 0) return;
    /* Signals that end a rank make its exit ours (by_us); CONT, USR1 and the like do not. */
    int ending = sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
    cJSON *msg = agent_reply_new("signal", id);
    cJSON_AddBoolToObject(msg, "ok", 1);
    cJSON *done = cJSON_AddArrayToObject(msg, "ranks");
    for (struct run_rank *r = run_ranks(); r; r = r->next)
        if (listed(list, r->rank) && run_rank_signal(r, sig, ending) == 0)
            cJSON_AddItemToArray(done, cJSON_CreateNumber(r->rank));
    agent_send(ag, msg);
}

void agent_run_stop_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long timeout;
    if (agent_req_int(ag, req, id, "term_timeout_ms", 0, TERM_TIMEOUT_MAX_MS, TERM_TIMEOUT_DEFAULT_MS,
                      &timeout) < 0)
        return;
    run_kill_all(SIGTERM);
    run_stop_wait(id, mono_ms() + timeout);
}

void agent_run_stacks_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(req, "rank");
    if (!is_int_in(rk, 0, INT_MAX)) {
        agent_send_error(ag, id, "\"rank\" must be a rank number");
        return;
    }
    struct run_rank *r = run_rank_find((int)rk->valuedouble);
    if (!r || r->have_status) {
        agent_send_error(ag, id, "rank %d is not running on this node", (int)rk->valuedouble);
        return;
    }
    struct strbuf raw, clean;
    strbuf_init(&raw);
    strbuf_init(&clean);
    const char *tool = stacks_collect(r->k.rank_pid, NULL, &raw);
    stream_sanitize(&clean, raw.buf ? raw.buf : "", raw.len);
    cJSON *msg = agent_reply_new("stacks", id);
    cJSON_AddNumberToObject(msg, "rank", r->rank);
    cJSON_AddNumberToObject(msg, "pid", r->k.rank_pid);
    cJSON_AddStringToObject(msg, "tool", tool);
    cJSON_AddStringToObject(msg, "text", clean.buf ? clean.buf : "");
    agent_send(ag, msg);
    strbuf_done(&raw);
    strbuf_done(&clean);
    run_schedule();
}

void agent_run_ping_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    (void)req;
    run_heartbeat_start();
    agent_send(ag, agent_reply_new("pong", id));
    run_schedule();
}
