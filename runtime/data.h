/* Training data and its sampler. Bytes are tokens: sample i asks the model for byte
 * [i + context] given bytes [i, i + context). The corpus comes from --data FILE or from a
 * built-in generator of English-like text (fixed vocabulary and grammar, seeded), so demos and
 * tests need no download.
 *
 * The sampler has torch's DistributedSampler semantics: each epoch a shuffle of all sample
 * indices seeded by (seed, epoch), padded by repeating its head to a multiple of world_size;
 * rank r takes indices[r::world_size]; step s of the epoch uses the shard's [s*B, (s+1)*B).
 * Hence 2 ranks x batch B see exactly the samples that 1 rank x batch 2B sees. */
#ifndef DDPTOP_DATA_H
#define DDPTOP_DATA_H

#include <stddef.h>
#include <stdint.h>

#define DATA_BUILTIN_BYTES (1u << 20)

struct data_corpus {
    uint8_t *bytes;
    size_t n;
};

/* Reads a whole file; -1 with a message naming it when it cannot be read. */
int data_load_file(struct data_corpus *c, const char *path, char *err, size_t errlen);
/* The built-in corpus: the same n bytes on every machine. */
void data_builtin(struct data_corpus *c, size_t n);
void data_corpus_free(struct data_corpus *c);

struct data_sampler {
    const uint8_t *bytes;
    int context, rank, world, batch;
    uint64_t seed;
    size_t n_samples;        /* corpus bytes - context */
    size_t per_rank;         /* shard length: ceil(n_samples / world) */
    size_t steps_per_epoch;  /* per_rank / batch (the ragged tail is dropped) */
    uint64_t epoch;          /* the epoch of the next batch */
    uint64_t pos;            /* batches of that epoch already taken */
    uint32_t *perm;          /* the epoch's padded permutation, world * per_rank long */
    uint64_t perm_epoch;     /* which epoch perm holds; UINT64_MAX: none yet */
};

/* -1 with a clear message when the corpus is too small for one batch per rank. */
int data_sampler_init(struct data_sampler *s, const struct data_corpus *c, int context, int rank,
                      int world, int batch, uint64_t seed, char *err, size_t errlen);
void data_sampler_free(struct data_sampler *s);
/* Where the next batch comes from (a resumed run sets what the snapshot said). */
void data_sampler_seek(struct data_sampler *s, uint64_t epoch, uint64_t pos);
/* The sample index at position k of this rank's shard of the given epoch. */
size_t data_sampler_shard_index(struct data_sampler *s, uint64_t epoch, size_t k);
/* Fills tokens [batch][context] and targets [batch], then advances (to the next epoch after
 * the last full batch). Writes the sample indices to idx when not NULL. */
void data_sampler_next(struct data_sampler *s, uint8_t *tokens, uint8_t *targets, size_t *idx);

#endif
