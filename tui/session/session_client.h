/* A session's client: this terminal, attached to the session of a run (`ddptop run` on a
 * terminal is the first one, `ddptop attach` any later one). It puts the terminal in raw
 * mode, relays what is typed to the server and the server's screen bytes to the terminal,
 * sends its size on SIGWINCH, and gives the terminal back on every way out: the job's end (it
 * returns the job's exit status), a detach (`d` in the dashboard, or Ctrl-\ here, which works
 * even when the dashboard does not answer), SIGTERM, SIGHUP (the terminal closed: the job goes
 * on), the server gone, a crash. */
#ifndef DDPTOP_SESSION_CLIENT_H
#define DDPTOP_SESSION_CLIENT_H

/* fd: connected to the run's socket (owned: closed here). flags: SESSION_HELLO_* (STARTED
 * for the process that started the session). Returns the exit status for the process: the
 * job's when it ended while attached, 0 after a detach, 1 when the session was lost,
 * 128+N after signal N. */
int session_client_run(int fd, const char *run_id, unsigned flags);

#endif
