/* The upload of the agent over a command's stdin (agent_deploy.h), for a node without another
 * way to copy files (an sshd with no `Subsystem sftp`, many clusters; a pod reached by kubectl
 * exec): one remote `sh -c` per file reads the bytes into a private temporary name beside the
 * target, checks them with the node's sha256sum against the hash computed here, and only then
 * renames them into place, so a node never runs a half-written or corrupted agent and nodes
 * sharing the directory never see one. What carries the bytes is the caller's
 * (ssh_upload_exec.c: an exec channel; transport_exec.c: a child's pipes). */
#include "agent_deploy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/sha256.h"
#include "util/util.h"

#define UPLOAD_FILE_MAX (256u << 20) /* the agent is a few MiB; this is a sanity bound */
#define UPLOAD_OUT_MAX 4096           /* the tail of the remote output we keep for messages */
#define UPLOAD_TAG "ddptop-upload "

char *agent_upload_command(const char *dir, const char *name, const char *sha256_hex, unsigned mode)
{
    struct strbuf script, cmd;
    char m[16];
    snprintf(m, sizeof m, "%o", mode & 07777);
    strbuf_init(&script);
    /* One line, no '!': the login shell may be csh, which would take either as its own. */
    strbuf_adds(&script, "umask 077; exec 2>&1; d=");
    strbuf_add_shell_quoted(&script, dir);
    strbuf_adds(&script, "; n=");
    strbuf_add_shell_quoted(&script, name);
    strbuf_adds(&script, "; want=");
    strbuf_add_shell_quoted(&script, sha256_hex);
    strbuf_adds(&script, "; m=");
    strbuf_add_shell_quoted(&script, m);
    /* fail reads stdin to its end, so that our write never meets a closed channel */
    strbuf_adds(&script,
                "; t=; fail() { [ -n \"$t\" ] && rm -f \"$t\"; cat >/dev/null; "
                "echo \"" UPLOAD_TAG "$1\"; exit 1; }; "
                "command -v sha256sum >/dev/null 2>&1 || fail no-sha256sum; "
                "mkdir -p \"$d\" || fail failed; "
                "t=$(mktemp \"$d/.$n.tmp.XXXXXX\") || fail failed; "
                "cat >\"$t\" || fail failed; "
                "got=$(sha256sum <\"$t\") || fail failed; got=${got%% *}; "
                "[ \"$got\" = \"$want\" ] || fail \"mismatch $got\"; "
                "chmod \"$m\" \"$t\" && mv -f \"$t\" \"$d/$n\" || fail failed; "
                "echo '" UPLOAD_TAG "ok'");
    strbuf_init(&cmd);
    strbuf_adds(&cmd, "exec sh -c ");
    strbuf_add_shell_quoted(&cmd, script.buf);
    strbuf_done(&script);
    return cmd.buf;
}

/* The whole file, so that the bytes we hash are the bytes we send. */
static int load_file(const char *path, struct strbuf *out)
{
    char buf[65536];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        if (out->len + (size_t)n > UPLOAD_FILE_MAX) {
            close(fd);
            errno = EFBIG;
            return -1;
        }
        strbuf_add(out, buf, (size_t)n);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return n < 0 ? -1 : 0;
}

char *agent_upload_changed(const char *local, const char *got_hex, const char *want_hex, const char *node)
{
    if (!want_hex || !*want_hex || strcmp(got_hex, want_hex) == 0) return NULL;
    return xasprintf("%s changed on this machine since ddptop started (rebuilt?): nothing was "
                     "installed on %s; run ddptop again", local, node);
}

int agent_upload_load(const char *path, struct strbuf *data, char hex[65])
{
    struct sha256 h;
    unsigned char digest[32];
    if (load_file(path, data) < 0) return -1;
    sha256_init(&h);
    sha256_update(&h, data->buf, data->len);
    sha256_final(&h, digest);
    sha256_hex(digest, hex);
    return 0;
}

