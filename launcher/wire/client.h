/* The one client of the agent protocol (docs/protocol.md), as the controller speaks it to each
 * node: request ids, the requests still waiting for their answer and whose they are, the
 * greeting's version check. It knows no transport: requests come out as lines for the caller
 * to send, and lines the caller received go in. Both the preflight (check/) and the run
 * (controller/) speak through it, on the same connection. */
#ifndef DDPTOP_WIRE_CLIENT_H
#define DDPTOP_WIRE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

/* Who waits for an answer: the run's own requests, or the preflight's (tag >= WIRE_TAG_CHECK,
 * the preflight numbers its own tags from there). */
enum wire_tag {
    WIRE_TAG_NONE = 0,   /* an unprompted message, or an answer nobody waits for */
    WIRE_TAG_PING,
    WIRE_TAG_SPAWN,
    WIRE_TAG_STOP,
    WIRE_TAG_STACKS,
    WIRE_TAG_FILES,      /* list and read: the hang action's flight recorder dumps */
    WIRE_TAG_RESUME,     /* a new link's resume: the agent sends again what we miss */
    WIRE_TAG_CHECK = 1000,
};

struct wire_pending {
    int id;
    int tag;
};

struct wire_client {
    int next_id;
    struct wire_pending *pending;
    size_t n_pending, cap;
};

/* One message from the agent. json is owned by the message (wire_msg_done frees it). */
struct wire_msg {
    cJSON *json;
    const char *ev;   /* "hello", "facts", "out", ... */
    int id;           /* 0: none */
    int tag;          /* whose request this answers (WIRE_TAG_NONE: nobody's) */
};

void wire_client_init(struct wire_client *cl);
void wire_client_done(struct wire_client *cl);
/* Forgets every request in flight (the connection was replaced: their answers never come). */
void wire_client_reset(struct wire_client *cl);

/* A new request {"op":op,"id":N} whose answer will be tagged tag; *id gets N when not NULL. */
cJSON *wire_client_request(struct wire_client *cl, const char *op, int tag, int *id);
/* The same request's id, for a caller that writes the line itself (the ping, 1,024 a second). */
int wire_client_begin(struct wire_client *cl, int tag);
/* The request as one line (malloc'd, no newline); frees msg. */
char *wire_line(cJSON *msg);

/* Parses one line. Returns false (and nothing to free) when it is not a protocol message: not
 * JSON, or no "ev". An answer ("id" of a request in flight) takes the request's tag and ends
 * it, except that "error" answers of any request end it too; a partial answer ("more": true,
 * bench_nccl's unique id) takes the tag and leaves the request in flight. */
bool wire_client_parse(struct wire_client *cl, const char *line, struct wire_msg *out);

/* The tag of request id in flight, or WIRE_TAG_NONE; with take, the request ends. For a
 * caller that decodes an answer without wire_client_parse (the pong, 1,024 a second). */
int wire_client_tag(struct wire_client *cl, int id, bool take);
void wire_msg_done(struct wire_msg *m);

/* The greeting's protocol check: NULL when the agent speaks ours, else why not (static text
 * that says what to do). */
const char *wire_hello_mismatch(const cJSON *hello, char *buf, size_t len);

#endif
