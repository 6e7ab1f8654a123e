/* The "list" and "read" requests, and the flight recorder's directory (agent_files.h). Both
 * requests read the local disk in the loop: a directory listing and one 512 KiB read are short,
 * and the controller asks for one chunk at a time, so rank output and heartbeats go on between
 * them. Only regular files of the agent's own user, never through a symbolic link: the dumps
 * live in a directory under /tmp, where another user could plant a link to a private file for
 * ddptop to copy into a log directory others may read. */
#include "agent_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "util/util.h"
#include "wire/base64.h"
#include "wire/protocol.h"

#define FILES_READ_MAX_OFFSET (1LL << 40)
#define MADE_DIRS_MAX 64

/* The directories agent_files_prepare made, to remove again when still empty (deepest first). */
static char *made_dirs[MADE_DIRS_MAX];
static int n_made_dirs;
/* Dump directories that were not ours alone, and the directories their dumps go to instead. */
static struct {
    char *from, *to, *why;
} moved[MADE_DIRS_MAX];
static int n_moved;

static void remember_dir(const char *dir)
{
    for (int i = 0; i < n_made_dirs; i++)
        if (strcmp(made_dirs[i], dir) == 0) return;
    if (n_made_dirs < MADE_DIRS_MAX) made_dirs[n_made_dirs++] = xstrdup(dir);
}

/* mkdir -p dir (mode 0700); each directory this made is remembered. */
static void make_dirs(const char *dir)
{
    char *p = xstrdup(dir);
    for (char *s = p + 1; ; s++) {
        if (*s != '/' && *s != '\0') continue;
        char was = *s;
        *s = '\0';
        if (mkdir(p, 0700) == 0) remember_dir(p);
        *s = was;
        if (!was) break;
    }
    free(p);
}

/* The dump directory is ours alone: a real directory (not a link) of our user that no one else
 * may write to (others may read: it is the user's own, often the working directory). Else
 * another user could plant a link at a dump's name, through which PyTorch would overwrite a
 * file of ours, or read and swap the dumps. why: what is wrong. */
static bool dump_dir_ok(const char *dir, char *why, size_t whylen)
{
    return agent_nodedir_ours(dir, 022, false, why, whylen);
}

/* Where the dumps of a directory that was not ours go instead (made once per directory), and
 * why (for each rank's log). */
static const char *moved_dir(const char *from, const char **why)
{
    for (int i = 0; i < n_moved; i++)
        if (strcmp(moved[i].from, from) == 0) {
            if (why) *why = moved[i].why;
            return moved[i].to;
        }
    return NULL;
}

char *agent_files_prepare(const char *value, char *note, size_t notelen)
{
    const char *slash = value ? strrchr(value, '/') : NULL;
    if (!slash || slash == value || (size_t)(slash - value) >= PATH_MAX) return NULL;
    char *dir = xstrndup(value, (size_t)(slash - value)), *out = NULL;
    const char *said = NULL, *to = moved_dir(dir, &said);
    char why[160], err[400];
    struct stat st;
    if (!to && lstat(dir, &st) != 0) make_dirs(dir);
    if (!to && !dump_dir_ok(dir, why, sizeof why)) {
        const char *own = n_moved < MADE_DIRS_MAX ? agent_nodedir_own(err, sizeof err) : NULL;
        if (n_moved >= MADE_DIRS_MAX) snprintf(err, sizeof err, "%d such directories were moved already", n_moved);
        if (own) {
            char *mine = xasprintf("%s/dumps-%d", own, n_moved);
            if (mkdir(mine, 0700) == 0) {
                moved[n_moved].from = xstrdup(dir);
                moved[n_moved].why = xstrdup(why);
                moved[n_moved++].to = mine;
                to = mine;
            } else {
                snprintf(err, sizeof err, "cannot create %s: %s", mine, strerror(errno));
                free(mine);
            }
        }
        if (to)
            snprintf(note, notelen, "the flight recorder's directory %s %s: its dumps go to %s instead", dir, why, to);
        else
            snprintf(note, notelen, "the flight recorder's directory %s %s and %s: it is not used", dir, why, err);
        if (!to) out = xstrdup(""); /* no dump rather than one where others can reach it */
    } else if (to) {
        snprintf(note, notelen, "the flight recorder's directory %s %s: its dumps go to %s instead", dir, said, to);
    }
    if (to) out = xasprintf("%s%s", to, slash);
    free(dir);
    return out;
}

