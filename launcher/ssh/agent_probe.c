/* The probe that starts the agent on a node (agent_deploy.h: ssh_deploy.c and
 * transport_exec.c run it), and what it says back.
 *
 * The probe chooses the agent by the node's `uname -m` among the kit's (agent_kit.h) and
 * refuses, before anything runs, a node of an architecture ddptop has no agent for or whose
 * glibc (getconf GNU_LIBC_VERSION) is older than that agent asks for: the loader's own
 * "GLIBC_2.27 not found" would say less, and say it later. The agent runs as the user from
 * --agent-dir, so that directory decides whose code runs: the probe refuses it when it is a
 * symbolic link, belongs to someone other than the user (or root), or is writable by group or
 * others (a private group, the user's own, excepted); the same for its parent, where a sticky
 * bit (/tmp) is enough, since it keeps others from renaming the directory away. The agent's
 * name carries the first 16 hex digits of its SHA-256, so a rebuilt agent of the same version
 * gets a new name and is uploaded again; where the node has sha256sum, the agent is hashed
 * there and must match ours, and must belong to the user (or root), before it is exec'd. */
#include "agent_deploy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_kit.h"
#include "util/util.h"
#include "wire/protocol.h"

/* "~" and "~/x" are expanded by the remote shell through $HOME; everything else is quoted.
 * Trailing slashes go, so that the parent is the parent. */
static void add_remote_dir(struct strbuf *sb, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *d = xstrndup(dir, n);
    if (strcmp(d, "~") == 0) {
        strbuf_adds(sb, "\"$HOME\"");
    } else if (strncmp(d, "~/", 2) == 0) {
        strbuf_adds(sb, "\"$HOME\"/");
        strbuf_add_shell_quoted(sb, d + 2);
    } else {
        strbuf_add_shell_quoted(sb, d);
    }
    free(d);
}

char *agent_probe_script(const struct agent_probe *p)
{
    struct strbuf s, cmd;
    strbuf_init(&s);
    /* One line, no '!': the login shell may be csh, which would take either as its own. set -f:
     * the words of ls's output are never globbed. */
    strbuf_adds(&s, "umask 077; set -f; d=");
    add_remote_dir(&s, p->dir);
    /* the node's architecture picks the agent: its name, hash and the glibc it needs */
    strbuf_adds(&s, "; a=$(uname -m); case \"$a\" in ");
    for (size_t i = 0; i < p->n_agents; i++) {
        const struct agent_probe_agent *g = &p->agents[i];
        strbuf_add_shell_quoted(&s, g->arch);
        strbuf_adds(&s, ") n=");
        strbuf_add_shell_quoted(&s, g->name);
        strbuf_adds(&s, "; ha=");
        strbuf_add_shell_quoted(&s, g->sha256 ? g->sha256 : "");
        strbuf_adds(&s, "; gv=");
        strbuf_add_shell_quoted(&s, g->glibc ? g->glibc : "");
        strbuf_adds(&s, ";; ");
    }
    strbuf_adds(
        &s, "*) printf 'ddptop-probe %s noagent\\n' \"$a\"; exit 0;; esac; "
            /* glibc X.Y older than the agent's need: refused before anything runs. No getconf
             * or another C library: tried, and the loader says why. */
            "older() { M=${1%%.*}; r=${1#*.}; m=${r%%.*}; N=${2%%.*}; o=${2#*.}; "
            "[ \"$M\" -lt \"$N\" ] 2>/dev/null || { [ \"$M\" -eq \"$N\" ] 2>/dev/null && "
            "[ \"${m:-0}\" -lt \"$o\" ] 2>/dev/null; }; }; "
            "g=$(getconf GNU_LIBC_VERSION 2>/dev/null); g=${g#glibc }; "
            "case \"$g$gv\" in [0-9]*.[0-9]*[0-9].[0-9]*) older \"$g\" \"$gv\" && "
            "{ printf 'ddptop-probe %s oldlibc %s %s\\n' \"$a\" \"$g\" \"$gv\"; exit 0; };; esac; "
            "[ -d \"$d\" ] || [ -L \"$d\" ] || mkdir -p \"$d\" 2>/dev/null; "
            "p=${d%/*}; [ -z \"$p\" ] && p=/; [ \"$p\" = \"$d\" ] && p=.; "
            /* the verdict on an unsafe directory: WHICH KIND VALUE PATH, the path last */
            "bad() { printf 'ddptop-probe %s unsafe %s %s %s %s\\n' \"$a\" \"$1\" \"$2\" \"$3\" \"$4\"; exit 0; }; "
            /* group-writable is fine when the group is the user's private one */
            "upg() { [ \"$(id -gn 2>/dev/null)\" = \"$(id -un 2>/dev/null)\" ] && [ \"$1\" = \"$(id -g)\" ]; }; "
            "chk() { [ \"$1\" = dir ] && [ -L \"$2\" ] && bad dir link - \"$2\"; [ -e \"$2\" ] || return 0; "
            "set -- \"$1\" \"$2\" $(ls -ldLn \"$2\" 2>/dev/null); "
            "[ -n \"$5\" ] || bad \"$1\" unknown - \"$2\"; "
            "[ -O \"$2\" ] || [ \"$5\" = 0 ] || bad \"$1\" owner \"$5\" \"$2\"; "
            "case \"$1$3\" in parent?????????[tT]*) return 0;; esac; "
            "case \"$3\" in ????????w*) bad \"$1\" mode \"$3\" \"$2\";; "
            "?????w*) upg \"$6\" || bad \"$1\" mode \"$3\" \"$2\";; esac; }; "
            "chk parent \"$p\"; chk dir \"$d\"; "
            /* a file of the user (or root), not a link: only they could have put it there */
            "mine() { [ -L \"$1\" ] && return 1; [ -f \"$1\" ] || return 1; [ -O \"$1\" ] && return 0; "
            "f=$1; set -- $(ls -ldn \"$f\" 2>/dev/null); [ \"$3\" = 0 ]; }; "
            "sum() { [ -z \"$2\" ] && return 0; command -v sha256sum >/dev/null 2>&1 || return 0; "
            "s=$(sha256sum <\"$1\" 2>/dev/null) || return 1; [ \"${s%% *}\" = \"$2\" ]; }; "
            "mine \"$d/$n\" && [ -x \"$d/$n\" ] && sum \"$d/$n\" \"$ha\" && exec \"$d/$n\"");
    if (p->arg) {
        strbuf_adds(&s, " ");
        strbuf_add_shell_quoted(&s, p->arg);
    }
    strbuf_adds(&s, "; printf 'ddptop-probe %s absent %s\\n' \"$a\" \"$d\"");
    /* the login shell may not be POSIX (fish, csh): run the script with sh */
    strbuf_init(&cmd);
    strbuf_adds(&cmd, "exec sh -c ");
    strbuf_add_shell_quoted(&cmd, s.buf);
    strbuf_done(&s);
    return cmd.buf;
}

