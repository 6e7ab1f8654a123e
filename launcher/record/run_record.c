/* The takeover record (run_record.h): JSON, read back with every member checked, so that a
 * damaged file is an error naming it, never a crash or a half-adopted run. */
#include "run_record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "logw.h"
#include "util/util.h"

#define RECORD_MAX (16u << 20)

static cJSON *strings(char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

char *run_record_json(const struct run_record *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", RUN_RECORD_VERSION);
    cJSON_AddItemToObject(o, "argv", strings(r->argv, r->argc));
    cJSON_AddStringToObject(o, "cwd", r->cwd ? r->cwd : "/");
    if (r->adoptable) {
        cJSON_AddItemToObject(o, "env", strings(r->env, r->n_env));
        cJSON_AddStringToObject(o, "token", r->token ? r->token : "");
    }
    cJSON_AddNumberToObject(o, "attempt", r->attempt);
    cJSON_AddStringToObject(o, "state", r->state ? r->state : "?");
    if (r->after) cJSON_AddStringToObject(o, "after", r->after);
    else cJSON_AddNullToObject(o, "after");
    cJSON_AddBoolToObject(o, "auto_restart", r->auto_restart);
    cJSON_AddNumberToObject(o, "agent_grace_s", r->agent_grace_s);
    cJSON_AddItemToObject(o, "hosts", strings(r->hosts, r->n_nodes));
    cJSON *rpn = cJSON_AddArrayToObject(o, "ranks_per_node");
    for (size_t i = 0; i < r->n_nodes; i++) cJSON_AddItemToArray(rpn, cJSON_CreateNumber(r->ranks_per_node[i]));
    cJSON *base = cJSON_AddArrayToObject(o, "rank_base");
    for (size_t i = 0; i < r->n_ranks; i++) cJSON_AddItemToArray(base, cJSON_CreateNumber((double)r->rank_base[i]));
    if (r->slurm_jobid) cJSON_AddStringToObject(o, "slurm_jobid", r->slurm_jobid);
    else cJSON_AddNullToObject(o, "slurm_jobid");
    cJSON_AddBoolToObject(o, "slurm_release", r->slurm_release);
    cJSON_AddNumberToObject(o, "written_ms", (double)(r->written_ns / 1000000));
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) util_fatal("out of memory printing the run's record");
    return text;
}

void run_record_free(struct run_record *r)
{
    for (size_t i = 0; i < r->argc; i++) free(r->argv[i]);
    for (size_t i = 0; i < r->n_env; i++) free(r->env[i]);
    for (size_t i = 0; r->hosts && r->hosts[i]; i++) free(r->hosts[i]);
    free(r->hosts);
    free(r->argv);
    free(r->env);
    free(r->cwd);
    free(r->token);
    free(r->state);
    free(r->after);
    free(r->ranks_per_node);
    free(r->rank_base);
    free(r->slurm_jobid);
    memset(r, 0, sizeof *r);
}

static int take_strings(const cJSON *a, char ***out, size_t *n)
{
    const cJSON *e;
    if (!cJSON_IsArray(a)) return -1;
    size_t k = (size_t)cJSON_GetArraySize(a);
    *out = xcalloc(k + 1, sizeof **out);
    *n = 0;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsString(e)) return -1;
        (*out)[(*n)++] = xstrdup(e->valuestring);
    }
    return 0;
}

static bool int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi;
}

