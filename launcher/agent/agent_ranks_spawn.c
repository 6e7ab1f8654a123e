/* The spawn request of ddptop-agent, without blocking the loop: the request is checked whole
 * (a bad one starts nothing), then its keepers are forked in batches of at most SPAWN_SLICE_MS
 * per loop pass, and each keeper's first message (the exec succeeded or failed) arrives on its
 * status watch like any later one. "spawned" goes out once every rank of the request started or
 * failed, so a 1024-rank spawn never holds the status heartbeat back. A rank that could not
 * start (exec or chdir failed, keeper gone, start timeout) gets its error in "spawned", a line
 * on its stderr and, after "spawned", an exit with code 127. */
#include "agent_ranks.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_envdefault.h"
#include "agent_files.h"
#include "agent_nodedir.h"
#include "agent_ranks_int.h"
#include "util/util.h"
#include "wire/protocol.h"

extern char **environ;

#define SPAWN_START_TIMEOUT_MS 10000
#define SPAWN_MAX_RANKS 1024
/* Forking keepers stops for this pass after this long: the loop (heartbeat, output) goes on. */
#define SPAWN_SLICE_MS 40
#define ERROR_FILE_VAR "TORCHELASTIC_ERROR_FILE"

struct spawn_slot {
    const cJSON *ro;          /* the rank's object in the request (in sp->ranks) */
    struct agent_rank *r;       /* NULL when refused or not forked yet */
    char *error;              /* refused before a keeper started: "still running", fork */
    int pid;                  /* the running rank's pid for "still running" */
};

struct rank_spawn {
    cJSON *id;                /* copy of the request's id, or NULL */
    cJSON *ranks;             /* copy of the request's ranks */
    char **argv;
    char *workdir;
    long attempt;
    int n, next;              /* slots, and the next one to fork */
    int doomed;               /* a stop came: ranks forked from now on are killed once started */
    struct spawn_slot *slot;
    struct rank_spawn *next_sp;
};

static struct {
    struct agent *ag;
    struct rank_spawn *list;
} sps;

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

/* Forks one rank's keeper (or refuses the rank). */
static void spawn_fork_one(struct rank_spawn *sp, struct spawn_slot *sl)
{
    int rank = rank_number(cJSON_GetObjectItemCaseSensitive(sl->ro, "rank"));
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(sl->ro, "env");
    char err[512];
    struct agent_rank *old = rank_find(rank);
    if (old) {
        sl->error = xstrdup("this rank is still running on this node (stop it first)");
        sl->pid = old->k.rank_pid;
        return;
    }
    /* The rank's error file: the controller's when its env names one (even null: then none),
     * else one in the agent's private directory, named after the attempt and the rank (never
     * a predictable name in a shared /tmp: agent_nodedir.h). */
    char *errfile = NULL, *no_dir = NULL;
    int ours = 0;
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(env, ERROR_FILE_VAR);
    if (cJSON_IsString(given)) {
        errfile = xstrdup(given->valuestring);
    } else if (!given) {
        const char *dir = agent_nodedir_own(err, sizeof err);
        if (dir) {
            errfile = xasprintf("%s/a%ld-r%d.error.json", dir, sp->attempt, rank);
            unlink(errfile);
            ours = 1;
        } else {
            no_dir = xasprintf("rank %d: %s; it runs without %s", rank, err, ERROR_FILE_VAR);
        }
    }
    /* PyTorch writes its flight recorder dump there without making the directory. */
    struct env_set set[ENV_SET_MAX];
    char *moved[2] = { NULL, NULL }, trace_note[600] = "";
    size_t n_set = trace_env(env, set, moved, trace_note, sizeof trace_note);
    if (ours) set[n_set++] = (struct env_set){ ERROR_FILE_VAR, errfile };
    char **owned;
    /* ddptop's defaults (NCCL_DEBUG) where the node sets none of them itself */
    cJSON *with_defaults = envdefault_apply(env, cJSON_GetObjectItemCaseSensitive(sl->ro, "env_default"));
    char **envp = build_env(with_defaults ? with_defaults : env, set, n_set, &owned);
    cJSON_Delete(with_defaults);
    struct keeper_spec spec = { .argv = sp->argv, .envp = envp, .workdir = sp->workdir,
                                .start_timeout_ms = SPAWN_START_TIMEOUT_MS };
    struct keeper k;
    int64_t t0 = wall_ns();
    int rc = keeper_fork(&spec, &k, err, sizeof err);
    free_env(envp, owned);
    free(moved[0]);
    free(moved[1]);
    if (rc < 0) {
        sl->error = xstrdup(err);
        if (ours) unlink(errfile);
        free(errfile);
        free(no_dir);
        return;
    }
    sl->r = rank_add_starting(rank, (int)sp->attempt, &k, errfile, ours, t0, sp,
                                  mono_ms() + SPAWN_START_TIMEOUT_MS);
    if (no_dir) rank_say(sl->r, no_dir);
    if (trace_note[0]) {
        char *text = xasprintf("rank %d: %s", rank, trace_note);
        rank_say(sl->r, text);
        free(text);
    }
    free(no_dir);
    if (sp->doomed) rank_signal(sl->r, SIGKILL, 1);
}

static void spawn_free(struct rank_spawn *sp)
{
    for (int i = 0; i < sp->n; i++) free(sp->slot[i].error);
    for (char **a = sp->argv; a && *a; a++) free(*a);
    free(sp->argv);
    free(sp->workdir);
    free(sp->slot);
    cJSON_Delete(sp->ranks);
    cJSON_Delete(sp->id);
    free(sp);
}

