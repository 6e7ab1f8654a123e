/* Unit tests for the protocol client (wire/client.h): an answer takes its request's tag and ends
 * it; an "error" answer ends it too; a partial answer ("more": true, bench_nccl's unique id,
 * docs/protocol.md) takes the tag and leaves the request in flight for its real answer. */
#include <string.h>

#include "tap.h"
#include "wire/client.h"

static int parse_tag(struct wire_client *cl, const char *line)
{
    struct wire_msg m;
    if (!wire_client_parse(cl, line, &m)) return -1;
    int tag = m.tag;
    wire_msg_done(&m);
    return tag;
}

static void test_answers_end_requests(void)
{
    struct wire_client cl;
    int id1, id2;
    char line[200];
    wire_client_init(&cl);
    cJSON_Delete(wire_client_request(&cl, "bench_nccl", 4242, &id1));
    cJSON_Delete(wire_client_request(&cl, "facts", 77, &id2));
    /* the partial answer: tagged, the request still in flight */
    snprintf(line, sizeof line, "{\"ev\":\"bench_nccl_id\",\"id\":%d,\"more\":true,\"uid\":\"ab\"}", id1);
    CHECK_INT(parse_tag(&cl, line), 4242);
    CHECK_INT(wire_client_tag(&cl, id1, false), 4242);
    /* "more": false is no partial answer: the real one ends it */
    snprintf(line, sizeof line, "{\"ev\":\"bench_nccl\",\"id\":%d,\"more\":false,\"busbw_gbs\":1}", id1);
    CHECK_INT(parse_tag(&cl, line), 4242);
    CHECK_INT(wire_client_tag(&cl, id1, false), WIRE_TAG_NONE);
    CHECK_INT(parse_tag(&cl, line), WIRE_TAG_NONE);   /* a second answer answers nobody */
    snprintf(line, sizeof line, "{\"ev\":\"error\",\"id\":%d,\"error\":\"no\"}", id2);
    CHECK_INT(parse_tag(&cl, line), 77);
    CHECK_INT(wire_client_tag(&cl, id2, false), WIRE_TAG_NONE);
    wire_client_done(&cl);
}

int main(void)
{
    RUN(test_answers_end_requests);
    return tap_done();
}
