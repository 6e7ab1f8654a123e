/* SSH transport, deployment: the exec channel that starts ddptop-agent, the probe's answer,
 * and uploading the agent when the node lacks it. One remote sh command both probes and starts
 * (agent_probe.c, the helper of agent_deploy.h any kind that can exec uses): it refuses an agent directory that others could write, execs the agent when a
 * copy of our hash is there, else it prints "ddptop-probe ARCH absent DIR", and we upload our
 * own copy by SFTP and run it again. When the node's sshd has no sftp subsystem (common on
 * clusters), the upload goes over an exec channel instead, checked with sha256sum on the node
 * (ssh_upload_exec.c). Once the agent runs, its lines are ssh_stream.c's.
 *
 * libssh's SFTP API is blocking only. Rather than stall the poll loop (and every other host)
 * during an upload, a short-lived thread owns the session until the upload is done and then
 * writes one byte to a pipe that the poll loop watches; the loop does not touch that session
 * meanwhile. */
#include "ssh_conn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh/sftp.h>

#include "agent_deploy.h"
#include "agent_kit.h"
#include "hosts/hostfile.h"
#include "wire/protocol.h"
#include "util/sha256.h"

void ssh_conn_exec_begin(struct ssh_conn *c)
{
    if (!c->exec_cmd) c->exec_cmd = agent_probe_for_kit(c->o->agent_local, c->o->agent_dir, c->attach ? "--attach" : NULL);
    c->exec_stage = 0;
    c->state = SSH_CONN_EXEC;
    c->deadline_ms = mono_ms() + (int64_t)c->o->timeout_s * 1000;
}

void ssh_conn_exec_pump(struct ssh_conn *c)
{
    int rc;
    if (!c->channel) {
        c->channel = ssh_channel_new(c->session);
        if (!c->channel) {
            ssh_conn_fail(c, NULL, "cannot open a channel to %s: %s", c->h->name, ssh_get_error(c->session));
            return;
        }
    }
    if (c->exec_stage == 0) {
        rc = ssh_channel_open_session(c->channel);
        if (rc == SSH_AGAIN) return;
        if (rc != SSH_OK) {
            ssh_conn_fail(c, "check MaxSessions and ForceCommand in the node's sshd_config",
                          "cannot open a session channel on %s: %s", c->h->name, ssh_get_error(c->session));
            return;
        }
        c->exec_stage = 1;
    }
    rc = ssh_channel_request_exec(c->channel, c->exec_cmd);
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
        ssh_conn_fail(c, "check that the node's sshd allows running commands",
                      "cannot run a command on %s: %s", c->h->name, ssh_get_error(c->session));
        return;
    }
    /* The login shell's start is its own stage: a slow ~/.bashrc is no dead host. */
    c->state = SSH_CONN_PROBING;
    c->deadline_ms = mono_ms() + (int64_t)ssh_conn_login_timeout_s(c) * 1000;
    if (!c->exec_sent_ms) c->exec_sent_ms = mono_ms();
}

static void *upload_thread(void *arg);

