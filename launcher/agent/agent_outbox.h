/* The agent's messages to its controller, kept in the order they were made, and the spool that
 * lets a run outlive the control plane (docs/protocol.md "Reconnecting"). A message is either
 * plain (answers, status, GPU samples: useless once the link that asked for them is gone) or
 * durable: a rank's output and its exit, numbered per rank (seq from 1, on for every attempt
 * this agent runs) and kept after it was written until the controller acknowledges it. When a
 * link is lost, the durable messages wait here; on the next link the controller says what it
 * has and everything after it goes again, in the original order. No I/O but outbox_write. */
#ifndef DDPTOP_AGENT_OUTBOX_H
#define DDPTOP_AGENT_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

struct outbox;

struct outbox *outbox_new(void);
void outbox_free(struct outbox *ob);

/* A plain message: one line (no '\n' in it; one is added). */
void outbox_add(struct outbox *ob, const char *line, size_t len);
/* Written before anything queued, even while the outbox is held (the hello of a new link). */
void outbox_add_urgent(struct outbox *ob, const char *line, size_t len);
/* The number the next durable message of rank gets; outbox_add_durable takes it. */
uint64_t outbox_next_seq(struct outbox *ob, int rank);
void outbox_add_durable(struct outbox *ob, int rank, uint64_t seq, const char *line, size_t len);

/* Writes what fd takes without blocking (several messages per writev). 0, or -1 on an error
 * other than EAGAIN/EINTR (errno kept): the link is gone. */
int outbox_write(struct outbox *ob, int fd);
/* Bytes that can be written now (urgent ones included; while held, only those), and bytes held
 * in all (the spool: unwritten, and written durable ones not yet acknowledged). */
size_t outbox_unsent(const struct outbox *ob);
size_t outbox_bytes(const struct outbox *ob);
/* Bytes of durable messages not yet acknowledged: what a controller still needs. */
size_t outbox_durable_bytes(const struct outbox *ob);

/* Gives back the memory of held messages no longer needed for reuse (agent_outslab.h): call
 * it about once a second. */
void outbox_trim(struct outbox *ob);
/* The controller has rank's durable messages up to seq: they are let go. */
void outbox_ack(struct outbox *ob, int rank, uint64_t seq);

/* The link ended: plain messages are dropped (nobody will read them). */
void outbox_unlink(struct outbox *ob);
/* A new link: plain messages queued for the old one are dropped, and nothing but urgent lines
 * is written until outbox_resume. */
void outbox_relink(struct outbox *ob);
/* The new link's controller has rank's messages up to from(ctx, rank) (0: none): those are
 * let go, every later durable message is written again from the oldest, then what came since.
 * *n and *bytes: how many durable messages go again. */
void outbox_resume(struct outbox *ob, uint64_t (*from)(void *ctx, int rank), void *ctx, size_t *n,
                   size_t *bytes);
int outbox_held(const struct outbox *ob);

#endif
