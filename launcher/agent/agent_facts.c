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
#include "agent_nvml.h"
#include "agent_pycache.h"
#include "agent_pyver.h"
#include "util/sha256.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/protocol.h"

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
enum { PROBE_PYTHON, PROBE_NVSMI_QUERY, PROBE_NVSMI_BANNER, PROBE_COUNT };

/* One python3 for both versions (a start of python3 is most of the cost): its own first, then
 * torch.__version__ without importing torch (which loads hundreds of MB of libraries: seconds
 * on a GPU node). find_spec locates the package and its version.py holds the very string
 * torch.__version__ is; the package metadata (it scans every installed distribution), then the
 * import, only when that fails. "-" when there is no torch. */
static char *const python_argv[] = {
    "python3", "-c",
    "import sys\n"
    "print('Python %d.%d.%d' % sys.version_info[:3], flush=True)\n"
    "import importlib.util, os\n"
    "v = None\n"
    "try:\n"
    " s = importlib.util.find_spec('torch')\n"
    " for l in open(os.path.join(os.path.dirname(s.origin), 'version.py')):\n"
    "  if l.startswith('__version__'):\n"
    "   v = l.split('=', 1)[1].strip().strip('\\'\"'); break\n"
    "except Exception:\n"
    " pass\n"
    "if not v:\n"
    " try:\n"
    "  import importlib.metadata as m; v = m.version('torch')\n"
    " except Exception:\n"
    "  try:\n"
    "   import torch; v = torch.__version__\n"
    "  except Exception:\n"
    "   v = '-'\n"
    "print(v)\n",
    NULL,
};

/* The probes that run: python3 only when the files could not tell (agent_pyver.h), the
 * nvidia-smi pair when it is on PATH. Unused slots have no argv. */
static void run_probes(struct agent_probe p[PROBE_COUNT], bool python)
{
    struct agent_probe run[PROBE_COUNT];
    int n = 0, at[PROBE_COUNT];
    memset(p, 0, PROBE_COUNT * sizeof *p);
    if (python) p[PROBE_PYTHON] = (struct agent_probe){ .argv = python_argv, .timeout_ms = TORCH_TIMEOUT_MS };
    if (agent_exec_on_path("nvidia-smi", NULL)) agent_gpu_probes(&p[PROBE_NVSMI_QUERY], &p[PROBE_NVSMI_BANNER]);
    for (int i = 0; i < PROBE_COUNT; i++)
        if (p[i].argv) {
            at[n] = i;
            run[n++] = p[i];
        }
    agent_exec_run_all(run, n);
    for (int i = 0; i < n; i++) p[at[i]] = run[i];
}

/* A fact whose probe ran past its time limit is null like an unknown one, and named in
 * "unread" ({"torch":"timeout"}): the controller must not take "could not be read on a loaded
 * node" for "not installed" and report a difference. */
static void add_unread(cJSON *o, const char *key, const char *why)
{
    cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "unread");
    if (!u) u = cJSON_AddObjectToObject(o, "unread");
    cJSON_AddStringToObject(u, key, why);
}

/* "Python 3.11.2" (the first line; it comes even when the torch part then hangs) -> "3.11.2";
 * torch's version from the last line, when the probe ended well. */
static void add_python(cJSON *o, struct agent_probe *py)
{
    char *ver = NULL, *torch = NULL, *s = py->out.buf;
    if (s && strncmp(s, "Python ", 7) == 0 && isdigit((unsigned char)s[7])) {
        char *nl = strchr(s, '\n');
        if (nl) {
            *nl = '\0';
            ver = agent_exec_clean(s + 7);
            s = nl + 1;
            if (py->status == 0) {
                /* The version is the last line: imports may print banners before it. */
                size_t n = strlen(s);
                while (n && s[n - 1] == '\n') s[--n] = '\0';
                char *last = strrchr(s, '\n');
                s = agent_exec_clean(last ? last + 1 : s);
                if (isdigit((unsigned char)s[0])) torch = s;
            }
        }
    }
    add_str(o, "python3", ver);
    add_str(o, "torch", torch);
    if (py->status == -1) {           /* killed at TORCH_TIMEOUT_MS */
        if (!ver) add_unread(o, "python3", "timeout");
        add_unread(o, "torch", "timeout");
    }
}

/* python3 and torch: from the cache, the files, or the probe when they could not tell
 * ("python_source" says which: "cache", "files", "probe"). A probe that ended well is cached
 * under the same key, so a node whose files do not tell pays its python3 start once. */
static void add_versions(cJSON *o, struct agent_pyver *pv, struct agent_probe *py, bool cached)
{
    if (py->argv) {
        add_python(o, py);
        cJSON_AddStringToObject(o, "python_source", "probe");
        const cJSON *un = cJSON_GetObjectItemCaseSensitive(o, "unread");
        if (pv->key && py->status == 0 && !un)
            agent_pycache_put(pv->exe, pv->key, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "python3")),
                              cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "torch")));
        return;
    }
    add_str(o, "python3", pv->python3);
    add_str(o, "torch", pv->torch);
    if (pv->exe) cJSON_AddStringToObject(o, "python_source", cached ? "cache" : "files");
    else cJSON_AddNullToObject(o, "python_source"); /* no python3 on PATH */
    if (!cached && pv->key) agent_pycache_put(pv->exe, pv->key, pv->python3, pv->torch);
}

