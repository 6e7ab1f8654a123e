/* Verdicts of the clock, gpu and env checks from what the agents reported; see check_eval.h.
 * The nccl and tcp verdicts are in check_eval_net.c. */
#include "check_eval.h"

#include "job/gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "util/util.h"
#include "wire/json_num.h"

/* The verdict respects the estimate's own error bound: the true offset is anywhere in
 * |offset| +/- error. Only what it is certainly above counts (docs/check.md, "clock"):
 *   fail   |offset| - error > --max-skew-ms
 *   warn   |offset| + error > --max-skew-ms (it may be above the limit: the round trip was too
 *          long to tell), or |offset| - error above a tenth of --max-skew-ms
 *   pass   otherwise; when |offset| alone is above the tenth, the detail says it is within the
 *          error bound (-95 ms +/- 95 ms may be 0). */
void check_eval_clock(struct check_result *res, const struct clock_sample *s, size_t n, int max_skew_ms)
{
    struct clock_estimate est;
    cJSON *f;
    double off, least, most, warn_ms = max_skew_ms / 10.0;
    if (n == 0 || clock_estimate(s, n, &est) < 0) {
        check_result_set(res, CHECK_SKIP, "no clock sample", NULL);
        return;
    }
    off = est.offset_ms;
    least = fabs(off) - est.error_ms;
    most = fabs(off) + est.error_ms;
    f = check_result_fields(res);
    check_fields_add_ms(f, "offset_ms", off);
    check_fields_add_ms(f, "error_ms", est.error_ms);
    cJSON_AddNumberToObject(f, "samples", (double)est.samples);
    cJSON_AddNumberToObject(f, "max_skew_ms", max_skew_ms);
    cJSON_AddBoolToObject(f, "within_error", least <= warn_ms && fabs(off) > warn_ms);
    if (least > max_skew_ms) {
        check_result_setf(res, CHECK_FAIL,
                          "sync the node's clock with NTP (chrony or systemd-timesyncd; check with "
                          "chronyc tracking or timedatectl)",
                          "offset %+.3f ms (+/- %.3f ms), above --max-skew-ms %d", off, est.error_ms,
                          max_skew_ms);
    } else if (most > max_skew_ms) {
        check_result_setf(res, CHECK_WARN,
                          "run ddptop check again when the node is less loaded; if it says so again, sync "
                          "the node's clock with NTP (chrony or systemd-timesyncd)",
                          "offset %+.3f ms (+/- %.3f ms): may be above --max-skew-ms %d (the round trip was "
                          "too long to tell)", off, est.error_ms, max_skew_ms);
    } else if (least > warn_ms) {
        check_result_setf(res, CHECK_WARN, "sync the node's clock with NTP (chrony or systemd-timesyncd)",
                          "offset %+.3f ms (+/- %.3f ms), above %.0f ms (a tenth of --max-skew-ms)", off,
                          est.error_ms, warn_ms);
    } else if (fabs(off) > warn_ms) {
        check_result_setf(res, CHECK_PASS, NULL,
                          "offset %+.3f ms (+/- %.3f ms): within the error bound of the %.0f ms warning (a "
                          "tenth of --max-skew-ms)", off, est.error_ms, warn_ms);
    } else {
        check_result_setf(res, CHECK_PASS, NULL, "offset %+.3f ms (+/- %.3f ms)", off, est.error_ms);
    }
}

