/* What an executable asks of the machine that runs it, read from its ELF file: the
 * architecture it is built for (in `uname -m`'s words) and the newest glibc symbol version it
 * needs. ddptop reads its agents with it, to choose one per node and to say why a node cannot
 * run one (docs/check.md, "Which nodes"); tests/it_agent_glibc.sh compares it with readelf. */
#ifndef DDPTOP_UTIL_ELF_NEEDS_H
#define DDPTOP_UTIL_ELF_NEEDS_H

#include <stddef.h>

struct elf_needs {
    char arch[16];        /* "x86_64", "aarch64", ...; "" when the machine is not known */
    int glibc_major;      /* the highest GLIBC_X.Y among its version needs; 0.0: none (static, */
    int glibc_minor;      /* or not linked against glibc) */
};

/* Files larger than this are not read (an agent is about a megabyte). */
#define ELF_NEEDS_MAX_BYTES (64u << 20)

/* Reads path. 0, or -1 with a message in err ("not an ELF file", "truncated ..."). Only 64-bit
 * little-endian ELF files are understood (every architecture ddptop builds agents for). */
int elf_needs_read(const char *path, struct elf_needs *out, char *err, size_t errlen);
/* The same on bytes in memory (the fuzz target and the unit test). */
int elf_needs_parse(const unsigned char *buf, size_t n, struct elf_needs *out, char *err, size_t errlen);
/* "x86_64" for EM_X86_64 and the like; NULL for a machine without a name here. */
const char *elf_needs_arch_name(unsigned machine);
/* Compares glibc versions a.b and c.d: <0, 0, >0. */
int elf_needs_glibc_cmp(int a, int b, int c, int d);

#endif
