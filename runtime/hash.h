/* Hashes the runtime needs: FNV-1a 64 for the parameter checksum in the "done" metrics line
 * and for the snapshot's integrity check. Both are over bytes, so they are the same on every
 * machine as long as the bytes are (the snapshot format is little-endian). */
#ifndef DDPTOP_HASH_H
#define DDPTOP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A64_INIT 0xcbf29ce484222325ULL

/* Continues an FNV-1a 64 hash over data[0..len); start with HASH_FNV1A64_INIT. */
uint64_t hash_fnv1a64(uint64_t h, const void *data, size_t len);

/* FNV-1a 64 of n floats taken as their little-endian IEEE 754 bytes, whatever the host order. */
uint64_t hash_floats_le(uint64_t h, const float *x, size_t n);

#endif