char *agent_probe_command(const char *agent_dir, const char *name, const char *arch)
{
    struct agent_probe_agent g = {.arch = arch, .name = name};
    struct agent_probe p = {.dir = agent_dir, .agents = &g, .n_agents = 1};
    return agent_probe_script(&p);
}

char *agent_probe_for_kit(const char *agent_local, const char *agent_dir, const char *arg)
{
    const struct agent_kit *k = agent_kit_get(agent_local);
    struct agent_probe_agent *g = xcalloc(k->n ? k->n : 1, sizeof *g);
    for (size_t i = 0; i < k->n; i++)
        g[i] = (struct agent_probe_agent){.arch = k->e[i].arch, .name = k->e[i].remote_name,
                                          .sha256 = k->e[i].sha256, .glibc = k->e[i].glibc};
    struct agent_probe p = {.dir = agent_dir ? agent_dir : AGENT_REMOTE_DIR, .agents = g, .n_agents = k->n,
                            .arg = arg};
    char *cmd = agent_probe_script(&p);
    free(g);
    return cmd;
}

/* Remote bytes for a message: printable ASCII only. malloc'd. */
static char *printable(const char *s)
{
    char *out = xstrdup(s);
    for (char *q = out; *q; q++)
        if (*q < 0x20 || *q > 0x7e) *q = '?';
    return out;
}

static void refuse(struct agent_probe_reply *r, char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct agent_probe_reply *r, char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    r->said = PROBE_REFUSED;
    r->error = xvasprintf(fmt, ap);
    r->hint = hint;
    va_end(ap);
}

/* "unsafe WHICH KIND VALUE PATH" (rest: after "unsafe "); false when rest is not one. */
static bool read_unsafe(const char *rest, const char *node, struct agent_probe_reply *r)
{
    char which[16], kind[16], value[64];
    int off = 0;
    if (sscanf(rest, "%15s %15s %63s %n", which, kind, value, &off) != 3 || off == 0) return false;
    char *path = printable(rest + off), *val = printable(value);
    bool parent = strcmp(which, "parent") == 0;
    const char *what = parent ? "the parent of --agent-dir" : "the agent directory";
    const char *why = parent ? "could replace the agent directory and so choose what ddptop runs as you"
                             : "could put a program there that ddptop would run as you";
    if (strcmp(kind, "link") == 0) {
        refuse(r, xasprintf("point --agent-dir at a real directory of yours (mkdir -m 700 DIR)"),
               "%s: %s %s is a symbolic link: ddptop runs no agent from there (nothing was run)", node, what, path);
    } else if (strcmp(kind, "owner") == 0) {
        refuse(r, parent ? xasprintf("choose an --agent-dir inside a directory of yours")
                         : xasprintf("use a directory of your own for --agent-dir (default ~/.cache/ddptop), "
                                     "made with mkdir -m 700"),
               "%s: %s %s belongs to uid %s, not to you: its owner %s (nothing was run)", node, what, path, val,
               why);
    } else if (strcmp(kind, "mode") == 0) {
        refuse(r, parent ? xasprintf("chmod go-w %s (or chmod +t where others must write there), or choose "
                                     "another --agent-dir", path)
                         : xasprintf("chmod 700 %s and remove any file there you did not put, or choose "
                                     "another --agent-dir", path),
               "%s: %s %s is writable by %s (%s): another user %s (nothing was run)", node, what, path,
               strlen(val) > 8 && val[8] == 'w' ? "others" : "its group", val, why);
    } else {
        refuse(r, xasprintf("check that the node has ls on the PATH its sshd sets"),
               "%s: cannot read the owner and mode of %s %s (ls -ldn): ddptop runs no agent from a directory "
               "it cannot check (nothing was run)", node, what, path);
    }
    free(val);
    free(path);
    return true;
}

