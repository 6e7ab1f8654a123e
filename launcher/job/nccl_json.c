/* The NCCL account as JSON (nccl.h): what LOGDIR/RUN/attempt-N/nccl.json holds (written by
 * the job's sink, record/run_files.c) and its reading back (ddptop logs --nccl, ddptop view).
 * One object per rank; fields that are unknown are absent. Reading back is bounded by the
 * model's own fields: a string too long is cut, a rank out of range is skipped. */
#include "nccl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "job.h"
#include "util/util.h"

#define NCCL_JSON_VERSION 1

static void add_s(cJSON *o, const char *k, const char *v)
{
    if (v && v[0]) cJSON_AddStringToObject(o, k, v);
}

static void finding(void *ctx, int node, const char *line)
{
    (void)node;
    cJSON_AddItemToArray(ctx, cJSON_CreateString(line));
}

struct cJSON *nccl_to_json(const struct job *j)
{
    const struct nccl_job *n = j->nccl;
    if (!n || !n->r) return NULL;
    cJSON *o = cJSON_CreateObject(), *ranks = cJSON_CreateArray(), *f = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "version", NCCL_JSON_VERSION);
    cJSON_AddNumberToObject(o, "attempt", n->attempt);
    for (size_t i = 0; i < n->n_ranks && i < j->n_ranks; i++) {
        const struct nccl_rank *r = &n->r[i];
        if (!r->seen) continue;
        cJSON *x = cJSON_CreateObject();
        char tr[24];
        cJSON_AddNumberToObject(x, "rank", (double)i);
        cJSON_AddStringToObject(x, "node", job_rank_host(j, (int)i));
        add_s(x, "nccl_version", r->version);
        add_s(x, "bootstrap_if", r->boot_if);
        add_s(x, "bootstrap_addr", r->boot_addr);
        add_s(x, "net", r->net);
        add_s(x, "net_devices", r->net_devs);
        add_s(x, "oob", r->oob);
        add_s(x, "plugin", r->plugin);
        add_s(x, "transports", nccl_transports_str(r->transports, tr, sizeof tr));
        cJSON_AddNumberToObject(x, "channels", r->channels);
        cJSON_AddNumberToObject(x, "comms", r->comms);
        if (r->nranks) cJSON_AddNumberToObject(x, "nranks", r->nranks);
        cJSON_AddBoolToObject(x, "init_complete", r->init_complete);
        double t = nccl_rank_init_s(r);
        if (t >= 0) cJSON_AddNumberToObject(x, "init_s", round(t * 1000) / 1000);
        cJSON_AddNumberToObject(x, "warns", r->warns);
        cJSON *w = cJSON_AddArrayToObject(x, "warn_last");
        for (int k = 0; k < NCCL_WARN_KEEP; k++)
            if (r->warn_last[k][0]) cJSON_AddItemToArray(w, cJSON_CreateString(r->warn_last[k]));
        cJSON_AddItemToArray(ranks, x);
    }
    cJSON_AddItemToObject(o, "ranks", ranks);
    nccl_findings(j, finding, f);
    cJSON_AddItemToObject(o, "findings", f);
    return o;
}

static void get_s(const cJSON *x, const char *k, char *dst, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, k);
    if (!cJSON_IsString(v)) return;
    size_t i = 0;
    for (const char *s = v->valuestring; *s && i + 1 < cap; s++)
        dst[i++] = (unsigned char)*s < 0x20 ? '?' : *s;
    dst[i] = '\0';
}

static double get_n(const cJSON *x, const char *k, double lo, double hi, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, k);
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi ? v->valuedouble : dflt;
}

bool nccl_from_json(struct job *j, const struct cJSON *o)
{
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(o, "ranks");
    if (!cJSON_IsObject(o) || !cJSON_IsArray(ranks)) return false;
    struct nccl_job *n = nccl_get(j);
    n->quiet = true;
    const cJSON *x;
    cJSON_ArrayForEach(x, ranks) {
        double rk = get_n(x, "rank", 0, (double)n->n_ranks - 1, -1);
        if (rk < 0) continue;
        struct nccl_rank *r = &n->r[(size_t)rk];
        char tr[24] = "";
        r->seen = true;
        get_s(x, "nccl_version", r->version, sizeof r->version);
        get_s(x, "bootstrap_if", r->boot_if, sizeof r->boot_if);
        get_s(x, "bootstrap_addr", r->boot_addr, sizeof r->boot_addr);
        get_s(x, "net", r->net, sizeof r->net);
        get_s(x, "net_devices", r->net_devs, sizeof r->net_devs);
        r->net_said = r->net[0] != '\0';
        if (strcmp(r->net, "Socket") == 0) memcpy(r->sock_devs, r->net_devs, sizeof r->sock_devs);
        else memcpy(r->ib_devs, r->net_devs, sizeof r->ib_devs);
        get_s(x, "oob", r->oob, sizeof r->oob);
        get_s(x, "plugin", r->plugin, sizeof r->plugin);
        get_s(x, "transports", tr, sizeof tr);
        r->transports = (strstr(tr, "P2P") ? NCCL_TR_P2P : 0) | (strstr(tr, "SHM") ? NCCL_TR_SHM : 0) |
                        (strstr(tr, "NET") ? NCCL_TR_NET : 0) | (strstr(tr, "CollNet") ? NCCL_TR_COLLNET : 0);
        r->channels = (unsigned)get_n(x, "channels", 0, 1e6, 0);
        r->comms = (unsigned)get_n(x, "comms", 0, 1e6, 0);
        r->nranks = (int)get_n(x, "nranks", 0, 1e7, 0);
        r->init_complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "init_complete"));
        r->init_total_s = get_n(x, "init_s", 0, 1e6, -1);
        r->warns = (unsigned)get_n(x, "warns", 0, 4e9, 0);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(x, "warn_last"), *e;
        int k = 0;
        cJSON_ArrayForEach(e, w) {
            if (k == NCCL_WARN_KEEP) break;
            if (!cJSON_IsString(e)) continue;
            size_t i = 0;
            for (const char *s = e->valuestring; *s && i + 1 < sizeof r->warn_last[0]; s++)
                r->warn_last[k][i++] = (unsigned char)*s < 0x20 ? '?' : *s;
            r->warn_last[k++][i] = '\0';
        }
    }
    j->generation++;
    return true;
}
