/* Internals of the SSH transport shared by ssh_conn.c (state machine, host keys),
 * ssh_conn_net.c (resolve, TCP connect, authentication), ssh_deploy.c (exec channel, agent
 * probe's answer, upload by SFTP), ssh_upload_exec.c (upload over an exec channel when the node has
 * no sftp subsystem) and ssh_stream.c (the agent's lines over the channel). Not for other
 * modules: they use ssh_conn.h. */
#ifndef DDPTOP_SSH_CONN_INT_H
#define DDPTOP_SSH_CONN_INT_H

#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include "ssh_conn.h"
#include "util/util.h"
#include "wire/line_reader.h"

struct gai_req;
struct agent_kit_entry;

struct ssh_conn {
    const struct host *h;
    const struct ssh_conn_opts *o;
    enum ssh_conn_state state;
    int64_t deadline_ms;
    char *err, *hint;

    ssh_session session;
    char *address;             /* HostName after the ssh config */
    int port;
    char *user;
    char *known_hosts;
    bool proxy;                /* ProxyCommand: libssh connects */
    bool attach;               /* the exec runs a bridge (ddptop-agent --attach) */
    bool accepted_new;

    /* resolve + connect */
    struct gai_req *gai;       /* async lookup in flight (leaked if it cannot be cancelled) */
    char port_str[16];
    struct addrinfo *ai_head, *ai_next;
    struct addrinfo *ai_cur;   /* the address being connected to */
    int64_t syn_ms;            /* when its connect began */
    int fd;
    bool fd_given;             /* handed to libssh, which closes it */
    struct ssh_counter_struct lib_io; /* what libssh read and wrote of its socket (ssh_set_counters) */
    char connect_err[128];

    /* authentication */
    struct ssh_callbacks_struct cb;
    bool tried_agent;          /* SSH_AUTH_SOCK was set: publickey_auto asks the agent first */
    struct strbuf tried;       /* key files offered: "/root/.ssh/id_ed25519, ..." */
    bool passphrase_needed;

    /* exec channel: probe, then agent */
    ssh_channel channel;
    int exec_stage;            /* 0: open the session channel, 1: request exec */
    char *exec_cmd;
    int64_t exec_sent_ms;      /* when the first exec request went out (0: not yet) */
    int64_t login_ms;          /* see ssh_conn_login_ms */
    bool probe_done_once;      /* the probe said "absent" once (we uploaded) */
    const struct agent_kit_entry *agent; /* the one the probe's answer named (uploaded), or NULL */
    bool uploaded;
    const char *upload_method; /* "sftp" or "exec" (static), set by the upload thread */
    char *remote_dir;
    struct line_reader in;     /* the agent's stdout (wire/line_reader.h) */
    struct strbuf out, errtail;
    uint64_t bytes_in;         /* agent output received, in all */
    bool more_in;              /* libssh may hold agent output no fd shows (ssh_conn_pending) */

    /* upload thread */
    pthread_t upload_tid;
    bool upload_running;
    bool upload_timed_out;
    int upload_pipe[2];
    char *upload_err;
    char *upload_hint;         /* NULL: the generic "is --agent-dir writable" hint */
};

void ssh_conn_fail(struct ssh_conn *c, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ssh_conn_teardown(struct ssh_conn *c);
/* --login-timeout, or its default (60 s). */
int ssh_conn_login_timeout_s(const struct ssh_conn *c);

void ssh_conn_resolve_begin(struct ssh_conn *c);
void ssh_conn_resolve_poll(struct ssh_conn *c);
void ssh_conn_resolve_cancel(struct ssh_conn *c);
void ssh_conn_connect_next(struct ssh_conn *c);
void ssh_conn_auth_begin(struct ssh_conn *c);
void ssh_conn_auth_pump(struct ssh_conn *c);

void ssh_conn_exec_begin(struct ssh_conn *c);
void ssh_conn_exec_pump(struct ssh_conn *c);
/* ssh_stream.c: in PROBING and READY, writes the queued requests, reads the channel (bounded)
 * and sees its end. */
void ssh_conn_channel_io(struct ssh_conn *c);
/* In PROBING, once a whole first line arrived: the probe's answer (absent: the upload begins;
 * unsafe: c fails) is taken and true returned; else it is the agent's hello, c is READY and the
 * line stays queued. False too while no whole line is there. */
bool ssh_conn_probe_reply(struct ssh_conn *c);
void ssh_conn_upload_poll(struct ssh_conn *c, short revents);
/* In the upload thread (blocking session): installs local as c->remote_dir/name with mode over
 * an exec channel; when want_sha256 is given, the bytes read must hash to it (the file did not
 * change since its name was made). Returns NULL or a malloc'd error (and may set
 * c->upload_hint). */
char *ssh_conn_upload_exec(struct ssh_conn *c, const char *local, const char *name, unsigned mode,
                           const char *want_sha256);

#endif
