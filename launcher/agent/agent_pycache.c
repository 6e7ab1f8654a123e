/* The versions' cache on the node (agent_pycache.h). */
#include "agent_pycache.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "util/sha256.h"
#include "util/util.h"

#define CACHE_MAX 262144 /* the key lists every site directory and .pth file: a few KiB */

/* DIR/ddptop-UID/cache/python-<sha256 of host and exe, 16 hex>, in the first base that is
 * ours. The host's name is in it (and in the key) because $TMPDIR may be shared by nodes. */
static char *cache_path(const char *exe)
{
    char **bases = agent_nodedir_bases("cache"), *path = NULL;
    unsigned char d[32];
    char hex[65], why[400];
    struct sha256 h;
    struct utsname u;
    sha256_init(&h);
    if (uname(&u) == 0) sha256_update(&h, u.nodename, strlen(u.nodename) + 1);
    sha256_update(&h, exe, strlen(exe));
    sha256_final(&h, d);
    sha256_hex(d, hex);
    for (size_t i = 0; bases[i] && !path; i++)
        if (agent_nodedir_private(bases[i], why, sizeof why)) path = xasprintf("%s/python-%.16s", bases[i], hex);
    agent_nodedir_free(bases);
    return path;
}

static char *dup_or_null(const cJSON *v)
{
    return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

int agent_pycache_get(const char *exe, const char *key, char **python3, char **torch)
{
    char *path = exe && key ? cache_path(exe) : NULL;
    struct stat st;
    struct strbuf sb;
    int fd, hit = 0;
    *python3 = *torch = NULL;
    if (!path) return 0;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    free(path);
    if (fd < 0) return 0;
    strbuf_init(&sb);
    /* ours alone: a file someone else made or could have written is not an answer */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077) &&
        util_read_fd(fd, &sb, CACHE_MAX) == 0 && sb.buf) {
        cJSON *j = cJSON_Parse(sb.buf);
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key");
        if (cJSON_IsString(k) && strcmp(k->valuestring, key) == 0) {
            *python3 = dup_or_null(cJSON_GetObjectItemCaseSensitive(j, "python3"));
            *torch = dup_or_null(cJSON_GetObjectItemCaseSensitive(j, "torch"));
            hit = 1;
        }
        cJSON_Delete(j);
    }
    close(fd);
    strbuf_done(&sb);
    return hit;
}

void agent_pycache_put(const char *exe, const char *key, const char *python3, const char *torch)
{
    char *path = exe && key ? cache_path(exe) : NULL, *tmp, *text;
    unsigned int rnd = 0;
    cJSON *j;
    int fd;
    if (!path) return;
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", key);
    if (python3) cJSON_AddStringToObject(j, "python3", python3);
    else cJSON_AddNullToObject(j, "python3");
    if (torch) cJSON_AddStringToObject(j, "torch", torch);
    else cJSON_AddNullToObject(j, "torch");
    text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    /* a name of its own (agents of one machine may write at once), then renamed over the old */
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) rnd = (unsigned)mono_ns();
    tmp = xasprintf("%s.%d.%08x.tmp", path, (int)getpid(), rnd);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        bool ok = text && util_write_all(fd, text, strlen(text)) == 0;
        if (close(fd) != 0) ok = false;
        if (!ok || rename(tmp, path) != 0) unlink(tmp);
    }
    free(tmp);
    free(text);
    free(path);
}

int agent_pycache_lock(const char *exe, int wait_ms, bool *waited)
{
    char *path = exe ? cache_path(exe) : NULL, *lock;
    int fd;
    if (!path) return -1;
    lock = xasprintf("%s.lock", path);
    free(path);
    fd = util_open_private(lock, O_RDWR, 0600);
    free(lock);
    if (fd < 0) return -1;
    /* polled, not a blocking flock: the wait stays bounded whatever the holder does */
    *waited = false;
    for (int64_t end = mono_ms() + wait_ms;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        *waited = true;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        if (mono_ms() >= end) break;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
    }
    close(fd);
    return -1;
}

void agent_pycache_unlock(int fd)
{
    if (fd >= 0) close(fd); /* the lock goes with the descriptor */
}
