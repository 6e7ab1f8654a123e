/* How the controller reaches one node's ddptop-agent, whatever the kind of transport
 * (transport_kind.h, which opens them): over SSH (transport_ssh.c over ssh_conn.h), as a
 * member of a Slurm job step running every node's agent (transport_srun.c over srun_step.h),
 * or as a child process on two pipes (transport_child.c: without hosts the agent itself; under
 * PBS pbs_tmrsh starting it on the node). Each of these ways is an ops table (transport_int.h)
 * that transport.c dispatches through; the constructors below are the kinds' (kind_*.c), and
 * what is built is never asked which it is. All are driven the same way from
 * the controller's one loop: transport_pollfds gives the (fd, events) to watch,
 * transport_pump takes their revents (0 on a timer tick, with transport_deadline_ms saying
 * when one is due), then transport_next_line_into hands out the lines that arrived. Nothing
 * blocks, except transport_free: a local child agent that was neither detached nor abandoned
 * is given up to 3 s to stop its ranks after end of file (then SIGKILL), and an SSH upload
 * still in progress is cut (its socket shut down) and its thread joined. */
#ifndef DDPTOP_TRANSPORT_H
#define DDPTOP_TRANSPORT_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "ssh_conn.h"
#include "srun_step.h"

struct host;

enum transport_state {
    TRANSPORT_CONNECTING,  /* SSH stages, or the child not yet started */
    TRANSPORT_READY,       /* lines flow */
    TRANSPORT_CLOSED,      /* the agent's output ended (it exited, the link dropped) */
    TRANSPORT_FAILED,      /* could not connect / start the agent */
};

struct transport;

/* h and o must outlive the transport. attach: a bridge to the agent that waits on the node
 * (ddptop-agent --attach), not a new agent. */
struct transport *transport_ssh_new(const struct host *h, const struct ssh_conn_opts *o);
struct transport *transport_ssh_attach_new(const struct host *h, const struct ssh_conn_opts *o);
/* A child process on two pipes that is the agent ({"/path/ddptop-agent", NULL}) or starts it
 * on a node ({"pbs_tmrsh", "node3", "/path/ddptop-agent", NULL}, PBS); address: what its peers
 * use (NULL: 127.0.0.1). Its stderr goes to stderr_path (appended; NULL: /dev/null), so
 * nothing it says can reach the terminal the dashboard draws on. */
struct transport *transport_child_new(const char *const *argv, const char *address, const char *stderr_path);
/* A command that runs `sh -c CMD` on node and carries its stdin and stdout: prefix such as
 * {"kubectl", "exec", "-i", "POD", "--", NULL} ({NULL}: sh on this machine). The agent is
 * deployed through it by the probe and, when the node lacks it, the upload of agent_deploy.h
 * (transport_exec.c); address: what its peers use (NULL: 127.0.0.1). */
struct transport_exec_opts {
    const char *agent_local;   /* this machine's ddptop-agent: its kit (agent_kit.h) */
    const char *agent_dir;     /* on the node; NULL: AGENT_REMOTE_DIR */
    int timeout_s;             /* the upload may take three times this */
    int login_timeout_s;       /* the probe's first line (0: 60 s) */
    const char *stderr_path;   /* what the commands say on stderr (NULL: /dev/null) */
    bool attach;               /* a bridge to the agent that waits there (--attach) */
};
struct transport *transport_exec_new(const char *const *prefix, const char *node, const char *address,
                                     const struct transport_exec_opts *o);
/* Member `member` of a Slurm step of agents (srun_step.h); the transports of a step release it. */
struct transport *transport_srun_new(struct srun_step *s, size_t member);
void transport_free(struct transport *t);

/* Begins connecting (SSH) or forks and execs the agent (local). */
void transport_start(struct transport *t);
/* The most descriptors one transport asks to poll (a Slurm step's member: its direct
 * connection; srun's stdout, stderr, stdin and the direct connections' epoll set). */
#define TRANSPORT_POLLFDS_MAX 5
/* Up to max descriptors to poll (fd and events); returns how many were filled. */
int transport_pollfds(struct transport *t, struct pollfd *p, int max);
/* Advances it; revents of any of its fds (0 on a timer tick). Never blocks. */
void transport_pump(struct transport *t, short revents);
/* True when bytes already read wait inside it where none of its fds shows them, and a pump
 * would take them on now (over SSH: the agent's output libssh holds once the backlog had
 * room again): the loop polls without sleeping, as for lines left unread. */
bool transport_pending(const struct transport *t);
/* Monotonic ms by which the current stage must end (0: none). */
int64_t transport_deadline_ms(const struct transport *t);

enum transport_state transport_state(const struct transport *t);
/* True while connecting, for --fanout. */
bool transport_connecting(const struct transport *t);
/* Whether the node itself was reached: a TCP connection made to sshd; always for srun, pbs_tmrsh
 * and local children (a process was started). A failure before is cheap to try again. */
bool transport_reached(const struct transport *t);
/* Why it failed or closed (one line), and what to do (or NULL). */
const char *transport_error(const struct transport *t);
const char *transport_hint(const struct transport *t);
/* The address peers use to reach the node: HostName after the ssh config, or 127.0.0.1. */
const char *transport_address(const struct transport *t);

/* Over SSH: the user and port it logs in with, whether it uploaded the agent, and how long the
 * login shell took to start it (ms, -1 unknown). Local: the current user, 0, false, -1. */
const char *transport_user(const struct transport *t);
int transport_port(const struct transport *t);
bool transport_uploaded(const struct transport *t);
int64_t transport_login_ms(const struct transport *t);
/* ssh_conn_upload_method's answer; NULL when local or not uploaded. */
const char *transport_upload_method(const struct transport *t);

/* Queues one line ('\n' added). */
void transport_send_line(struct transport *t, const char *line);
/* The next complete line from the agent into out (reset first, NUL-terminated, without '\n'):
 * the run's loop takes every line of rank output this way, without a malloc and free per line.
 * false: none now. */
struct strbuf;
bool transport_next_line_into(struct transport *t, struct strbuf *out);
/* Bytes of agent output received so far. */
uint64_t transport_bytes_in(const struct transport *t);
/* Ends the agent's stdin so it exits (it stops its ranks first); the transport is CLOSED. */
void transport_close(struct transport *t);
/* transport_free will let go without ending the far side: an agent that holds ranks waits for
 * a controller to come back (its grace), so its child process is neither waited for nor
 * killed, and a Slurm step of agents is left running. */
void transport_detach(struct transport *t);
/* transport_free will end the far side at once and not wait for it: a bridge that failed
 * (its child process, or its Slurm step, is killed). */
void transport_abandon(struct transport *t);
/* Reaps child processes let go of earlier (detached or abandoned) that have exited since. */
void transport_reap_orphans(void);

#endif
