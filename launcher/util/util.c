/* Shared helpers: see util.h. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void (*fatal_hook)(void);

void util_set_fatal_hook(void (*hook)(void))
{
    fatal_hook = hook;
}

void util_fatal(const char *fmt, ...)
{
    va_list ap;
    if (fatal_hook) {
        void (*hook)(void) = fatal_hook;
        fatal_hook = NULL; /* a failure inside the hook must not recurse */
        hook();
    }
    fputs("ddptop: fatal: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) util_fatal("out of memory (%zu bytes)", n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) util_fatal("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) util_fatal("out of memory (%zu bytes)", n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_vaddf(&sb, fmt, ap);
    if (!sb.buf) strbuf_adds(&sb, "");
    return sb.buf;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t mono_ms(void) { return clock_ns(CLOCK_MONOTONIC) / 1000000; }
int64_t wall_ns(void) { return clock_ns(CLOCK_REALTIME); }

void strbuf_init(struct strbuf *sb)
{
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}

void strbuf_done(struct strbuf *sb)
{
    free(sb->buf);
    strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf) sb->buf[0] = '\0';
}

static void strbuf_grow(struct strbuf *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1) cap *= 2;
    sb->buf = xrealloc(sb->buf, cap);
    sb->cap = cap;
}

void strbuf_reserve(struct strbuf *sb, size_t extra)
{
    strbuf_grow(sb, extra);
}

void strbuf_truncate(struct strbuf *sb, size_t n)
{
    if (n >= sb->len) return;
    sb->len = n;
    sb->buf[n] = '\0';
}

void strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
    strbuf_grow(sb, n);
    if (n) memcpy(sb->buf + sb->len, data, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void strbuf_adds(struct strbuf *sb, const char *s)
{
    strbuf_add(sb, s, strlen(s));
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
    /* Format into the spare room first; grow and format again only when it did not fit. */
    va_list ap2;
    strbuf_grow(sb, 64);
    va_copy(ap2, ap);
    int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        sb->buf[sb->len] = '\0';
        return;
    }
    if ((size_t)n >= sb->cap - sb->len) {
        strbuf_grow(sb, (size_t)n);
        vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    }
    sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vaddf(sb, fmt, ap);
    va_end(ap);
}

void strbuf_add_shell_quoted(struct strbuf *sb, const char *s)
{
    strbuf_add(sb, "'", 1);
    for (; *s; s++) {
        if (*s == '\'') strbuf_adds(sb, "'\\''");
        else strbuf_add(sb, s, 1);
    }
    strbuf_add(sb, "'", 1);
}

void strbuf_consume(struct strbuf *sb, size_t n)
{
    if (n >= sb->len) {
        strbuf_reset(sb);
        return;
    }
    memmove(sb->buf, sb->buf + n, sb->len - n);
    sb->len -= n;
    sb->buf[sb->len] = '\0';
}

char *strbuf_take_line(struct strbuf *sb, size_t *off)
{
    char *nl = *off < sb->len ? memchr(sb->buf + *off, '\n', sb->len - *off) : NULL;
    if (!nl) return NULL;
    char *line = xstrndup(sb->buf + *off, (size_t)(nl - (sb->buf + *off)));
    *off = (size_t)(nl - sb->buf) + 1;
    if (*off == sb->len || *off > sb->len / 2) {
        strbuf_consume(sb, *off);
        *off = 0;
    }
    return line;
}

bool strbuf_next_line(struct strbuf *sb, size_t *off, struct strbuf *out)
{
    char *nl = *off < sb->len ? memchr(sb->buf + *off, '\n', sb->len - *off) : NULL;
    if (!nl) return false;
    strbuf_reset(out);
    strbuf_add(out, sb->buf + *off, (size_t)(nl - (sb->buf + *off)));
    *off = (size_t)(nl - sb->buf) + 1;
    if (*off == sb->len || *off > sb->len / 2) {
        strbuf_consume(sb, *off);
        *off = 0;
    }
    return true;
}

int fd_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int fd_set_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

char *util_exe_sibling(const char *name)
{
    char buf[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (!slash) return NULL;
    *slash = '\0';
    return xasprintf("%s/%s", buf, name);
}

char *util_exe_program(const char *name)
{
    char *beside = util_exe_sibling(name), *installed;
    if (!beside || access(beside, X_OK) == 0) return beside;
    installed = util_exe_sibling("../libexec/ddptop/");
    if (installed) {
        char *p = xasprintf("%s%s", installed, name);
        free(installed);
        if (access(p, X_OK) == 0) {
            free(beside);
            return p;
        }
        free(p);
    }
    return beside;
}

void util_iso_time(int64_t wall, char *buf, size_t n)
{
    time_t secs = (time_t)(wall / 1000000000);
    struct tm tm;
    char base[32];
    gmtime_r(&secs, &tm);
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03dZ", base, (int)(wall / 1000000 % 1000));
}

void util_hex(const void *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *u = b;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[u[i] >> 4];
        out[2 * i + 1] = digits[u[i] & 15];
    }
    out[2 * n] = '\0';
}

