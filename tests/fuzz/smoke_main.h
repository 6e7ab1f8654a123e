/* The libFuzzer-free driver the fuzz harnesses share under -DFUZZ_SMOKE_MAIN: feeds mutations
 * (replace, insert, delete a byte from the harness's alphabet, or any byte) of the harness's
 * seed inputs to LLVMFuzzerTestOneInput, with a fixed xorshift seed so a failure reproduces. */
#ifndef DDPTOP_FUZZ_SMOKE_MAIN_H
#define DDPTOP_FUZZ_SMOKE_MAIN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fuzz_rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t fuzz_rng(void)
{
    fuzz_rng_state ^= fuzz_rng_state << 13;
    fuzz_rng_state ^= fuzz_rng_state >> 7;
    fuzz_rng_state ^= fuzz_rng_state << 17;
    return fuzz_rng_state;
}

/* alphabet holds alpha_len bytes (NULs allowed); argv[1] is the number of inputs. */
static int fuzz_smoke_run(int argc, char **argv, const char *name, const char *const *seeds,
                          size_t n_seeds, const char *alphabet, size_t alpha_len)
{
    long iterations = argc > 1 ? atol(argv[1]) : 5000;
    uint8_t buf[1024];
    for (long it = 0; it < iterations; it++) {
        const char *seed = seeds[fuzz_rng() % n_seeds];
        size_t n = strlen(seed);
        if (n > sizeof buf - 1) n = sizeof buf - 1;
        memcpy(buf, seed, n);
        for (int m = (int)(fuzz_rng() % 8); m >= 0; m--) {
            size_t at = n ? fuzz_rng() % n : 0;
            switch (fuzz_rng() % 4) {
            case 0:                              /* replace a byte */
                if (n) buf[at] = (uint8_t)alphabet[fuzz_rng() % alpha_len];
                break;
            case 1:                              /* insert a byte */
                if (n < sizeof buf - 1) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = (uint8_t)alphabet[fuzz_rng() % alpha_len];
                    n++;
                }
                break;
            case 2:                              /* delete a byte */
                if (n) {
                    memmove(buf + at, buf + at + 1, n - at - 1);
                    n--;
                }
                break;
            default:                             /* any byte value */
                if (n) buf[at] = (uint8_t)fuzz_rng();
                break;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%s: %ld inputs, no failure\n", name, iterations);
    return 0;
}

#endif
