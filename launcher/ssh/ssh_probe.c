/* The probe that starts the agent on a node (ssh_deploy.c runs it), and what it says back.
 *
 * The agent runs as the user from --agent-dir, so that directory decides whose code runs: the
 * probe refuses it, before anything executes, when it is a symbolic link, belongs to someone
 * other than the user (or root), or is writable by group or others (a private group, the
 * user's own, excepted); the same for its parent, where a sticky bit (/tmp) is enough, since it
 * keeps others from renaming the directory away. The agent's name carries the first 16 hex
 * digits of its SHA-256, so a rebuilt agent of the same version gets a new name and is uploaded
 * again; where the node has sha256sum, the agent and libcjson beside it are hashed there and
 * must match ours, and both must belong to the user (or root), before the agent is exec'd. */
#include "ssh_conn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cJSON.h>
#include <dlfcn.h>

#include "hosts/hostfile.h"
#include "util/sha256.h"
#include "util/version.h"
#include "wire/protocol.h"

const char *ssh_conn_arch(void)
{
    static struct utsname u;
    if (!u.machine[0] && uname(&u) < 0) return "unknown";
    return u.machine;
}

const char *ssh_conn_bundled_lib(void)
{
    Dl_info info;
    if (dladdr((void *)cJSON_Version, &info) && info.dli_fname && info.dli_fname[0] == '/')
        return info.dli_fname;
    return NULL;
}

/* The hashes of our agent and library, computed once per process (not once per node: a
 * thousand nodes would hash the same files a thousand times). Filled on the poll loop's thread
 * before any upload thread starts, which only reads it. */
static struct {
    bool filled;
    char *local;     /* the agent file hashed (NULL: none) */
    char agent[65];  /* "" when it cannot be read */
    char lib[65];
} ident;

static void ident_fill(const char *local)
{
    const char *lib;
    if (ident.filled && (ident.local == local || (ident.local && local && strcmp(ident.local, local) == 0)))
        return;
    lib = ssh_conn_bundled_lib();
    ident.filled = true;
    free(ident.local);
    ident.local = local ? xstrdup(local) : NULL;
    if (!local || sha256_file_hex(local, ident.agent) < 0) ident.agent[0] = '\0';
    if (!lib || sha256_file_hex(lib, ident.lib) < 0) ident.lib[0] = '\0';
}

const char *ssh_conn_agent_sha256(const char *local)
{
    ident_fill(local);
    return ident.agent;
}

const char *ssh_conn_lib_sha256(const char *local)
{
    ident_fill(local);
    return ident.lib;
}

char *ssh_conn_agent_name(const char *local)
{
    const char *h = ssh_conn_agent_sha256(local);
    /* without a local copy there is nothing to hash: the name of an agent installed by hand */
    if (!*h) return xasprintf(AGENT_REMOTE_NAME_FMT, DDPTOP_VERSION, PROTOCOL_VERSION, ssh_conn_arch());
    return xasprintf(AGENT_REMOTE_NAME_FMT "-%.16s", DDPTOP_VERSION, PROTOCOL_VERSION, ssh_conn_arch(), h);
}

char *ssh_conn_upload_changed(const struct ssh_conn *c, const char *local, const char *got_hex,
                              const char *want_hex)
{
    if (!want_hex || !*want_hex || strcmp(got_hex, want_hex) == 0) return NULL;
    return xasprintf("%s changed on this machine since ddptop started (rebuilt?): nothing was "
                     "installed on %s; run ddptop again", local, c->h->name);
}

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

