/* What the libFuzzer harnesses (tests/fuzz/fuzz_*.c) share: the entry point's prototype, an
 * invariant check that aborts (libFuzzer then saves the input as crash-*), and exact-size
 * copies of the input, so that ASan sees a read one byte past a line or a string. */
#ifndef DDPTOP_FUZZ_COMMON_H
#define DDPTOP_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

/* n bytes of data in a buffer of exactly n bytes (1 when n is 0): not NUL-terminated. */
static inline char *fuzz_bytes(const uint8_t *data, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (b) memcpy(b, data, n);
    return b;
}

/* n bytes of data and a NUL, in a buffer of exactly n + 1 bytes (a NUL inside ends it early). */
static inline char *fuzz_str(const uint8_t *data, size_t n)
{
    char *b = malloc(n + 1);
    if (b) {
        memcpy(b, data, n);
        b[n] = '\0';
    }
    return b;
}

#endif
