/* Snapshot files (see snapshot.h and docs/training.md). Fields are encoded byte by byte, so
 * the format does not depend on the host's byte order or struct padding. */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "metrics.h"

uint64_t snapshot_file_size(uint64_t n_params)
{
    return SNAPSHOT_HEADER_BYTES + 12 * n_params + 8;
}

static void put32(uint8_t *p, uint32_t x)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(x >> (8 * i));
}
static void put64(uint8_t *p, uint64_t x)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(x >> (8 * i));
}
static void putf(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(p, u);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) x |= (uint32_t)p[i] << (8 * i);
    return x;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}
static float getf(const uint8_t *p)
{
    uint32_t u = get32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void encode_header(uint8_t *h, const struct snapshot_meta *m)
{
    memset(h, 0, SNAPSHOT_HEADER_BYTES);
    memcpy(h, SNAPSHOT_MAGIC, 8);
    put32(h + 8, SNAPSHOT_VERSION);
    put32(h + 12, SNAPSHOT_HEADER_BYTES);
    put32(h + 16, MODEL_VOCAB);
    put32(h + 20, (uint32_t)m->cfg.context);
    put32(h + 24, (uint32_t)m->cfg.embed);
    put32(h + 28, (uint32_t)m->cfg.hidden);
    put32(h + 32, (uint32_t)m->cfg.layers);
    put32(h + 36, m->batch_size);
    put32(h + 40, m->world_size);
    put64(h + 48, m->n_params);
    put64(h + 56, m->step);
    put64(h + 64, m->epoch);
    put64(h + 72, m->pos);
    put64(h + 80, m->seed);
    put64(h + 88, m->rng_state);
    put64(h + 96, m->adam_t);
    putf(h + 104, m->lr);
    putf(h + 108, m->beta1);
    putf(h + 112, m->beta2);
    putf(h + 116, m->eps);
    putf(h + 120, m->weight_decay);
}

static void decode_header(const uint8_t *h, struct snapshot_meta *m)
{
    memset(m, 0, sizeof *m);
    m->cfg.context = (int)get32(h + 20);
    m->cfg.embed = (int)get32(h + 24);
    m->cfg.hidden = (int)get32(h + 28);
    m->cfg.layers = (int)get32(h + 32);
    m->batch_size = get32(h + 36);
    m->world_size = get32(h + 40);
    m->n_params = get64(h + 48);
    m->step = get64(h + 56);
    m->epoch = get64(h + 64);
    m->pos = get64(h + 72);
    m->seed = get64(h + 80);
    m->rng_state = get64(h + 88);
    m->adam_t = get64(h + 96);
    m->lr = getf(h + 104);
    m->beta1 = getf(h + 108);
    m->beta2 = getf(h + 112);
    m->eps = getf(h + 116);
    m->weight_decay = getf(h + 120);
}

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes n floats little-endian through a bounce buffer, hashing as it goes. */
static int write_floats(int fd, const float *x, size_t n, uint64_t *h)
{
    uint8_t buf[1 << 16];
    size_t per = sizeof buf / 4;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        for (size_t j = 0; j < k; j++)
            putf(buf + 4 * j, x[i + j]);
        *h = hash_fnv1a64(*h, buf, 4 * k);
        if (write_all(fd, buf, 4 * k)) return -1;
    }
    return 0;
}

static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