char *ssh_conn_probe_script(const struct ssh_probe *p)
{
    struct strbuf s, cmd;
    strbuf_init(&s);
    /* One line, no '!': the login shell may be csh, which would take either as its own. set -f:
     * the words of ls's output are never globbed. */
    strbuf_adds(&s, "umask 077; set -f; d=");
    add_remote_dir(&s, p->dir);
    strbuf_adds(&s, "; n=");
    strbuf_add_shell_quoted(&s, p->name);
    strbuf_adds(&s, "; ha=");
    strbuf_add_shell_quoted(&s, p->agent_sha256 ? p->agent_sha256 : "");
    strbuf_adds(&s, "; hl=");
    strbuf_add_shell_quoted(&s, p->lib_sha256 ? p->lib_sha256 : "");
    strbuf_adds(&s, "; a=$(uname -m); if [ \"$a\" = ");
    strbuf_add_shell_quoted(&s, p->arch);
    strbuf_adds(
        &s, " ]; then "
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
            "mine \"$d/$n\" && mine \"$d/" AGENT_BUNDLED_LIB "\" && [ -x \"$d/$n\" ] && "
            "sum \"$d/$n\" \"$ha\" && sum \"$d/" AGENT_BUNDLED_LIB "\" \"$hl\" && exec \"$d/$n\"");
    if (p->arg) {
        strbuf_adds(&s, " ");
        strbuf_add_shell_quoted(&s, p->arg);
    }
    strbuf_adds(&s, "; fi; printf 'ddptop-probe %s absent %s\\n' \"$a\" \"$d\"");
    /* the login shell may not be POSIX (fish, csh): run the script with sh */
    strbuf_init(&cmd);
    strbuf_adds(&cmd, "exec sh -c ");
    strbuf_add_shell_quoted(&cmd, s.buf);
    strbuf_done(&s);
    return cmd.buf;
}

char *ssh_conn_probe_command(const char *agent_dir, const char *name, const char *arch)
{
    struct ssh_probe p = {.dir = agent_dir, .name = name, .arch = arch};
    return ssh_conn_probe_script(&p);
}

/* Remote bytes for a message: printable ASCII only. malloc'd. */
static char *printable(const char *s)
{
    char *out = xstrdup(s);
    for (char *q = out; *q; q++)
        if (*q < 0x20 || *q > 0x7e) *q = '?';
    return out;
}

bool ssh_conn_probe_unsafe(struct ssh_conn *c, const char *rest)
{
    char which[16], kind[16], value[64];
    int off = 0;
    if (sscanf(rest, "%15s %15s %63s %n", which, kind, value, &off) != 3 || off == 0) return false;
    char *path = printable(rest + off), *val = printable(value), *hint;
    bool parent = strcmp(which, "parent") == 0;
    const char *what = parent ? "the parent of --agent-dir" : "the agent directory";
    const char *why = parent ? "could replace the agent directory and so choose what ddptop runs as you"
                             : "could put a program there that ddptop would run as you";
    if (strcmp(kind, "link") == 0) {
        hint = xasprintf("point --agent-dir at a real directory of yours (mkdir -m 700 DIR)");
        ssh_conn_fail(c, hint, "%s: %s %s is a symbolic link: ddptop runs no agent from there (nothing was run)",
                      c->h->name, what, path);
    } else if (strcmp(kind, "owner") == 0) {
        hint = parent ? xasprintf("choose an --agent-dir inside a directory of yours")
                      : xasprintf("use a directory of your own for --agent-dir (default ~/.cache/ddptop), "
                                  "made with mkdir -m 700");
        ssh_conn_fail(c, hint, "%s: %s %s belongs to uid %s, not to you: its owner %s (nothing was run)",
                      c->h->name, what, path, val, why);
    } else if (strcmp(kind, "mode") == 0) {
        hint = parent ? xasprintf("chmod go-w %s (or chmod +t where others must write there), or choose "
                                  "another --agent-dir", path)
                      : xasprintf("chmod 700 %s and remove any file there you did not put, or choose "
                                  "another --agent-dir", path);
        ssh_conn_fail(c, hint, "%s: %s %s is writable by %s (%s): another user %s (nothing was run)",
                      c->h->name, what, path, strlen(val) > 8 && val[8] == 'w' ? "others" : "its group", val, why);
    } else {
        hint = xasprintf("check that the node has ls on the PATH its sshd sets");
        ssh_conn_fail(c, hint, "%s: cannot read the owner and mode of %s %s (ls -ldn): ddptop "
                      "runs no agent from a directory it cannot check (nothing was run)", c->h->name, what, path);
    }
    free(hint);
    free(val);
    free(path);
    return true;
}
