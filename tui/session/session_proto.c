/* The session protocol (session_proto.h): frames, the output queue, and the socket with its
 * directory. The directory is the only thing between the socket and other users on the
 * machine (a Unix socket's own mode is not checked by every system), so one that is not ours
 * or is open to others is refused, never repaired: someone may be waiting in it. */
#include "session_proto.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* ---- frames ------------------------------------------------------------------------------- */

static bool known_type(int t)
{
    switch (t) {
    case SM_HELLO: case SM_INPUT: case SM_WINSIZE: case SM_REDRAW:
    case SM_OUTPUT: case SM_DETACHED: case SM_EXIT:
        return true;
    default:
        return false;
    }
}

void session_put_u16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

unsigned session_get_u16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

int session_frame_parse(const uint8_t *buf, size_t len, struct session_frame *f, size_t *used)
{
    if (len < 1) return 0;
    if (!known_type(buf[0])) return -1;
    if (len < SESSION_HDR) return 0;
    size_t n = session_get_u16(buf + 1);
    if (len < SESSION_HDR + n) return 0;
    f->type = buf[0];
    f->payload = buf + SESSION_HDR;
    f->len = n;
    *used = SESSION_HDR + n;
    return 1;
}

/* ---- the queue ---------------------------------------------------------------------------- */

void session_queue_done(struct session_queue *q)
{
    free(q->buf);
    memset(q, 0, sizeof *q);
}

static void queue_reserve(struct session_queue *q, size_t n)
{
    if (q->head + q->len + n <= q->cap) return;
    if (q->head) {                  /* slide what is left to the front first */
        memmove(q->buf, q->buf + q->head, q->len);
        q->head = 0;
        if (q->len + n <= q->cap) return;
    }
    size_t cap = q->cap ? q->cap : 4096;
    while (cap < q->len + n) cap *= 2;
    q->buf = xrealloc(q->buf, cap);
    q->cap = cap;
}

void session_queue_put(struct session_queue *q, const void *p, size_t n)
{
    if (!n) return;
    queue_reserve(q, n);
    memcpy(q->buf + q->head + q->len, p, n);
    q->len += n;
}

void session_queue_frame(struct session_queue *q, int type, const void *p, size_t n)
{
    const uint8_t *b = p;
    assert(known_type(type));
    do {
        size_t k = n > SESSION_FRAME_MAX ? SESSION_FRAME_MAX : n;
        uint8_t hdr[SESSION_HDR] = { (uint8_t)type };
        session_put_u16(hdr + 1, (unsigned)k);
        session_queue_put(q, hdr, sizeof hdr);
        session_queue_put(q, b, k);
        b += k;
        n -= k;
    } while (n > 0);
}

