/* `ddptop logs --nccl RUN`: NCCL's account of an attempt as a table, one row per node, then
 * the odd ones out (docs/nccl.md). It reads the attempt's nccl.json, which the live run wrote
 * (init times measured as the lines arrived), and parses the rank logs again with the same
 * parser when there is none (a run of an older ddptop, or one killed before its account was
 * decided): so every run that kept its logs has an account. --json prints the same as one
 * object. */
#include "cmd_logs.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "job/nccl.h"
#include "record/run_nccl.h"
#include "record/run_replay.h"
#include "record/run_summary.h"
#include "util/util.h"

#define COLS 9

static const char *const heads[COLS] = { "NODE", "RANKS", "NCCL", "BOOTSTRAP", "NET", "DEVICES",
                                         "TRANSPORTS", "INIT", "WARN" };

/* The row of node i: its cells (malloc'd), or false when it has no rank that said anything. */
static bool node_row(const struct job *j, size_t i, char *cells[COLS], cJSON *arr)
{
    struct nccl_node_sum s;
    nccl_node_sum(j, i, &s);
    if (!s.ranks_seen) return false;
    const struct node_info *n = &j->nodes[i];
    char init[32] = "-";
    if (s.init_s >= 0) snprintf(init, sizeof init, "%.2fs", s.init_s);
    cells[0] = xstrdup(n->name);
    cells[1] = n->n_ranks > 1 ? xasprintf("%d-%d", n->first_rank, n->first_rank + n->n_ranks - 1)
                              : xasprintf("%d", n->first_rank);
    cells[2] = xstrdup(s.version[0] ? s.version : "-");
    cells[3] = xstrdup(s.boot[0] ? s.boot : "-");
    cells[4] = xstrdup(s.net[0] ? s.net : "-");
    cells[5] = xstrdup(s.devs[0] ? s.devs : "-");
    cells[6] = xstrdup(s.transports[0] ? s.transports : "-");
    cells[7] = xstrdup(init);
    cells[8] = xasprintf("%u", s.warns);
    if (arr) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "node", n->name);
        cJSON_AddNumberToObject(o, "first_rank", n->first_rank);
        cJSON_AddNumberToObject(o, "ranks", n->n_ranks);
        cJSON_AddNumberToObject(o, "ranks_seen", s.ranks_seen);
        cJSON_AddStringToObject(o, "nccl_version", s.version);
        cJSON_AddStringToObject(o, "bootstrap", s.boot);
        cJSON_AddStringToObject(o, "net", s.net);
        cJSON_AddStringToObject(o, "net_devices", s.devs);
        cJSON_AddStringToObject(o, "transports", s.transports);
        if (s.init_s >= 0) cJSON_AddNumberToObject(o, "init_s", s.init_s);
        else cJSON_AddNullToObject(o, "init_s");
        cJSON_AddNumberToObject(o, "warns", s.warns);
        cJSON_AddItemToArray(arr, o);
    }
    return true;
}

static void print_table(const struct job *j)
{
    size_t n = j->n_nodes, w[COLS];
    char *(*rows)[COLS] = xcalloc(n ? n : 1, sizeof *rows);
    bool *have = xcalloc(n ? n : 1, sizeof *have);
    for (int c = 0; c < COLS; c++) w[c] = strlen(heads[c]);
    for (size_t i = 0; i < n; i++) {
        have[i] = node_row(j, i, rows[i], NULL);
        for (int c = 0; have[i] && c < COLS; c++)
            if (strlen(rows[i][c]) > w[c]) w[c] = strlen(rows[i][c]);
    }
    for (int c = 0; c < COLS; c++) printf("%-*s%s", c == COLS - 1 ? 0 : (int)w[c], heads[c], c == COLS - 1 ? "\n" : "  ");
    for (size_t i = 0; i < n; i++) {
        if (!have[i]) continue;
        for (int c = 0; c < COLS; c++) {
            printf("%-*s%s", c == COLS - 1 ? 0 : (int)w[c], rows[i][c], c == COLS - 1 ? "\n" : "  ");
            free(rows[i][c]);
        }
    }
    free(rows);
    free(have);
}

static void print_finding(void *ctx, int node, const char *line)
{
    (void)node;
    (void)ctx;
    printf("  %s\n", line);
}

/* The findings the live run wrote into nccl.json (its WARN groups included). */
static size_t file_findings(const char *dir, int attempt, cJSON *into)
{
    char *path = xasprintf("%s/attempt-%d/%s", dir, attempt, RUN_NCCL_FILE);
    FILE *f = util_fopen_read(path);
    free(path);
    if (!f) return 0;
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[8192];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0 && sb.len < (64u << 20)) strbuf_add(&sb, buf, k);
    fclose(f);
    cJSON *o = sb.buf ? cJSON_ParseWithLength(sb.buf, sb.len) : NULL;
    strbuf_done(&sb);
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(o, "findings"), *e;
    size_t n = 0;
    cJSON_ArrayForEach(e, fs) {
        if (!cJSON_IsString(e)) continue;
        if (into) cJSON_AddItemToArray(into, cJSON_CreateString(e->valuestring));
        else printf("  %s\n", e->valuestring);   /* ours, written control-free (job/nccl_odd.c) */
        n++;
    }
    cJSON_Delete(o);
    return n;
}

int logs_nccl_print(const char *dir, const char *name, int attempt, const struct run_summary *sum, bool json)
{
    char err[512];
    struct job *j = run_replay_job_build(sum, name, err, sizeof err);
    if (!j) {
        fprintf(stderr, "ddptop logs: %s\n", err);
        return 1;
    }
    j->attempt = attempt;
    enum run_nccl_source src = run_nccl_load(j, dir, attempt);
    const char *from = src == RUN_NCCL_JSON ? RUN_NCCL_FILE : "the rank logs";
    if (src == RUN_NCCL_NONE || !j->nccl) {
        fprintf(stderr, "ddptop logs: run '%s' attempt %d has no NCCL lines (NCCL prints them with "
                "NCCL_DEBUG=INFO; docs/nccl.md)\n", name, attempt);
        job_free(j);
        return 1;
    }
    if (json) {
        cJSON *o = nccl_to_json(j), *nodes = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "run", name);
        cJSON_AddStringToObject(o, "source", src == RUN_NCCL_JSON ? "nccl.json" : "logs");
        char *cells[COLS];
        for (size_t i = 0; i < j->n_nodes; i++)
            if (node_row(j, i, cells, nodes))
                for (int c = 0; c < COLS; c++) free(cells[c]);
        cJSON_AddItemToObject(o, "nodes", nodes);
        if (src == RUN_NCCL_JSON) {
            cJSON *f = cJSON_CreateArray();
            file_findings(dir, attempt, f);
            cJSON_ReplaceItemInObjectCaseSensitive(o, "findings", f);
        }
        char *text = cJSON_PrintUnformatted(o);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
        job_free(j);
        return 0;
    }
    printf("NCCL in run %s, attempt %d (from %s)\n", name, attempt, from);
    print_table(j);
    printf("odd ones out:\n");
    size_t n = src == RUN_NCCL_JSON ? file_findings(dir, attempt, NULL) : nccl_findings(j, print_finding, NULL);
    if (!n) printf("  none\n");
    job_free(j);
    return 0;
}
