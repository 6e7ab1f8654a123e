/* What the parts of fakecuda share: fenced device memory, the sticky-free last error, streams
 * with pending operations (only NCCL's stay pending), and the way to stop with a message. */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

#include <stddef.h>

#include "cuda_runtime.h"

/* Prints "fakecuda: ..." and aborts: for what a GPU would fault on or what the fake cannot
 * emulate, so that the test shows the reason instead of a wrong number. */
[[noreturn]] void fake_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fake_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Device memory. fake_dev_span: whether [p, p + bytes) lies inside one live cudaMalloc
 * allocation. Between fake_mem_open and fake_mem_close (nested) device memory can be touched;
 * outside them it is PROT_NONE unless FAKECUDA_PROTECT=0. */
bool fake_dev_span(const void *p, size_t bytes);
void fake_mem_open(void);
void fake_mem_close(void);

/* f as the tensor cores see it in TF32: 10-bit mantissa, round to nearest even. */
float fake_tf32_round(float f);

void fake_set_error(cudaError_t e);
int fake_current_device(void);
double fake_now(void);

/* An operation that stays pending on its stream until poll says it is done; drop removes it
 * unfinished (an aborted communicator). owner tells whose it is. */
struct fake_op {
    bool (*poll)(void *ctx);
    void (*drop)(void *ctx);
    void *ctx;
    const void *owner;
};
cudaStream_t fake_stream(cudaStream_t s);   /* 0 -> the default stream; checks it is alive */
void fake_stream_push(cudaStream_t s, fake_op op);
void fake_stream_progress(cudaStream_t s);  /* completes what it can, never waits */
void fake_stream_drain(cudaStream_t s);     /* waits until nothing is pending */
void fake_stream_drop_owner(const void *owner);

#endif
