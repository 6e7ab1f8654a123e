/* The ranks side's view of its link to the controller (docs/protocol.md "Reconnecting"): how long
 * the ranks may run without a controller, whether the agent goes on when the link ends, its
 * part of a new link's hello (how long it was away, its grace, its spool), and acknowledgements.
 *
 * A spawn sets the grace. With grace_ms 0 the agent behaves as it always did: the end of its
 * input, or watchdog_ms without a request while ranks run, stops every rank and ends the agent.
 * With a grace, neither does: the ranks go on, their output is spooled (agent_outbox.h), the
 * agent listens for a bridge (agent_sock.h), and only when no controller was heard of for
 * grace_ms does it stop the ranks and exit, so no rank is left behind for good.
 * A leaf below the ranks: it knows the link, not the ranks (the hooks that the agent's loop
 * calls when the link ends or comes back, and the resume request, are agent_ranks_ops.c's). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_outbox.h"
#include "agent_ranks_int.h"
#include "agent_sock.h"
#include "util/util.h"
#include "wire/protocol.h"

#define WATCHDOG_MAX_MS 86400000L
#define GRACE_MAX_MS (7L * 86400000L)
#define SPOOL_DEFAULT (256L << 20)
#define SPOOL_MIN (64L << 10)
#define SPOOL_MAX (64L << 30)

static struct {
    struct agent *ag;
    long watchdog_ms, grace_ms;
    long spool_max;
    int64_t away_since_ms;   /* when the link was lost; 0 while there is one */
} lk = {.spool_max = SPOOL_DEFAULT};

size_t ranks_spool_max(void)
{
    return (size_t)lk.spool_max;
}

int ranks_link_away(int holds)
{
    if (lk.grace_ms <= 0) return 0;
    if (!holds && outbox_durable_bytes(agent_outbox(lk.ag)) == 0) return 0;
    lk.away_since_ms = mono_ms();
    return 1;
}

void ranks_link_hello(cJSON *m)
{
    int64_t now = mono_ms();
    cJSON_AddNumberToObject(m, "away_ms", (double)(now - (lk.away_since_ms ? lk.away_since_ms
                                                                          : agent_last_input_ms(lk.ag))));
    cJSON_AddNumberToObject(m, "grace_ms", (double)lk.grace_ms);
    cJSON_AddNumberToObject(m, "spool_bytes", (double)outbox_bytes(agent_outbox(lk.ag)));
    lk.away_since_ms = 0;
}

void ranks_link_init(struct agent *ag)
{
    lk.ag = ag;
}

int ranks_link_config(const cJSON *req, const cJSON *id)
{
    long watchdog, grace, spool, node;
    struct agent *ag = lk.ag;
    if (agent_req_int(ag, req, id, "watchdog_ms", 0, WATCHDOG_MAX_MS, 0, &watchdog) < 0 ||
        agent_req_int(ag, req, id, "grace_ms", 0, GRACE_MAX_MS, 0, &grace) < 0 ||
        agent_req_int(ag, req, id, "spool_bytes", SPOOL_MIN, SPOOL_MAX, lk.spool_max, &spool) < 0 ||
        agent_req_int(ag, req, id, "node", 0, INT_MAX, -1, &node) < 0)
        return -1;
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(req, "run");
    if (run && !util_run_id_ok(cJSON_GetStringValue(run))) {
        agent_send_error(ag, id, "\"run\" must be 1 to 64 letters, digits, '.', '_' or '-'");
        return -1;
    }
    lk.watchdog_ms = watchdog;
    lk.grace_ms = grace;
    lk.spool_max = spool;
    if (grace > 0 && run && node >= 0) {
        char err[400];
        if (agent_sock_listen(ag, run->valuestring, (int)node, err, sizeof err) < 0) {
            cJSON *m = agent_reply_new(WIRE_EV_NOTICE, NULL);
            cJSON_AddStringToObject(m, "text", err);
            cJSON_AddStringToObject(m, "what", "no_reconnect");
            agent_send(ag, m);
        }
    }
    return 0;
}

int64_t ranks_link_deadline(void)
{
    int64_t last = agent_last_input_ms(lk.ag);
    if (lk.grace_ms > 0) return last + lk.grace_ms;
    return lk.watchdog_ms > 0 ? last + lk.watchdog_ms : 0;
}

int ranks_link_check(int64_t now_ms, int live)
{
    struct agent *ag = lk.ag;
    int64_t quiet = now_ms - agent_last_input_ms(ag);
    if (lk.grace_ms > 0 && quiet >= lk.grace_ms) {
        agent_send_error(ag, NULL, "no controller for %ld s (--agent-grace); stopping every rank and exiting",
                         lk.grace_ms / 1000);
        agent_quit(ag, 1);
        return 1;
    }
    if (lk.grace_ms <= 0 && lk.watchdog_ms > 0 && live && quiet >= lk.watchdog_ms) {
        agent_send_error(ag, NULL, "no request from the controller for %ld ms (watchdog_ms); "
                         "stopping every rank and exiting", lk.watchdog_ms);
        agent_quit(ag, 1);
        return 1;
    }
    return 0;
}

/* "RANK": seq members of an object, each handed to fn. */
static void each_rank_seq(const cJSON *obj, void (*fn)(int rank, uint64_t seq, void *ctx), void *ctx)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, obj) {
        char *end;
        long long seq;
        long rank = e->string ? strtol(e->string, &end, 10) : -1;
        if (!e->string || *end || rank < 0 || rank > INT_MAX || !json_int_in(e, 0, JSON_EXACT_MAX, &seq))
            continue;
        fn((int)rank, (uint64_t)seq, ctx);
    }
}

static void ack_one(int rank, uint64_t seq, void *ctx)
{
    outbox_ack(ctx, rank, seq);
}

void ranks_link_ack(const cJSON *req)
{
    const cJSON *ack = cJSON_GetObjectItemCaseSensitive(req, "ack");
    if (cJSON_IsObject(ack)) each_rank_seq(ack, ack_one, agent_outbox(lk.ag));
}
