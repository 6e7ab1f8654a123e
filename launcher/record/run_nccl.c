/* A run's NCCL account read back (run_nccl.h). */
#include "run_nccl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "job/nccl.h"
#include "runs.h"
#include "util/util.h"

/* Bounded: nccl.json holds a few hundred bytes per rank. */
#define NCCL_JSON_MAX (64u * 1024 * 1024)

static bool load_json(struct job *j, const char *dir, int attempt)
{
    char *path = xasprintf("%s/attempt-%d/%s", dir, attempt, RUN_NCCL_FILE);
    int fd = util_open_read(path);
    free(path);
    if (fd < 0) return false;
    struct strbuf sb;
    strbuf_init(&sb);
    util_read_fd(fd, &sb, NCCL_JSON_MAX);
    close(fd);
    cJSON *o = sb.buf ? cJSON_ParseWithLength(sb.buf, sb.len) : NULL;
    strbuf_done(&sb);
    bool ok = o && nccl_from_json(j, o);
    cJSON_Delete(o);
    return ok;
}

/* The lines of buf[0..len) into rank's account; a cut last line is left out. */
static void feed(struct job *j, int rank, const char *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        if (!nl) break;
        size_t n = (size_t)(nl - (buf + i));
        nccl_feed_line(j, rank, buf + i, n, 0, 0);
        i += n + 1;
    }
}

static size_t read_at(int fd, char *buf, size_t want, off_t from)
{
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(fd, buf + got, want - got, from + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

static bool parse_log(struct job *j, const char *dir, int attempt, int rank, size_t head_max, size_t tail_max)
{
    char *path = xasprintf("%s/attempt-%d/rank-%d.log", dir, attempt, rank);
    int fd = util_open_read(path);
    free(path);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    size_t size = (size_t)st.st_size, head = size < head_max ? size : head_max;
    char *buf = xmalloc(head_max > tail_max ? head_max : tail_max);
    feed(j, rank, buf, read_at(fd, buf, head, 0));
    if (size > head) {   /* the tail, from its first whole line */
        off_t from = size - head > tail_max ? (off_t)(size - tail_max) : (off_t)head;
        size_t got = read_at(fd, buf, size - (size_t)from, from);
        const char *nl = from > (off_t)head ? memchr(buf, '\n', got) : buf - 1;
        if (nl) feed(j, rank, nl + 1, got - (size_t)(nl + 1 - buf));
    }
    free(buf);
    close(fd);
    return true;
}

enum run_nccl_source run_nccl_load(struct job *j, const char *dir, int attempt)
{
    if (load_json(j, dir, attempt)) return RUN_NCCL_JSON;
    nccl_get(j)->quiet = true;
    size_t n = 0;
    int *logs = runs_rank_logs(dir, attempt, &n);
    bool any = false;
    size_t per = n ? RUN_NCCL_BUDGET / n : RUN_NCCL_BUDGET;
    size_t head = per * 4 / 5, tail = per / 5;
    head = head > RUN_NCCL_HEAD ? RUN_NCCL_HEAD : head < 64 * 1024 ? 64 * 1024 : head;
    tail = tail > RUN_NCCL_TAIL ? RUN_NCCL_TAIL : tail < 16 * 1024 ? 16 * 1024 : tail;
    for (size_t k = 0; k < n; k++)
        if (logs[k] >= 0 && (size_t)logs[k] < j->n_ranks) any |= parse_log(j, dir, attempt, logs[k], head, tail);
    free(logs);
    return any ? RUN_NCCL_LOGS : RUN_NCCL_NONE;
}
