/* Unit tests for util/chacha_poly.c against RFC 8439's vectors (the ChaCha20 block of 2.3.2,
 * the Poly1305 key generation of 2.6.2, Poly1305's 2.5.2 and the appendix's edge cases where
 * the last reduction must carry), and tags of other lengths fed in odd pieces and of messages
 * with every limb at its largest, checked against Python's `cryptography` (OpenSSL) when these
 * were written (and 4,000 random keys and messages, extremes among them, once by hand). */
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "util/chacha_poly.h"
#include "util/util.h"

static void hex_of(const unsigned char *b, size_t n, char *out)
{
    util_hex(b, n, out);
}

static void unhex(const char *h, unsigned char *out)
{
    for (size_t i = 0; h[2 * i]; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
}

static void test_chacha20_block(void)
{
    unsigned char key[32], nonce[12], out[64];
    char hex[129];
    for (int i = 0; i < 32; i++) key[i] = (unsigned char)i;
    unhex("000000090000004a00000000", nonce);
    chacha20_block(key, 1, nonce, out);
    hex_of(out, 64, hex);
    CHECK_STR(hex, "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
                   "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e");
    /* 2.6.2: the one-time Poly1305 key is the first half of block 0 */
    for (int i = 0; i < 32; i++) key[i] = (unsigned char)(0x80 + i);
    unhex("000000000001020304050607", nonce);
    chacha20_block(key, 0, nonce, out);
    hex_of(out, 32, hex);
    CHECK_STR(hex, "8ad5a08b905f81cc815040274ab29471a833b637e3fd0da508dbb8e2fdd1a646");
}

static void tag_of(const char *key_hex, const unsigned char *m, size_t n, size_t step, char out[33]);

/* Every limb at its largest, for long (two blocks a step: poly_blocks' r^2 path): no sum may
 * overflow its 128 bits. */
static void test_poly1305_extremes(void)
{
    static unsigned char m[4096];
    char tag[33];
    const char *ones = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    memset(m, 0xff, sizeof m);
    tag_of(ones, m, 1000, 1000, tag);
    CHECK_STR(tag, "de9406b10e7023bcd692ff687f4cbc7f");
    tag_of(ones, m, 1000, 13, tag);
    CHECK_STR(tag, "de9406b10e7023bcd692ff687f4cbc7f");
    tag_of("ffffffffffffffffffffffffffffffff00000000000000000000000000000000", m, sizeof m, sizeof m, tag);
    CHECK_STR(tag, "2927279b4c1d3e6b93286238199e131a");
}

static void tag_of(const char *key_hex, const unsigned char *m, size_t n, size_t step, char out[33])
{
    unsigned char key[32], tag[16];
    struct poly1305 p;
    unhex(key_hex, key);
    poly1305_init(&p, key);
    for (size_t off = 0; off < n; off += step) poly1305_update(&p, m + off, n - off < step ? n - off : step);
    poly1305_final(&p, tag);
    hex_of(tag, 16, out);
}

static void test_poly1305(void)
{
    static const char *const msg = "Cryptographic Forum Research Group";
    char tag[33];
    unsigned char m[1000];
    tag_of("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b", (const unsigned char *)msg,
           strlen(msg), 1000, tag);
    CHECK_STR(tag, "a8061dc1305136c6c22b8baf0c0127a9");
    tag_of("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b", (const unsigned char *)msg,
           strlen(msg), 5, tag);
    CHECK_STR(tag, "a8061dc1305136c6c22b8baf0c0127a9");
    /* appendix A.3, #5 to #8: h at or past 2^130 - 5 */
    memset(m, 0xff, 16);
    tag_of("0200000000000000000000000000000000000000000000000000000000000000", m, 16, 16, tag);
    CHECK_STR(tag, "03000000000000000000000000000000");
    memset(m, 0, 16);
    m[0] = 2;
    tag_of("02000000000000000000000000000000ffffffffffffffffffffffffffffffff", m, 16, 16, tag);
    CHECK_STR(tag, "03000000000000000000000000000000");
    unhex("fffffffffffffffffffffffffffffffff0ffffffffffffffffffffffffffffff11000000000000000000000000000000", m);
    tag_of("0100000000000000000000000000000000000000000000000000000000000000", m, 48, 48, tag);
    CHECK_STR(tag, "05000000000000000000000000000000");
    unhex("fffffffffffffffffffffffffffffffffbfefefefefefefefefefefefefefefe01010101010101010101010101010101", m);
    tag_of("0100000000000000000000000000000000000000000000000000000000000000", m, 48, 7, tag);
    CHECK_STR(tag, "00000000000000000000000000000000");
    /* lengths around a block, fed 3 bytes at a time and whole */
    {
        static const struct { size_t n; const char *tag; } want[] = {
            {0, "ffffffffffffffffffffffffffffffff"},   {1, "10ffff2f04fcff2f04fcff2f04fcff2f"},
            {15, "d194fa5a1ecb1b6715ade81eb83a61d6"},  {16, "cc94566017cb776c0ead4424b13abd87"},
            {17, "3b31b9367640136a3db40c7c2285a269"},  {63, "1a5e06c3f72dd2550bfc1219e50cfbaa"},
            {64, "1a5ea23eef2d6ed102fcae94dc0c9712"},  {1000, "182d6e8690ebbb9dc0c9c2316493100e"},
        };
        const char *ones = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
        for (size_t i = 0; i < sizeof m; i++) m[i] = (unsigned char)(i * 7 + 3);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            tag_of(ones, m, want[i].n, 3, tag);
            CHECK_STR(tag, want[i].tag);
            tag_of(ones, m, want[i].n, 1000, tag);
            CHECK_STR(tag, want[i].tag);
        }
    }
}

int main(void)
{
    RUN(test_chacha20_block);
    RUN(test_poly1305);
    RUN(test_poly1305_extremes);
    return tap_done();
}
