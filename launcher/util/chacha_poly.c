/* ChaCha20's block function and Poly1305 (RFC 8439), see chacha_poly.h. Poly1305 in radix 2^44
 * (three 64-bit limbs, products in 128 bits), as poly1305-donna's 64-bit version. */
#include "chacha_poly.h"

#include <string.h>

__extension__ typedef unsigned __int128 u128;

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; /* gcc makes it one load */
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

#define ROTL(v, n) ((v) << (n) | (v) >> (32 - (n)))
#define QUARTER(a, b, c, d)                                        \
    do {                                                           \
        x[a] += x[b]; x[d] ^= x[a]; x[d] = ROTL(x[d], 16);         \
        x[c] += x[d]; x[b] ^= x[c]; x[b] = ROTL(x[b], 12);         \
        x[a] += x[b]; x[d] ^= x[a]; x[d] = ROTL(x[d], 8);          \
        x[c] += x[d]; x[b] ^= x[c]; x[b] = ROTL(x[b], 7);          \
    } while (0)

void chacha20_block(const unsigned char key[32], uint32_t counter, const unsigned char nonce[12],
                    unsigned char out[64])
{
    uint32_t in[16], x[16];
    in[0] = 0x61707865;
    in[1] = 0x3320646e;
    in[2] = 0x79622d32;
    in[3] = 0x6b206574;
    for (int i = 0; i < 8; i++) in[4 + i] = le32(key + 4 * i);
    in[12] = counter;
    for (int i = 0; i < 3; i++) in[13 + i] = le32(nonce + 4 * i);
    memcpy(x, in, sizeof x);
    for (int i = 0; i < 10; i++) {
        QUARTER(0, 4, 8, 12);
        QUARTER(1, 5, 9, 13);
        QUARTER(2, 6, 10, 14);
        QUARTER(3, 7, 11, 15);
        QUARTER(0, 5, 10, 15);
        QUARTER(1, 6, 11, 12);
        QUARTER(2, 7, 8, 13);
        QUARTER(3, 4, 9, 14);
    }
    for (int i = 0; i < 16; i++) {
        uint32_t v = x[i] + in[i];
        out[4 * i] = (unsigned char)v;
        out[4 * i + 1] = (unsigned char)(v >> 8);
        out[4 * i + 2] = (unsigned char)(v >> 16);
        out[4 * i + 3] = (unsigned char)(v >> 24);
    }
    /* the key stream is the one-time key of a line: no copy of it stays on the stack */
    explicit_bzero(x, sizeof x);
    explicit_bzero(in, sizeof in);
}

#define M44 0xfffffffffffULL
#define M42 0x3ffffffffffULL

/* d (three 128-bit sums) carried back into three limbs of 44, 44 and 42 bits, the part above
 * 2^130 folded in times 5 (2^130 = 5 mod p): h is then below p plus a little, not reduced. */
#define POLY_CARRY(d0, d1, d2, h0, h1, h2)   \
    do {                                     \
        uint64_t c_ = (uint64_t)(d0 >> 44);  \
        h0 = (uint64_t)d0 & M44;             \
        d1 += c_;                            \
        c_ = (uint64_t)(d1 >> 44);           \
        h1 = (uint64_t)d1 & M44;             \
        d2 += c_;                            \
        c_ = (uint64_t)(d2 >> 42);           \
        h2 = (uint64_t)d2 & M42;             \
        h0 += c_ * 5;                        \
        c_ = h0 >> 44;                       \
        h0 &= M44;                           \
        h1 += c_;                            \
    } while (0)

void poly1305_init(struct poly1305 *p, const unsigned char key[32])
{
    uint64_t t0 = le64(key), t1 = le64(key + 8);
    /* r is clamped as the RFC says (r &= 0x0ffffffc0ffffffc0ffffffc0fffffff) */
    p->r[0] = t0 & 0xffc0fffffffULL;
    p->r[1] = (t0 >> 44 | t1 << 20) & 0xfffffc0ffffULL;
    p->r[2] = (t1 >> 24) & 0x00ffffffc0fULL;
    p->h[0] = p->h[1] = p->h[2] = 0;
    {
        /* r^2 for two blocks a step (poly_blocks) */
        uint64_t r0 = p->r[0], r1 = p->r[1], r2 = p->r[2], s1 = r1 * (5 << 2), s2 = r2 * (5 << 2);
        u128 d0 = (u128)r0 * r0 + (u128)r1 * s2 + (u128)r2 * s1;
        u128 d1 = (u128)r0 * r1 + (u128)r1 * r0 + (u128)r2 * s2;
        u128 d2 = (u128)r0 * r2 + (u128)r1 * r1 + (u128)r2 * r0;
        POLY_CARRY(d0, d1, d2, p->rr[0], p->rr[1], p->rr[2]);
    }
    p->pad[0] = le64(key + 16);
    p->pad[1] = le64(key + 24);
    p->fill = 0;
}

/* 16-byte blocks; hibit is 2^128 in the top limb's place for a whole block, 0 for the padded
 * last one (its 1 byte is already in the block). Two blocks a step where there are two,
 * h = (h + m1) r^2 + m2 r: the two products do not wait on each other, which is most of the
 * speed (every byte of the ranks' output passes here). Limbs times r's are below 2^94, six of
 * them summed below 2^97: 128 bits hold them. */
