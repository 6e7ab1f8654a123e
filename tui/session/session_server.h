/* A session's server: the process that holds the pseudo-terminal the dashboard runs on, so
 * that the job outlives the terminal that started it. One poll() loop over the pty's master
 * side, the run's listening socket, every client and the dashboard's request socket: screen
 * bytes go to every client (each through a bounded queue; one that falls too far behind is
 * dropped with a message), typed bytes go to the pty, the latest client to attach or resize
 * sets the pty's size. It ends when the dashboard has exited and its last bytes and exit
 * status went out; the socket is removed first. See docs/dashboard.md. */
#ifndef DDPTOP_SESSION_SERVER_H
#define DDPTOP_SESSION_SERVER_H

#include <sys/types.h>

struct session_server_args {
    int listen_fd;           /* the run's socket, listening (owned: closed here) */
    int master;              /* the pty's master side (owned) */
    int ctl_fd;              /* the dashboard's requests ("detach"), SOCK_SEQPACKET (owned) */
    pid_t child;             /* the dashboard (the inner ddptop) on the pty's slave side */
    const char *sock_path;   /* removed when the session ends */
};

/* Runs the session to its end. Returns the dashboard's exit status (128+N for signal N). */
int session_server_run(const struct session_server_args *a);

#endif
