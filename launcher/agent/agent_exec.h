/* Running a short probe program for the agent's facts (python3 --version, nvidia-smi, ...):
 * no shell, stdin from /dev/null, output captured, and a hard time limit after which the
 * probe's whole process group is killed, so a hung probe never hangs the agent. */
#ifndef DDPTOP_AGENT_EXEC_H
#define DDPTOP_AGENT_EXEC_H

#include <sys/types.h>

#include "util/util.h"

#define AGENT_EXEC_MAX_PROBES 16

/* One probe of a batch that runs concurrently (so facts cost the slowest probe, not the sum). */
struct agent_probe {
    char *const *argv;   /* in: argv[0] searched on PATH like execvp */
    int timeout_ms;      /* in */
    int merge_stderr;    /* in: capture stderr with stdout */
    struct strbuf out;   /* out: captured output, at most 64 KiB; strbuf_done it */
    int status;          /* out: as agent_exec_capture returns */
    /* private */
    pid_t pid;
    int fd, timed_out;
    size_t got;
    int64_t deadline;
};

/* Starts every probe, collects their output, reaps them; blocks for at most the longest
 * timeout_ms. At most AGENT_EXEC_MAX_PROBES. */
void agent_exec_run_all(struct agent_probe *probes, int n);

/* Runs argv (argv[0] searched on PATH like execvp), appending its stdout (and stderr when
 * merge_stderr) to out, at most 64 KiB. Returns the exit status (0-255), 128+N when killed by
 * signal N, 127 when the program could not be started, or -1 when it ran past timeout_ms
 * (then it and its process group were killed). Blocks the caller for up to timeout_ms. */
int agent_exec_capture(char *const argv[], int timeout_ms, int merge_stderr, struct strbuf *out);

/* Whether an executable named name is found on PATH (or is an executable path). */
int agent_exec_on_path(const char *name, const char *path_env);

/* Resolves name like execvp would: a name with '/' is taken as is (a leading "~/" is the home
 * directory); otherwise the first executable regular file in path_env (NULL: $PATH). Returns a
 * malloc'ed path or NULL. */
char *agent_exec_resolve(const char *name, const char *path_env);

/* Trims s in place and turns every byte outside printable ASCII into '?' (newlines too): probe
 * output is remote text that must never reach the controller's terminal raw. Returns the start. */
char *agent_exec_clean(char *s);

#endif
