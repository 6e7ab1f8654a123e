/* Sessions: the job outlives the terminal that started it (docs/dashboard.md "Detach and
 * attach"). `ddptop run` on a terminal does not draw the dashboard itself: it starts a
 * session server (its own session, SIGHUP ignored; session_server.h) that runs the real
 * dashboard and controller, the same program again with DDPTOP_IN_SESSION=1 and --run-id
 * RUN, on the slave side of a pseudo-terminal, and listens on the run's Unix socket
 * (session_proto.h); the process then becomes the first client (session_client.h). Closing
 * the terminal ends only the client; `ddptop attach RUN` comes back. dtach and abduco work
 * the same way.
 *
 * The session layer's face (tui/session/README.md): only the program's entry and its commands
 * include it. The dashboard does not: it is handed session_note_run and, inside a session,
 * session_request_detach (tui/frontend_session.h); the session includes nothing of the
 * dashboard or of the commands (session_attach_main is handed run_again). */
#ifndef DDPTOP_SESSION_H
#define DDPTOP_SESSION_H

#include <stdbool.h>
#include <stdio.h>

/* First thing in main: whether we are a session's dashboard (DDPTOP_IN_SESSION=1 and the
 * request socket's fd in DDPTOP_SESSION_FD); the markers are taken out of the environment so
 * that nothing we start (the local agent, its ranks, a nested ddptop) inherits them. */
void session_inner_init(void);
bool session_inside(void);
/* From the dashboard inside a session: the client that typed last is detached. -1 when not
 * in a session. */
int session_request_detach(void);

struct session_start {
    int argc;
    char **argv;          /* our command line as main got it: the dashboard runs with it */
    int run_id_at;        /* where "--run-id RUN" goes in it (after "run", else after argv[0]) */
    const char *run_id;   /* --run-id, or NULL: one is made here, as the controller would */
    bool detach;          /* --detach: no client; print how to attach and return 0 */
};

/* Starts the session and (unless detach) attaches this terminal to it. Returns the exit
 * status for the process: the job's, 0 after a detach, 2 when the session cannot start.
 * The forked server process returns here too, once the session ended (with the job's
 * status): callers print nothing after this call. */
int session_start(const struct session_start *s);

/* The dashboard's command line: argv with "--run-id", run_id inserted at index at. malloc'd
 * array (the strings are argv's), NULL-terminated. */
char **session_inner_argv(int argc, char **argv, int at, const char *run_id);

/* `ddptop attach [RUN | SOCKET]` (the arguments after "attach"). Returns the exit status.
 * run_again(argc, argv) runs `ddptop run ...` (argv[0] "ddptop", argv[1] "run") in this
 * process: how a run whose controller is gone is taken over; view(argc, argv) is `ddptop view`
 * (its arguments after "view"): how a run that ended is shown. */
int session_attach_main(int argc, char **argv, int (*run_again)(int argc, char **argv),
                        int (*view)(int argc, char **argv));
/* RUN has no session: view it when it ended, else take it over (session_takeover.c). -1 (and
 * nothing said) when no run of that name is found and no --log-dir was given. */
int session_takeover(const char *run, const char *log_dir, bool headless, bool force,
                     int (*run_again)(int argc, char **argv), int (*view)(int argc, char **argv));
void session_attach_usage(FILE *f);

#endif
