/* The runtime's one pseudo-random generator, splitmix64: tiny, fast, and its whole state is
 * one uint64_t, so a snapshot stores it as one field. Used for parameter init, the built-in
 * corpus and the sampler's shuffles; never the C library's rand(). */
#ifndef DDPTOP_RNG_H
#define DDPTOP_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) for n < 2^32, by multiply-shift (no modulo bias worth mentioning). */
static inline uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(((rng_next(s) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [0, 1) with 24 bits, exactly representable as float. */
static inline float rng_uniform(uint64_t *s)
{
    return (float)(rng_next(s) >> 40) * (1.0f / 16777216.0f);
}

/* Standard normal by Box-Muller (one of the pair; simplicity over speed: init only). */
static inline float rng_normal(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
