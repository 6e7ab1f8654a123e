/* elf_needs.h: the ELF header's machine and the version needs (SHT_GNU_verneed) of a file, read
 * with every offset and count checked against the bytes there are: the file is ours, but a
 * truncated copy or a wrong file beside ddptop must give a message, not a crash. */
#include "elf_needs.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *elf_needs_arch_name(unsigned machine)
{
    switch (machine) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_PPC64: return "ppc64le";
    case EM_S390: return "s390x";
#ifdef EM_RISCV
    case EM_RISCV: return "riscv64";
#endif
    default: return NULL;
    }
}

int elf_needs_glibc_cmp(int a, int b, int c, int d)
{
    if (a != c) return a < c ? -1 : 1;
    if (b != d) return b < d ? -1 : 1;
    return 0;
}

static int fail(char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    return -1;
}

/* [off, off + len) lies inside n bytes */
static int inside(size_t n, uint64_t off, uint64_t len)
{
    return off <= n && len <= n - off;
}

/* "GLIBC_2.17" (not GLIBC_PRIVATE, not GLIBC_ABI_...): its version into *maj.*min */
static int glibc_version(const char *s, size_t room, int *maj, int *min)
{
    const char *p;
    char *end;
    long a, b = 0;
    if (room < 7 || strncmp(s, "GLIBC_", 6) != 0 || !memchr(s, '\0', room)) return 0;
    p = s + 6;
    if (*p < '0' || *p > '9') return 0;
    a = strtol(p, &end, 10);
    if (*end == '.') b = strtol(end + 1, &end, 10);
    if (a < 0 || a > 1000 || b < 0 || b > 1000) return 0;
    *maj = (int)a;
    *min = (int)b;
    return 1;
}

static int read_verneed(const unsigned char *buf, size_t n, const Elf64_Shdr *vn, const Elf64_Shdr *str,
                        struct elf_needs *out, char *err, size_t errlen)
{
    uint64_t off = vn->sh_offset, end;
    if (!inside(n, vn->sh_offset, vn->sh_size) || !inside(n, str->sh_offset, str->sh_size))
        return fail(err, errlen, "truncated ELF file (version needs)");
    end = vn->sh_offset + vn->sh_size;
    /* sh_info entries; each names its first aux and the next entry, relative */
    for (uint64_t k = 0; k < vn->sh_info && k < 4096; k++) {
        Elf64_Verneed v;
        if (off > end || end - off < sizeof v) return fail(err, errlen, "truncated ELF file (verneed)");
        memcpy(&v, buf + off, sizeof v);
        uint64_t aoff = off + v.vn_aux;
        for (unsigned j = 0; j < v.vn_cnt && j < 4096; j++) {
            Elf64_Vernaux a;
            int maj, min;
            if (aoff > end || end - aoff < sizeof a) return fail(err, errlen, "truncated ELF file (vernaux)");
            memcpy(&a, buf + aoff, sizeof a);
            if (a.vna_name < str->sh_size &&
                glibc_version((const char *)buf + str->sh_offset + a.vna_name, str->sh_size - a.vna_name, &maj,
                              &min) &&
                elf_needs_glibc_cmp(maj, min, out->glibc_major, out->glibc_minor) > 0) {
                out->glibc_major = maj;
                out->glibc_minor = min;
            }
            if (!a.vna_next) break;
            aoff += a.vna_next;
        }
        if (!v.vn_next) break;
        off += v.vn_next;
    }
    return 0;
}

int elf_needs_parse(const unsigned char *buf, size_t n, struct elf_needs *out, char *err, size_t errlen)
{
    Elf64_Ehdr eh;
    const char *arch;
    memset(out, 0, sizeof *out);
    if (n < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) return fail(err, errlen, "not an ELF file");
    if (buf[EI_CLASS] != ELFCLASS64 || buf[EI_DATA] != ELFDATA2LSB)
        return fail(err, errlen, "not a 64-bit little-endian ELF file");
    if (n < sizeof eh) return fail(err, errlen, "truncated ELF file (header)");
    memcpy(&eh, buf, sizeof eh);
    arch = elf_needs_arch_name(eh.e_machine);
    snprintf(out->arch, sizeof out->arch, "%s", arch ? arch : "");
    if (eh.e_shoff == 0 || eh.e_shnum == 0) return 0; /* no sections: nothing more to learn */
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !inside(n, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return fail(err, errlen, "truncated ELF file (section headers)");
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh, str;
        memcpy(&sh, buf + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_GNU_verneed) continue;
        if (sh.sh_link >= eh.e_shnum) return fail(err, errlen, "bad ELF file (verneed's string table)");
        memcpy(&str, buf + eh.e_shoff + (uint64_t)sh.sh_link * sizeof str, sizeof str);
        if (read_verneed(buf, n, &sh, &str, out, err, errlen) < 0) return -1;
    }
    return 0;
}

int elf_needs_read(const char *path, struct elf_needs *out, char *err, size_t errlen)
{
    struct stat st;
    unsigned char *buf;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
    memset(out, 0, sizeof *out);
    if (fd < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)ELF_NEEDS_MAX_BYTES) {
        snprintf(err, errlen, "%s: not a regular file of at most %u MiB", path, ELF_NEEDS_MAX_BYTES >> 20);
        close(fd);
        return -1;
    }
    buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!buf) {
        close(fd);
        return fail(err, errlen, "out of memory");
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    rc = elf_needs_parse(buf, got, out, err, errlen);
    free(buf);
    if (rc < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s", err);
        snprintf(err, errlen, "%s: %s", path, msg);
    }
    return rc;
}
