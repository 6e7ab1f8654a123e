/* A spawn request of ddptop-agent, checked whole (a bad one starts nothing), the forking of
 * one of its ranks' keepers, and the request's answer. Forking: the rank's environment (the
 * request's env, ddptop's defaults where the node sets none, the agent's own
 * TORCHELASTIC_ERROR_FILE and flight recorder directory) and its error file. A leaf: a forked
 * keeper goes back as a handle (struct rank_handle), and agent_ranks.c alone decides what a
 * rank is from then on (starting, started, failed), when the next batch is forked and when
 * "spawned" goes; here the request only records what became of each rank (its slot) and says
 * it in the answer. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_envdefault.h"
#include "agent_torchenv.h"
#include "agent_files.h"
#include "agent_nodedir.h"
#include "agent_ranks_int.h"
#include "util/util.h"
#include "wire/protocol.h"

extern char **environ;

#define SPAWN_MAX_RANKS 1024
#define ERROR_FILE_VAR "TORCHELASTIC_ERROR_FILE"

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
        if (!cJSON_IsObject(o) || !ranks_is_int_in(rk, 0, INT_MAX)) {
            agent_send_error(ag, id, "ranks[%d] must be an object with \"rank\", an integer from 0 to %d",
                             i, INT_MAX);
            return -1;
        }
        for (const cJSON *p = ranks->child; p != o; p = p->next)
            if (rank_number(cJSON_GetObjectItemCaseSensitive(p, "rank")) == rank_number(rk)) {
                agent_send_error(ag, id, "rank %d appears twice in \"ranks\"", rank_number(rk));
                return -1;
            }
        if (env && !cJSON_IsObject(env)) {
            agent_send_error(ag, id, "ranks[%d].env must be an object of strings", i);
            return -1;
        }
        const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(o, "env_default");
        if (dflt && !cJSON_IsObject(dflt)) {
            agent_send_error(ag, id, "ranks[%d].env_default must be an object of strings", i);
            return -1;
        }
        cJSON_ArrayForEach(e, dflt) {
            if (!e->string[0] || strchr(e->string, '=') || !cJSON_IsString(e)) {
                agent_send_error(ag, id, "ranks[%d].env_default.%.64s must be a variable name with a string",
                                 i, e->string);
                return -1;
            }
        }
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(o, "env_old_torch");
        if (old && !cJSON_IsObject(old)) {
            agent_send_error(ag, id, "ranks[%d].env_old_torch must be an object of strings", i);
            return -1;
        }
        cJSON_ArrayForEach(e, old) {
            if (!e->string[0] || strchr(e->string, '=') || !cJSON_IsString(e)) {
                agent_send_error(ag, id, "ranks[%d].env_old_torch.%.64s must be a variable name with a string",
                                 i, e->string);
                return -1;
            }
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

/* A variable the agent itself sets for a rank (value NULL: removes it). */
struct env_set {
    const char *key, *value;
};
#define ENV_SET_MAX 6

static int env_in_set(const char *entry, const struct env_set *set, size_t n_set, int is_key)
{
    for (size_t i = 0; i < n_set; i++)
        if (is_key ? strcmp(entry, set[i].key) == 0 : env_key_is(entry, set[i].key)) return 1;
    return 0;
}

/* The rank's environment: the agent's, with the request's env applied (null removes), then
 * the agent's own settings (TORCHELASTIC_ERROR_FILE, a moved flight recorder directory). Strings
 * the vector owns are listed in owned (freed with free_env). */
static char **build_env(const cJSON *env, const struct env_set *set, size_t n_set, char ***owned)
{
    size_t n_env = 0, n_req = (size_t)cJSON_GetArraySize(env), k = 0, o = 0;
    while (environ && environ[n_env]) n_env++;
    char **v = xcalloc(n_env + n_req + n_set + 1, sizeof *v);
    *owned = xcalloc(n_req + n_set + 1, sizeof **owned);
    for (size_t i = 0; i < n_env; i++) {
        int drop = env_in_set(environ[i], set, n_set, 0);
        const cJSON *e;
        cJSON_ArrayForEach(e, env) drop = drop || env_key_is(environ[i], e->string);
        if (!drop) v[k++] = environ[i];
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, env) {
        if (!cJSON_IsString(e) || env_in_set(e->string, set, n_set, 1)) continue;
        int dup = 0; /* cJSON keeps duplicate keys; the last one wins, as in a shell */
        for (const cJSON *f = e->next; f; f = f->next) dup = dup || strcmp(f->string, e->string) == 0;
        if (!dup) v[k++] = (*owned)[o++] = xasprintf("%s=%s", e->string, e->valuestring);
    }
    for (size_t i = 0; i < n_set; i++)
        if (set[i].value) v[k++] = (*owned)[o++] = xasprintf("%s=%s", set[i].key, set[i].value);
    return v;
}

