/* The lines of a direct connection after its handshake (wire/direct.h). Each one carries a MAC
 * under a key of its direction that only the two ends of this handshake can derive, over the
 * line and its number in that direction: whoever can write into the TCP stream without the
 * step's key cannot add, change, replay, reorder or drop a line unseen (issue 28).
 *
 *   "TAG LINE"   TAG: 32 hex digits, Poly1305 of LINE under the one-time key made as RFC 8439's
 *                AEAD makes it: ChaCha20(K, counter 0, nonce 0^4 || N as 64-bit little endian),
 *                its first 32 bytes; N the line's number in its direction, from 0; K =
 *                HMAC(key, "ddptop-direct agent-lines TASK NA NC") from the agent,
 *                HMAC(key, "ddptop-direct controller-lines TASK NA NC") from ddptop.
 *
 * LINE itself goes as it is (not encrypted: like srun's own I/O forwarding beside it). Poly1305
 * rather than HMAC-SHA-256: every byte of the ranks' output is sealed by the agent and opened by
 * ddptop, and it costs a fraction of SHA-256 in portable C (docs/performance.md). Pure. */
#ifndef DDPTOP_WIRE_DIRECT_LINE_H
#define DDPTOP_WIRE_DIRECT_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "direct.h"
#include "util/util.h"

#define DIRECT_TAG_HEX 32
/* What a sealed line adds to the line: its tag and a blank. */
#define DIRECT_LINE_OVERHEAD (DIRECT_TAG_HEX + 1)
#define DIRECT_ROLE_AGENT_LINES "agent-lines"
#define DIRECT_ROLE_CONTROLLER_LINES "controller-lines"

/* One direction of one connection: its key and the number of its next line. */
struct direct_line_key {
    unsigned char key[32];
    uint64_t seq;
};

/* The key of role's lines (DIRECT_ROLE_*) from the handshake's values; seq 0. */
void direct_line_init(struct direct_line_key *d, const unsigned char key[DIRECT_KEY_LEN], const char *role,
                      int task, const char *na, const char *nc);
/* Appends "TAG LINE\n" (line: len bytes, no '\n') to out; the next line's number. */
void direct_line_seal(struct direct_line_key *d, const char *line, size_t len, struct strbuf *out);
/* One received line (len bytes, without its '\n'): DIRECT_LINE_OVERHEAD, where LINE begins,
 * when its tag is right for the next number (which it then takes); -1 when it is not (malformed,
 * another line's, another connection's: the caller ends the connection). */
int direct_line_open(struct direct_line_key *d, const char *line, size_t len);
/* The key wiped (the connection is over, or this process is a child that must not hold it). */
void direct_line_wipe(struct direct_line_key *d);

#endif
