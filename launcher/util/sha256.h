/* SHA-256 (FIPS 180-4), streaming, no dependencies: the agent hashes the training command and
 * NCCL config files so `ddptop check` can compare them across nodes. */
#ifndef DDPTOP_SHA256_H
#define DDPTOP_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t state[8];
    uint64_t bytes;          /* total message length so far */
    unsigned char block[64]; /* pending partial block */
    size_t fill;             /* bytes used in block */
};

void sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *data, size_t n);
void sha256_final(struct sha256 *h, unsigned char digest[32]);

/* Lower-case hex of a digest into out[65] (NUL-terminated). */
void sha256_hex(const unsigned char digest[32], char out[65]);
/* Hashes a whole file into out_hex[65]; -1 (errno set) when it cannot be opened or read. */
int sha256_file_hex(const char *path, char out_hex[65]);

#endif
