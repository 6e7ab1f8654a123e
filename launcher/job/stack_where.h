/* Where a rank is, read from the text of its stack dump (the agent's "stacks" answer: py-spy,
 * gdb or /proc), as one short phrase, and the ranks of a hung job grouped by it for the root
 * cause: "15 ranks in all_reduce (0-6,8-15), rank 7 in the data loader". Pure functions of
 * the text, so tests feed them dumps without a process.
 *
 * The phrase, in this order of preference:
 *  1. the main thread's innermost frame that says something: a torch collective (all_reduce,
 *     broadcast, barrier, all_gather, reduce_scatter, all_to_all, gather, scatter, reduce; send
 *     and recv only when nothing else is there), named as torch.distributed names it, from a
 *     Python frame in torch/distributed/ or a C++ frame of c10d::, gloo:: or NCCL; the data
 *     loader (a Python frame in torch/utils/data/); the rendezvous (init_process_group, the
 *     TCP store); or a Python frame of the user's code: "train_step (train.py)";
 *  2. a collective in another thread (gloo and NCCL run them on threads of their own while the
 *     main thread waits for the result);
 *  3. the main thread's innermost frame outside the C library, libstdc++ and the dynamic
 *     loader (gdb: "event_loop"; a c10d wait: "c10d::Work::wait (a collective)", when the
 *     collective's own code has no symbols, as in Debian's gloo); for a Python process that gdb
 *     sees only the interpreter of (no Python frames without py-spy), the call it waits in:
 *     "clock_nanosleep (python)"; else its innermost Python frame;
 *  4. /proc: the main thread's kernel wait channel, "do_signal_stop (kernel)".
 * The main thread is the one whose id is the process id (pid), else gdb's thread 1, py-spy's
 * "MainThread", or the first one listed. */
#ifndef DDPTOP_STACK_WHERE_H
#define DDPTOP_STACK_WHERE_H

#include <stddef.h>

#define STACK_WHERE_MAX 72   /* bytes of a phrase at most (longer C++ names are cut) */

/* The phrase for one dump, or NULL when the text names nothing usable. tool is the agent's
 * "py-spy", "gdb" or "proc" (NULL: guessed from the text); pid the process's, or 0. Lines the
 * agent put above the dump (why a tool failed) are ignored. Caller frees. */
char *stack_where(const char *tool, const char *text, int pid);

/* The ranks grouped by phrase, biggest group first (ties: lowest rank first): "rank 1 in
 * freeze (job.py), rank 0 in all_reduce"; a group of several lists its ranks as ranges,
 * "15 ranks in all_reduce (0-6,8-15)"; one group holding every rank of several is "all 4 ranks
 * in all_reduce". where[i] is the phrase of rank ranks[i]; NULL groups as "where unknown".
 * Caller frees. */
char *stack_where_summary(const int *ranks, char *const *where, size_t n);

#endif