static const char *str_or_null(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* NVML's health report (agent_nvml_health): the worst finding as the verdict, every finding in
 * the detail. False when there is nothing to say (all healthy, or no NVML). */
static bool gpu_health_verdict(struct check_result *res, const cJSON *h)
{
    struct strbuf what;
    const char *hint = NULL, *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "error"));
    enum check_status st = CHECK_PASS;
    const cJSON *g;
    char names[160];
    if (!h) return false;
    strbuf_init(&what);
    if (err) {
        strbuf_addf(&what, "NVML: %s", err);
        st = CHECK_WARN;
        hint = "check the driver: nvidia-smi must work, with the driver and its library of one version";
    }
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(h, "gpus")) {
        int i;
        long long ecc = 0, thr = 0;
        if (!json_int_in_i(cJSON_GetObjectItemCaseSensitive(g, "index"), 0, CHECK_GPUS_MAX - 1, &i)) continue;
        json_int_in(cJSON_GetObjectItemCaseSensitive(g, "ecc_uncorrected"), 0, JSON_EXACT_MAX, &ecc);
        json_int_in(cJSON_GetObjectItemCaseSensitive(g, "throttle"), 0, JSON_EXACT_MAX, &thr);
        const char *sep = what.len ? "; " : "";
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "retired_pending"))) {
            strbuf_addf(&what, "%sGPU %d has retired pages pending a reset", sep, i);
            st = CHECK_FAIL;
            hint = "reset the GPU (nvidia-smi -r -i N, with nothing running on it) or drain the node";
        } else if (ecc > 0) {
            strbuf_addf(&what, "%sGPU %d has %lld uncorrectable ECC error%s", sep, i, ecc, ecc == 1 ? "" : "s");
            st = CHECK_FAIL;
            hint = "reset the GPU (nvidia-smi -r -i N, with nothing running on it) or drain the node";
        } else if ((unsigned long long)thr & GPU_THR_PROBLEMS) {
            strbuf_addf(&what, "%sGPU %d is throttling now: %s", sep, i,
                        gpu_throttle_names((unsigned long long)thr & GPU_THR_PROBLEMS, names, sizeof names));
            if (st < CHECK_WARN) st = CHECK_WARN;
            if (!hint) hint = "check the node's cooling and power (nvidia-smi -q -d PERFORMANCE says why)";
        } else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(g, "persistence"))) {
            strbuf_addf(&what, "%sGPU %d has persistence mode off", sep, i);
            if (st < CHECK_WARN) st = CHECK_WARN;
            if (!hint) hint = "sudo nvidia-smi -pm 1, or run nvidia-persistenced: without it each job start "
                              "waits for the driver to initialise the GPUs";
        }
    }
    if (st != CHECK_PASS) check_result_set(res, st, what.buf, hint);
    strbuf_done(&what);
    return st != CHECK_PASS;
}

void check_eval_gpu(struct check_result *res, const cJSON *facts, int slots)
{
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(facts, "gpu");
    const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(gpu, "count");
    int count = 0;
    if (!json_int_in_i(cnt, 0, CHECK_GPUS_MAX, &count)) count = 0;
    const cJSON *health_gpus = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(facts, "gpu_health"), "gpus");
    if (count <= 0 && cJSON_GetArraySize(health_gpus) > 0) count = cJSON_GetArraySize(health_gpus); /* NVML saw them */
    const char *model = str_or_null(gpu, "model"), *driver = str_or_null(gpu, "driver");
    const char *cuda = str_or_null(gpu, "cuda_driver"), *source = str_or_null(gpu, "source");
    cJSON *f = check_result_fields(res);
    cJSON_AddNumberToObject(f, "count", count);
    model ? (void)cJSON_AddStringToObject(f, "model", model) : (void)cJSON_AddNullToObject(f, "model");
    driver ? (void)cJSON_AddStringToObject(f, "driver", driver) : (void)cJSON_AddNullToObject(f, "driver");
    cuda ? (void)cJSON_AddStringToObject(f, "cuda_driver", cuda) : (void)cJSON_AddNullToObject(f, "cuda_driver");
    cJSON_AddStringToObject(f, "source", source ? source : "none");
    if (slots) cJSON_AddNumberToObject(f, "slots", slots);
    else cJSON_AddNullToObject(f, "slots");

    if (count <= 0) {
        check_result_set(res, CHECK_WARN, "no GPU found: will use the CPU backend",
                         "if the node has GPUs, install the NVIDIA driver (nvidia-smi must work)");
    } else if (slots > count) {
        char hint[160];
        snprintf(hint, sizeof hint, "set slots=%d or fewer for this host in the hostfile", count);
        check_result_setf(res, CHECK_FAIL, hint, "slots=%d but the node has %d GPU%s", slots, count,
                          count == 1 ? "" : "s");
    } else if (!gpu_health_verdict(res, cJSON_GetObjectItemCaseSensitive(facts, "gpu_health"))) {
        check_result_setf(res, CHECK_PASS, NULL, "%d x %s, driver %s, CUDA %s", count, model ? model : "GPU",
                          driver ? driver : "?", cuda ? cuda : "?");
    }
}