void util_random(void *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((unsigned char *)b + got, n - got, 0);
        if (r < 0 && errno != EINTR) util_fatal("getrandom: %s", strerror(errno));
        if (r > 0) got += (size_t)r;
    }
}

int util_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO; /* no progress and no error: say something true */
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int util_replace_file(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
    char *tmp = xasprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    /* fchmod: a file left by an earlier try keeps its mode through O_TRUNC */
    bool ok = fd >= 0 && fchmod(fd, mode) == 0 && util_write_all(fd, data, len) == 0 &&
              (!sync || fdatasync(fd) == 0 || errno == EINVAL);
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    int e = errno;
    if (!ok) {
        unlink(tmp);
    } else if (sync) {
        char *dir = xstrdup(path), *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        int dfd = open(slash ? (*dir ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* the rename itself; a directory some filesystems cannot sync is no error */
            close(dfd);
        }
        free(dir);
    }
    free(tmp);
    errno = e;
    return ok ? 0 : -1;
}

int util_open_private(const char *path, int flags, mode_t mode)
{
    bool trunc = flags & O_TRUNC;
    int fd = open(path, (flags & ~O_TRUNC) | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
    struct stat st;
    if (fd < 0 && errno == ENXIO) errno = EINVAL; /* a FIFO nobody reads: not a regular file */
    if (fd < 0) return -1;
    int e = 0;
    if (fstat(fd, &st) != 0) e = errno;
    else if (!S_ISREG(st.st_mode)) e = EINVAL;   /* a FIFO, a device, a directory */
    else if (st.st_uid != geteuid()) e = EPERM;  /* made by someone else: not ours to write */
    /* exactly mode: the umask would take the group's bits of --log-mode 0640, and an older
     * file of ours gets the mode asked for now; emptied only once known to be a file of ours */
    else if (((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0) || (trunc && ftruncate(fd, 0) != 0))
        e = errno;
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int util_open_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0) return -1;
    int e = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    /* back to blocking reads (a regular file never blocks; a later fcntl of a caller sees the
     * usual flags) */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

const char *util_open_read_error(int err)
{
    return err == EINVAL ? "not a regular file (a FIFO, a device or a directory)" : strerror(err);
}

FILE *util_fopen_read(const char *path)
{
    int fd = util_open_read(path);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd);
    return f;
}

FILE *util_fopen_write(const char *path, mode_t mode)
{
    int fd = util_open_private(path, O_WRONLY | O_TRUNC, mode);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) close(fd);
    return f;
}

int util_read_fd(int fd, struct strbuf *out, size_t cap)
{
    char buf[4096];
    size_t got = 0;
    while (got < cap) {
        size_t want = cap - got < sizeof buf ? cap - got : sizeof buf;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) break;
        strbuf_add(out, buf, (size_t)n);
        got += (size_t)n;
    }
    return 0;
}

int util_mkdir_p(const char *path)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = -1;
            break;
        }
        *s = c;
        if (c == '\0') break;
    }
    int saved = errno;
    free(p);
    errno = saved;
    if (rc == 0) {
        struct stat st;
        if (stat(path, &st) != 0) return -1;
        if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
    }
    return rc;
}

bool util_in_path(const char *name)
{
    const char *path = getenv("PATH");
    bool found = false;
    if (!path || strchr(name, '/')) return false;
    for (const char *p = path; !found;) {
        size_t n = strcspn(p, ":");
        char *f = xasprintf("%.*s/%s", n ? (int)n : 1, n ? p : ".", name);
        found = access(f, X_OK) == 0;
        free(f);
        if (!p[n]) break;
        p += n + 1;
    }
    return found;
}

char *util_abs_path(const char *p)
{
    char cwd[PATH_MAX];
    if (p[0] == '/' || !getcwd(cwd, sizeof cwd)) return xstrdup(p);
    while (p[0] == '.' && p[1] == '/') p += 2;
    if (strcmp(p, ".") == 0 || !*p) return xstrdup(cwd);
    return xasprintf("%s/%s", cwd, p);
}

char *util_clock_text(int64_t wall, char *buf, size_t n)
{
    time_t t = (time_t)(wall / 1000000000);
    struct tm tm;
    if (wall <= 0 || !localtime_r(&t, &tm) || !strftime(buf, n, "%H:%M:%S", &tm)) snprintf(buf, n, "?");
    return buf;
}

bool util_run_id_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

const char *util_memmem_rare(const char *hay, size_t n, const char *needle, size_t m)
{
    if (!m) return hay;
    const char *p = hay, *end = hay + n;
    while ((size_t)(end - p) >= m) {
        p = memchr(p, needle[0], (size_t)(end - p) - m + 1);
        if (!p) return NULL;
        if (!memcmp(p + 1, needle + 1, m - 1)) return p;
        p++;
    }
    return NULL;
}
