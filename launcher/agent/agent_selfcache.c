/* The agent's copy of itself on its node (agent_selfcache.h, docs/slurm.md "The agent's copy"):
 * started from srun's --bcast copy, it keeps its own bytes as /tmp/ddptop-UID/bin/ddptop-agent-
 * SHA256, so that a later step of the same job runs that instead of copying again. The file is
 * only a candidate: the step's wrapper (srun_step.c) checks the directories, the owner, the mode
 * and the SHA-256 again before it runs it, so what is written here never needs to be trusted. */
#include "agent_selfcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "util/sha256.h"
#include "util/util.h"

static bool is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return false;
    return strspn(s, "0123456789abcdef") == 64;
}

bool agent_selfcache_keep(const char *want_hex)
{
    char dir[64], why[400], hex[65];
    unsigned char digest[32];
    char buf[65536];
    struct sha256 h;
    ssize_t n;
    bool ok = false;
    if (!is_hex64(want_hex)) return false;
    snprintf(dir, sizeof dir, "/tmp/ddptop-%u/bin", (unsigned)getuid());
    if (!agent_nodedir_private(dir, why, sizeof why)) return false;
    char *final = xasprintf("%s/ddptop-agent-%s", dir, want_hex);
    /* written again even when a file of that name is there: it may have been changed, and a
     * --bcast step only runs when a node's copy was missing or refused */
    char *tmp = xasprintf("%s/.ddptop-agent-%s.%d", dir, want_hex, (int)getpid());
    /* /proc/self/exe: our own bytes, even once the --bcast copy is unlinked */
    int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    if (out >= 0) {
        sha256_init(&h);
        while ((n = read(in, buf, sizeof buf)) > 0) {
            sha256_update(&h, buf, (size_t)n);
            if (util_write_all(out, buf, (size_t)n) < 0) break;
        }
        sha256_final(&h, digest);
        sha256_hex(digest, hex);
        /* a copy whose bytes are not the ones named is not kept */
        ok = n == 0 && strcmp(hex, want_hex) == 0 && fchmod(out, 0700) == 0;
        if (close(out) != 0) ok = false;
        if (ok && rename(tmp, final) != 0) ok = false;
        if (!ok) unlink(tmp);
    }
    if (in >= 0) close(in);
    free(tmp);
    free(final);
    return ok;
}
