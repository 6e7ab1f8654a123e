/* TEST DOUBLE (tests/fakecudart): what the fake cuBLAS asks of the fake CUDA runtime it is
 * linked against (libcublas.so.12 needs libcudart.so.12, as the real one does). Not an NVIDIA
 * interface: the CUDA calls themselves are declared in fake_cudart.c and fake_cublas.c with the
 * real ABI. */
#ifndef DDPTOP_FAKE_CUDART_H
#define DDPTOP_FAKE_CUDART_H

#include <stddef.h>

/* The current GPU's speed: the fraction of a healthy fake GPU's figures it reaches (1, or
 * DDPTOP_FAKE_CUDART_SLOW's factor), its compute capability's major number, and whether its
 * matrix products hang (DDPTOP_FAKE_CUDART_HANG). */
double fake_cudart_speed(void);
int fake_cudart_cc_major(void);
int fake_cudart_hangs(void);
/* p .. p+bytes lies inside one allocation of the current GPU. */
int fake_cudart_is_device(const void *p, size_t bytes);
/* The GPU works for ns: the caller sleeps that long and the events' clock moves by it. */
void fake_cudart_spend(double ns);

#endif
