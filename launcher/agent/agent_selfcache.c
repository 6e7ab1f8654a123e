/* The agent's copy of itself on its node (agent_selfcache.h, docs/slurm.md "The agent's copy"):
 * started from srun's --bcast copy, it keeps its own bytes as /tmp/ddptop-UID/bin/ddptop-agent-
 * SHA256, so that a later step of the same job runs that instead of copying again. The file is
 * only a candidate: the step's wrapper (srun_step.c) checks the directories, the owner, the mode
 * and the SHA-256 again before it runs it, so what is written here never needs to be trusted. */
#include "agent_selfcache.h"

#include <dirent.h>
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

/* Older copies go: each ddptop build is a new hash, and a node would otherwise keep every
 * version it ever ran. The AGENT_SELFCACHE_KEEP newest stay (an older one still in use by a
 * running job is only unlinked: it runs on, and a later step of that job falls back to
 * --bcast). Only regular files of ours named like ours are looked at; bounded scan. */
#define AGENT_SELFCACHE_KEEP 4

static void prune(int dfd)
{
    struct { char name[80]; long long mtime; } keep[AGENT_SELFCACHE_KEEP + 1];
    size_t nk = 0, seen = 0;
    DIR *d = fdopendir(dfd);
    struct dirent *e;
    if (!d) { close(dfd); return; }
    while ((e = readdir(d)) && seen++ < 4096) {
        struct stat st;
        if (strncmp(e->d_name, "ddptop-agent-", 13) != 0 || !is_hex64(e->d_name + 13)) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        /* insert by mtime, newest first; what falls off the end is removed */
        size_t i = nk < AGENT_SELFCACHE_KEEP + 1 ? nk++ : AGENT_SELFCACHE_KEEP;
        memcpy(keep[i].name, e->d_name, 13 + 64 + 1);   /* checked: exactly that long */
        keep[i].mtime = (long long)st.st_mtime;
        for (; i > 0 && keep[i].mtime > keep[i - 1].mtime; i--) {
            char tn[80];
            long long tm = keep[i].mtime;
            memcpy(tn, keep[i].name, sizeof tn);
            memcpy(keep[i].name, keep[i - 1].name, sizeof tn);
            keep[i].mtime = keep[i - 1].mtime;
            memcpy(keep[i - 1].name, tn, sizeof tn);
            keep[i - 1].mtime = tm;
        }
        if (nk == AGENT_SELFCACHE_KEEP + 1) {
            unlinkat(dirfd(d), keep[AGENT_SELFCACHE_KEEP].name, 0);
            nk = AGENT_SELFCACHE_KEEP;
        }
    }
    closedir(d);
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
    if (ok) prune(open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    free(tmp);
    free(final);
    return ok;
}