static void poly_blocks(struct poly1305 *p, const unsigned char *m, size_t n, uint64_t hibit)
{
    uint64_t r0 = p->r[0], r1 = p->r[1], r2 = p->r[2];
    uint64_t s1 = r1 * (5 << 2), s2 = r2 * (5 << 2);
    uint64_t q0 = p->rr[0], q1 = p->rr[1], q2 = p->rr[2];
    uint64_t t1s = q1 * (5 << 2), t2s = q2 * (5 << 2);
    uint64_t h0 = p->h[0], h1 = p->h[1], h2 = p->h[2];
    while (n >= 32) {
        uint64_t a0 = le64(m), a1 = le64(m + 8), b0 = le64(m + 16), b1 = le64(m + 24);
        uint64_t x0 = h0 + (a0 & M44), x1 = h1 + ((a0 >> 44 | a1 << 20) & M44), x2 = h2 + (((a1 >> 24) & M42) | hibit);
        uint64_t y0 = b0 & M44, y1 = (b0 >> 44 | b1 << 20) & M44, y2 = ((b1 >> 24) & M42) | hibit;
        u128 d0 = (u128)x0 * q0 + (u128)x1 * t2s + (u128)x2 * t1s + (u128)y0 * r0 + (u128)y1 * s2 + (u128)y2 * s1;
        u128 d1 = (u128)x0 * q1 + (u128)x1 * q0 + (u128)x2 * t2s + (u128)y0 * r1 + (u128)y1 * r0 + (u128)y2 * s2;
        u128 d2 = (u128)x0 * q2 + (u128)x1 * q1 + (u128)x2 * q0 + (u128)y0 * r2 + (u128)y1 * r1 + (u128)y2 * r0;
        POLY_CARRY(d0, d1, d2, h0, h1, h2);
        m += 32;
        n -= 32;
    }
    while (n >= 16) {
        uint64_t t0 = le64(m), t1 = le64(m + 8);
        u128 d0, d1, d2;
        h0 += t0 & M44;
        h1 += (t0 >> 44 | t1 << 20) & M44;
        h2 += ((t1 >> 24) & M42) | hibit;
        d0 = (u128)h0 * r0 + (u128)h1 * s2 + (u128)h2 * s1;
        d1 = (u128)h0 * r1 + (u128)h1 * r0 + (u128)h2 * s2;
        d2 = (u128)h0 * r2 + (u128)h1 * r1 + (u128)h2 * r0;
        POLY_CARRY(d0, d1, d2, h0, h1, h2);
        m += 16;
        n -= 16;
    }
    p->h[0] = h0;
    p->h[1] = h1;
    p->h[2] = h2;
}

void poly1305_update(struct poly1305 *p, const void *data, size_t n)
{
    const unsigned char *m = data;
    if (p->fill) {
        size_t take = 16 - p->fill < n ? 16 - p->fill : n;
        memcpy(p->buf + p->fill, m, take);
        p->fill += take;
        m += take;
        n -= take;
        if (p->fill < 16) return;
        poly_blocks(p, p->buf, 16, 1ULL << 40);
        p->fill = 0;
    }
    if (n >= 16) {
        size_t whole = n & ~(size_t)15;
        poly_blocks(p, m, whole, 1ULL << 40);
        m += whole;
        n -= whole;
    }
    memcpy(p->buf, m, n);
    p->fill = n;
}

void poly1305_final(struct poly1305 *p, unsigned char tag[16])
{
    uint64_t h0, h1, h2, g0, g1, g2, c, t0, t1;
    if (p->fill) {
        p->buf[p->fill] = 1;
        memset(p->buf + p->fill + 1, 0, 15 - p->fill);
        poly_blocks(p, p->buf, 16, 0);
    }
    h0 = p->h[0];
    h1 = p->h[1];
    h2 = p->h[2];
    /* carry through, then h mod 2^130 - 5 chosen without a branch on it */
    c = h1 >> 44; h1 &= M44;
    h2 += c; c = h2 >> 42; h2 &= M42;
    h0 += c * 5; c = h0 >> 44; h0 &= M44;
    h1 += c; c = h1 >> 44; h1 &= M44;
    h2 += c; c = h2 >> 42; h2 &= M42;
    h0 += c * 5; c = h0 >> 44; h0 &= M44;
    h1 += c;
    g0 = h0 + 5; c = g0 >> 44; g0 &= M44;
    g1 = h1 + c; c = g1 >> 44; g1 &= M44;
    g2 = h2 + c - (1ULL << 42);
    c = (g2 >> 63) - 1; /* all ones when h >= p: take g */
    g0 &= c; g1 &= c; g2 &= c;
    c = ~c;
    h0 = (h0 & c) | g0;
    h1 = (h1 & c) | g1;
    h2 = (h2 & c) | g2;
    t0 = p->pad[0];
    t1 = p->pad[1];
    h0 += t0 & M44; c = h0 >> 44; h0 &= M44;
    h1 += ((t0 >> 44 | t1 << 20) & M44) + c; c = h1 >> 44; h1 &= M44;
    h2 += ((t1 >> 24) & M42) + c; h2 &= M42;
    put_le64(tag, h0 | h1 << 44);
    put_le64(tag + 8, h1 >> 20 | h2 << 24);
    explicit_bzero(p, sizeof *p);
}
