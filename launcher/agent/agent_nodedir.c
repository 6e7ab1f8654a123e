/* The agent's private directories on its node and the checked read of files in them
 * (agent_nodedir.h). */
#include "agent_nodedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The agent's directory once made, or why none could be (asked once: the answer holds for the
 * agent's life, and every rank that asks gets the same one). */
static struct {
    char *path;
    char *why;
} nd;

char **agent_nodedir_bases(const char *leaf)
{
    char **v = xcalloc(4, sizeof *v);
    size_t n = 0;
    unsigned uid = (unsigned)geteuid();
    const char *t = getenv("TMPDIR");
    if (t && t[0] == '/' && strcmp(t, "/tmp") != 0 && strcmp(t, "/tmp/") != 0)
        v[n++] = xasprintf("%s/ddptop-%u/%s", t, uid, leaf);
    v[n++] = xasprintf("/tmp/ddptop-%u/%s", uid, leaf);
    v[n++] = xasprintf("/dev/shm/ddptop-%u/%s", uid, leaf);
    return v;
}

void agent_nodedir_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* gid is the user's private group: their primary group, named as they are. */
static bool private_group(gid_t gid)
{
    struct passwd *pw = getpwuid(geteuid());
    if (!pw || pw->pw_gid != gid) return false;
    char name[256];
    snprintf(name, sizeof name, "%s", pw->pw_name); /* getgrgid may reuse the static buffer */
    struct group *gr = getgrgid(gid);
    return gr && gr->gr_name && strcmp(gr->gr_name, name) == 0;
}

bool agent_nodedir_ours(const char *dir, unsigned lax, bool tighten, char *why, size_t whylen)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        struct stat lst; /* O_DIRECTORY | O_NOFOLLOW on a link to a directory says ENOTDIR */
        if (e == ELOOP || (e == ENOTDIR && lstat(dir, &lst) == 0 && S_ISLNK(lst.st_mode)))
            snprintf(why, whylen, "is a symbolic link");
        else if (e == ENOTDIR) snprintf(why, whylen, "is not a directory");
        else snprintf(why, whylen, "cannot be opened (%s)", strerror(e));
        if (fd >= 0) close(fd);
        return false;
    }
    bool ok = false;
    unsigned bad = st.st_mode & lax;
    /* group-writable is fine when the group is the user's private one (umask 002 on such
     * systems): the same rule as the probe of --agent-dir (ssh_probe.c) */
    if (bad == 020 && !tighten && private_group(st.st_gid)) bad = 0;
    if (st.st_uid != geteuid())
        snprintf(why, whylen, "belongs to uid %u, not to us (uid %u)", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (!bad)
        ok = true;
    else if (!tighten)
        snprintf(why, whylen, "is %s group or others (mode %04o)", lax & 044 ? "open to" : "writable by",
                 (unsigned)(st.st_mode & 07777));
    else if (fchmod(fd, st.st_mode & 07777 & ~lax) != 0)
        snprintf(why, whylen, "lets others in and cannot be made private: %s", strerror(errno));
    else
        ok = true;
    close(fd);
    return ok;
}

/* dir is ours alone (made 0700 when missing, a lax mode of ours tightened); why names it. */
static bool private_one(const char *dir, char *why, size_t whylen)
{
    char w[200];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
        return false;
    }
    if (agent_nodedir_ours(dir, 077, true, w, sizeof w)) return true;
    snprintf(why, whylen, "%s %s", dir, w);
    return false;
}

bool agent_nodedir_private(const char *dir, char *why, size_t whylen)
{
    char *parent = xstrdup(dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    bool ok = private_one(parent, why, whylen) && private_one(dir, why, whylen);
    free(parent);
    return ok;
}

const char *agent_nodedir_own(char *err, size_t errlen)
{
    if (!nd.path && !nd.why) {
        char **dirs = agent_nodedir_bases("runs");
        struct strbuf why;
        strbuf_init(&why);
        for (size_t i = 0; dirs[i] && !nd.path; i++) {
            char w[400];
            /* every refusal is named: the user learns which directory to remove */
            if (why.len) strbuf_adds(&why, "; ");
            if (!agent_nodedir_private(dirs[i], w, sizeof w)) {
                strbuf_adds(&why, w);
                continue;
            }
            char *tmpl = xasprintf("%s/agent-%d.XXXXXX", dirs[i], (int)getpid());
            if (mkdtemp(tmpl)) {
                nd.path = tmpl;
            } else {
                strbuf_addf(&why, "cannot create a directory in %s: %s", dirs[i], strerror(errno));
                free(tmpl);
            }
        }
        agent_nodedir_free(dirs);
        if (!nd.path) nd.why = xstrdup(why.buf ? why.buf : "no candidate");
        strbuf_done(&why);
    }
    if (!nd.path) snprintf(err, errlen, "no private directory on this node: %s", nd.why);
    return nd.path;
}

/* Empties the directory open at dfd (closed here): files, links (not followed), FIFOs, and
 * directories down to depth more levels. */
static void empty_dir(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    for (struct dirent *e; (e = readdir(d)); ) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (unlinkat(dfd, e->d_name, 0) == 0 || depth <= 0) continue;
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) empty_dir(sub, depth - 1);
        unlinkat(dfd, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

void agent_nodedir_remove(void)
{
    if (nd.path) {
        /* what the ranks made at their error files' paths, and the moved dump directories */
        int dfd = open(nd.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) empty_dir(dfd, 2);
        rmdir(nd.path);
    }
    free(nd.path);
    free(nd.why);
    nd.path = nd.why = NULL;
}

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    return "not a regular file";
}

int agent_nodedir_read(const char *path, struct strbuf *out, size_t cap, int64_t not_before_ns,
                       char *why, size_t whylen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        if (errno == ELOOP) snprintf(why, whylen, "is not a regular file of ours (a symbolic link)");
        else snprintf(why, whylen, "cannot be read: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "cannot be read: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        if (!S_ISREG(st.st_mode))
            snprintf(why, whylen, "is not a regular file of ours (%s)", kind_of(st.st_mode));
        else
            snprintf(why, whylen, "is not a regular file of ours (it belongs to uid %u)", (unsigned)st.st_uid);
        close(fd);
        return -1;
    }
    /* a file the controller named may be left from an earlier run: only a fresh one counts */
    if ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec < not_before_ns) {
        close(fd);
        return 0;
    }
    if (util_read_fd(fd, out, cap) != 0) {
        snprintf(why, whylen, "cannot be read: %s", strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    return 1;
}