int snapshot_save(const char *path, const struct snapshot_meta *meta, const float *params,
                  const float *m, const float *v, char *err, size_t errlen)
{
    char tmp[4096], prev[4096], dir[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(prev, sizeof prev, "%s.prev", path);
    dir_of(path, dir, sizeof dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "snapshot %s: cannot create %s: %s", path, tmp, strerror(errno));
        return -1;
    }
    uint8_t hdr[SNAPSHOT_HEADER_BYTES], sum[8];
    encode_header(hdr, meta);
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_INIT, hdr, sizeof hdr);
    int bad = write_all(fd, hdr, sizeof hdr) || write_floats(fd, params, meta->n_params, &h) ||
              write_floats(fd, m, meta->n_params, &h) || write_floats(fd, v, meta->n_params, &h);
    put64(sum, h);
    bad = bad || write_all(fd, sum, 8) || fsync(fd);
    if (close(fd)) bad = 1;
    if (bad) {
        snprintf(err, errlen, "snapshot %s: writing %s failed: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* Keep the last good one as PATH.prev; a crash between the renames leaves PATH missing
     * but PATH.prev good, which snapshot_load_latest handles. */
    if (rename(path, prev) && errno != ENOENT) {
        snprintf(err, errlen, "snapshot %s: renaming to %s failed: %s", path, prev,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "snapshot %s: renaming %s failed: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {   /* makes the renames durable */
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void floats_from_le(float *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = getf(src + 4 * i);
}

int snapshot_load(const char *path, struct snapshot *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 1;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t hdr[SNAPSHOT_HEADER_BYTES];
    if (size < SNAPSHOT_HEADER_BYTES + 8 || pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
        snprintf(err, errlen, "%s: truncated (%llu bytes, less than a header)", path,
                 (unsigned long long)size);
        close(fd);
        return -1;
    }
    if (memcmp(hdr, SNAPSHOT_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not a ddptop-train snapshot (bad magic)", path);
        close(fd);
        return -1;
    }
    if (get32(hdr + 8) != SNAPSHOT_VERSION || get32(hdr + 12) != SNAPSHOT_HEADER_BYTES) {
        snprintf(err, errlen, "%s: snapshot format version %u, this build reads version %d",
                 path, get32(hdr + 8), SNAPSHOT_VERSION);
        close(fd);
        return -1;
    }
    uint64_t n = get64(hdr + 48);
    if (n > ((uint64_t)1 << 32) || size != snapshot_file_size(n)) {
        snprintf(err, errlen, "%s: truncated or damaged: %llu bytes, expected %llu for %llu "
                 "parameters", path, (unsigned long long)size,
                 (unsigned long long)snapshot_file_size(n), (unsigned long long)n);
        close(fd);
        return -1;
    }
    uint8_t *buf = malloc(size);
    RT_CHECK(buf != NULL, "out of memory reading snapshot %s", path);
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        snprintf(err, errlen, "%s: read error after %zu of %llu bytes", path, got,
                 (unsigned long long)size);
        free(buf);
        return -1;
    }
    uint64_t want = get64(buf + size - 8);
    uint64_t have = hash_fnv1a64(HASH_FNV1A64_INIT, buf, size - 8);
    if (want != have) {
        snprintf(err, errlen, "%s: checksum mismatch (stored %016llx, computed %016llx): the "
                 "file is corrupt", path, (unsigned long long)want, (unsigned long long)have);
        free(buf);
        return -1;
    }
    decode_header(buf, &s->meta);
    s->params = malloc((size_t)(3 * n) * sizeof(float) + 4);
    RT_CHECK(s->params != NULL, "out of memory reading snapshot %s", path);
    s->m = s->params + n;
    s->v = s->m + n;
    floats_from_le(s->params, buf + SNAPSHOT_HEADER_BYTES, (size_t)n);
    floats_from_le(s->m, buf + SNAPSHOT_HEADER_BYTES + 4 * n, (size_t)n);
    floats_from_le(s->v, buf + SNAPSHOT_HEADER_BYTES + 8 * n, (size_t)n);
    free(buf);
    return 0;
}

int snapshot_load_latest(const char *path, struct snapshot *s, char *used, size_t usedlen,
                         char *err, size_t errlen)
{
    char prev[4096], err1[1024] = "", err2[1024] = "";
    snprintf(prev, sizeof prev, "%s.prev", path);
    int r1 = snapshot_load(path, s, err1, sizeof err1);
    if (r1 == 0) {
        snprintf(used, usedlen, "%s", path);
        return 0;
    }
    int r2 = snapshot_load(prev, s, err2, sizeof err2);
    if (r1 == 1 && r2 == 1) return 1;
    if (r1 == 1) snprintf(err1, sizeof err1, "%.900s: missing", path);
    if (r2 == 1) snprintf(err2, sizeof err2, "%.900s: missing", prev);
    if (r2 == 0) {
        if (r1 == 1)
            rt_log("warning: snapshot %s is missing (interrupted write?); resuming from %s",
                   path, prev);
        else
            rt_log("warning: snapshot %s is unusable (%s); falling back to %s", path, err1, prev);
        snprintf(used, usedlen, "%s", prev);
        return 0;
    }
    snprintf(err, errlen, "no usable snapshot: %s; %s. Remove or restore the snapshot files "
             "(or pass another --snapshot PATH) to start over",
             err1, err2);
    return -1;
}

void snapshot_release(struct snapshot *s)
{
    free(s->params);
    memset(s, 0, sizeof *s);
}
