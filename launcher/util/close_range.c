/* util_close_range (util.h): close_range(2) without glibc's wrapper, which came in 2.34, past
 * the 2.28 the agent and the tarball's ddptop are built for (docs/check.md, "Which nodes").
 * Kernels before 5.9 (RHEL 8's 4.18) lack the system call: there the open descriptors are read
 * from /proc/self/fd with getdents64 into a stack buffer, no malloc, since this runs between
 * fork and exec. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436 /* the same number on every architecture */
#endif

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int fd_of_name(const char *s)
{
    int v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 100000000) return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* Closes what /proc/self/fd lists in [lo, hi]; -1 when it cannot be read. */
static int close_listed(unsigned lo, unsigned hi)
{
    char buf[4096] __attribute__((aligned(8)));
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long n;
    if (dir < 0) return -1;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            int fd = fd_of_name(d->d_name);
            off += d->d_reclen;
            if (fd >= 0 && fd != dir && (unsigned)fd >= lo && (unsigned)fd <= hi) close(fd);
        }
    }
    close(dir);
    return n < 0 ? -1 : 0;
}

void util_close_range(unsigned lo, unsigned hi)
{
    if (lo > hi) return;
    if (syscall(SYS_close_range, lo, hi, 0) == 0) return;
    if (close_listed(lo, hi) == 0) return;
    /* no /proc: every descriptor up to the limit */
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20) max = 1 << 20;
    for (long fd = lo; fd < max && (unsigned long)fd <= hi; fd++) close((int)fd);
}
