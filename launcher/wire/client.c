/* The agent client (client.h): request ids and the table of requests in flight. A node has a
 * few requests in flight at a time (pings, the preflight's connects: one per peer it tests),
 * so the table is a small array searched from the end, where the newest are. */
#include "client.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_num.h"
#include "protocol.h"
#include "util/util.h"

void wire_client_init(struct wire_client *cl)
{
    memset(cl, 0, sizeof *cl);
}

void wire_client_done(struct wire_client *cl)
{
    free(cl->pending);
    memset(cl, 0, sizeof *cl);
}

void wire_client_reset(struct wire_client *cl)
{
    cl->n_pending = 0;
}

int wire_client_begin(struct wire_client *cl, int tag)
{
    cl->next_id++;
    if (cl->n_pending == cl->cap) {
        cl->cap = cl->cap ? 2 * cl->cap : 16;
        cl->pending = xrealloc(cl->pending, cl->cap * sizeof *cl->pending);
    }
    cl->pending[cl->n_pending++] = (struct wire_pending){.id = cl->next_id, .tag = tag};
    return cl->next_id;
}

cJSON *wire_client_request(struct wire_client *cl, const char *op, int tag, int *id)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) util_fatal("out of memory (cJSON)");
    int n = wire_client_begin(cl, tag);
    cJSON_AddStringToObject(m, "op", op);
    cJSON_AddNumberToObject(m, "id", n);
    if (id) *id = n;
    return m;
}

char *wire_line(cJSON *msg)
{
    char *s = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!s) util_fatal("out of memory (cJSON)");
    return s;
}

int wire_client_tag(struct wire_client *cl, int id, bool take)
{
    for (size_t k = cl->n_pending; k-- > 0;) {
        if (cl->pending[k].id != id) continue;
        int tag = cl->pending[k].tag;
        if (!take) return tag;
        memmove(&cl->pending[k], &cl->pending[k + 1], (cl->n_pending - k - 1) * sizeof *cl->pending);
        cl->n_pending--;
        return tag;
    }
    return WIRE_TAG_NONE;
}

bool wire_client_parse(struct wire_client *cl, const char *line, struct wire_msg *out)
{
    cJSON *m = cJSON_Parse(line);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(m, "ev");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    memset(out, 0, sizeof *out);
    if (!m || !cJSON_IsString(ev)) {
        cJSON_Delete(m);
        return false;
    }
    out->json = m;
    out->ev = ev->valuestring;
    /* an id that is not one of ours (2.5, 1e300) answers nothing: cJSON's valueint would
     * round or saturate it onto one */
    if (!json_int_in_i(id, 1, INT_MAX, &out->id)) out->id = 0;
    /* a partial answer ("more": true, bench_nccl's unique id) leaves its request in flight */
    out->tag = out->id ? wire_client_tag(cl, out->id, !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "more")))
                       : WIRE_TAG_NONE;
    return true;
}

void wire_msg_done(struct wire_msg *m)
{
    cJSON_Delete(m->json);
    memset(m, 0, sizeof *m);
}

const char *wire_hello_mismatch(const cJSON *hello, char *buf, size_t len)
{
    const cJSON *proto = cJSON_GetObjectItemCaseSensitive(hello, "protocol");
    char text[32];
    if (cJSON_IsNumber(proto) && proto->valuedouble == PROTOCOL_VERSION) return NULL;
    snprintf(buf, len, "its agent speaks protocol %s, this ddptop speaks %d (remove the stale agent in --agent-dir)",
             cJSON_IsNumber(proto) ? json_num_text(proto, text, sizeof text) : "?", PROTOCOL_VERSION);
    return buf;
}
