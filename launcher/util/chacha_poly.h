/* ChaCha20's block function and Poly1305 (RFC 8439), no dependencies: the one-time MAC of each
 * line on the agents' direct connections under srun (wire/direct_line.h). Every byte of a
 * rank's output passes it twice (the agent seals, ddptop opens), so it is chosen for speed
 * where SHA-256 has no instructions: Poly1305 runs at a few cycles a byte in portable C (64-bit
 * limbs), ChaCha20 makes each line's one-time key in one block. No encryption is done here. */
#ifndef DDPTOP_CHACHA_POLY_H
#define DDPTOP_CHACHA_POLY_H

#include <stddef.h>
#include <stdint.h>

/* One 64-byte block of ChaCha20's key stream (RFC 8439 2.3). */
void chacha20_block(const unsigned char key[32], uint32_t counter, const unsigned char nonce[12],
                    unsigned char out[64]);

/* Poly1305 (RFC 8439 2.5), streaming. The key must never be used for two messages. */
struct poly1305 {
    uint64_t r[3], rr[3], h[3], pad[2]; /* rr: r^2 */
    unsigned char buf[16];
    size_t fill;
};
void poly1305_init(struct poly1305 *p, const unsigned char key[32]);
void poly1305_update(struct poly1305 *p, const void *data, size_t n);
/* The tag; the state is wiped. */
void poly1305_final(struct poly1305 *p, unsigned char tag[16]);

#endif
