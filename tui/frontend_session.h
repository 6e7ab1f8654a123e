/* What a front end (the dashboard, the line printer) may ask of the session it runs in. The
 * session layer is a room of its own (tui/session/, dtach-like) that the front ends do not
 * include: the program's entry fills this in from tui/session/session.h and hands it over.
 * NULL as a whole, or a NULL field, means "no such service": the front end then does without. */
#ifndef DDPTOP_FRONTEND_SESSION_H
#define DDPTOP_FRONTEND_SESSION_H

struct frontend_session {
    /* The run started: run_id's files are in run_dir. Noted so that `ddptop attach RUN` finds
     * a run whose controller is gone from any directory. Called with or without a session. */
    void (*note_run)(const char *run_id, const char *run_dir);
    /* Inside a session only (NULL outside one): detach the client that typed last, the job
     * goes on. 0, or -1 when the request could not be sent. */
    int (*detach)(void);
};

#endif
