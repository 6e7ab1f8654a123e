/* OOM kills in a rank's cgroup (agent_oom.h). */
#include "agent_oom.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP2_MAGIC 0x63677270   /* linux/magic.h CGROUP2_SUPER_MAGIC */
#define CGROUP1_MAGIC 0x27e0eb     /* linux/magic.h CGROUP_SUPER_MAGIC */
#define READ_CAP 4096              /* both files are a few hundred bytes */

/* At most READ_CAP bytes of path into buf (NUL-terminated); the file must be on cgroupfs or
 * procfs as asked (fs_magic 0: any). -1 when it cannot be read. */
static ssize_t read_small(const char *path, char *buf, size_t n, long fs_magic)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct statfs sf;
    if (fs_magic && (fstatfs(fd, &sf) != 0 || (long)sf.f_type != fs_magic)) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t k = read(fd, buf + got, n - 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

long long oom_parse_events(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        if (e - i > 9 && memcmp(text + i, "oom_kill ", 9) == 0) {
            long long v = 0;
            size_t k = i + 9;
            if (k == e) return -1;
            for (; k < e; k++) {
                if (text[k] < '0' || text[k] > '9' || v > 100000000000LL) return -1;
                v = v * 10 + (text[k] - '0');
            }
            return v;
        }
        i = e + 1;
    }
    return -1;
}

/* A plain absolute path: no "." or ".." part, no NUL, not "(deleted)". */
static int path_plain(const char *p, size_t n)
{
    if (n == 0 || p[0] != '/') return 0;
    for (size_t k = 0; k < n; k++) {
        if (p[k] == '\0') return 0;
        if (p[k] != '/' || k + 1 >= n || p[k + 1] != '.') continue;
        size_t dots = k + 2 < n && p[k + 2] == '.' ? 2 : 1;
        if (k + 1 + dots == n || p[k + 1 + dots] == '/') return 0;
    }
    return !(n >= 10 && memcmp(p + n - 10, " (deleted)", 10) == 0);
}

/* Whether the controller list a[0..n) ("memory", "cpu,memory") holds "memory". */
static int has_memory(const char *a, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && a[e] != ',') e++;
        if (e - i == 6 && memcmp(a + i, "memory", 6) == 0) return 1;
        i = e + 1;
    }
    return 0;
}

int oom_counter_file(const char *text, size_t len, char *out, size_t n, int *v1)
{
    const char *v2p = NULL, *v1p = NULL;
    size_t v2n = 0, v1n = 0;
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        const char *c1 = memchr(text + i, ':', e - i);
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(text + e - c1 - 1)) : NULL;
        if (c2) {
            const char *p = c2 + 1;
            size_t pl = (size_t)(text + e - p);
            if (c1 - (text + i) == 1 && text[i] == '0' && c2 == c1 + 1) {
                v2p = p;
                v2n = pl;
            } else if (has_memory(c1 + 1, (size_t)(c2 - c1 - 1))) {
                v1p = p;
                v1n = pl;
            }
        }
        i = e + 1;
    }
    const char *p = v1p ? v1p : v2p;
    size_t pl = v1p ? v1n : v2n;
    if (!p || !path_plain(p, pl)) return -1;
    if (pl == 1) pl = 0;                              /* the root: no "//" */
    int k = snprintf(out, n, "%s%.*s/%s", v1p ? CGROUP_ROOT "/memory" : CGROUP_ROOT, (int)pl, p,
                     v1p ? "memory.oom_control" : "memory.events");
    if (k < 0 || (size_t)k >= n) return -1;
    *v1 = v1p != NULL;
    return 0;
}

static long long read_oom_kill(const char *file)
{
    char buf[READ_CAP];
    /* the v1 and v2 file systems: a path that led elsewhere is not read */
    ssize_t got = read_small(file, buf, sizeof buf, strstr(file, "/memory.oom_control") ? CGROUP1_MAGIC
                                                                                       : CGROUP2_MAGIC);
    return got < 0 ? -1 : oom_parse_events(buf, (size_t)got);
}

void oom_follow(struct rank_cgroup *cg, pid_t pid)
{
    char path[32], buf[READ_CAP], file[sizeof cg->file];
    int v1;
    if (pid <= 0) return;
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    ssize_t got = read_small(path, buf, sizeof buf, 0);
    if (got <= 0 || oom_counter_file(buf, (size_t)got, file, sizeof file, &v1) != 0) return;
    if (cg->file[0] && strcmp(cg->file, file) == 0) return;
    snprintf(cg->file, sizeof cg->file, "%s", file);
    cg->base = read_oom_kill(file);
}

long long oom_kills_since(const struct rank_cgroup *cg)
{
    if (!cg->file[0] || cg->base < 0) return -1;
    long long now = read_oom_kill(cg->file);
    return now < cg->base ? -1 : now - cg->base;
}