int session_queue_flush(struct session_queue *q, int fd)
{
    while (q->len > 0) {
        ssize_t w = write(fd, q->buf + q->head, q->len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        q->head += (size_t)w;
        q->len -= (size_t)w;
    }
    q->head = 0;
    return 0;
}

/* ---- the directory -------------------------------------------------------------------------- */

int session_dir_check(const char *dir, bool create, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        int e = errno;
        if (e != ENOENT || !create) {
            snprintf(err, errlen, "the session directory %s: %s", dir, strerror(e));
            errno = e;
            return -1;
        }
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot make the session directory %s: %s", dir, strerror(errno));
            return -1;
        }
        if (lstat(dir, &st) != 0) {
            snprintf(err, errlen, "the session directory %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "the session directory %s is not a directory (a link or a file): "
                 "not using it; remove it", dir);
        errno = ENOTDIR;
        return -1;
    }
    if (st.st_uid != getuid()) {
        snprintf(err, errlen, "the session directory %s belongs to uid %u, not to you (uid %u): "
                 "not using it", dir, (unsigned)st.st_uid, (unsigned)getuid());
        errno = EPERM;
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen, "the session directory %s is open to group or others (mode %04o): "
                 "not using it; chmod 700 %s", dir, (unsigned)(st.st_mode & 07777), dir);
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* $HOME/.cache/ddptop/run-HOST: where the sockets go when /tmp/ddptop-UID is not ours (another
 * user can make that name first). Per host, as a home directory is often shared by the login
 * nodes and a socket serves only the machine it was made on. false when there is no $HOME. */
static bool fallback_dir(char *out, size_t n)
{
    const char *home = getenv("HOME");
    if (!home || home[0] != '/') {
        struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
    char host[64] = "";
    if (!home || gethostname(host, sizeof host) != 0) return false;
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (!(*h == '-' || *h == '.' || *h == '_' || (*h >= '0' && *h <= '9') || ((*h | 0x20) >= 'a' && (*h | 0x20) <= 'z')))
            *h = '_';
    int k = snprintf(out, n, "%s/.cache/ddptop/run-%s", home, host[0] ? host : "localhost");
    return k > 0 && (size_t)k < n;
}

static void tmp_dir(char *out, size_t n)
{
    snprintf(out, n, "/tmp/ddptop-%u", (unsigned)getuid());
}

/* Makes the fallback's parents: ~/.cache as any program would, ddptop/ in it ours alone. */
static void fallback_parents(const char *dir)
{
    char *p = xstrdup(dir), *slash = strrchr(p, '/');
    if (slash) {
        *slash = '\0';                          /* .../.cache/ddptop */
        char *up = strrchr(p, '/');
        if (up) {
            *up = '\0';                         /* .../.cache */
            if (util_mkdir_p(p) == 0) {
                *up = '/';
                if (mkdir(p, 0700) != 0 && errno != EEXIST) { /* session_dir_check says so */ }
            }
        }
    }
    free(p);
}

int session_dir(char *out, size_t n, bool create, char *err, size_t errlen)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    char fb[200], why[512];
    if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid()) {
        snprintf(out, n, "%s/ddptop", xdg);
        return session_dir_check(out, create, err, errlen);
    }
    bool have_fb = fallback_dir(fb, sizeof fb);
    /* a fallback made once stays in use while it is there: every ddptop of ours agrees on it,
     * whatever becomes of /tmp/ddptop-UID meanwhile */
    if (have_fb && lstat(fb, &st) == 0 && session_dir_check(fb, false, why, sizeof why) == 0) {
        snprintf(out, n, "%s", fb);
        return 0;
    }
    tmp_dir(out, n);
    if (session_dir_check(out, create, err, errlen) == 0) return 0;
    if (!have_fb || (errno == ENOENT && !create)) return -1;
    /* /tmp/ddptop-UID is there and not ours to use: someone else's (made first), a link, a file */
    snprintf(why, sizeof why, "%s", err);
    snprintf(out, n, "%s", fb);
    if (!create) {
        snprintf(err, errlen, "%s; and there is no %s", why, fb);
        errno = ENOENT;
        return -1;
    }
    fallback_parents(fb);
    return session_dir_check(fb, true, err, errlen);
}

bool session_dir_fallback_note(const char *dir, char *note, size_t n)
{
    char fb[200], tmp[64], why[512];
    if (!fallback_dir(fb, sizeof fb) || strcmp(dir, fb) != 0) return false;
    tmp_dir(tmp, sizeof tmp);
    if (session_dir_check(tmp, false, why, sizeof why) == 0 || errno == ENOENT)
        snprintf(note, n, "the session sockets are in %s (made when %s was not yours; "
                 "remove it to go back to /tmp)", fb, tmp);
    else
        snprintf(note, n, "%s; the session sockets are in %s instead", why, fb);
    return true;
}

/* A run's note is worth keeping while its directory is there (attach and view also search
 * --log-dir). Notes of ours older than an hour (a newer run may not have made its directory
 * yet) that name a directory that is gone are removed when another run is noted: without it
 * the directory kept one note per run for ever (4,484 here after a few days of tests). A
 * bounded scan: SESSION_PRUNE_MAX notes looked at, each read at most 4 KiB, opened without
 * following a link. */
#define SESSION_PRUNE_MAX 4096

/* The run directory a note (NAME in the directory dirfd) names, into buf: true when it holds an
 * absolute path. Opened without following a link, read at most len - 1 bytes. */
