/* Taking a run over (logw.h, "re-adoption"): the log index read back, and each rank log cut
 * back to what the index counts, so that what the agent sends again follows on exactly. Split
 * from logw.c, which writes; this reads what an earlier controller left. */
#include "logw_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int logw_read_index(const char *run_dir, struct logw_mark *marks, size_t n_ranks)
{
    for (size_t i = 0; i < n_ranks; i++) marks[i] = (struct logw_mark){.attempt = -1};
    char *path = xasprintf("%s/%s", run_dir, LOG_INDEX_FILE);
    FILE *f = fopen(path, "re");
    free(path);
    if (!f) return -1;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long rank, seq, base, bytes;
        int attempt;
        if (line[0] == '#') continue;
        if (sscanf(line, "%llu %d %llu %llu %llu", &rank, &attempt, &seq, &base, &bytes) != 5) continue;
        if (rank >= n_ranks || attempt < 0 || attempt > 1000000) continue;
        marks[rank] = (struct logw_mark){.attempt = attempt, .seq = seq, .base = base, .bytes = bytes};
    }
    fclose(f);
    return 0;
}

static void cut(const struct logw *w, int attempt, size_t rank, uint64_t bytes)
{
    char *path = logw_rank_path(w, attempt, rank);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > bytes) {
        if (ftruncate(fd, (off_t)bytes) != 0) { /* reported when the log is written next */ }
    }
    if (fd >= 0) close(fd);
    free(path);
}

void logw_cut_back(struct logw *w, const struct logw_mark *marks, int last_attempt)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->n; i++) {
        const struct logw_mark *m = &marks[i];
        int from = m->attempt >= 0 ? m->attempt + 1 : last_attempt;
        if (m->attempt >= 0) cut(w, m->attempt, i, m->bytes);
        for (int a = from; a <= last_attempt; a++) cut(w, a, i, 0);
        w->dur_seq[i] = m->attempt >= 0 ? m->seq : 0;
        w->dur_base[i] = m->attempt >= 0 ? m->base : 0;
        /* the thread's own marks start from there too (it has not begun on this rank) */
        w->r[i].w_attempt = m->attempt;
        w->r[i].w_seq = m->seq;
        w->r[i].w_base = m->base;
        w->r[i].w_bytes = m->bytes;
    }
    pthread_mutex_unlock(&w->mu);
}
