/* NCCL's own account of each rank, read from the INFO and WARN lines NCCL prints with
 * NCCL_DEBUG (docs/nccl.md): what a line of NCCL's debug output looks like, and (nccl.c)
 * what the lines say. */
#ifndef DDPTOP_NCCL_H
#define DDPTOP_NCCL_H

#include <stdbool.h>
#include <stddef.h>

/* True when the line is one of NCCL's debug lines: "HOST:PID:TID [DEV] NCCL INFO ...",
 * "... NCCL WARN ...", "... NCCL TRACE ..." (NCCL's src/debug.cc, ncclDebugLog, 2.1x-2.2x),
 * the form the log pane folds away by default. */
bool nccl_line_is(const char *text, size_t len);

#endif
