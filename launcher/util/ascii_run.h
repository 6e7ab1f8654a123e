/* The length of the leading run of plain ASCII in a buffer, 16 bytes a step (GCC's vector
 * extension, which clang has too: SSE2 on x86-64, NEON on arm64, plain words elsewhere). Rank
 * output passes through these twice on its way to the screen (the agent's JSON framing, the
 * headless printer's sanitizer), every byte of a flood; a word-at-a-time scan of our own was
 * the larger part of both. */
#ifndef DDPTOP_ASCII_RUN_H
#define DDPTOP_ASCII_RUN_H

#include <stdint.h>
#include <string.h>

typedef unsigned char ascii_v16 __attribute__((vector_size(16)));
typedef signed char ascii_m16 __attribute__((vector_size(16)));

static inline int ascii_any16(ascii_m16 m)
{
    uint64_t a, b;
    memcpy(&a, &m, 8);
    memcpy(&b, (const char *)&m + 8, 8);
    return (a | b) != 0;
}

/* Bytes 0x20..0x7e from s: what a terminal shows as it is (util/sanitize.c). */
static inline size_t ascii_printable_run(const unsigned char *s, size_t n)
{
    size_t k = 0;
    while (k + 16 <= n) {
        ascii_v16 v;
        memcpy(&v, s + k, 16);
        if (ascii_any16((ascii_m16)((ascii_v16)(v - 0x20) > 0x5e))) break;
        k += 16;
    }
    while (k < n && s[k] >= 0x20 && s[k] < 0x7f) k++;
    return k;
}

/* Bytes 0x20..0x7f but '"' and '\\' from s: what a JSON string takes as it is, with no UTF-8
 * check (agent/agent_stream.c). */
static inline size_t ascii_json_run(const unsigned char *s, size_t n)
{
    size_t k = 0;
    while (k + 16 <= n) {
        ascii_v16 v;
        memcpy(&v, s + k, 16);
        if (ascii_any16((ascii_m16)((ascii_v16)(v - 0x20) > 0x5f) | (ascii_m16)(v == '"') | (ascii_m16)(v == '\\')))
            break;
        k += 16;
    }
    while (k < n && s[k] >= 0x20 && s[k] < 0x80 && s[k] != '"' && s[k] != '\\') k++;
    return k;
}

#endif
