/* libFuzzer harness for the ELF reader (util/elf_needs.c) that ddptop runs over the agents it
 * finds beside itself before uploading one (ssh/agent_kit.c): a truncated or foreign file there
 * must give a message, not a crash or a read outside the bytes. Built and run by `make
 * fuzz-programs`, `make fuzz` and `make test` (docs/testing.md, "Fuzzing"); its seeds are
 * small ELF files with version needs (tests/fuzz/corpus/elf_needs).
 *
 * Invariants: a file read without error names a known architecture or none, a glibc version in
 * range; a failure always says why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/elf_needs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_elf_needs: invariant failed: %s\n", #cond); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct elf_needs en;
    char err[256];
    /* a copy of exactly size bytes: ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    err[0] = '\0';
    if (elf_needs_parse(buf, size, &en, err, sizeof err) == 0) {
        EXPECT(en.arch[0] == '\0' || strcmp(en.arch, "x86_64") == 0 || strcmp(en.arch, "aarch64") == 0 ||
               strcmp(en.arch, "ppc64le") == 0 || strcmp(en.arch, "s390x") == 0 || strcmp(en.arch, "riscv64") == 0);
        EXPECT(en.glibc_major >= 0 && en.glibc_major <= 1000 && en.glibc_minor >= 0 && en.glibc_minor <= 1000);
    } else {
        EXPECT(err[0] != '\0');
    }
    free(buf);
    return 0;
}
