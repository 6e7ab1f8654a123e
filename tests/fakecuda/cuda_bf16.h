/* fakecuda: bfloat16 as the GPU stores it (the top 16 bits of an IEEE float), with the
 * round-to-nearest-even conversion of __float2bfloat16_rn. See cuda_runtime.h. */
#ifndef FAKECUDA_CUDA_BF16_H
#define FAKECUDA_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 { uint16_t bits; };

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {   /* NaN stays a (quiet) NaN */
        r.bits = (uint16_t)((u >> 16) | 0x40u);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);         /* ties to even */
    r.bits = (uint16_t)(u >> 16);
    return r;
}

/* Two bf16 values in 4 bytes, x in the low half (the lower address), as cuda_bf16.h has it. */
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b)
{
    __nv_bfloat162 r;
    r.x = __float2bfloat16_rn(a);
    r.y = __float2bfloat16_rn(b);
    return r;
}

static inline float __bfloat162float(__nv_bfloat16 b)
{
    uint32_t u = (uint32_t)b.bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