/* ---- env parity ---- */

struct env_fact {
    const char *key;         /* facts member, or "nccl_env:NAME" / "nccl_conf:PATH" */
    const char *label;
    enum check_status severity;
    const char *hint;
};

static const struct env_fact env_facts[] = {
    {"os", "OS", CHECK_WARN, "install the same OS release on every node"},
    {"kernel", "kernel", CHECK_WARN, "run the same kernel on every node"},
    /* a warning: ddptop runs each node's own agent (docs/check.md, "Which nodes"), but the
     * training command must exist for every architecture, and mixed nodes train at the pace
     * of the slowest */
    {"arch", "arch", CHECK_WARN,
     "make sure the training command runs on every architecture (a Python env or a build per architecture)"},
    {"libc", "glibc", CHECK_WARN, "install the same OS release on every node"},
    {"gpu:model", "GPU model", CHECK_WARN,
     "mixed GPU models train at the pace of the slowest: use nodes of one model, or expect that"},
    {"nccl", "NCCL", CHECK_FAIL, "install the same NCCL version on every node"},
    {"cuda_runtime", "CUDA runtime", CHECK_FAIL, "install the same CUDA runtime on every node"},
    {"python3", "python3", CHECK_WARN, "install the same python3 on every node"},
    {"torch", "torch", CHECK_FAIL, "install the same torch version on every node"},
    {"ddptop_version", "ddptop", CHECK_FAIL, "run the same ddptop version everywhere"},
    {"gpu_driver", "NVIDIA driver", CHECK_WARN, "install the same NVIDIA driver on every node"},
    /* NVML's, per node (agent_facts.c): warnings, as the model's */
    {"gpu_memory", "GPU memory", CHECK_WARN,
     "GPUs of one memory size on every node, or size the batch for the smallest"},
    {"gpu_cc", "GPU compute capability", CHECK_WARN,
     "GPUs of one architecture on every node, and a build with kernels for each (TORCH_CUDA_ARCH_LIST)"},
    {"gpu_mig", "MIG mode", CHECK_FAIL,
     "set MIG mode the same way on every node (nvidia-smi -mig 0 or 1, then a GPU reset)"},
    {"cuda_visible_devices", "CUDA_VISIBLE_DEVICES", CHECK_FAIL,
     "set CUDA_VISIBLE_DEVICES the same way on every node (or unset it)"},
};

/* A fact's value as text; NULL when unknown. Numbers and booleans are printed. */
static char *fact_value(const cJSON *facts, const char *key)
{
    const cJSON *v;
    if (strncmp(key, "nccl_env:", 9) == 0) {
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(facts, "nccl_env"), key + 9);
    } else if (strncmp(key, "nccl_conf:", 10) == 0) {
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(facts, "nccl_conf"), key + 10);
    } else if (strncmp(key, "gpu:", 4) == 0) {
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(facts, "gpu"), key + 4);
    } else {
        v = cJSON_GetObjectItemCaseSensitive(facts, key);
    }
    if (cJSON_IsString(v)) return xstrdup(v->valuestring);
    if (cJSON_IsNumber(v)) return xasprintf("%g", v->valuedouble);
    if (cJSON_IsBool(v)) return xstrdup(cJSON_IsTrue(v) ? "true" : "false");
    return NULL;
}

struct env_eval {
    const struct check_node_info *nodes;
    size_t n;
    size_t *reach;          /* indexes of the nodes with facts */
    size_t n_reach;
    const char **names;     /* per reachable node */
    struct strbuf *msgs;    /* per node: "; "-joined minority descriptions */
    enum check_status *st;  /* per node */
    const char **hints;     /* per node: the hint of its worst difference */
    cJSON **diffs;          /* per node: differences array for JSON */
};

