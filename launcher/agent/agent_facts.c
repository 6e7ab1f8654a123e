/* The agent's "facts" answer: see agent_facts.h. Every value we cannot learn is JSON null, never
 * an empty string or zero, so the parity check can tell "unknown" from "different". */
#include "agent_facts.h"

#include <ctype.h>
#include <gnu/libc-version.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent_exec.h"
#include "agent_gpu.h"
#include "agent_ifaces.h"
#include "util/sha256.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/protocol.h"

#define PYTHON_TIMEOUT_MS 3000
/* A cold `import torch` reads hundreds of MB of shared libraries, often from NFS. */
#define TORCH_TIMEOUT_MS 8000

extern char **environ;

static void add_str(cJSON *o, const char *key, const char *v)
{
    if (v && v[0]) cJSON_AddStringToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static void add_owned(cJSON *o, const char *key, char *v)
{
    add_str(o, key, v);
    free(v);
}

/* PRETTY_NAME from os-release, unquoted ("Debian GNU/Linux 12 (bookworm)"). */
static char *os_pretty_name(void)
{
    const char *files[] = { "/etc/os-release", "/usr/lib/os-release" };
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        if (!f) continue;
        char line[512];
        char *res = NULL;
        while (!res && fgets(line, sizeof line, f)) {
            if (strncmp(line, "PRETTY_NAME=", 12) != 0) continue;
            char *v = line + 12, *o = v;
            v[strcspn(v, "\n")] = '\0';
            char q = (*v == '"' || *v == '\'') ? *v++ : 0;
            for (; *v && *v != q; v++) {
                if (q == '"' && *v == '\\' && v[1]) v++;
                *o++ = *v;
            }
            *o = '\0';
            res = xstrdup(agent_exec_clean(line + 12));
        }
        fclose(f);
        if (res && res[0]) return res;
        free(res);
    }
    return NULL;
}

/* The value a rank would see: the request's env wins over the agent's own environment. A null
 * in the request's env means "unset". Returns NULL when unset. */
static const char *effective_env(const cJSON *env, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, name);
    if (v) return cJSON_IsString(v) ? v->valuestring : NULL;
    return getenv(name);
}

static cJSON *nccl_env(const cJSON *env)
{
    cJSON *o = cJSON_CreateObject();
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "NCCL_", 5) != 0 || !eq) continue;
        char *key = xstrndup(*e, (size_t)(eq - *e));
        if (!cJSON_GetObjectItemCaseSensitive(o, key)) cJSON_AddStringToObject(o, key, eq + 1);
        free(key);
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, env) {
        if (!v->string || strncmp(v->string, "NCCL_", 5) != 0) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(o, v->string);
        if (cJSON_IsString(v)) cJSON_AddStringToObject(o, v->string, v->valuestring);
    }
    return o;
}

static void add_hash(cJSON *o, const char *key, const char *path)
{
    char hex[65];
    if (path && sha256_file_hex(path, hex) == 0) cJSON_AddStringToObject(o, key, hex);
    else cJSON_AddNullToObject(o, key);
}

static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && h[0]) return h;
    struct passwd *pw = getpwuid(getuid());
    return pw ? pw->pw_dir : NULL;
}

/* NCCL reads /etc/nccl.conf, then $NCCL_CONF_FILE or else ~/.nccl.conf. */
static cJSON *nccl_conf(const cJSON *env)
{
    cJSON *o = cJSON_CreateObject();
    const char *home = home_dir();
    char *user = home ? xasprintf("%s/.nccl.conf", home) : NULL;
    add_hash(o, "/etc/nccl.conf", "/etc/nccl.conf");
    add_hash(o, "~/.nccl.conf", user);
    free(user);
    const char *conf = effective_env(env, "NCCL_CONF_FILE");
    if (conf && conf[0]) add_hash(o, conf, conf);
    return o;
}

static void add_cmd(cJSON *o, const char *cmd, const cJSON *env)
{
    char *path = cmd && cmd[0] ? agent_exec_resolve(cmd, effective_env(env, "PATH")) : NULL;
    char hex[65];
    add_str(o, "cmd_path", path);
    if (path && sha256_file_hex(path, hex) == 0) cJSON_AddStringToObject(o, "cmd_sha256", hex);
    else cJSON_AddNullToObject(o, "cmd_sha256");
    if (cmd && cmd[0] && !path)
        cJSON_AddStringToObject(o, "cmd_error", strchr(cmd, '/') ? "no such file" : "not found on PATH");
    else if (path && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "cmd_sha256")))
        cJSON_AddStringToObject(o, "cmd_error", "cannot be read");
    free(path);
}

/* The probe programs run side by side: facts cost the slowest of them, not their sum. */
enum { PROBE_PYTHON, PROBE_TORCH, PROBE_NVSMI_QUERY, PROBE_NVSMI_BANNER, PROBE_COUNT };

static char *const python_argv[] = { "python3", "--version", NULL };
/* The installed package's version from its metadata: reading it costs a few ms, where
 * `import torch` loads hundreds of MB of libraries (seconds on a GPU node); import only when
 * the metadata is missing (a source build, or Python before 3.8). */
static char *const torch_argv[] = {
    "python3", "-c",
    "try:\n import importlib.metadata as m; print(m.version('torch'))\n"
    "except Exception:\n import torch; print(torch.__version__)",
    NULL,
};

