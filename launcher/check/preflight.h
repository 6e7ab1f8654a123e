/* The preflight: the checks of `ddptop check` (ssh, clock, gpu, env parity, tcp reachability,
 * NCCL interfaces; docs/check.md) as a state machine per node that the controller drives on
 * its own connections. The controller connects every node once; as each node's agent greets,
 * the preflight asks it, in order: facts, CLOCK_SAMPLES clock round trips, listen. When every
 * node got that far (or failed), each agent connects to its peers' listeners and to the first
 * node's --master-port. `ddptop check` stops there; `ddptop run` goes on to launch on the same
 * connections. Verdicts come from check_eval*.c; the report is check_report.h's. */
#ifndef DDPTOP_CHECK_PREFLIGHT_H
#define DDPTOP_CHECK_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "node_opts.h"
#include "check_report.h"
#include "wire/client.h"

struct host;
struct preflight;

/* How the preflight talks to node i's agent through the controller's client. */
struct preflight_io {
    void *ctx;
    /* A new request (op, id) whose answer comes back to preflight_node_message with tag. */
    cJSON *(*request)(void *ctx, size_t node, const char *op, int tag);
    /* Sends it (takes msg). */
    void (*send)(void *ctx, size_t node, cJSON *msg);
};

/* What the controller knows of a node's connection once its agent greeted. */
struct preflight_link {
    const char *user;
    const char *address;     /* HostName after the ssh config: the address peers use */
    int port;
    bool uploaded;           /* the agent was uploaded by this connection */
    const char *upload_method; /* "sftp", "exec" (no sftp subsystem), NULL: not uploaded */
    int64_t login_ms;        /* the login shell's start, -1 unknown */
};

/* Login shells slower than this get a warning in the ssh column (docs/check.md). */
#define PREFLIGHT_SLOW_LOGIN_MS 5000

/* hosts[0..n) and o must outlive it. */
struct preflight *preflight_new(const struct node_opts *o, const struct host *hosts, size_t n,
                                const struct preflight_io *io);
void preflight_free(struct preflight *p);

/* Node i's connection began (its address and port are known now). */
void preflight_node_connecting(struct preflight *p, size_t i, const char *address, int port);
/* Node i's agent greeted (hello): the checks begin. */
void preflight_node_up(struct preflight *p, size_t i, const struct preflight_link *l, const cJSON *hello);
/* Node i cannot be reached, or its agent is gone: error and hint for the ssh column. */
void preflight_node_down(struct preflight *p, size_t i, const char *error, const char *hint);
/* An answer to one of the preflight's requests (m->tag >= WIRE_TAG_CHECK); line is its text. */
void preflight_node_message(struct preflight *p, size_t i, const struct wire_msg *m, const char *line);

/* Timers: requests without an answer in time, the start and end of the tcp phase. */
void preflight_step(struct preflight *p, int64_t now_ms);
/* Monotonic ms of its next timer (0: none). */
int64_t preflight_deadline_ms(const struct preflight *p);
/* Every node is done (checked, or failed); the report is final once this is true. */
bool preflight_done(struct preflight *p);

/* The report: live while the checks run (rows fill in), final once done. */
const struct check_report *preflight_report(const struct preflight *p);
/* True once after anything in the report changed (for the front end's redraw). */
bool preflight_take_dirty(struct preflight *p);
/* Node i's GPU count from its facts, -1 unknown. */
int preflight_gpu_count(const struct preflight *p, size_t i);
/* What NCCL should do on node i (docs/nccl.md): the interfaces NCCL_SOCKET_IFNAME or NCCL's
 * default rule selects there, comma-joined into ifaces ("" unknown), and its active IB
 * ports (-1 unknown), from the nccl check's fields. */
void preflight_nccl_expect(const struct preflight *p, size_t i, char *ifaces, size_t cap, int *ib_ports);

#endif
