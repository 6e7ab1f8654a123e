/* Unit tests for the agents ddptop chooses from (ssh/agent_kit.h) and the ELF reader under it
 * (util/elf_needs.h): the built agents read as their architecture and glibc need, files named
 * like an agent but of another architecture are left out and named, and every offset the
 * reader follows is checked against the file's bytes (a truncated or garbled file gives a
 * message, never a crash). The built agents come from $DDPTOP_BUILD (tests/run.sh sets it). */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ssh/agent_kit.h"
#include "tap.h"
#include "tmptree.h"
#include "util/elf_needs.h"
#include "util/util.h"

static char tmp[] = "/tmp/ddptop-test-agentkit-XXXXXX";

static const char *build_dir(void)
{
    const char *b = getenv("DDPTOP_BUILD");
    return b && *b ? b : "build";
}

/* The whole file, malloc'd; *n its size. NULL when unreadable. */
static unsigned char *slurp(const char *path, size_t *n)
{
    struct strbuf sb;
    int fd;
    strbuf_init(&sb);
    fd = util_open_read(path);
    if (fd < 0 || util_read_fd(fd, &sb, 64u << 20) < 0) {
        if (fd >= 0) close(fd);
        strbuf_done(&sb);
        return NULL;
    }
    close(fd);
    *n = sb.len;
    return (unsigned char *)sb.buf;
}

