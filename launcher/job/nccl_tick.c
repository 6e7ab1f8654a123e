/* When NCCL's odd ones out are said (nccl.h): nccl_tick decides once enough ranks reported, and
 * says each finding once per attempt as an EV_NCCL event, and each WARN group once it had
 * NCCL_WARN_WAIT_MS to gather its ranks; nccl_flush says what is still pending. Both hand the
 * account (nccl.json) to the job's sink when it changed. Whoever feeds the lines calls them:
 * the controller ticks every second and flushes when an attempt ends (a restart, the run's
 * end, before its "end" event); the events ring knows nothing of NCCL. */
#include "nccl.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "job.h"

/* An event, unless one with this key was said this attempt. */
static void say(void *ctx, int node, uint32_t key, const char *line)
{
    struct job *j = ctx;
    struct nccl_job *n = j->nccl;
    for (size_t i = 0; key && i < n->n_said; i++)
        if (n->said[i] == key) return;
    if (key && n->n_said < sizeof n->said / sizeof *n->said) n->said[n->n_said++] = key;
    job_event_add(j, EV_NCCL, -1, node, "%s", line);
}

static void hand_json(struct job *j)
{
    struct nccl_job *n = j->nccl;
    if (!n->dirty || !j->sink || !j->sink->nccl) return;
    struct cJSON *o = nccl_to_json(j);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    if (text) j->sink->nccl(j->sink->ctx, n->attempt, text, strlen(text));
    free(text);
    cJSON_Delete(o);
    n->dirty = false;
}

static bool all_reported(const struct job *j)
{
    const struct nccl_job *n = j->nccl;
    for (size_t r = 0; r < n->n_ranks; r++)
        if (!n->r[r].net[0] && !n->r[r].init_complete) return false;
    return n->n_ranks > 0;
}

static void decide(struct job *j, int64_t now_ms, bool flush)
{
    struct nccl_job *n = j->nccl;
    if (!n || !n->r || n->quiet || n->attempt != j->attempt) return;
    if (!n->decided && n->first_net_ms &&
        (flush || all_reported(j) || now_ms - n->first_net_ms >= NCCL_DECIDE_MS)) {
        n->decided = true;
        n->late = false;
        nccl_odd_ones(j, say, j);
    } else if (n->decided && n->late) {   /* a rank reported after the decision: what is new */
        n->late = false;
        nccl_odd_ones(j, say, j);
    }
    for (size_t i = 0; i < n->n_warn; i++) {
        struct nccl_warn_group *g = &n->warn[i];
        if (g->said || (!flush && now_ms - g->first_ms < NCCL_WARN_WAIT_MS)) continue;
        g->said = true;
        nccl_warn_line(j, g, say, j);
    }
    if (n->decided || flush) hand_json(j);
}

void nccl_tick(struct job *j, int64_t now_ms)
{
    decide(j, now_ms, false);
}

void nccl_flush(struct job *j)
{
    decide(j, 0, true);
}