/* The flight recorder's dump prefixes (both names): kept, or moved out of a directory that is
 * not ours alone (agent_files_prepare). With nowhere private to go, dumping is turned off
 * rather than left where others reach it. note gets the first reason. */
static size_t trace_env(const cJSON *env, struct env_set *set, char **moved, char *note, size_t notelen)
{
    static const char *const vars[] = { FILES_TRACE_VAR, FILES_TRACE_VAR_NEW };
    static const char *const off[] = { "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_ON_TIMEOUT" };
    size_t n = 0;
    int dump_off = 0;
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, vars[i]);
        char why[600] = "";
        if (!cJSON_IsString(v)) continue;
        moved[i] = agent_files_prepare(v->valuestring, why, sizeof why);
        if (why[0] && !note[0]) snprintf(note, notelen, "%s", why);
        if (!moved[i]) continue;
        set[n++] = (struct env_set){ vars[i], moved[i][0] ? moved[i] : NULL };
        dump_off = dump_off || !moved[i][0];
    }
    for (size_t i = 0; dump_off && i < 2; i++) set[n++] = (struct env_set){ off[i], "0" };
    return n;
}

static void free_env(char **v, char **owned)
{
    for (size_t i = 0; owned[i]; i++) free(owned[i]);
    free(owned);
    free(v);
}

int spawn_req_rank(const struct spawn_req *q, int i)
{
    return rank_number(cJSON_GetObjectItemCaseSensitive(q->ro[i], "rank"));
}

int spawn_fork(struct spawn_req *q, int i, struct rank_handle *h)
{
    char err[512];
    int rank = spawn_req_rank(q, i);
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(q->ro[i], "env");
    char why[512];
    *h = (struct rank_handle){ .error_file = NULL };
    /* The rank's error file: the controller's when its env names one (even null: then none),
     * else one in the agent's private directory, named after the attempt and the rank (never
     * a predictable name in a shared /tmp: agent_nodedir.h). */
    char *errfile = NULL, *no_dir = NULL;
    int ours = 0;
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(env, ERROR_FILE_VAR);
    if (cJSON_IsString(given)) {
        errfile = xstrdup(given->valuestring);
    } else if (!given) {
        const char *dir = agent_nodedir_own(why, sizeof why);
        if (dir) {
            errfile = xasprintf("%s/a%d-r%d.error.json", dir, q->attempt, rank);
            unlink(errfile);
            ours = 1;
        } else {
            no_dir = xasprintf("rank %d: %s; it runs without %s", rank, why, ERROR_FILE_VAR);
        }
    }
    /* PyTorch writes its flight recorder dump there without making the directory. */
    struct env_set set[ENV_SET_MAX];
    char *moved[2] = { NULL, NULL }, trace_note[600] = "";
    size_t n_set = trace_env(env, set, moved, trace_note, sizeof trace_note);
    if (ours) set[n_set++] = (struct env_set){ ERROR_FILE_VAR, errfile };
    char **owned;
    /* ddptop's defaults (NCCL_DEBUG) where the node sets none of them itself */
    cJSON *with_defaults = envdefault_apply(env, cJSON_GetObjectItemCaseSensitive(q->ro[i], "env_default"));
    /* NCCL_ASYNC_ERROR_HANDLING only for a torch that reads it (older than 2.2) */
    const cJSON *old_torch = cJSON_GetObjectItemCaseSensitive(q->ro[i], "env_old_torch");
    if (cJSON_IsObject(old_torch) && old_torch->child && !q->torch_asked) {
        q->torch = torchenv_node_torch();   /* files read, maybe python run: once, not per rank */
        q->torch_asked = 1;
    }
    cJSON *with_old = torchenv_apply(with_defaults ? with_defaults : env, old_torch, q->torch);
    char **envp = build_env(with_old ? with_old : with_defaults ? with_defaults : env, set, n_set, &owned);
    cJSON_Delete(with_old);
    cJSON_Delete(with_defaults);
    struct keeper_spec spec = { .argv = q->argv, .envp = envp, .workdir = q->workdir,
                                .start_timeout_ms = ranks_start_timeout_ms() };
    int64_t t0 = wall_ns();
    int rc = keeper_fork(&spec, &h->k, err, sizeof err);
    free_env(envp, owned);
    free(moved[0]);
    free(moved[1]);
    if (rc < 0) {
        q->slot[i].error = xstrdup(err);
        if (ours) unlink(errfile);
        free(errfile);
        free(no_dir);
        return -1;
    }
    h->error_file = errfile;
    h->error_file_ours = ours;
    h->spawn_wall_ns = t0;
    h->say[0] = no_dir;
    h->say[1] = trace_note[0] ? xasprintf("rank %d: %s", rank, trace_note) : NULL;
    return 0;
}

