/* A measuring program beside the agent's loop: started with no shell, stdin and stderr on
 * /dev/null, its stdout read by a watch (complete lines handed over as they come, at most cap
 * bytes kept), in a process group of its own that dies with the agent (PR_SET_PDEATHSIG) and
 * is killed at the deadline. Its exit is looked for, never waited for: the loop never blocks on
 * it, not even on a killed GPU program the driver holds. Used by bench_nccl (the agent's own
 * binary in its NCCL mode) and bench_dcgmi (`dcgmi diag -r 1 -j`). */
#ifndef DDPTOP_AGENT_BENCH_PROC_H
#define DDPTOP_AGENT_BENCH_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

#define BENCH_PROC_TIMED_OUT (-1)   /* the deadline came first: killed */
#define BENCH_PROC_KILLED (-2)      /* agent_bench_proc_kill */

struct bench_proc;
/* A complete line of its output, without the '\n'. It may call agent_bench_proc_kill (the
 * struct outlives the call: it is freed only once the program is reaped, after on_end). */
typedef void (*bench_proc_line_fn)(struct agent *ag, void *ctx, const char *line);
/* Once, at its end: its exit status (0-255, 128+N for a signal) or BENCH_PROC_*; out is what
 * it printed (at most cap bytes; over: more came). The end is its exit after its output ended,
 * or its kill (at the deadline, or agent_bench_proc_kill): reported at once, the killed program
 * reaped later. The caller frees ctx here, and uses the struct bench_proc no more. */
typedef void (*bench_proc_end_fn)(struct agent *ag, void *ctx, int status, const char *out, int over);

/* argv[0] is a path (never searched); envp its environment (NULL: the agent's); exec_fd, when
 * not -1, the program opened already (the caller's checks were made on it): run with fexecve,
 * argv[0] only its name. The caller keeps exec_fd. NULL with err set when it cannot be started. */
struct bench_proc *agent_bench_proc_start(struct agent *ag, char *const argv[], char *const envp[], int exec_fd,
                                          int64_t deadline_ms, size_t cap,
                                          bench_proc_line_fn on_line, bench_proc_end_fn on_end, void *ctx,
                                          char *err, size_t errlen);
/* Ends it now (on_end with BENCH_PROC_KILLED); nothing when it has ended. */
void agent_bench_proc_kill(struct agent *ag, struct bench_proc *p);

#endif
