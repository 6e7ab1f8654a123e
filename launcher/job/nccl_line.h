/* What a line of NCCL's debug output looks like: pure text tests on a rank's output line,
 * apart from the NCCL account (nccl.h) so that the job model can mark NCCL's lines as it keeps
 * them (LOG_LINE_NCCL, folded by the log pane) without including the account, which includes
 * the job. */
#ifndef DDPTOP_NCCL_LINE_H
#define DDPTOP_NCCL_LINE_H

#include <stdbool.h>
#include <stddef.h>

/* True when the line is one of NCCL's debug lines: "HOST:PID:TID [DEV] NCCL INFO ...",
 * "... NCCL WARN ...", "... NCCL TRACE ..." (NCCL's src/debug.cc, ncclDebugLog, 2.1x-2.2x),
 * the form the log pane folds away by default. */
bool nccl_line_is(const char *text, size_t len);

/* Cheap test for a block of output lines: false when no line in it can be NCCL's (no
 * " NCCL " in it), so the controller skips the per-line parse. */
bool nccl_block_may_hold(const char *text, size_t len);
/* NCCL 2.18-2.22 print their version as a bare "NCCL version 2.18.3+cuda12.2" line on stdout
 * (init.cc, showVersion: printf), with no INFO prefix; 2.23+ as an INFO line. */
bool nccl_version_line_is(const char *text, size_t len);

#endif
