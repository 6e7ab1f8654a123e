/* The agents' copy by hash under srun (srun_step_int.h; docs/slurm.md "The agent's copy").
 *
 * An agent started from srun's --bcast copy keeps itself as /tmp/ddptop-UID/bin/ddptop-agent-
 * SHA256 on its node (agent_selfcache.c) and says so in its greeting ("kept"). Once every node
 * of a --bcast step greeted, ddptop notes those that kept it, per Slurm job and agent hash, in a file of its own on this machine; a
 * later step of the same job on nodes that were all noted (the next run in the allocation, a
 * restart) runs a small sh wrapper instead of copying: it runs the kept copy only when every
 * directory of the chain and the file are the user's, not links, not writable by group or
 * others, and the file's SHA-256 is the agent's; else it says so and exits. Any task that ends
 * before every node greeted sends the whole step back to --bcast (srun_step.c), and until then
 * nothing of the step reaches the controller nor goes to the nodes, so the first try leaves no
 * trace. The note is only a guess about the nodes: a wrong one costs a second step, never
 * safety (the wrapper decides). */
#include "srun_step_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/sha256.h"

/* The wrapper: $1 the hash, the rest the agent's arguments. The directories are made by the
 * agents, never by this script; a missing one is a miss. `ls -ldn` prints the mode and the
 * owner without following a link; -O is the effective uid. set -f: no globbing of ls's words. */
static const char wrapper[] =
    "umask 077; set -f; h=$1; shift; u=$(id -u); d=/tmp/ddptop-$u; f=$d/bin/ddptop-agent-$h; "
    "ok() { [ -L \"$1\" ] && return 1; [ -O \"$1\" ] || return 1; set -- $(ls -ldn \"$1\" 2>/dev/null); "
    "[ \"$3\" = \"$u\" ] || return 1; case $1 in ?????w*|????????w*) return 1;; esac; }; "
    "if ok \"$d\" && [ -d \"$d\" ] && ok \"$d/bin\" && [ -d \"$d/bin\" ] && ok \"$f\" && [ -f \"$f\" ] && "
    "[ -x \"$f\" ] && s=$(sha256sum <\"$f\" 2>/dev/null) && [ \"${s%% *}\" = \"$h\" ]; then exec \"$f\" \"$@\"; fi; "
    "echo \"" SRUN_CACHE_MISS " $(hostname)\" >&2; exit 97";

const char *srun_step_cache_wrapper(void)
{
    return wrapper;
}

/* The note's file: /tmp/ddptop-UID/srun-[CLUSTER-]JOB-HASH16 on this machine, or NULL (no job id we
 * can use in a name). The directory is made 0700 when missing, and must be ours, a real
 * directory, not open to others. */
static char *note_path(const struct srun_step *s, bool make)
{
    static const char word[] = "0123456789_-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const char *job = s->jobid ? s->jobid : getenv("SLURM_JOB_ID");
    const char *cluster = getenv("SLURM_CLUSTER_NAME"); /* job ids repeat across clusters */
    char dir[64];
    struct stat st;
    if (!cluster || strlen(cluster) > 64 || cluster[strspn(cluster, word)]) cluster = "";
    if (!s->sha256 || !job || !*job || strlen(job) > 64 || job[strspn(job, word)]) return NULL;
    snprintf(dir, sizeof dir, "/tmp/ddptop-%u", (unsigned)getuid());
    if (make && mkdir(dir, 0700) != 0 && errno != EEXIST) return NULL;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) return NULL;
    return xasprintf("%s/srun-%s%s%s-%.16s", dir, cluster, *cluster ? "-" : "", job, s->sha256);
}

/* Whether every node of the step was noted as holding the agent of s->sha256. */
static bool all_noted(const struct srun_step *s)
{
    char *path = note_path(s, false);
    char buf[1 << 16];
    struct stat st;
    ssize_t r = 0;
    bool all = false;
    int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
    free(path);
    if (fd < 0) return false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid())
        r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return false;
    buf[r] = '\0';
    all = true;
    for (size_t i = 0; i < s->n && all; i++) {
        /* one name per line, the file begins with '\n' */
        char *want = xasprintf("\n%s\n", s->m[i].name);
        all = strstr(buf, want) != NULL;
        free(want);
    }
    return all;
}

void srun_step_cache_plan(struct srun_step *s)
{
    char hex[65];
    if (!s->bcast || getenv("DDPTOP_SRUN_NO_AGENT_CACHE")) return;
    if (sha256_file_hex(s->agent_path, hex) != 0) return;
    s->sha256 = xstrdup(hex);
    if (!all_noted(s)) return;
    /* no --bcast this time: the wrapper runs the nodes' copies */
    free(s->bcast);
    s->bcast = NULL;
    s->cache_try = true;
}

/* Notes of jobs long gone: a note is one small file per Slurm job and agent build; those not
 * written for SRUN_NOTE_DAYS go when a new one is written (a job older than that only pays a
 * --bcast copy again). Regular files of ours named srun-*, a bounded scan. */
