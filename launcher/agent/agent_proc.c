/* /proc readers for the agent's rank status and stack fallback: see agent_proc.h. */
#include "agent_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_read_file(const char *path, struct strbuf *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = util_read_fd(fd, out, cap), e = errno;
    close(fd);
    errno = e;
    return rc;
}

int proc_stat_parse(const char *text, struct proc_stat *ps)
{
    /* "pid (comm) S ppid ...": comm may hold anything, so fields start after the last ')'. */
    const char *p = strrchr(text, ')');
    unsigned long long v[4];
    if (!p || p[1] != ' ' || !p[2]) return -1;
    ps->state = p[2];
    p += 3;
    /* p is at the space before field 4 (ppid); each step lands on the start of the next field,
     * up to field 14, utime, followed by stime, cutime and cstime. */
    for (int field = 4; field <= 14; field++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    for (int i = 0; i < 4; i++) {
        char *end;
        errno = 0;
        v[i] = strtoull(p, &end, 10);
        if (end == p || errno) return -1;
        p = end;
    }
    long tck = sysconf(_SC_CLK_TCK);
    if (tck <= 0) tck = 100;
    ps->cpu_s = (double)(v[0] + v[1] + v[2] + v[3]) / (double)tck;
    return 0;
}

int proc_stat_read(pid_t pid, struct proc_stat *ps)
{
    char path[64];
    struct strbuf sb;
    int rc = -1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    strbuf_init(&sb);
    if (proc_read_file(path, &sb, 4096) == 0 && sb.len) rc = proc_stat_parse(sb.buf, ps);
    strbuf_done(&sb);
    return rc;
}

int proc_is_python(pid_t pid)
{
    char path[64], exe[PATH_MAX];
    struct strbuf sb;
    int yes = 0;
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    strbuf_init(&sb);
    if (proc_read_file(path, &sb, 64) == 0 && sb.len) yes = strncmp(sb.buf, "python", 6) == 0;
    strbuf_done(&sb);
    if (yes) return 1;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    return strncmp(base, "python", 6) == 0;
}
