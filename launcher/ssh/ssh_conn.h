/* SSH transport to one node: a nonblocking state machine (resolve, TCP connect, SSH handshake,
 * host key verification, public key authentication, agent deployment, agent exec channel) that
 * the caller drives from its one poll() loop. Once ready, the connection carries the agent's
 * JSON lines both ways (docs/protocol.md). Nothing here blocks the caller's loop; the only
 * blocking work (uploading the agent by SFTP, or over an exec channel when the node's sshd has
 * no sftp subsystem) runs in a short-lived thread, see ssh_deploy.c; the agent's lines are read
 * and written in ssh_stream.c. */
#ifndef DDPTOP_SSH_CONN_H
#define DDPTOP_SSH_CONN_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct host;

/* Options shared by every command that reaches nodes over SSH (`check`, later `run`). */
struct ssh_conn_opts {
    const char *known_hosts;   /* NULL: ~/.ssh/known_hosts */
    bool accept_new_hosts;     /* unknown host keys are added (OpenSSH's accept-new) */
    const char *identity;      /* -i FILE, tried before the config's IdentityFile; NULL: none */
    const char *ssh_config;    /* -F FILE; NULL: ~/.ssh/config then /etc/ssh/ssh_config */
    const char *agent_dir;     /* remote dir of the agent; NULL: AGENT_REMOTE_DIR */
    const char *agent_local;   /* our own ddptop-agent binary, uploaded when a node lacks it */
    int timeout_s;             /* deadline of each stage (connect, deploy, ...) in seconds */
    int login_timeout_s;       /* the login shell's start: from the exec request to the agent's
                                * first line (0: 60 s); apart from timeout_s because real login
                                * shells (conda, pyenv, modules) can take many seconds */
    int verbose;               /* > 0: libssh warnings on stderr */
};

enum ssh_conn_state {
    SSH_CONN_NEW,          /* ssh_conn_start not called yet */
    SSH_CONN_RESOLVING,
    SSH_CONN_CONNECTING,   /* TCP connect in progress */
    SSH_CONN_HANDSHAKE,    /* banner, key exchange */
    SSH_CONN_AUTH,
    SSH_CONN_EXEC,         /* opening the exec channel (probe or agent) */
    SSH_CONN_PROBING,      /* exec sent: the login shell starts; agent hello or probe answer expected */
    SSH_CONN_UPLOADING,    /* the upload thread owns the session */
    SSH_CONN_READY,        /* agent running: lines flow */
    SSH_CONN_CLOSED,       /* agent channel ended (see ssh_conn_error) */
    SSH_CONN_FAILED,
};

struct ssh_conn;

/* h must outlive the connection. */
struct ssh_conn *ssh_conn_new(const struct host *h, const struct ssh_conn_opts *o);
void ssh_conn_free(struct ssh_conn *c);

/* Reads the ssh config for the host and begins resolving/connecting. After it, the address
 * and port are known (ssh_conn_address) even if connecting fails later. */
void ssh_conn_start(struct ssh_conn *c);

/* What to poll for: fills p (fd, events) and returns true, or returns false when the
 * connection waits on nothing but time (resolving) or is finished. */
bool ssh_conn_pollfd(struct ssh_conn *c, struct pollfd *p);
/* True when agent output waits inside libssh where its socket does not show it (read from the
 * socket into the channel's buffer, then left there while the backlog was full) and the backlog
 * has room again: the caller's loop must not sleep (transport_pending). */
bool ssh_conn_pending(const struct ssh_conn *c);
/* Advances the machine; revents from poll (0 on a timer tick). Never blocks. */
void ssh_conn_pump(struct ssh_conn *c, short revents);
/* Monotonic ms by which the current stage must finish (0: no deadline now). */
int64_t ssh_conn_deadline_ms(const struct ssh_conn *c);

enum ssh_conn_state ssh_conn_state(const struct ssh_conn *c);
/* True from the first call until READY, FAILED or CLOSED: what --fanout bounds. */
bool ssh_conn_connecting(const struct ssh_conn *c);
/* Whether the TCP connection to sshd was ever made (a ProxyCommand's: assumed). */
bool ssh_conn_reached(const struct ssh_conn *c);
/* A one-line error and a fix hint, set in FAILED and CLOSED. */
const char *ssh_conn_error(const struct ssh_conn *c);
const char *ssh_conn_hint(const struct ssh_conn *c);
/* Where it connects: HostName after the ssh config (the address peers use), port, user. */
const char *ssh_conn_address(const struct ssh_conn *c);
int ssh_conn_port(const struct ssh_conn *c);
const char *ssh_conn_user(const struct ssh_conn *c);
/* True when this connection uploaded the agent (it was missing on the node). */
bool ssh_conn_uploaded(const struct ssh_conn *c);
/* How long the node's login shell took, from the exec request to the first line it sent (the
 * agent's hello or the probe's answer), in ms; -1 until known. */
int64_t ssh_conn_login_ms(const struct ssh_conn *c);
/* How it uploaded: "sftp", "exec" (the node's sshd has no sftp subsystem: an exec channel ran
 * `sh -c` and the copy was verified with sha256sum there), or NULL when it did not upload. */
const char *ssh_conn_upload_method(const struct ssh_conn *c);
/* Bytes of agent output received so far (the controller tells streaming from a trickle). */
uint64_t ssh_conn_bytes_in(const struct ssh_conn *c);

/* Queues one line (a '\n' is added) for the agent's stdin. */
void ssh_conn_send_line(struct ssh_conn *c, const char *line);
/* The next complete line from the agent (malloc'd, without '\n'), or NULL. */
char *ssh_conn_next_line(struct ssh_conn *c);
/* The same into out (reset first), without an allocation; false: none now. */
struct strbuf;
bool ssh_conn_next_line_into(struct ssh_conn *c, struct strbuf *out);
/* Ends the agent's stdin (it exits) and tears the session down. */
void ssh_conn_close(struct ssh_conn *c);

/* Before ssh_conn_start: the exec channel runs `ddptop-agent --attach`, a bridge to the agent
 * that waits on the node (docs/protocol.md "Reconnecting"), not a new agent. */
void ssh_conn_set_attach(struct ssh_conn *c);

#endif
