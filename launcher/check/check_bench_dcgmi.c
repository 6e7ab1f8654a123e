/* The measured preflight's `dcgmi diag -r 1` (--bench-dcgmi): asked of every node at the
 * bench's start, beside the measurements (it checks the node's software and GPUs' state, not
 * their speed), each node's answer kept as it came for the verdicts (check_bench_eval.c). A
 * node that goes, refuses or misses the deadline gets an answer of ours saying so. */
#include "check_bench.h"
#include "check_bench_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/protocol.h"

/* `dcgmi diag -r 1`: about a minute, bounded by the agent at this. */
#define DCGMI_SECONDS 90

struct check_bench_dcgmi {
    size_t n;
    cJSON **ans;      /* node i's bench_dcgmi answer; NULL: none yet */
    bool *asked;
    int64_t deadline;
};

struct check_bench_dcgmi *check_bench_dcgmi_new(size_t n)
{
    struct check_bench_dcgmi *d = xcalloc(1, sizeof *d);
    d->n = n;
    d->ans = xcalloc(n ? n : 1, sizeof *d->ans);
    d->asked = xcalloc(n ? n : 1, sizeof *d->asked);
    return d;
}

void check_bench_dcgmi_free(struct check_bench_dcgmi *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) cJSON_Delete(d->ans[i]);
    free(d->ans);
    free(d->asked);
    free(d);
}

void check_bench_dcgmi_start(struct check_bench_dcgmi *d, const struct check_bench_io *io, int tag,
                             const bool *alive, int64_t deadline)
{
    for (size_t i = 0; i < d->n; i++) {
        if (!alive[i]) continue;
        cJSON *m = io->request(io->ctx, i, WIRE_OP_BENCH_DCGMI, tag);
        cJSON_AddNumberToObject(m, "seconds", DCGMI_SECONDS);
        io->send(io->ctx, i, m);
        d->asked[i] = true;
    }
    d->deadline = deadline + DCGMI_SECONDS * 1000;
}

void check_bench_dcgmi_fail(struct check_bench_dcgmi *d, size_t i, const char *why)
{
    if (i >= d->n || !d->asked[i] || d->ans[i]) return;
    d->ans[i] = cJSON_CreateObject();
    cJSON_AddStringToObject(d->ans[i], "status", "error");
    cJSON_AddStringToObject(d->ans[i], "error", why);
}

void check_bench_dcgmi_message(struct check_bench_dcgmi *d, size_t i, const struct wire_msg *m)
{
    if (i >= d->n || !d->asked[i] || d->ans[i]) return;
    if (strcmp(m->ev, WIRE_EV_BENCH_DCGMI) == 0) {
        d->ans[i] = cJSON_Duplicate(m->json, 1);
        return;
    }
    char *why = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m->json, "error"));
    check_bench_dcgmi_fail(d, i, why ? why : "refused");
    free(why);
}

void check_bench_dcgmi_step(struct check_bench_dcgmi *d, int64_t now)
{
    if (now < d->deadline) return;
    for (size_t i = 0; i < d->n; i++) check_bench_dcgmi_fail(d, i, "no answer to bench_dcgmi in time");
}

bool check_bench_dcgmi_over(const struct check_bench_dcgmi *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->asked[i] && !d->ans[i]) return false;
    return true;
}

int64_t check_bench_dcgmi_deadline(const struct check_bench_dcgmi *d)
{
    return d->deadline;
}

const cJSON *check_bench_dcgmi_answer(const struct check_bench_dcgmi *d, size_t i)
{
    return i < d->n ? d->ans[i] : NULL;
}