void spawn_refuse(struct spawn_req *q, int i, int pid)
{
    q->slot[i].error = xstrdup("this rank is still running on this node (stop it first)");
    q->slot[i].pid = pid;
}

int spawn_req_resolved(const struct spawn_req *q)
{
    if (q->next < q->n) return 0;
    for (int i = 0; i < q->n; i++)
        if (q->slot[i].r && q->slot[i].r->starting) return 0;
    return 1;
}

cJSON *spawn_req_answer(const struct spawn_req *q)
{
    cJSON *msg = agent_reply_new(WIRE_EV_SPAWNED, q->id);
    cJSON *out = cJSON_AddArrayToObject(msg, "ranks");
    for (int i = 0; i < q->n; i++) {
        const struct spawn_slot *sl = &q->slot[i];
        const struct agent_rank *r = sl->r;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", spawn_req_rank(q, i));
        if (r && !r->start_error) {
            cJSON_AddNumberToObject(o, "pid", r->k.rank_pid);
        } else {
            cJSON_AddStringToObject(o, "error", r ? r->start_error : sl->error);
            if (!r && sl->pid > 0) cJSON_AddNumberToObject(o, "pid", sl->pid);
        }
        cJSON_AddItemToArray(out, o);
    }
    return msg;
}

void spawn_req_free(struct spawn_req *q)
{
    if (!q) return;
    for (int i = 0; i < q->n; i++) free(q->slot[i].error);
    free(q->slot);
    for (char **a = q->argv; a && *a; a++) free(*a);
    free(q->argv);
    free(q->workdir);
    free(q->torch);
    free(q->ro);
    cJSON_Delete(q->ranks);
    cJSON_Delete(q->id);
    free(q);
}

void spawn_done(void)
{
    agent_files_done();
}

struct spawn_req *spawn_req_parse(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *argv = cJSON_GetObjectItemCaseSensitive(req, "argv"), *a;
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(req, "workdir");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(req, "ranks"), *ro;
    long attempt;
    int argc = cJSON_GetArraySize(argv), i = 0;

    if (!cJSON_IsArray(argv) || argc < 1) {
        agent_send_error(ag, id, "\"argv\" must be a non-empty array of strings");
        return NULL;
    }
    cJSON_ArrayForEach(a, argv) {
        if (!cJSON_IsString(a) || (i++ == 0 && !a->valuestring[0])) {
            agent_send_error(ag, id, "\"argv\" must be a non-empty array of strings");
            return NULL;
        }
    }
    if (wd && !cJSON_IsString(wd) && !cJSON_IsNull(wd)) {
        agent_send_error(ag, id, "\"workdir\" must be a string");
        return NULL;
    }
    if (agent_req_int(ag, req, id, "attempt", 0, INT_MAX, 0, &attempt) < 0 ||
        spawn_check_ranks(ag, id, ranks) < 0)
        return NULL;

    struct spawn_req *q = xcalloc(1, sizeof *q);
    q->id = id ? cJSON_Duplicate(id, 1) : NULL;
    q->ranks = cJSON_Duplicate(ranks, 1);
    q->argv = xcalloc((size_t)argc + 1, sizeof *q->argv);
    i = 0;
    cJSON_ArrayForEach(a, argv) q->argv[i++] = xstrdup(a->valuestring);
    q->workdir = cJSON_IsString(wd) ? xstrdup(wd->valuestring) : NULL;
    q->attempt = (int)attempt;
    q->n = cJSON_GetArraySize(q->ranks);
    q->ro = xcalloc((size_t)q->n, sizeof *q->ro);
    q->slot = xcalloc((size_t)q->n, sizeof *q->slot);
    i = 0;
    cJSON_ArrayForEach(ro, q->ranks) q->ro[i++] = ro;
    return q;
}