/* The distinct values of one member of NVML's GPUs, ", "-joined in the order met ("80 GiB";
 * "80 GiB, 40 GiB" on a node of mixed GPUs); numbers of MiB are given in GiB. NULL when none. */
static char *gpu_values(const cJSON *gpus, const char *key)
{
    char seen[8][48];
    int n = 0;
    struct strbuf sb = {0};
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, key);
        char one[48];
        int k = 0;
        if (cJSON_IsNumber(v)) snprintf(one, sizeof one, "%.0f GiB", v->valuedouble / 1024.0);
        else if (cJSON_IsString(v)) snprintf(one, sizeof one, "%s", v->valuestring);
        else continue;
        while (k < n && strcmp(seen[k], one) != 0) k++;
        if (k < n || n == 8) continue; /* met before, or more kinds than a node has */
        memcpy(seen[n++], one, sizeof one);
        if (sb.len) strbuf_adds(&sb, ", ");
        strbuf_adds(&sb, one);
    }
    return sb.len ? sb.buf : (strbuf_done(&sb), NULL);
}

/* NVML's view of the GPUs' health ("gpu_health"), and the values check compares across nodes
 * as facts of their own: the driver version, the MIG mode ("on", "off", "mixed"), each GPU's
 * memory size and compute capability (a 40 GB A100 among 80 GB ones, or an sm_80 among sm_90s,
 * holds the job back or cannot run its kernels). */
static void add_gpu_health(cJSON *o)
{
    cJSON *h = agent_nvml_health();
    const cJSON *g;
    int on = 0, off = 0;
    if (!h) return;
    const char *drv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "driver"));
    if (drv) cJSON_AddStringToObject(o, "gpu_driver", drv);
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(h, "gpus")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(g, "mig");
        if (cJSON_IsBool(m)) cJSON_IsTrue(m) ? on++ : off++;
    }
    if (on || off) cJSON_AddStringToObject(o, "gpu_mig", on && off ? "mixed" : on ? "on" : "off");
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(h, "gpus");
    char *mem = gpu_values(gpus, "memory_mib"), *cc = gpu_values(gpus, "compute_capability");
    if (mem) cJSON_AddStringToObject(o, "gpu_memory", mem);
    if (cc) cJSON_AddStringToObject(o, "gpu_cc", cc);
    free(mem);
    free(cc);
    cJSON_AddItemToObject(o, "gpu_health", h);
}

cJSON *agent_facts_collect(const char *cmd, const cJSON *env)
{
    cJSON *o = cJSON_CreateObject();
    struct utsname u;
    int have_u = uname(&u) == 0;
    const char *cuda_home = effective_env(env, "CUDA_HOME");
    char *nccl_path = NULL;
    struct agent_probe probes[PROBE_COUNT];
    struct agent_pyver pv;
    bool cached = false;
    int lock = -1;
    agent_pyver_locate(&pv);
    if (pv.key) {
        cached = agent_pycache_get(pv.exe, pv.key, &pv.python3, &pv.torch) == 1;
        /* a miss: one agent of this machine reads (or probes), the others wait for its answer */
        bool waited = false;
        if (!cached && (lock = agent_pycache_lock(pv.exe, TORCH_TIMEOUT_MS + 1000, &waited)) >= 0)
            cached = agent_pycache_get(pv.exe, pv.key, &pv.python3, &pv.torch) == 1;
        if (!cached && waited) {
            agent_pycache_unlock(lock);
            lock = -1;
        }
    }
    if (cached) pv.probe = false;
    else agent_pyver_read(&pv);
    run_probes(probes, pv.probe);

    cJSON_AddStringToObject(o, "ddptop_version", DDPTOP_VERSION);
    add_owned(o, "os", os_pretty_name());
    add_str(o, "kernel", have_u ? u.release : NULL);
    add_str(o, "arch", have_u ? u.machine : NULL);
    add_str(o, "libc", gnu_get_libc_version());
    add_owned(o, "nccl", agent_gpu_nccl_version(cuda_home, &nccl_path));
    add_owned(o, "nccl_path", nccl_path);
    add_owned(o, "cuda_runtime", agent_gpu_cudart_version(cuda_home));
    add_versions(o, &pv, &probes[PROBE_PYTHON], cached);
    agent_pycache_unlock(lock);
    cJSON_AddItemToObject(o, "nccl_env", nccl_env(env));
    /* Set but empty is a value (it hides every GPU), not an unknown. */
    const char *cvd = effective_env(env, "CUDA_VISIBLE_DEVICES");
    if (cvd) cJSON_AddStringToObject(o, "cuda_visible_devices", cvd);
    else cJSON_AddNullToObject(o, "cuda_visible_devices");
    cJSON_AddItemToObject(o, "nccl_conf", nccl_conf(env));
    add_cmd(o, cmd, env);
    cJSON_AddItemToObject(o, "gpu", probes[PROBE_NVSMI_QUERY].argv
        ? agent_gpu_facts(&probes[PROBE_NVSMI_QUERY], &probes[PROBE_NVSMI_BANNER])
        : agent_gpu_facts(NULL, NULL));
    add_gpu_health(o);
    cJSON_AddItemToObject(o, "ifaces", agent_ifaces_list());
    cJSON_AddItemToObject(o, "ib", agent_ifaces_ib(NULL));
    for (int i = 0; i < PROBE_COUNT; i++)
        if (probes[i].argv) strbuf_done(&probes[i].out);
    agent_pyver_done(&pv);
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
