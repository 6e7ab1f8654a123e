/* The kernel's OOM kills in a rank's memory cgroup: the "oom_kill N" of its memory.events
 * (cgroup v2) or memory.oom_control (the v1 memory controller, kernel 4.13 on) when the rank
 * started (and whenever it moved to another cgroup, seen at the
 * once-a-second status), and again at its end; the difference goes out with the rank's exit
 * when it ended by SIGKILL or with code 137 (docs/protocol.md), so the controller can say the
 * OOM killer took it. Bounded reads of /proc and /sys/fs/cgroup only; no symlink is followed
 * out of the cgroup file system. */
#ifndef DDPTOP_AGENT_OOM_H
#define DDPTOP_AGENT_OOM_H

#include <sys/types.h>

struct rank_cgroup {
    char file[600];          /* the counter's file under /sys/fs/cgroup; "" unknown */
    long long base;          /* its oom_kill when first seen; -1 unknown */
};

/* Follows the rank's cgroup: a new one (or the first) gets its oom_kill count now. */
void oom_follow(struct rank_cgroup *cg, pid_t pid);
/* The OOM kills in the last cgroup followed since it was first seen; -1 unknown (no cgroup v2,
 * no memory controller, the cgroup gone). */
long long oom_kills_since(const struct rank_cgroup *cg);
/* The "oom_kill N" of a memory.events text; -1 when absent or out of range. */
long long oom_parse_events(const char *text, size_t len);
/* The file holding the oom_kill count of the memory cgroup a /proc/PID/cgroup text names, into
 * out: "/sys/fs/cgroup/memory/PATH/memory.oom_control" for a v1 "N:memory:/PATH" line (it
 * holds the memory controller then), else "/sys/fs/cgroup/PATH/memory.events" for the v2
 * "0::/PATH"; *v1 says which. -1 when there is none or the path is not a plain absolute one
 * (no "." or ".." part). */
int oom_counter_file(const char *text, size_t len, char *out, size_t n, int *v1);

#endif