static bool note_read(int dirfd, const char *name, char *buf, size_t len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0 || buf[0] != '/') return false;
    buf[n] = '\0';
    return true;
}
#define SESSION_PRUNE_AGE_S 3600

void session_prune_notes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int seen = 0;
    time_t now = time(NULL);
    if (!d) return;
    while ((e = readdir(d)) != NULL && seen < SESSION_PRUNE_MAX) {
        size_t len = strlen(e->d_name);
        struct stat st;
        char buf[4096];
        if (len < 5 || strcmp(e->d_name + len - 4, ".dir") != 0) continue;
        seen++;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != getuid() || now - st.st_mtime < SESSION_PRUNE_AGE_S)
            continue;
        if (note_read(dirfd(d), e->d_name, buf, sizeof buf) && stat(buf, &st) != 0 && errno == ENOENT)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

void session_note_run(const char *run_id, const char *run_dir)
{
    char dir[200], err[256];
    if (!run_dir || session_dir(dir, sizeof dir, true, err, sizeof err) < 0) return;
    session_prune_notes(dir);
    char *path = xasprintf("%s/%s.dir", dir, run_id);
    util_replace_file(path, run_dir, strlen(run_dir), 0600, false); /* a note: attach also searches --log-dir */
    free(path);
}

char *session_find_run(const char *run_id)
{
    char dir[200], err[256], buf[4096];
    if (session_dir(dir, sizeof dir, false, err, sizeof err) < 0) return NULL;
    char *path = xasprintf("%s/%s.dir", dir, run_id);
    bool ok = note_read(AT_FDCWD, path, buf, sizeof buf);
    free(path);
    return ok ? xstrdup(buf) : NULL;
}

int session_sock_path(char *out, size_t n, const char *dir, const char *run_id,
                      char *err, size_t errlen)
{
    struct sockaddr_un a;
    int k = snprintf(out, n, "%s/%s.sock", dir, run_id);
    if (k < 0 || (size_t)k >= n || (size_t)k >= sizeof a.sun_path) {
        snprintf(err, errlen, "the session socket %s/%s.sock is too long a path for a Unix "
                 "socket (at most %zu bytes): use a shorter --run-id or XDG_RUNTIME_DIR",
                 dir, run_id, sizeof a.sun_path - 1);
        return -1;
    }
    return 0;
}

void session_run_of_path(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t len = strlen(b);
    if (len > 5 && strcmp(b + len - 5, ".sock") == 0) len -= 5;
    snprintf(out, n, "%.*s", (int)len, b);
}

/* ---- the socket ------------------------------------------------------------------------------ */

static int sock_addr(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a->sun_path, path, strlen(path) + 1);
    return 0;
}

int session_connect(const char *path)
{
    struct sockaddr_un a;
    if (sock_addr(path, &a) < 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int session_peer_uid(int fd, uid_t *uid)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return -1;
    *uid = cr.uid;
    return 0;
}

int session_remove_stale(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid()) return 0;
    int fd = session_connect(path);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno != ECONNREFUSED) return 0;
    return unlink(path) == 0;
}

int session_listen(const char *path, const char *run_id, char *err, size_t errlen)
{
    struct sockaddr_un a;
    if (sock_addr(path, &a) < 0) {
        snprintf(err, errlen, "the session socket %s is too long a path", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot make a Unix socket: %s", strerror(errno));
        return -1;
    }
    for (int tries = 0;; tries++) {
        mode_t old = umask(0177);       /* the socket is born 0600: no window at 0755 */
        int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
        int e = errno;
        umask(old);
        if (rc == 0) break;
        if (e == EADDRINUSE && tries == 0 && session_remove_stale(path)) continue;
        if (e == EADDRINUSE)
            snprintf(err, errlen, "a session of run %s is already running (ddptop attach %s), or "
                     "%s is not a socket of yours", run_id, run_id, path);
        else
            snprintf(err, errlen, "cannot make the session socket %s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    if (chmod(a.sun_path, 0600) != 0 || listen(fd, 16) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", a.sun_path, strerror(errno));
        unlink(a.sun_path);
        close(fd);
        return -1;
    }
    return fd;
}
