/* agent_kit.h. An agent's name says its architecture and its ELF header must agree: a file
 * of the wrong architecture under a name would be uploaded to nodes it cannot run on. Such
 * files (and unreadable ones) are left out and named in `skipped`, for the message of a node
 * that then has no agent. */
#include "agent_kit.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "util/elf_needs.h"
#include "util/sha256.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/protocol.h"

const char *agent_kit_host_arch(void)
{
    static struct utsname u;
    if (!u.machine[0] && uname(&u) < 0) return "unknown";
    return u.machine;
}

/* "x86_64" and the like: what uname -m prints, nothing a shell or a file name could misread */
static bool arch_word(const char *s)
{
    if (!*s || strlen(s) >= sizeof ((struct agent_kit_entry *)0)->arch) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
    return true;
}

static void skip(struct agent_kit *k, const char *path, const char *why)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (k->skipped) strbuf_addf(&sb, "%s; ", k->skipped);
    strbuf_addf(&sb, "%s: %s", path, why);
    free(k->skipped);
    k->skipped = sb.buf;
}

static void add(struct agent_kit *k, const char *path, const char *arch)
{
    struct elf_needs en;
    char err[256];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, X_OK) != 0) return;
    if (agent_kit_find(k, arch)) return;
    if (elf_needs_read(path, &en, err, sizeof err) < 0) {
        skip(k, path, err);
        return;
    }
    if (strcmp(en.arch, arch) != 0) {
        char why[96];
        snprintf(why, sizeof why, "built for %s, not %s", en.arch[0] ? en.arch : "another machine", arch);
        skip(k, path, why);
        return;
    }
    k->e = xrealloc(k->e, (k->n + 1) * sizeof *k->e);
    struct agent_kit_entry *e = &k->e[k->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->arch, sizeof e->arch, "%s", arch);
    e->path = xstrdup(path);
    if (sha256_file_hex(path, e->sha256) < 0) e->sha256[0] = '\0';
    e->glibc_major = en.glibc_major;
    e->glibc_minor = en.glibc_minor;
    if (en.glibc_major) snprintf(e->glibc, sizeof e->glibc, "%d.%d", en.glibc_major, en.glibc_minor);
    /* without a hash (unreadable) the name of an agent installed by hand */
    e->remote_name = e->sha256[0]
                         ? xasprintf(AGENT_REMOTE_NAME_FMT "-%.16s", DDPTOP_VERSION, PROTOCOL_VERSION, arch, e->sha256)
                         : xasprintf(AGENT_REMOTE_NAME_FMT, DDPTOP_VERSION, PROTOCOL_VERSION, arch);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct agent_kit *agent_kit_load(const char *local)
{
    struct agent_kit *k = xcalloc(1, sizeof *k);
    const char *slash;
    char *dir, *base, *own;
    char **names = NULL;
    size_t n = 0;
    DIR *d;
    if (!local) return k;
    k->native = xstrdup(local);
    slash = strrchr(local, '/');
    dir = slash ? xstrndup(local, (size_t)(slash - local)) : xstrdup(".");
    base = xstrdup(slash ? slash + 1 : local);
    /* the architecture's own file first: it wins over this machine's unsuffixed agent */
    own = xasprintf("%s-%s", local, agent_kit_host_arch());
    add(k, own, agent_kit_host_arch());
    free(own);
    if (!agent_kit_find(k, agent_kit_host_arch())) add(k, local, agent_kit_host_arch());
    if ((d = opendir(dir)) != NULL) {
        struct dirent *de;
        size_t bl = strlen(base);
        while ((de = readdir(d)) != NULL && n < 64) {
            if (strncmp(de->d_name, base, bl) != 0 || de->d_name[bl] != '-' || !arch_word(de->d_name + bl + 1))
                continue;
            names = xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = xstrdup(de->d_name);
        }
        closedir(d);
    }
    if (n) qsort(names, n, sizeof *names, by_name); /* the same order on every run (none: no array) */
    for (size_t i = 0; i < n; i++) {
        char *p = xasprintf("%s/%s", dir, names[i]);
        add(k, p, names[i] + strlen(base) + 1);
        free(p);
        free(names[i]);
    }
    free(names);
    free(dir);
    free(base);
    return k;
}

void agent_kit_free(struct agent_kit *k)
{
    if (!k) return;
    for (size_t i = 0; i < k->n; i++) {
        free(k->e[i].path);
        free(k->e[i].remote_name);
    }
    free(k->e);
    free(k->native);
    free(k->skipped);
    free(k);
}

const struct agent_kit *agent_kit_get(const char *local)
{
    static struct agent_kit *kit;
    if (kit && ((!kit->native && !local) || (kit->native && local && strcmp(kit->native, local) == 0))) return kit;
    agent_kit_free(kit);
    kit = agent_kit_load(local);
    return kit;
}

const struct agent_kit_entry *agent_kit_find(const struct agent_kit *k, const char *arch)
{
    for (size_t i = 0; k && arch && i < k->n; i++)
        if (strcmp(k->e[i].arch, arch) == 0) return &k->e[i];
    return NULL;
}

void agent_kit_arches(const struct agent_kit *k, struct strbuf *out)
{
    if (!k || !k->n) {
        strbuf_adds(out, "none");
        return;
    }
    for (size_t i = 0; i < k->n; i++)
        strbuf_addf(out, "%s%s", i == 0 ? "" : i + 1 == k->n ? " and " : ", ", k->e[i].arch);
}
