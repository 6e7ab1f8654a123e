/* Stack dumps of a running rank for {"op":"stacks"}: py-spy for a Python rank when py-spy is
 * installed, else gdb in batch mode when installed, else what /proc tells without a debugger
 * (each thread's wait channel, kernel stack and state). Blocks its caller while the tool runs
 * (bounded by its time limit): the agent calls it in a child process (agent_ranks_ops.c). */
#ifndef DDPTOP_AGENT_STACKS_H
#define DDPTOP_AGENT_STACKS_H

#include <sys/types.h>

#include "util/util.h"

#define STACKS_TEXT_MAX (256 * 1024)
#define STACKS_TOOL_TIMEOUT_MS 15000
/* gdb reads the symbols of every library first: libtorch's alone take seconds on a busy node. */
#define STACKS_GDB_TIMEOUT_MS 30000

/* Appends the dump to text (raw bytes, at most STACKS_TEXT_MAX) and returns the tool that made
 * it: "py-spy", "gdb" or "proc". path_env is the PATH to look the tools up on (NULL: the agent's). */
const char *stacks_collect(pid_t pid, const char *path_env, struct strbuf *text);

#endif
