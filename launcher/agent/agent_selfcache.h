/* The agent's copy of itself for later steps of a Slurm job (agent_selfcache.c). */
#ifndef DDPTOP_AGENT_SELFCACHE_H
#define DDPTOP_AGENT_SELFCACHE_H

#include <stdbool.h>

/* Keeps this executable as /tmp/ddptop-UID/bin/ddptop-agent-HEX (directories 0700 and ours,
 * not links; file 0700, written under a temporary name and renamed) when its SHA-256 is
 * want_hex. true: the copy is there. */
bool agent_selfcache_keep(const char *want_hex);

#endif