void ranks_spawn_first_msg(struct agent_rank *r, const struct keeper_msg *m)
{
    char err[512];
    struct rank_spawn *sp = r->spawn;
    if (m->kind == KEEPER_STARTED) {
        r->starting = 0;
        r->k.rank_pid = m->a;
        oom_follow(&r->cg, r->k.rank_pid);
        /* A stop came while it started: the signal it missed, and the end is ours. */
        if (r->doomed) kill(-r->k.rank_pid, SIGKILL);
        return;
    }
    if (m->kind == KEEPER_FAILED && sp)
        keeper_failed_text(sp->argv[0], sp->workdir, m, err, sizeof err);
    else
        snprintf(err, sizeof err, "its keeper process reported nothing sensible before the rank started");
    rank_start_failed(r, err);
}

void ranks_spawn_check_timeout(struct agent_rank *r, int64_t now_ms)
{
    char err[512];
    if (!r->starting || now_ms < r->start_deadline_ms) return;
    snprintf(err, sizeof err, "'%s' did not start within %d ms (its keeper was killed)",
             r->spawn ? r->spawn->argv[0] : "?", SPAWN_START_TIMEOUT_MS);
    /* Its rank follows by PDEATHSIG; the keeper is reaped at its status pipe's end. */
    kill(r->k.keeper_pid, SIGKILL);
    rank_start_failed(r, err);
}

/* Answers the request once every slot is forked and resolved, then lets its ranks' exits out. */
void ranks_spawn_resolved(struct rank_spawn *sp)
{
    if (sp->next < sp->n) return;
    for (int i = 0; i < sp->n; i++)
        if (sp->slot[i].r && sp->slot[i].r->starting) return;
    cJSON *msg = agent_reply_new(WIRE_EV_SPAWNED, sp->id);
    cJSON *out = cJSON_AddArrayToObject(msg, "ranks");
    for (int i = 0; i < sp->n; i++) {
        struct spawn_slot *sl = &sp->slot[i];
        struct agent_rank *r = sl->r;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", rank_number(cJSON_GetObjectItemCaseSensitive(sl->ro, "rank")));
        if (r && !r->start_error) {
            cJSON_AddNumberToObject(o, "pid", r->k.rank_pid);
        } else {
            cJSON_AddStringToObject(o, "error", r ? r->start_error : sl->error);
            if (!r && sl->pid > 0) cJSON_AddNumberToObject(o, "pid", sl->pid);
        }
        cJSON_AddItemToArray(out, o);
    }
    agent_send(sps.ag, msg);
    for (struct rank_spawn **pp = &sps.list; *pp; pp = &(*pp)->next_sp)
        if (*pp == sp) {
            *pp = sp->next_sp;
            break;
        }
    /* Announcing may free a rank: collect them first. */
    int n = 0;
    struct agent_rank **rs = xcalloc((size_t)sp->n + 1, sizeof *rs);
    for (int i = 0; i < sp->n; i++)
        if (sp->slot[i].r) rs[n++] = sp->slot[i].r;
    spawn_free(sp);
    for (int i = 0; i < n; i++) {
        rs[i]->spawn = NULL;
        rank_announce(rs[i]);
    }
    free(rs);
}

void ranks_spawn_pump(void)
{
    int64_t until = mono_ms() + SPAWN_SLICE_MS;
    for (struct rank_spawn *sp = sps.list, *next; sp; sp = next) {
        next = sp->next_sp;
        while (sp->next < sp->n && mono_ms() < until) {
            spawn_fork_one(sp, &sp->slot[sp->next]);
            sp->next++;
        }
        if (sp->next < sp->n) return;
        ranks_spawn_resolved(sp); /* may free sp */
    }
}

int64_t ranks_spawn_deadline(void)
{
    for (struct rank_spawn *sp = sps.list; sp; sp = sp->next_sp)
        if (sp->next < sp->n) return mono_ms();
    return 0;
}

void ranks_spawn_doom(void)
{
    for (struct rank_spawn *sp = sps.list; sp; sp = sp->next_sp) sp->doomed = 1;
}

void ranks_spawn_done(void)
{
    while (sps.list) {
        struct rank_spawn *sp = sps.list;
        sps.list = sp->next_sp;
        spawn_free(sp);
    }
    agent_files_done();
}

void agent_ranks_spawn_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *argv = cJSON_GetObjectItemCaseSensitive(req, "argv"), *a;
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(req, "workdir");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(req, "ranks"), *ro;
    long attempt;
    int argc = cJSON_GetArraySize(argv), i = 0;

    sps.ag = ag;
    ranks_heartbeat_start();
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
        spawn_check_ranks(ag, id, ranks) < 0 || ranks_link_config(req, id) < 0)
        return;

    struct rank_spawn *sp = xcalloc(1, sizeof *sp);
    sp->id = id ? cJSON_Duplicate(id, 1) : NULL;
    sp->ranks = cJSON_Duplicate(ranks, 1);
    sp->argv = xcalloc((size_t)argc + 1, sizeof *sp->argv);
    i = 0;
    cJSON_ArrayForEach(a, argv) sp->argv[i++] = xstrdup(a->valuestring);
    sp->workdir = cJSON_IsString(wd) ? xstrdup(wd->valuestring) : NULL;
    sp->attempt = attempt;
    sp->n = cJSON_GetArraySize(sp->ranks);
    sp->slot = xcalloc((size_t)sp->n, sizeof *sp->slot);
    i = 0;
    cJSON_ArrayForEach(ro, sp->ranks) sp->slot[i++].ro = ro;
    /* Later requests queue behind earlier ones, so ranks start in request order. */
    struct rank_spawn **pp = &sps.list;
    while (*pp) pp = &(*pp)->next_sp;
    *pp = sp;
    ranks_spawn_pump();
    ranks_schedule();
}
