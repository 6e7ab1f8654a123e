/* Uploading the agent over an exec channel, for nodes whose sshd has no `Subsystem sftp` line
 * (many clusters). Per file, one remote `sh -c` reads the bytes from stdin into a private
 * temporary name beside the target, checks them with the node's sha256sum against the hash we
 * computed here, and only then renames them into place: a node never runs a half-written or
 * corrupted agent, and nodes sharing the directory never see one. Runs in the upload thread of
 * ssh_deploy.c, which owns the session (blocking) until it is done; the poll loop's deadline
 * shuts the socket down to end it. */
#include "ssh_conn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hosts/hostfile.h"
#include "util/sha256.h"
#include "wire/protocol.h"

#define UPLOAD_FILE_MAX (256u << 20) /* the agent is a few hundred KiB; this is a sanity bound */
#define UPLOAD_OUT_MAX 4096           /* the tail of the remote output we keep for messages */
#define UPLOAD_TAG "ddptop-upload "

char *ssh_conn_upload_command(const char *dir, const char *name, const char *sha256_hex,
                              unsigned mode)
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

static void add_tail(struct strbuf *sb, const char *buf, int n)
{
    strbuf_add(sb, buf, (size_t)n);
    if (sb->len > UPLOAD_OUT_MAX) strbuf_consume(sb, sb->len - UPLOAD_OUT_MAX);
}

/* Sends data on ch, then reads its output to EOF: out gets stdout (where the script sends its
 * own errors too), err the rest of stderr (the login shell's rc files). Both are read, because
 * libssh reports the EOF only once the stderr buffer is drained. Returns NULL or an error. */
static char *exchange(struct ssh_conn *c, ssh_channel ch, const struct strbuf *data,
                      struct strbuf *out, struct strbuf *err, const char *what, int64_t deadline)
{
    char buf[4096];
    size_t off = 0;
    while (off < data->len) {
        size_t chunk = data->len - off < 32768 ? data->len - off : 32768;
        int n = ssh_channel_write(ch, data->buf + off, (uint32_t)chunk);
        if (n < 0 || (n == 0 && mono_ms() >= deadline))
            return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
        off += (size_t)n;
    }
    if (ssh_channel_send_eof(ch) != SSH_OK)
        return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
    /* the writes only queued the bytes: send them now, not a little per read below */
    int64_t left = deadline - mono_ms();
    int rc = ssh_blocking_flush(c->session, left > 0 ? (int)left : 0);
    if (rc == SSH_ERROR)
        return xasprintf("sending %s to %s failed: %s", what, c->h->name, ssh_get_error(c->session));
    if (rc == SSH_AGAIN) return xasprintf("sending %s to %s timed out", what, c->h->name);
    for (;;) {
        int n = ssh_channel_read_timeout(ch, buf, sizeof buf, 0, 200), k;
        if (n == SSH_ERROR)
            return xasprintf("lost the connection to %s while installing %s: %s", c->h->name, what,
                             ssh_get_error(c->session));
        if (n > 0) add_tail(out, buf, n);
        k = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 1);
        if (k == SSH_ERROR)
            return xasprintf("lost the connection to %s while installing %s: %s", c->h->name, what,
                             ssh_get_error(c->session));
        if (k > 0) add_tail(err, buf, k);
        if (n <= 0 && k <= 0 && (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch))) return NULL;
        if (mono_ms() >= deadline) return xasprintf("installing %s on %s timed out", what, c->h->name);
    }
}

static void set_hint(struct ssh_conn *c, const char *hint)
{
    free(c->upload_hint);
    c->upload_hint = xstrdup(hint);
}

/* The error for what the remote command reported (NULL: it installed the file). */
static char *judge(struct ssh_conn *c, const struct strbuf *out, const struct strbuf *err, int status,
                   const char *name, const char *hex)
{
    char tag[128], why[256];
    bool tagged = parse_output(out, tag, sizeof tag, why, sizeof why);
    if (!tagged && !*why) parse_output(err, tag, sizeof tag, why, sizeof why);
    if (tagged && strcmp(tag, "ok") == 0 && status == 0) return NULL;
    if (tagged && strcmp(tag, "no-sha256sum") == 0) {
        set_hint(c, "install sha256sum (coreutils) on the node, or add `Subsystem sftp` to its "
                    "sshd_config, or copy the agent for its architecture into --agent-dir by hand");
        return xasprintf("cannot upload ddptop-agent to %s: its sshd has no sftp subsystem and the node "
                         "has no sha256sum to verify a copy sent over exec (nothing was installed)",
                         c->h->name);
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
        set_hint(c, "check the link to the node and its sha256sum, then run again (or enable "
                    "`Subsystem sftp` in its sshd_config)");
        return xasprintf("upload of %s to %s:%s over exec was corrupted: its SHA-256 there is %s, "
                         "ours is %s; the temporary copy was removed and %s was not installed",
                         name, c->h->name, c->remote_dir, k ? got : "empty", hex, name);
    }
    if (tagged) /* "failed": mkdir, mktemp, cat, chmod or mv said why on the line before */
        return xasprintf("cannot install %s in %s:%s over exec%s%s", name, c->h->name, c->remote_dir,
                         *why ? ": " : "", why);
    set_hint(c, "run `ssh NODE sh -c true` to see what the login shell prints, or enable "
                "`Subsystem sftp` in the node's sshd_config");
    return xasprintf("uploading %s to %s over exec failed (exit status %d)%s%s", name, c->h->name,
                     status, *why ? ": " : "", why);
}

char *ssh_conn_upload_exec(struct ssh_conn *c, const char *local, const char *name, unsigned mode,
                           const char *want_sha256)
{
    struct strbuf data, out, errout;
    struct sha256 h;
    unsigned char digest[32];
    char hex[65], *cmd = NULL, *err = NULL;
    ssh_channel ch = NULL;
    /* a little past the poll loop's own deadline for the stage, whose message then wins */
    int64_t deadline = mono_ms() + (int64_t)c->o->timeout_s * 3000 + 2000;

    strbuf_init(&data);
    strbuf_init(&out);
    strbuf_init(&errout);
    if (load_file(local, &data) < 0) {
        err = xasprintf("cannot read %s: %s", local, strerror(errno));
        goto out;
    }
    sha256_init(&h);
    sha256_update(&h, data.buf, data.len);
    sha256_final(&h, digest);
    sha256_hex(digest, hex);
    if ((err = ssh_conn_upload_changed(c, local, hex, want_sha256)) != NULL) goto out;
    cmd = ssh_conn_upload_command(c->remote_dir, name, hex, mode);
    ch = ssh_channel_new(c->session);
    if (!ch || ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, cmd) != SSH_OK) {
        set_hint(c, "check that the node's sshd allows running commands (or enable `Subsystem sftp`)");
        err = xasprintf("cannot run a command on %s to upload %s (it has no sftp subsystem): %s",
                        c->h->name, name, ssh_get_error(c->session));
        goto out;
    }
    err = exchange(c, ch, &data, &out, &errout, name, deadline);
    if (!err) err = judge(c, &out, &errout, ssh_channel_get_exit_status(ch), name, hex);
out:
    if (ch) {
        if (!err) ssh_channel_close(ch);
        ssh_channel_free(ch);
    }
    free(cmd);
    strbuf_done(&data);
    strbuf_done(&out);
    strbuf_done(&errout);
    return err;
}
