/* What one output line of a rank says about a failure: its class (CUDA out of memory, a
 * collective timeout, an NCCL or IB error, a peer reset, a full disk, the scheduler's
 * cancel, a Python traceback's parts), PyTorch's watchdog sequence numbers, and the peer
 * address a connection error names. Pure functions of the bytes (no model, no I/O), so the
 * tests feed them the exact lines of PyTorch, gloo, NCCL and Slurm (tests/fixtures/failures/).
 * failure_class.h puts them together over the ranks of an attempt. */
#ifndef DDPTOP_FAILURE_LINE_H
#define DDPTOP_FAILURE_LINE_H

#include <stdbool.h>
#include <stddef.h>

/* The classes, in no order (failure_class.c ranks them). FAILURE_NONE: not classified yet. */
enum failure_class {
    FAILURE_NONE = 0,
    FAILURE_CUDA_OOM,           /* torch.OutOfMemoryError: CUDA out of memory */
    FAILURE_COLLECTIVE_TIMEOUT, /* ProcessGroupNCCL's watchdog */
    FAILURE_NCCL_ERROR,         /* ncclSystemError, ncclRemoteError, an IB completion error */
    FAILURE_CONN_RESET,         /* gloo's or NCCL's socket: reset, closed, refused */
    FAILURE_OOM_KILL,           /* the kernel's OOM killer (SIGKILL) */
    FAILURE_SEGFAULT,           /* SIGSEGV, SIGBUS */
    FAILURE_PYTHON_EXCEPTION,   /* a traceback: its innermost frame in the user's code */
    FAILURE_DISK_FULL,          /* ENOSPC */
    FAILURE_PREEMPTED,          /* the scheduler cancelled or preempted the job */
    FAILURE_NODE_LOST,          /* the node went away (no rank exit to read) */
    FAILURE_HANG,               /* --on-hang: nothing failed, nothing moved */
    FAILURE_UNKNOWN,
    FAILURE_LOSS_NAN,           /* --on-nan: a rank's loss became NaN or inf */
    FAILURE_LOSS_SPIKE,         /* --on-spike: a rank's loss jumped above --loss-spike's rule */
    FAILURE_CONFIG,             /* a usage or configuration error: ranks against GPUs, a device */
    FAILURE_CLASSES
};

/* "collective_timeout": the name in events.jsonl and --json (stable). */
const char *failure_class_name(enum failure_class c);
/* "collective timeout": for people (the screen, the headless lines, ddptop ls). */
const char *failure_class_label(enum failure_class c);
/* The class of a name read back from events.jsonl; FAILURE_NONE when unknown. */
enum failure_class failure_class_parse(const char *name);

/* The class a line alone proves, FAILURE_NONE when it proves none. Exceptions' lines of the
 * specific classes (an OSError with errno 28, torch.OutOfMemoryError) are their class; a
 * Python exception line of another kind is FAILURE_NONE here (failure_line_exception). A
 * line longer than FAILURE_LINE_SCAN is looked at in its first FAILURE_LINE_SCAN bytes. */
#define FAILURE_LINE_SCAN 4096
enum failure_class failure_line_class(const char *text, size_t len);
/* An NCCL error of the IB transport (a completion error): it names a node pair. */
bool failure_line_ib(const char *text, size_t len);

/* PyTorch's watchdog numbers in a line: the timed-out work's SeqNum and OpType
 * ("WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, ..."), and the last enqueued and completed works
 * ("last enqueued NCCL work: 1234, last completed NCCL work: 1233"). -1: not in the line.
 * Returns whether any was found. */
struct watchdog_seq {
    long seq;                 /* the work that timed out or failed */
    long enqueued, completed;
    char op[24];              /* "ALLREDUCE"; "" unknown */
    bool timeout;             /* the line says it timed out */
};
bool failure_line_watchdog(const char *text, size_t len, struct watchdog_seq *out);

/* The peer a connection error names: gloo's "[10.0.0.2]:12345", NCCL's "10.0.0.2<45678>" or
 * "gpu2.cluster<45678>", or an IPv4 address anywhere in the line. Writes it without the port
 * into buf; false when none. */
bool failure_line_peer(const char *text, size_t len, char *buf, size_t n);

/* A Python traceback frame line, '  File "/home/u/train.py", line 42, in step': whether it
 * is one and whether it is the user's (not site-packages, dist-packages, lib/python3.X or
 * torch's own). */
bool failure_line_frame(const char *text, size_t len, bool *user);
/* A Python exception line ("ValueError: bad", "torch.OutOfMemoryError: ...",
 * "KeyboardInterrupt"): an unindented dotted name ending in Error, Exception, Interrupt or
 * Exit, then ':' or the end. */
bool failure_line_exception(const char *text, size_t len);

/* The fix for a class: one line for people. */
const char *failure_class_fix(enum failure_class c);

#endif