/* Why the node's agent could not read the fact ("timeout": its probe ran past its time limit),
 * from the facts' "unread" member; NULL when it was read (its value may still be unknown). */
static const char *fact_unread(const cJSON *facts, const char *key)
{
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(facts, "unread"), key);
    if (!why) return NULL;
    /* the agent's word is shown only when it is one we know: it is remote text */
    return cJSON_IsString(why) && strcmp(why->valuestring, "timeout") == 0 ? "timeout" : "unknown reason";
}

/* A fact the node could not read is no value to compare: said on that node as a warning (it
 * was not checked), never as a difference. */
static void note_unread(struct env_eval *e, size_t node, const char *key, const char *label, const char *why)
{
    cJSON *d = cJSON_CreateObject();
    char *detail = xasprintf("could not be read (%s)", why);
    if (e->msgs[node].len) strbuf_adds(&e->msgs[node], "; ");
    strbuf_addf(&e->msgs[node], "%s %s", label, detail);
    if (CHECK_WARN > e->st[node]) {
        e->st[node] = CHECK_WARN;
        e->hints[node] = "its probe ran past its time limit (a loaded node or a slow file system): run ddptop "
                         "check again";
    }
    cJSON_AddStringToObject(d, "fact", key);
    cJSON_AddStringToObject(d, "status", check_status_name(CHECK_WARN));
    cJSON_AddStringToObject(d, "detail", detail);
    cJSON_AddTrueToObject(d, "unread");
    cJSON_AddItemToArray(e->diffs[node], d);
    free(detail);
}

static void compare_fact(struct env_eval *e, const char *key, const char *label, enum check_status sev,
                         const char *hint)
{
    /* the nodes that read the fact, by their index in e->reach */
    char **vals = xcalloc(e->n_reach, sizeof *vals);
    const char **names = xcalloc(e->n_reach, sizeof *names);
    size_t *from = xcalloc(e->n_reach, sizeof *from), n_read = 0;
    struct parity_group *g = NULL;
    size_t ng;
    char *desc;
    for (size_t i = 0; i < e->n_reach; i++) {
        const cJSON *facts = e->nodes[e->reach[i]].facts;
        const char *why = fact_unread(facts, key);
        if (why) {
            note_unread(e, e->reach[i], key, label, why);
            continue;
        }
        vals[n_read] = fact_value(facts, key);
        names[n_read] = e->names[i];
        from[n_read++] = i;
    }
    desc = parity_describe(names, (const char *const *)vals, n_read);
    if (desc) {
        ng = parity_group((const char *const *)vals, n_read, &g);
        for (size_t gi = 1; gi < ng; gi++) {
            for (size_t j = 0; j < g[gi].n; j++) {
                size_t node = e->reach[from[g[gi].hosts[j]]];
                cJSON *d = cJSON_CreateObject();
                if (e->msgs[node].len) strbuf_adds(&e->msgs[node], "; ");
                strbuf_addf(&e->msgs[node], "%s differs: %s", label, desc);
                if (sev > e->st[node]) {
                    e->st[node] = sev;
                    e->hints[node] = hint;
                }
                cJSON_AddStringToObject(d, "fact", key);
                cJSON_AddStringToObject(d, "status", check_status_name(sev));
                cJSON_AddStringToObject(d, "detail", desc);
                cJSON_AddItemToArray(e->diffs[node], d);
            }
        }
        parity_groups_free(g, ng);
        free(desc);
    }
    for (size_t i = 0; i < n_read; i++) free(vals[i]);
    free(vals);
    free(names);
    free(from);
}

