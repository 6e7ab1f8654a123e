/* The node's cache of python3's and torch's versions (issue 22): what agent_pyver_read or the
 * python3 probe found, under the key agent_pyver_locate built (every file it depends on with its
 * stat signature, and the variables that select them), so that later facts on the node, of
 * this run or the next, skip the executable's scan or the probe. In DIR/ddptop-UID/cache
 * (agent_nodedir.h: 0700, ours), one file per interpreter, 0600; a file that is not a regular
 * file of ours with mode 0600 (or 0400) is ignored, so another user cannot plant an answer.
 * docs/check.md ("The facts' cache"). */
#ifndef DDPTOP_AGENT_PYCACHE_H
#define DDPTOP_AGENT_PYCACHE_H

#include <stdbool.h>

/* 1 and the versions (malloc'd, NULL for null) when the cache holds exactly key for exe; 0
 * otherwise (absent, another key, refused). */
int agent_pycache_get(const char *exe, const char *key, char **python3, char **torch);
/* Stores the answer for key (best effort: a cache that cannot be written is no error). */
void agent_pycache_put(const char *exe, const char *key, const char *python3, const char *torch);

/* The agents of one machine (the simulated nodes of tests/lib/scale.sh, or several runs at once)
 * that miss together would each start python3: the first takes this lock while it reads or
 * probes, the others wait for it (at most wait_ms, polled; facts blocks the agent anyway) and
 * then find its answer. The lock's fd, or -1 (no lock: go on without); waited: another agent
 * held it (when its answer is then not there, its probe failed: the caller lets go at once,
 * or every agent of the machine would take its turn at a hung probe's time limit). */
int agent_pycache_lock(const char *exe, int wait_ms, bool *waited);
void agent_pycache_unlock(int fd);

#endif