/* Remote bytes for a one-line message: printable ASCII only, at most max bytes. */
static void copy_printable(char *dst, size_t max, const char *src, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < max; i++)
        dst[k++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[k] = '\0';
}

/* The last "ddptop-upload ..." line of out (its text after the tag) and the non-empty line
 * before it (the shell's own error), both made printable. Returns false without a tag line. */
static bool parse_output(const struct strbuf *out, char *tag, size_t tagn, char *why, size_t whyn)
{
    const char *tag_at = NULL, *prev = NULL, *prev_end = NULL;
    const char *p = out->buf, *end = out->buf + out->len;
    const char *last = NULL, *last_end = NULL;
    *tag = *why = '\0';
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        size_t len = (size_t)(e - p);
        if (len >= strlen(UPLOAD_TAG) && memcmp(p, UPLOAD_TAG, strlen(UPLOAD_TAG)) == 0) {
            tag_at = p;
            copy_printable(tag, tagn, p + strlen(UPLOAD_TAG), len - strlen(UPLOAD_TAG));
            prev = last;
            prev_end = last_end;
        } else if (len) {
            last = p;
            last_end = e;
        }
        p = e + 1;
    }
    if (!tag_at) {
        if (last) copy_printable(why, whyn, last, (size_t)(last_end - last));
        return false;
    }
    if (prev) copy_printable(why, whyn, prev, (size_t)(prev_end - prev));
    return true;
}

void agent_upload_tail(struct strbuf *sb, const char *buf, size_t n)
{
    strbuf_add(sb, buf, n);
    if (sb->len > UPLOAD_OUT_MAX) strbuf_consume(sb, sb->len - UPLOAD_OUT_MAX);
}

static void set_hint(char **hint, const char *what)
{
    free(*hint);
    *hint = xstrdup(what);
}

char *agent_upload_verdict(const struct strbuf *out, const struct strbuf *err, int status, const char *node,
                           const char *dir, const char *name, const char *hex, char **hint)
{
    char tag[128], why[256];
    bool tagged = parse_output(out, tag, sizeof tag, why, sizeof why);
    if (!tagged && !*why) parse_output(err, tag, sizeof tag, why, sizeof why);
    if (tagged && strcmp(tag, "ok") == 0 && status == 0) return NULL;
    if (tagged && strcmp(tag, "no-sha256sum") == 0) {
        set_hint(hint, "install sha256sum (coreutils) on the node, or add `Subsystem sftp` to its "
                    "sshd_config, or copy the agent for its architecture into --agent-dir by hand");
        return xasprintf("cannot upload ddptop-agent to %s: its sshd has no sftp subsystem and the node "
                         "has no sha256sum to verify a copy sent over exec (nothing was installed)",
                         node);
    }
    if (tagged && strncmp(tag, "mismatch", 8) == 0) {
        char got[65];
        const char *g = tag + 8;
        size_t k = 0;
        while (*g == ' ') g++;
        for (; *g && k < 64; g++)
            if ((*g >= '0' && *g <= '9') || (*g >= 'a' && *g <= 'z') || (*g >= 'A' && *g <= 'Z'))
                got[k++] = *g;
        got[k] = '\0';
        set_hint(hint, "check the link to the node and its sha256sum, then run again (or enable "
                    "`Subsystem sftp` in its sshd_config)");
        return xasprintf("upload of %s to %s:%s over exec was corrupted: its SHA-256 there is %s, "
                         "ours is %s; the temporary copy was removed and %s was not installed",
                         name, node, dir, k ? got : "empty", hex, name);
    }
    if (tagged) /* "failed": mkdir, mktemp, cat, chmod or mv said why on the line before */
        return xasprintf("cannot install %s in %s:%s over exec%s%s", name, node, dir,
                         *why ? ": " : "", why);
    set_hint(hint, "run `ssh NODE sh -c true` to see what the login shell prints, or enable "
                "`Subsystem sftp` in the node's sshd_config");
    return xasprintf("uploading %s to %s over exec failed (exit status %d)%s%s", name, node,
                     status, *why ? ": " : "", why);
}