#define SRUN_NOTE_DAYS 14

static void notes_prune(const char *path)
{
    char *dir = xstrdup(path), *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *e;
    size_t seen = 0;
    time_t old = time(NULL) - (time_t)SRUN_NOTE_DAYS * 86400;
    if (!d && dfd >= 0) close(dfd);
    while (d && (e = readdir(d)) && seen++ < 65536) {
        struct stat st;
        if (strncmp(e->d_name, "srun-", 5) != 0) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == getuid() && st.st_mtime < old)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d) closedir(d);
    free(dir);
}

void srun_step_cache_note(struct srun_step *s)
{
    char *path, *tmp;
    struct strbuf b;
    int fd;
    if (!s->sha256 || s->cache_noted) return;
    s->cache_noted = true;
    if (!(path = note_path(s, true))) return;
    strbuf_init(&b);
    strbuf_adds(&b, "\n");
    for (size_t i = 0; i < s->n; i++)
        if (s->m[i].announced && s->m[i].kept) strbuf_addf(&b, "%s\n", s->m[i].name);
    /* whole or not at all: written aside, then renamed over the last one */
    tmp = xasprintf("%s.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        bool ok = b.len < (1 << 16) && util_write_all(fd, b.buf, b.len) == 0;
        if (close(fd) != 0 || !ok || rename(tmp, path) != 0) unlink(tmp);
        else notes_prune(path);
    }
    free(tmp);
    free(path);
    strbuf_done(&b);
}

/* The first srun, with the nodes' copies (the wrapper), has ended or failed somewhere:
 * it is let go (its stdin closes: the agents that started, which hold no ranks, exit; srun
 * follows) and the step starts again at once, as always, with --bcast (--overlap: the two may
 * run side by side a moment). Nothing of the first went to the controller or came from it. The
 * loop does not wait for it: reap() takes it when it ends, step_free ends it if it has not. */
static void restart_with_bcast(struct srun_step *s, const char *why)
{
    char note[400];
    snprintf(note, sizeof note, "ddptop: %s: the agents' step starts again with srun --bcast\n", why);
    if (s->log_fd >= 0 && util_write_all(s->log_fd, note, strlen(note)) < 0) {
        close(s->log_fd);
        s->log_fd = -1;
    }
    if (s->to_fd >= 0) close(s->to_fd);
    s->to_fd = -1;
    if (!s->reaped && waitpid(s->pid, &s->status, WNOHANG) != s->pid) {
        if (s->tried_pid > 0) {            /* a third start (never: the second has --bcast) */
            kill(-s->tried_pid, SIGKILL);
            waitpid(s->tried_pid, NULL, 0);
        }
        s->tried_pid = s->pid;
    }
    if (s->out_fd >= 0) close(s->out_fd);
    if (s->err_fd >= 0) close(s->err_fd);
    s->out_fd = s->err_fd = -1;
    s->pid = 0;
    s->started = s->exited = s->reaped = s->backlog_hit = false;
    s->close_when_flushed = false;
    s->srun_err[0] = '\0';
    strbuf_reset(&s->wbuf);
    line_reader_reset(&s->olines);
    line_reader_reset(&s->elines);
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        m->task = -1;
        m->announced = m->ended = m->failed = m->cut = m->kept = false;
        free(m->why);
        m->why = NULL;
        m->last_err[0] = m->addr[0] = '\0';
        strbuf_reset(&m->piece.line);
        m->piece.need = m->piece.hdr_len = 0;
        m->piece.last = false;
        line_reader_reset(&m->in);
        m->bytes_in = 0;
    }
    srun_step_direct_reset(s);
    s->cache_try = false;
    s->bcast = srun_step_bcast_target();
    srun_step_start(s);
}

/* While the nodes' copies are tried: every node greeted, the step goes on (what the
 * controller sent meanwhile goes out now; true); a task ended first, or srun did, the step
 * starts again with --bcast (false). */
bool srun_step_cache_settle(struct srun_step *s)
{
    size_t greeted = 0, live = 0;
    const struct member *gone = NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct member *m = &s->m[i];
        if (m->closed_by_us || m->released) continue;
        live++;
        if (m->ended && !gone) gone = m;
        else if (m->announced) greeted++;
    }
    if (!live) {
        s->cache_try = false; /* nobody waits for it: it ends as it is */
        return true;
    }
    if (!gone && (s->out_fd >= 0 || s->err_fd >= 0)) {
        if (greeted < live) return false;
        s->cache_try = false;
        for (size_t i = 0; i < s->n; i++)
            if (s->m[i].task >= 0) srun_step_flush_pending(s, &s->m[i]);
        srun_step_flush(s);
        return true;
    }
    char why[320];
    snprintf(why, sizeof why, "%s%s", gone ? gone->name : "srun", gone && strstr(gone->last_err, SRUN_CACHE_MISS)
             ? ": no usable copy of the agent" : gone ? ": the agent did not start from its copy" : " ended");
    restart_with_bcast(s, why);
    return false;
}