int run_record_read(const char *run_dir, struct run_record *r, char *err, size_t errlen)
{
    char *path = xasprintf("%s/%s", run_dir, RUN_RECORD_FILE);
    memset(r, 0, sizeof *r);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > RECORD_MAX) {
        if (fd < 0 && errno == ENOENT)
            snprintf(err, errlen, "%s does not exist: the run was started by a ddptop that cannot be taken "
                     "over, or before its first launch", path);
        else
            snprintf(err, errlen, "cannot read %s: %s", path, fd < 0 ? strerror(errno) : "not a small regular file");
        if (fd >= 0) close(fd);
        free(path);
        return -1;
    }
    /* It says what to run: only a record no one else could have written or put there */
    struct stat dst;
    const char *unsafe = NULL;
    if (st.st_uid != geteuid() || (st.st_mode & 022)) unsafe = "it is not yours alone (its owner or mode)";
    else if (stat(run_dir, &dst) != 0 || dst.st_uid != geteuid() || (dst.st_mode & 022))
        unsafe = "its directory is not yours alone: others could replace it (chmod go-w it)";
    if (unsafe) {
        snprintf(err, errlen, "%s: %s; ddptop attach does not run what it says", path, unsafe);
        close(fd);
        free(path);
        return -1;
    }
    char *text = xmalloc((size_t)st.st_size + 1);
    ssize_t got = read(fd, text, (size_t)st.st_size);
    close(fd);
    text[got > 0 ? got : 0] = '\0';
    cJSON *o = cJSON_Parse(text);
    free(text);
    const char *bad = NULL;
    if (!cJSON_IsObject(o)) bad = "it is not a JSON object";
    else if (!int_in(cJSON_GetObjectItem(o, "version"), RUN_RECORD_VERSION, RUN_RECORD_VERSION))
        bad = "its version is not one this ddptop reads";
    else if (take_strings(cJSON_GetObjectItem(o, "argv"), &r->argv, &r->argc) < 0) bad = "\"argv\" is not a list of strings";
    else if (!!cJSON_GetObjectItem(o, "env") != !!cJSON_GetObjectItem(o, "token"))
        bad = "it holds one of \"env\" and \"token\" without the other";
    else if ((r->adoptable = cJSON_GetObjectItem(o, "env") != NULL) &&
             take_strings(cJSON_GetObjectItem(o, "env"), &r->env, &r->n_env) < 0)
        bad = "\"env\" is not a list of strings";
    else if (!cJSON_IsString(cJSON_GetObjectItem(o, "cwd")) || !cJSON_IsString(cJSON_GetObjectItem(o, "state")) ||
             (r->adoptable && !cJSON_IsString(cJSON_GetObjectItem(o, "token"))))
        bad = "\"cwd\", \"token\" or \"state\" is missing";
    else if (!int_in(cJSON_GetObjectItem(o, "attempt"), 0, 1e6) ||
             !int_in(cJSON_GetObjectItem(o, "agent_grace_s"), 0, 7 * 86400))
        bad = "\"attempt\" or \"agent_grace_s\" is out of range";
    if (!bad) {
        r->cwd = xstrdup(cJSON_GetObjectItem(o, "cwd")->valuestring);
        if (r->adoptable) r->token = xstrdup(cJSON_GetObjectItem(o, "token")->valuestring);
        r->state = xstrdup(cJSON_GetObjectItem(o, "state")->valuestring);
        const char *after = cJSON_GetStringValue(cJSON_GetObjectItem(o, "after"));
        r->after = after ? xstrdup(after) : NULL;
        r->auto_restart = cJSON_IsTrue(cJSON_GetObjectItem(o, "auto_restart"));
        r->attempt = (int)cJSON_GetObjectItem(o, "attempt")->valuedouble;
        r->agent_grace_s = (int)cJSON_GetObjectItem(o, "agent_grace_s")->valuedouble;
        const cJSON *rpn = cJSON_GetObjectItem(o, "ranks_per_node"), *base = cJSON_GetObjectItem(o, "rank_base"), *e;
        size_t total = 0;
        if (!cJSON_IsArray(rpn) || cJSON_GetArraySize(rpn) < 1 || cJSON_GetArraySize(rpn) > 1000000) {
            bad = "\"ranks_per_node\" is not a list of nodes";
        } else {
            r->n_nodes = (size_t)cJSON_GetArraySize(rpn);
            r->ranks_per_node = xcalloc(r->n_nodes, sizeof *r->ranks_per_node);
            size_t i = 0;
            cJSON_ArrayForEach(e, rpn) {
                if (!int_in(e, 0, 4096)) bad = "\"ranks_per_node\" holds a bad count";
                else total += (size_t)(r->ranks_per_node[i] = (int)e->valuedouble);
                i++;
            }
        }
        size_t nh = 0;
        if (!bad && (take_strings(cJSON_GetObjectItem(o, "hosts"), &r->hosts, &nh) < 0 || nh != r->n_nodes))
            bad = "\"hosts\" does not match \"ranks_per_node\"";
        if (!bad && (!cJSON_IsArray(base) || (size_t)cJSON_GetArraySize(base) != total)) bad = "\"rank_base\" does not match the ranks";
        if (!bad) {
            r->n_ranks = total;
            r->rank_base = xcalloc(total ? total : 1, sizeof *r->rank_base);
            size_t i = 0;
            cJSON_ArrayForEach(e, base) {
                if (!int_in(e, 0, 9.0e15)) bad = "\"rank_base\" holds a bad number";
                else r->rank_base[i] = (uint64_t)e->valuedouble;
                i++;
            }
        }
        const char *job = cJSON_GetStringValue(cJSON_GetObjectItem(o, "slurm_jobid"));
        r->slurm_jobid = job ? xstrdup(job) : NULL;
        r->slurm_release = cJSON_IsTrue(cJSON_GetObjectItem(o, "slurm_release"));
        const cJSON *w = cJSON_GetObjectItem(o, "written_ms");
        r->written_ns = int_in(w, 0, 1e13) ? (int64_t)w->valuedouble * 1000000 : 0;
    }
    cJSON_Delete(o);
    if (bad) {
        snprintf(err, errlen, "%s cannot be used: %s", path, bad);
        run_record_free(r);
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

int64_t run_record_last_alive(const char *run_dir)
{
    const char *names[] = {LOG_INDEX_FILE, RUN_RECORD_FILE};
    int64_t best = 0;
    for (int i = 0; i < 2; i++) {
        char *p = xasprintf("%s/%s", run_dir, names[i]);
        struct stat st;
        if (stat(p, &st) == 0) {
            int64_t t = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            if (t > best) best = t;
        }
        free(p);
    }
    return best;
}

int run_record_forget(const char *run_dir, const char *state, char *err, size_t errlen)
{
    struct run_record r;
    if (run_record_read(run_dir, &r, err, errlen) < 0) return -1;
    if (!r.adoptable) {
        run_record_free(&r);
        return 0;
    }
    char *path = xasprintf("%s/%s", run_dir, RUN_RECORD_FILE);
    struct stat st;
    int rc = stat(path, &st);
    for (size_t i = 0; i < r.n_env; i++) {
        /* not left in freed memory either */
        explicit_bzero(r.env[i], strlen(r.env[i]));
        free(r.env[i]);
    }
    free(r.env);
    explicit_bzero(r.token, strlen(r.token));
    free(r.token);
    free(r.state);
    r.env = NULL;
    r.n_env = 0;
    r.token = NULL;
    r.adoptable = false;
    r.state = xstrdup(state);
    char *text = run_record_json(&r);
    run_record_free(&r);
    if (rc == 0) rc = util_replace_file(path, text, strlen(text), 0600, true);
    /* its time says when the run's controller was last alive: a rewrite is not a sign of life */
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    if (rc == 0) utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW);
    else snprintf(err, errlen, "cannot rewrite %s: %s", path, strerror(errno));
    free(text);
    free(path);
    return rc == 0 ? 0 : -1;
}
