/* What the agent reads about a rank from /proc: its state letter and CPU time for the status
 * heartbeat, whether it is a Python program (for py-spy), and small capped file reads for the
 * stack dump fallback. Every reader copes with a process that vanished meanwhile. */
#ifndef DDPTOP_AGENT_PROC_H
#define DDPTOP_AGENT_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "util/util.h"

struct proc_stat {
    char state;    /* R S D T t Z X I ... as the kernel writes it */
    double cpu_s;  /* utime + stime + cutime + cstime, in seconds */
};

/* Fills ps from /proc/<pid>/stat. Returns 0, or -1 when the process is gone or unreadable. */
int proc_stat_read(pid_t pid, struct proc_stat *ps);
/* Parses the text of a /proc/<pid>/stat file (the command name may hold spaces and ')'). */
int proc_stat_parse(const char *text, struct proc_stat *ps);
/* Whether the process runs a Python interpreter (comm or exe name starts with "python"). */
int proc_is_python(pid_t pid);
/* Appends at most cap bytes of the file at path to out. Returns 0, or -1 with errno set. */
int proc_read_file(const char *path, struct strbuf *out, size_t cap);

#endif
