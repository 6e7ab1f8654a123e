/* The relay framing: how protocol lines travel through one Slurm job step that runs an agent on
 * every node (docs/protocol.md "Through srun"). srun gives the step one standard input, copied
 * to every task, and one standard output, the tasks' lines merged (each prefixed "K: " by
 * --label, K the task id). So:
 *
 *   controller -> relay (stdin, every task sees every line):  "K LINE"  (LINE for task K only;
 *                                                               LINE "!eof" ends its stdin,
 *                                                               "!unlink" removes its srun
 *                                                               --bcast copy)
 *   relay -> controller (stdout, after srun's "K: " label):   "=NAME ADDR[ kept]"  who, where (kept: agent_selfcache.h)
 *                                                               "+LLLPIECE"   a line goes on
 *                                                               ".LLLPIECE"   a line ends
 *                                                               "!STATUS"     the agent exited
 *
 * A protocol line is cut into pieces of at most RELAY_PIECE_MAX bytes, each its own output
 * line written on its own, LLL its length in 3 hex digits: srun passes lines shorter than its
 * 1 KiB I/O message whole, so no task's piece is mixed with another's, however long the
 * protocol line. When a task exits, slurmstepd may still cut what it had buffered at any byte
 * (docs/slurm-facts.md); srun labels the rest as a line of its own, and the length says that
 * it continues the piece. Pure: strings in, strings out. */
#ifndef DDPTOP_WIRE_RELAY_H
#define DDPTOP_WIRE_RELAY_H

#include <stdbool.h>
#include <stddef.h>

#include "util/util.h"

#define RELAY_PIECE_MAX 900
#define RELAY_EOF "!eof"
/* Sent to every task once every node's agent has started: none needs the --bcast copy any
 * more (where nodes share /tmp, one file served them all). */
#define RELAY_UNLINK "!unlink"

/* Appends line (len bytes, no '\n') to out as pieces ("+..." lines, then one "." line). */
void relay_frame(const char *line, size_t len, struct strbuf *out);

/* Reassembly of one task's pieces. */
struct relay_piece {
    struct strbuf line;   /* the protocol line so far */
    size_t need;          /* bytes of the current piece still to come (it was cut) */
    bool last;            /* the current piece ends the line */
    char hdr[4];          /* a piece's "+LLL" when it was cut inside it */
    size_t hdr_len;
};
/* Feeds one labelled output line's text (after "K: ", without '\n') that is a piece or the
 * rest of a cut one. Returns 1 when a whole protocol line is in p->line (the caller takes it
 * and resets p->line), 0 when more is to come, -1 when text is not a piece (then ignored). */
int relay_piece_feed(struct relay_piece *p, const char *text, size_t len);

/* One line of srun's output: srun's "K: " label (spaces before K allowed) and what follows.
 * Returns the task id, or -1 when the line carries no label (then *rest is the line). */
int relay_label(const char *line, const char **rest);

/* A task id or an exit status as the relay and srun write them: decimal digits, at most
 * RELAY_NUMBER_MAX. Returns it and sets *end past the digits, or -1 (no digit, or more than
 * that: never an overflow) leaving *end alone. */
#define RELAY_NUMBER_MAX 1000000
int relay_number(const char *s, const char **end);

/* "K LINE" from the controller: K into *task and LINE into *rest; -1 when malformed. */
int relay_address(const char *line, int *task, const char **rest);

#endif
