/* FNV-1a 64: a small, well-known, byte-order-free hash. Not cryptographic: it guards snapshots
 * against truncation and flipped bytes and lets ranks compare parameters, nothing more. */
#include "hash.h"

#include <string.h>

#define FNV1A64_PRIME 0x100000001b3ULL

uint64_t hash_fnv1a64(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV1A64_PRIME;
    }
    return h;
}

uint64_t hash_floats_le(uint64_t h, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int b = 0; b < 4; b++) {   /* least significant byte first: little-endian order */
            h ^= (u >> (8 * b)) & 0xffu;
            h *= FNV1A64_PRIME;
        }
    }
    return h;
}