void agent_files_done(void)
{
    while (n_made_dirs > 0) {
        char *d = made_dirs[--n_made_dirs];
        rmdir(d); /* only when empty: a dump written there stays for the user */
        free(d);
    }
    while (n_moved > 0) { /* in the agent's own directory, which goes with the agent */
        n_moved--;
        free(moved[n_moved].from);
        free(moved[n_moved].to);
        free(moved[n_moved].why);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void agent_files_list_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *prefix = agent_req_str(req, "prefix");
    const char *slash = prefix ? strrchr(prefix, '/') : NULL;
    if (!prefix || !slash || strlen(prefix) >= PATH_MAX) {
        agent_send_error(ag, id, "\"prefix\" must be an absolute path prefix (DIR/NAME-START)");
        return;
    }
    char *dir = slash == prefix ? xstrdup("/") : xstrndup(prefix, (size_t)(slash - prefix));
    const char *to = moved_dir(dir, NULL);
    if (to) { /* the ranks were told to dump there (agent_files_prepare) */
        free(dir);
        dir = xstrdup(to);
    }
    const char *start = slash + 1;
    size_t start_len = strlen(start);
    char *names[FILES_LIST_MAX];
    int n = 0;
    DIR *d = opendir(dir);
    cJSON *msg = agent_reply_new(WIRE_EV_LIST, id);
    cJSON *files = cJSON_AddArrayToObject(msg, "files");
    if (!d && errno != ENOENT) cJSON_AddStringToObject(msg, "note", strerror(errno));
    for (struct dirent *e; d && (e = readdir(d)) && n < FILES_LIST_MAX; ) {
        if (strncmp(e->d_name, start, start_len) != 0 || e->d_name[0] == '.') continue;
        names[n++] = xstrdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char *path = xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, names[i]);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "path", path);
            cJSON_AddNumberToObject(f, "size", (double)st.st_size);
            cJSON_AddItemToArray(files, f);
        }
        free(path);
        free(names[i]);
    }
    free(dir);
    agent_send(ag, msg);
}

void agent_files_read_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *path = agent_req_str(req, "path");
    long offset;
    if (!path || path[0] != '/') {
        agent_send_error(ag, id, "\"path\" must be an absolute path");
        return;
    }
    if (agent_req_int(ag, req, id, "offset", 0, LONG_MAX, 0, &offset) < 0) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0) close(fd);
        agent_send_error(ag, id, "cannot read %s: %s", path,
                         e == EINVAL ? "not a regular file of the agent's user" : strerror(e));
        return;
    }
    char *buf = xmalloc(FILES_READ_CHUNK);
    size_t got = 0;
    while (got < FILES_READ_CHUNK && (long long)offset < FILES_READ_MAX_OFFSET) {
        ssize_t r = pread(fd, buf + got, FILES_READ_CHUNK - got, (off_t)offset + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    struct strbuf b64;
    strbuf_init(&b64);
    base64_encode(&b64, buf, got);
    free(buf);
    cJSON *msg = agent_reply_new(WIRE_EV_READ, id);
    cJSON_AddStringToObject(msg, "path", path);
    cJSON_AddNumberToObject(msg, "offset", (double)offset);
    cJSON_AddNumberToObject(msg, "size", (double)st.st_size);
    cJSON_AddBoolToObject(msg, "eof", (long long)offset + (long long)got >= (long long)st.st_size);
    cJSON_AddStringToObject(msg, "b64", b64.buf ? b64.buf : "");
    strbuf_done(&b64);
    agent_send(ag, msg);
}