/* Runs the probes; returns how many ran (the nvidia-smi pair only when it is on PATH). */
static int run_probes(struct agent_probe p[PROBE_COUNT])
{
    int n = PROBE_NVSMI_QUERY;
    p[PROBE_PYTHON] = (struct agent_probe){ .argv = python_argv, .timeout_ms = PYTHON_TIMEOUT_MS,
                                            .merge_stderr = 1 };
    p[PROBE_TORCH] = (struct agent_probe){ .argv = torch_argv, .timeout_ms = TORCH_TIMEOUT_MS };
    if (agent_exec_on_path("nvidia-smi", NULL)) {
        agent_gpu_probes(&p[PROBE_NVSMI_QUERY], &p[PROBE_NVSMI_BANNER]);
        n = PROBE_COUNT;
    }
    agent_exec_run_all(p, n);
    return n;
}

/* "Python 3.11.2" -> "3.11.2"; torch.__version__ only when python3 itself ran. */
static void add_python(cJSON *o, struct agent_probe *py, struct agent_probe *tp)
{
    char *ver = NULL, *torch = NULL;
    if (py->status == 0 && py->out.buf) {
        char *s = agent_exec_clean(py->out.buf);
        if (strncmp(s, "Python ", 7) == 0 && isdigit((unsigned char)s[7])) ver = s + 7;
    }
    if (ver && tp->status == 0 && tp->out.buf) {
        /* The version is the last line: imports may print banners before it. */
        char *s = tp->out.buf;
        size_t n = strlen(s);
        while (n && s[n - 1] == '\n') s[--n] = '\0';
        char *nl = strrchr(s, '\n');
        s = agent_exec_clean(nl ? nl + 1 : s);
        if (isdigit((unsigned char)s[0])) torch = s;
    }
    add_str(o, "python3", ver);
    add_str(o, "torch", torch);
}

cJSON *agent_facts_collect(const char *cmd, const cJSON *env)
{
    cJSON *o = cJSON_CreateObject();
    struct utsname u;
    int have_u = uname(&u) == 0;
    const char *cuda_home = effective_env(env, "CUDA_HOME");
    char *nccl_path = NULL;
    struct agent_probe probes[PROBE_COUNT];
    int nprobes = run_probes(probes);

    cJSON_AddStringToObject(o, "ddptop_version", DDPTOP_VERSION);
    add_owned(o, "os", os_pretty_name());
    add_str(o, "kernel", have_u ? u.release : NULL);
    add_str(o, "arch", have_u ? u.machine : NULL);
    add_str(o, "libc", gnu_get_libc_version());
    add_owned(o, "nccl", agent_gpu_nccl_version(cuda_home, &nccl_path));
    add_owned(o, "nccl_path", nccl_path);
    add_owned(o, "cuda_runtime", agent_gpu_cudart_version(cuda_home));
    add_python(o, &probes[PROBE_PYTHON], &probes[PROBE_TORCH]);
    cJSON_AddItemToObject(o, "nccl_env", nccl_env(env));
    /* Set but empty is a value (it hides every GPU), not an unknown. */
    const char *cvd = effective_env(env, "CUDA_VISIBLE_DEVICES");
    if (cvd) cJSON_AddStringToObject(o, "cuda_visible_devices", cvd);
    else cJSON_AddNullToObject(o, "cuda_visible_devices");
    cJSON_AddItemToObject(o, "nccl_conf", nccl_conf(env));
    add_cmd(o, cmd, env);
    cJSON_AddItemToObject(o, "gpu", nprobes == PROBE_COUNT
        ? agent_gpu_facts(&probes[PROBE_NVSMI_QUERY], &probes[PROBE_NVSMI_BANNER])
        : agent_gpu_facts(NULL, NULL));
    cJSON_AddItemToObject(o, "ifaces", agent_ifaces_list());
    cJSON_AddItemToObject(o, "ib", agent_ifaces_ib(NULL));
    for (int i = 0; i < nprobes; i++) strbuf_done(&probes[i].out);
    return o;
}

void agent_facts_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(req, "env");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    if (env && !cJSON_IsNull(env)) {
        const cJSON *v;
        int bad = !cJSON_IsObject(env);
        if (!bad)
            cJSON_ArrayForEach(v, env)
                if (!cJSON_IsString(v) && !cJSON_IsNull(v)) bad = 1;
        if (bad) {
            agent_send_error(ag, id, "facts: \"env\" must be an object of strings");
            return;
        }
    } else {
        env = NULL;
    }
    if (cmd && !cJSON_IsString(cmd) && !cJSON_IsNull(cmd)) {
        agent_send_error(ag, id, "facts: \"cmd\" must be a string");
        return;
    }
    cJSON *facts = agent_facts_collect(cJSON_IsString(cmd) ? cmd->valuestring : NULL, env);
    cJSON *msg = agent_reply_new(WIRE_EV_FACTS, id);
    cJSON *item = facts->child;
    /* Move the facts' members after "ev" and "id" so the answer reads in protocol order. */
    while (item) {
        cJSON *next = item->next;
        cJSON_AddItemToObject(msg, item->string, cJSON_DetachItemViaPointer(facts, item));
        item = next;
    }
    cJSON_Delete(facts);
    agent_send(ag, msg);
}