/* Every key of facts[member] on any node, e.g. all NCCL_* variables seen anywhere. */
static void compare_members(struct env_eval *e, const char *member, const char *prefix,
                            enum check_status sev, const char *hint)
{
    char **seen = NULL;
    size_t n_seen = 0;
    for (size_t i = 0; i < e->n_reach; i++) {
        const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e->nodes[e->reach[i]].facts, member);
        for (const cJSON *it = cJSON_IsObject(obj) ? obj->child : NULL; it; it = it->next) {
            size_t k = 0;
            while (k < n_seen && strcmp(seen[k], it->string) != 0) k++;
            if (k < n_seen) continue;
            seen = xrealloc(seen, (n_seen + 1) * sizeof *seen);
            seen[n_seen++] = it->string;
        }
    }
    for (size_t k = 0; k < n_seen; k++) {
        char *key = xasprintf("%s%s", prefix, seen[k]);
        compare_fact(e, key, seen[k], sev, hint);
        free(key);
    }
    free(seen);
}

static void env_pass_detail(struct strbuf *sb, const cJSON *facts)
{
    static const char *const keys[] = {"os", "kernel", "nccl", "cuda_runtime", "python3", "torch"};
    static const char *const labels[] = {"", "kernel ", "NCCL ", "CUDA ", "python3 ", "torch "};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = str_or_null(facts, keys[i]);
        if (!v) continue;
        if (sb->len) strbuf_adds(sb, ", ");
        strbuf_addf(sb, "%s%s", labels[i], v);
    }
}

void check_eval_env(struct check_report *r, const struct check_node_info *nodes, size_t n, bool cmd_given)
{
    struct env_eval e = {.nodes = nodes, .n = n};
    e.reach = xcalloc(n, sizeof *e.reach);
    e.names = xcalloc(n, sizeof *e.names);
    e.msgs = xcalloc(n, sizeof *e.msgs);
    e.st = xcalloc(n, sizeof *e.st);
    e.hints = xcalloc(n, sizeof *e.hints);
    e.diffs = xcalloc(n, sizeof *e.diffs);
    for (size_t i = 0; i < n; i++) {
        strbuf_init(&e.msgs[i]);
        e.st[i] = CHECK_PASS;
        e.diffs[i] = cJSON_CreateArray();
        if (nodes[i].facts) {
            e.names[e.n_reach] = nodes[i].name;
            e.reach[e.n_reach++] = i;
        }
    }
    for (size_t f = 0; f < sizeof env_facts / sizeof *env_facts; f++)
        compare_fact(&e, env_facts[f].key, env_facts[f].label, env_facts[f].severity, env_facts[f].hint);
    if (cmd_given)
        compare_fact(&e, "cmd_sha256", "training command (sha256)", CHECK_FAIL,
                     "install the same build of the training command on every node");
    compare_members(&e, "nccl_env", "nccl_env:", CHECK_FAIL,
                    "set NCCL_* variables the same way on every node (hostfile keys or --env)");
    compare_members(&e, "nccl_conf", "nccl_conf:", CHECK_FAIL,
                    "make /etc/nccl.conf and ~/.nccl.conf the same on every node");

    for (size_t i = 0; i < n; i++) {
        struct check_result *res = &r->rows[i].checks[CHECK_ENV];
        if (!nodes[i].facts) {
            cJSON_Delete(e.diffs[i]);
            if (res->status == CHECK_PENDING) check_result_set(res, CHECK_SKIP, "not run: no facts from the node", NULL);
            continue;
        }
        cJSON_AddItemToObject(check_result_fields(res), "differences", e.diffs[i]);
        if (e.st[i] == CHECK_PASS) {
            struct strbuf sb;
            strbuf_init(&sb);
            env_pass_detail(&sb, nodes[i].facts);
            if (e.n_reach > 1) strbuf_addf(&sb, "%s(same as the other %zu node%s)", sb.len ? " " : "",
                                           e.n_reach - 1, e.n_reach == 2 ? "" : "s");
            check_result_set(res, CHECK_PASS, sb.buf ? sb.buf : "", NULL);
            strbuf_done(&sb);
        } else {
            check_result_set(res, e.st[i], e.msgs[i].buf, e.hints[i]);
        }
    }
    for (size_t i = 0; i < n; i++) strbuf_done(&e.msgs[i]);
    free(e.reach);
    free(e.names);
    free(e.msgs);
    free(e.st);
    free(e.hints);
    free(e.diffs);
}