static void copy(const char *from, const char *to, mode_t mode)
{
    size_t n = 0;
    unsigned char *b = slurp(from, &n);
    FILE *f = fopen(to, "wb");
    CHECK(b != NULL && f != NULL);
    if (b && f) CHECK(fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    chmod(to, mode);
    free(b);
}

/* The portable agents: their own architecture, and glibc 2.28 at most (RHEL 8). */
static void test_built_agents_read(void)
{
    static const char *const arches[] = {"x86_64", "aarch64"};
    for (size_t i = 0; i < 2; i++) {
        char *p = xasprintf("%s/ddptop-agent-%s", build_dir(), arches[i]);
        struct elf_needs en;
        char err[256] = "";
        CHECK(elf_needs_read(p, &en, err, sizeof err) == 0);
        CHECK_STR(en.arch, arches[i]);
        CHECK(en.glibc_major == 2 && en.glibc_minor >= 2 && en.glibc_minor <= 28);
        if (*err) printf("# %s\n", err);
        free(p);
    }
}

/* Every length cut short, and bytes flipped all over: an error or an answer, never a crash or
 * a read outside (valgrind and ASan builds run this too). */
static void test_truncated_and_garbled(void)
{
    char *p = xasprintf("%s/ddptop-agent-x86_64", build_dir());
    size_t n = 0;
    unsigned char *b = slurp(p, &n);
    struct elf_needs en, whole;
    char err[256];
    CHECK(b != NULL && n > 4096);
    if (!b) {
        free(p);
        return;
    }
    CHECK(elf_needs_parse(b, n, &whole, err, sizeof err) == 0);
    CHECK(elf_needs_parse(b, 3, &en, err, sizeof err) < 0 && strstr(err, "not an ELF") != NULL);
    CHECK(elf_needs_parse(b, 40, &en, err, sizeof err) < 0 && strstr(err, "truncated") != NULL);
    /* without the section headers at the end (where they live) */
    CHECK(elf_needs_parse(b, n - 64, &en, err, sizeof err) < 0 && strstr(err, "truncated") != NULL);
    for (size_t cut = 0; cut < n; cut += 997) elf_needs_parse(b, cut, &en, err, sizeof err);
    unsigned char *g = xmalloc(n);
    srand(7);
    for (int round = 0; round < 200; round++) {
        memcpy(g, b, n);
        for (int k = 0; k < 64; k++) g[64 + (size_t)rand() % (n - 64)] = (unsigned char)rand();
        /* the section header table itself, where offsets and counts live */
        Elf64_Ehdr eh;
        memcpy(&eh, g, sizeof eh);
        if (eh.e_shoff < n)
            for (int k = 0; k < 16; k++) g[eh.e_shoff + (size_t)rand() % (n - eh.e_shoff)] = (unsigned char)rand();
        if (elf_needs_parse(g, n, &en, err, sizeof err) == 0) CHECK(en.glibc_major < 1001);
    }
    free(g);
    /* a 32-bit file is refused by name */
    b[EI_CLASS] = ELFCLASS32;
    CHECK(elf_needs_parse(b, n, &en, err, sizeof err) < 0 && strstr(err, "64-bit") != NULL);
    CHECK(elf_needs_read("/etc/hostname", &en, err, sizeof err) < 0);
    CHECK(elf_needs_read("/nonexistent/x", &en, err, sizeof err) < 0 && strstr(err, "/nonexistent/x") != NULL);
    free(b);
    free(p);
}

static void test_glibc_compare(void)
{
    CHECK(elf_needs_glibc_cmp(2, 28, 2, 28) == 0);
    CHECK(elf_needs_glibc_cmp(2, 9, 2, 28) < 0);   /* numbers, not text */
    CHECK(elf_needs_glibc_cmp(3, 0, 2, 99) > 0);
}

/* A directory as ddptop is installed: this machine's agent, the aarch64 one, a file named for
 * ppc64le that is really x86_64 (left out, named), a backup copy (not an architecture word). */
static void test_kit_from_directory(void)
{
    char *dir = xasprintf("%s/libexec", tmp);
    char *local = xasprintf("%s/ddptop-agent", dir);
    char *x86 = xasprintf("%s/ddptop-agent-x86_64", build_dir()), *arm = xasprintf("%s/ddptop-agent-aarch64", build_dir());
    char *p;
    mkdir(dir, 0700);
    copy(x86, local, 0755);
    p = xasprintf("%s-aarch64", local);
    copy(arm, p, 0755);
    free(p);
    p = xasprintf("%s-ppc64le", local);
    copy(x86, p, 0755);
    free(p);
    p = xasprintf("%s-aarch64.bak", local);
    copy(arm, p, 0755);
    free(p);
    struct agent_kit *k = agent_kit_load(local);
    const struct agent_kit_entry *a = agent_kit_find(k, "aarch64"), *h = agent_kit_find(k, agent_kit_host_arch());
    CHECK_INT(k->n, 2);
    CHECK(a != NULL && h != NULL);
    if (a) {
        CHECK(strstr(a->path, "ddptop-agent-aarch64") != NULL);
        CHECK(strstr(a->remote_name, "-aarch64-") != NULL);
        CHECK(strncmp(a->remote_name + strlen(a->remote_name) - 16, a->sha256, 16) == 0);
        CHECK(a->glibc[0] == '2' && a->glibc_major == 2 && a->glibc_minor <= 28);
    }
    if (h) CHECK_STR(h->path, local); /* no ddptop-agent-x86_64 here: the unsuffixed one stands in */
    CHECK(agent_kit_find(k, "ppc64le") == NULL);
    CHECK(k->skipped && strstr(k->skipped, "ddptop-agent-ppc64le: built for x86_64, not ppc64le"));
    struct strbuf sb;
    strbuf_init(&sb);
    agent_kit_arches(k, &sb);
    CHECK(strstr(sb.buf, "aarch64") && strstr(sb.buf, " and "));
    strbuf_done(&sb);
    agent_kit_free(k);
    /* the architecture's own file wins over the unsuffixed one */
    p = xasprintf("%s-%s", local, agent_kit_host_arch());
    copy(strcmp(agent_kit_host_arch(), "aarch64") == 0 ? arm : x86, p, 0755);
    k = agent_kit_load(local);
    h = agent_kit_find(k, agent_kit_host_arch());
    CHECK(h != NULL && strcmp(h->path, p) == 0);
    agent_kit_free(k);
    free(p);
    /* nothing there */
    k = agent_kit_load("/nonexistent/ddptop-agent");
    CHECK_INT(k->n, 0);
    strbuf_init(&sb);
    agent_kit_arches(k, &sb);
    CHECK_STR(sb.buf, "none");
    strbuf_done(&sb);
    agent_kit_free(k);
    free(x86);
    free(arm);
    free(local);
    free(dir);
}

int main(void)
{
    if (!mkdtemp(tmp)) {
        printf("not ok 1 - mkdtemp\n1..1\n");
        return 1;
    }
    RUN(test_built_agents_read);
    RUN(test_truncated_and_garbled);
    RUN(test_glibc_compare);
    RUN(test_kit_from_directory);
    tmptree_remove(tmp);
    return tap_done();
}
