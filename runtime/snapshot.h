/* Snapshots: everything a run needs to go on exactly where it stopped (parameters, AdamW
 * moments and step, sampler epoch and position, RNG state, model configuration) in one
 * portable file: little-endian, fixed-width fields, magic and format version, FNV-1a 64 over
 * all bytes. docs/training.md gives the layout byte by byte.
 *
 * Writing is crash-safe: a temporary file in the same directory, fsync, PATH renamed to
 * PATH.prev, the temporary renamed to PATH, fsync of the directory. Reading checks length and
 * checksum; a bad PATH falls back to PATH.prev. */
#ifndef DDPTOP_SNAPSHOT_H
#define DDPTOP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define SNAPSHOT_MAGIC "DDPTSNAP"
#define SNAPSHOT_VERSION 1
#define SNAPSHOT_HEADER_BYTES 128

struct snapshot_meta {
    struct model_config cfg;
    uint64_t n_params;
    uint64_t step;            /* optimizer steps completed */
    uint64_t epoch, pos;      /* the sampler's next batch: epoch and batches taken in it */
    uint32_t batch_size, world_size;   /* of the run that wrote it (sampler positions) */
    uint64_t seed;
    uint64_t rng_state;
    uint64_t adam_t;
    float lr, beta1, beta2, eps, weight_decay;
};

struct snapshot {
    struct snapshot_meta meta;
    float *params, *m, *v;    /* n_params each, host order, one allocation */
};

/* Bytes a snapshot of n parameters takes on disk. */
uint64_t snapshot_file_size(uint64_t n_params);

/* Writes PATH as described above. -1 with a message on failure (PATH is then untouched). */
int snapshot_save(const char *path, const struct snapshot_meta *meta, const float *params,
                  const float *m, const float *v, char *err, size_t errlen);

/* Reads and verifies one file: 0 on success, 1 when it does not exist, -1 when it is
 * unreadable, truncated or corrupt (err says which). */
int snapshot_load(const char *path, struct snapshot *s, char *err, size_t errlen);

/* PATH, else PATH.prev (with a warning on stderr). 0: loaded (used names the file),
 * 1: neither exists (a fresh start), -1: none is good (err names the files and why). */
int snapshot_load_latest(const char *path, struct snapshot *s, char *used, size_t usedlen,
                         char *err, size_t errlen);

void snapshot_release(struct snapshot *s);

#endif
