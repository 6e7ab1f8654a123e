/* SHA-256: the NIST/FIPS 180-4 test vectors, streaming in odd-sized pieces, and file hashing
 * (what the agent uses to compare training commands and NCCL configs across nodes). */
#include "util/sha256.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static const char *hash_str(const char *s, size_t n, char out[65])
{
    struct sha256 h;
    unsigned char d[32];
    sha256_init(&h);
    sha256_update(&h, s, n);
    sha256_final(&h, d);
    sha256_hex(d, out);
    return out;
}

static void test_empty(void)
{
    char out[65];
    CHECK_STR(hash_str("", 0, out), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_abc(void)
{
    char out[65];
    CHECK_STR(hash_str("abc", 3, out), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_448_bits(void)
{
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char out[65];
    CHECK_INT(strlen(m), 56);
    CHECK_STR(hash_str(m, strlen(m), out),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_896_bits(void)
{
    const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                    "klmnopqrlmnopqrsmnopqrstnopqrstu";
    char out[65];
    CHECK_STR(hash_str(m, strlen(m), out),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

/* A million 'a' fed in pieces of 1..97 bytes, so every block-boundary case of update runs. */
static void test_million_a_streaming(void)
{
    static char buf[97];
    struct sha256 h;
    unsigned char d[32];
    char out[65];
    size_t left = 1000000, step = 1;
    memset(buf, 'a', sizeof buf);
    sha256_init(&h);
    while (left) {
        size_t n = step < left ? step : left;
        sha256_update(&h, buf, n);
        left -= n;
        step = step % 97 + 1;
    }
    sha256_final(&h, d);
    sha256_hex(d, out);
    CHECK_STR(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes) hash the same in one piece and
 * byte by byte. */
static void test_padding_boundaries(void)
{
    static const size_t lens[] = { 55, 56, 57, 63, 64, 65, 119, 120, 128 };
    char m[128];
    memset(m, 'x', sizeof m);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char whole[65], bytewise[65];
        struct sha256 h;
        unsigned char d[32];
        hash_str(m, lens[i], whole);
        sha256_init(&h);
        for (size_t j = 0; j < lens[i]; j++) sha256_update(&h, m + j, 1);
        sha256_final(&h, d);
        sha256_hex(d, bytewise);
        CHECK_STR(bytewise, whole);
    }
    char out[65];
    /* 64 bytes: one full block plus a padding block (known answer from Python's hashlib). */
    CHECK_STR(hash_str(m, 64, out), "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

static void test_file(void)
{
    char path[] = "/tmp/ddptop-test-sha256-XXXXXX";
    char out[65];
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK_INT(write(fd, "abc", 3), 3);
    close(fd);
    CHECK_INT(sha256_file_hex(path, out), 0);
    CHECK_STR(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    errno = 0;
    CHECK_INT(sha256_file_hex(path, out), -1);
    CHECK_INT(errno, ENOENT);
    CHECK_INT(sha256_file_hex("/", out), -1); /* a directory opens but cannot be read */
}

int main(void)
{
    RUN(test_empty);
    RUN(test_abc);
    RUN(test_448_bits);
    RUN(test_896_bits);
    RUN(test_million_a_streaming);
    RUN(test_padding_boundaries);
    RUN(test_file);
    return tap_done();
}