/* The node's architecture has no agent here: which ones there are, and where they were
 * looked for (a file skipped, e.g. of the wrong architecture, is named). */
static void refuse_no_agent(struct agent_probe_reply *r, const char *node, const char *arch,
                            const struct agent_kit *k)
{
    struct strbuf have, hint;
    strbuf_init(&have);
    strbuf_init(&hint);
    agent_kit_arches(k, &have);
    strbuf_addf(&hint, "use nodes of %s, or build ddptop-agent on a %s machine (make PORTABLE=0 "
                "build/ddptop-agent) and put it beside this ddptop's agents as %s-%s",
                have.buf, arch, k->native ? k->native : "ddptop-agent", arch);
    if (k->skipped) strbuf_addf(&hint, " (skipped: %s)", k->skipped);
    refuse(r, xstrdup(hint.buf), "%s is %s: this ddptop has agents for %s only (nothing was run)", node, arch,
           have.buf);
    strbuf_done(&have);
    strbuf_done(&hint);
}

/* Remote bytes in a word of a message: printable ASCII only. */
static void clean_word(char *w)
{
    for (char *q = w; *q; q++)
        if (*q < 0x21 || *q > 0x7e) *q = '?';
}

void agent_probe_read(const char *line, const char *node, const char *agent_local, bool uploaded,
                      struct agent_probe_reply *r)
{
    const struct agent_kit *k = agent_kit_get(agent_local);
    char arch[64], have[32], need[32];
    int off = 0;
    memset(r, 0, sizeof *r);
    r->said = PROBE_AGENT;
    if (sscanf(line, "ddptop-probe %63s unsafe %n", arch, &off) == 1 && off > 0 &&
        read_unsafe(line + off, node, r))
        return;
    off = 0;
    if (sscanf(line, "ddptop-probe %63s noagent%n", arch, &off) == 1 && off > 0 && !line[off]) {
        clean_word(arch);
        refuse_no_agent(r, node, arch, k);
        return;
    }
    off = 0;
    if (sscanf(line, "ddptop-probe %63s oldlibc %31s %31s%n", arch, have, need, &off) == 3 && off > 0) {
        clean_word(have);
        refuse(r, xstrdup("run the nodes on glibc 2.28 or newer (RHEL/Rocky 8, Debian 10, Ubuntu 18.10, SLES 15 "
                          "and later), or build ddptop-agent on such a node (make PORTABLE=0 build/ddptop-agent) "
                          "and put it beside this ddptop's agents as ddptop-agent-ARCH"),
               "%s has glibc %s, older than the %s that ddptop's %s agent needs (nothing was run)", node, have,
               need, agent_kit_find(k, arch) ? arch : "?");
        return;
    }
    off = 0;
    if (sscanf(line, "ddptop-probe %63s absent %n", arch, &off) != 1 || off == 0) return;
    r->agent = agent_kit_find(k, arch);
    if (!r->agent) {
        refuse_no_agent(r, node, arch, k);
    } else if (uploaded) {
        refuse(r, xstrdup("check that the agent dir is writable and not mounted noexec (--agent-dir)"),
               "ddptop-agent was uploaded to %s:%s but cannot be run from there", node, line + off);
    } else if (access(r->agent->path, R_OK) != 0) {
        refuse(r, xstrdup("build it next to ddptop with make, or install it on the node by hand"),
               "ddptop-agent is not on %s and the local copy %s cannot be read: %s", node, r->agent->path,
               strerror(errno));
    } else {
        r->said = PROBE_ABSENT;
        r->dir = xstrdup(line + off);
    }
}

void agent_probe_reply_done(struct agent_probe_reply *r)
{
    free(r->dir);
    free(r->error);
    free(r->hint);
    memset(r, 0, sizeof *r);
}