static void upload_begin(struct ssh_conn *c, const struct agent_probe_reply *r)
{
    free(c->remote_dir);
    c->remote_dir = xstrdup(r->dir);
    c->agent = r->agent;
    ssh_channel_free(c->channel); /* the probe's channel: the shell already exited */
    c->channel = NULL;
    if (pipe2(c->upload_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        ssh_conn_fail(c, NULL, "pipe: %s", strerror(errno));
        return;
    }
    c->state = SSH_CONN_UPLOADING;
    c->deadline_ms = mono_ms() + (int64_t)c->o->timeout_s * 3000;
    c->upload_running = true;
    if (pthread_create(&c->upload_tid, NULL, upload_thread, c) != 0) {
        c->upload_running = false;
        ssh_conn_fail(c, NULL, "cannot start the upload thread");
    }
}

/* The probe's first line (agent_deploy.h): false when it is the agent's own. */
static bool handle_probe_line(struct ssh_conn *c, const char *line)
{
    struct agent_probe_reply r;
    agent_probe_read(line, c->h->name, c->o->agent_local, c->probe_done_once, &r);
    enum agent_probe_said said = r.said;
    if (said == PROBE_REFUSED) ssh_conn_fail(c, r.hint, "%s", r.error);
    else if (said == PROBE_ABSENT) upload_begin(c, &r);
    agent_probe_reply_done(&r);
    return said != PROBE_AGENT;
}

bool ssh_conn_probe_reply(struct ssh_conn *c)
{
    struct strbuf first;
    strbuf_init(&first);
    if (!line_reader_peek(&c->in, &first)) return false;
    if (c->login_ms < 0) c->login_ms = mono_ms() - c->exec_sent_ms;
    bool probe = handle_probe_line(c, first.buf);
    strbuf_done(&first);
    if (probe) {
        line_reader_reset(&c->in);
        return true;
    }
    c->state = SSH_CONN_READY; /* the agent's first line (hello) stays queued */
    return false;
}

/* Copies local to remote_dir/name over sftp: a private temporary name, then a rename, so
 * nodes sharing the directory never see a half-written file, and the loser of a race keeps
 * the winner's identical copy. Returns NULL or a malloc'd error. */
static char *upload_file(struct ssh_conn *c, sftp_session sftp, const char *local,
                         const char *name, mode_t mode, const char *want_sha256)
{
    struct sha256 h;
    unsigned char digest[32];
    char hex[65];
    char *final = xasprintf("%s/%s", c->remote_dir, name);
    char host[64] = "";
    char *tmp, *err = NULL;
    char buf[32768];
    sftp_file f = NULL;
    int in = -1;
    ssize_t n;

    gethostname(host, sizeof host - 1);
    tmp = xasprintf("%s/.%s.tmp-%s-%d-%p", c->remote_dir, name, host, (int)getpid(), (void *)c);
    in = open(local, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        err = xasprintf("cannot read %s: %s", local, strerror(errno));
        goto out;
    }
    f = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (!f) {
        err = xasprintf("cannot create %s:%s: %s", c->h->name, tmp, ssh_get_error(c->session));
        goto out;
    }
    sha256_init(&h);
    while ((n = read(in, buf, sizeof buf)) > 0) {
        sha256_update(&h, buf, (size_t)n);
        if (sftp_write(f, buf, (size_t)n) != n) {
            err = xasprintf("writing %s:%s failed: %s", c->h->name, tmp, ssh_get_error(c->session));
            goto out;
        }
    }
    if (n < 0) {
        err = xasprintf("cannot read %s: %s", local, strerror(errno));
        goto out;
    }
    sha256_final(&h, digest);
    sha256_hex(digest, hex);
    if ((err = agent_upload_changed(local, hex, want_sha256, c->h->name)) != NULL) goto out;
    sftp_close(f);
    f = NULL;
    if (sftp_rename(sftp, tmp, final) != 0) {
        sftp_attributes a = sftp_stat(sftp, final);
        if (!a) err = xasprintf("cannot rename %s to %s on %s: %s", tmp, final, c->h->name,
                                ssh_get_error(c->session));
        sftp_attributes_free(a);
        sftp_unlink(sftp, tmp);
    }
out:
    if (f) {
        sftp_close(f);
        sftp_unlink(sftp, tmp);
    }
    if (in >= 0) close(in);
    free(tmp);
    free(final);
    return err;
}

static char *upload(struct ssh_conn *c)
{
    const struct agent_kit_entry *a = c->agent;
    char *err = NULL;
    sftp_session sftp = sftp_new(c->session);
    if (sftp && sftp_init(sftp) == SSH_OK) {
        c->upload_method = "sftp";
        err = upload_file(c, sftp, a->path, a->remote_name, S_IRWXU, a->sha256);
    } else {
        /* sftp_new fails when sshd refuses the subsystem (no `Subsystem sftp` line), sftp_init
         * when its server does not start: both mean no SFTP here, so the same over exec */
        c->upload_method = "exec";
        err = ssh_conn_upload_exec(c, a->path, a->remote_name, S_IRWXU, a->sha256);
    }
    if (sftp) sftp_free(sftp);
    return err;
}

static void *upload_thread(void *arg)
{
    struct ssh_conn *c = arg;
    long t = c->o->timeout_s * 3L;
    ssh_options_set(c->session, SSH_OPTIONS_TIMEOUT, &t);
    ssh_set_blocking(c->session, 1);
    c->upload_err = upload(c);
    ssh_set_blocking(c->session, 0);
    /* pthread_join in the poll loop orders these writes before the loop reads them */
    if (write(c->upload_pipe[1], "x", 1) < 0) { /* the loop's deadline still ends the wait */ }
    return NULL;
}

void ssh_conn_upload_poll(struct ssh_conn *c, short revents)
{
    char b;
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
    if (read(c->upload_pipe[0], &b, 1) != 1) return;
    pthread_join(c->upload_tid, NULL);
    c->upload_running = false;
    close(c->upload_pipe[0]);
    close(c->upload_pipe[1]);
    c->upload_pipe[0] = c->upload_pipe[1] = -1;
    if (c->upload_timed_out) {
        ssh_conn_fail(c, "check the link to the node, or install the agent there by hand",
                      "uploading ddptop-agent to %s timed out", c->h->name);
    } else if (c->upload_err) {
        ssh_conn_fail(c, c->upload_hint ? c->upload_hint : "check that --agent-dir is writable on the node",
                      "%s", c->upload_err);
    } else {
        c->uploaded = true;
        c->probe_done_once = true;
        ssh_conn_exec_begin(c);
    }
}

const char *ssh_conn_upload_method(const struct ssh_conn *c)
{
    return c->uploaded ? c->upload_method : NULL;
}

