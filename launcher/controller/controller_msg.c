/* What every handler of an agent's message shares (controller_int.h): reading the numbers in
 * a message, which no agent is trusted with (a number out of range is said, a few times per
 * node, and ignored), the members of a rank's message, and the one way a handler asks for the
 * job to stop: it notes why, and the progress step (controller.c) acts on it. A leaf: it calls
 * no other file of the controller. */
#include "controller_int.h"

#include <limits.h>

#include "wire/json_num.h"

void ctl_bad_number(struct controller *c, size_t i, const char *ev, const char *key, const cJSON *v)
{
    struct cnode *nd = &c->nodes[i];
    char text[32];
    if (nd->bad_numbers++ < CTL_BAD_NUMBERS_SAID)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: %s message: %s %s out of range; ignored",
                      c->job->nodes[i].name, ev, key, json_num_text(v, text, sizeof text));
    if (nd->bad_numbers == CTL_BAD_NUMBERS_SAID)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: more numbers out of range in its agent's messages "
                      "are ignored without a word (%d said)", c->job->nodes[i].name, CTL_BAD_NUMBERS_SAID);
}

long long ctl_int(struct controller *c, size_t i, const char *ev, const cJSON *m, const char *key, long long lo,
                  long long hi, long long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    long long x;
    if (!v || cJSON_IsNull(v)) return dflt;
    if (json_int_in(v, lo, hi, &x)) return x;
    ctl_bad_number(c, i, ev, key, v);
    return dflt;
}

int ctl_msg_rank(struct controller *c, size_t i, const char *ev, const cJSON *m)
{
    return (int)ctl_int(c, i, ev, m, "rank", 0, INT_MAX, -1);
}

long long ctl_msg_seq(struct controller *c, size_t i, const char *ev, const cJSON *m)
{
    return cJSON_GetObjectItemCaseSensitive(m, "q") ? ctl_int(c, i, ev, m, "q", 0, JSON_EXACT_MAX, -1) : 0;
}

int ctl_msg_attempt(struct controller *c, size_t i, const char *ev, const cJSON *m, const char *key, int dflt)
{
    return cJSON_GetObjectItemCaseSensitive(m, key) ? (int)ctl_int(c, i, ev, m, key, 0, INT_MAX, -2) : dflt;
}

bool ctl_rank_on_node(const struct controller *c, size_t node, int rank)
{
    const struct node_info *ni = &c->job->nodes[node];
    return rank >= ni->first_rank && rank < ni->first_rank + ni->n_ranks;
}

/* ---- the stop a handler asks for ------------------------------------------------------------ */

bool ctl_stop_open(const struct controller *c)
{
    return job_is_running(c->job) && c->stop_noted == STOP_NONE;
}

void ctl_note_stop(struct controller *c, enum stop_cause why)
{
    if (ctl_stop_open(c)) c->stop_noted = why;
}
