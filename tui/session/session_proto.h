/* The session protocol (docs/dashboard.md "Detach and attach"): what a session's server and
 * its clients say to each other over the run's Unix socket, and where that socket lives.
 *
 * Every message both ways is a frame: 1 byte type, 2 bytes payload length (big endian), the
 * payload (at most SESSION_FRAME_MAX bytes). A client's first frame is SM_HELLO; the server
 * sends screen bytes only to clients that said hello (a liveness probe that connects and
 * closes gets nothing). Nothing here touches a terminal: the codec, the output queue and the
 * socket directory's checks are tested without one (tests/test_session.c). */
#ifndef DDPTOP_SESSION_PROTO_H
#define DDPTOP_SESSION_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SESSION_PROTOCOL_VERSION 1
#define SESSION_HDR        3
#define SESSION_FRAME_MAX  65535

enum session_msg {
    /* client -> server */
    SM_HELLO = 1,        /* u16 version, u16 rows, u16 cols, u8 flags (SESSION_HELLO_*) */
    SM_INPUT = 2,        /* bytes typed: they go to the dashboard's keyboard as they are */
    SM_WINSIZE = 3,      /* u16 rows, u16 cols: this terminal's size (it becomes the pty's) */
    SM_REDRAW = 4,       /* empty: repaint the whole screen */
    /* server -> client */
    SM_OUTPUT = 16,      /* the dashboard's screen bytes, to write to the terminal as they are */
    SM_DETACHED = 17,    /* text, may be empty: why; the client leaves, the job goes on */
    SM_EXIT = 18,        /* u8 exit status, u8 1 when the dashboard was killed by a signal */
};

/* SM_HELLO flags. STARTED: this client started the session (the dashboard draws its first
 * frame for it; no repaint, the terminal's modes are set by the dashboard itself). */
#define SESSION_HELLO_STARTED 0x1u

/* ---- frames ------------------------------------------------------------------------------- */

struct session_frame {
    int type;
    const uint8_t *payload;
    size_t len;
};

/* The first frame in buf[0..len): 1 with *f filled and *used its size, 0 when the frame is
 * not complete yet, -1 when the type is none of enum session_msg. */
int session_frame_parse(const uint8_t *buf, size_t len, struct session_frame *f, size_t *used);

/* Big-endian u16 in and out of payloads. */
void session_put_u16(uint8_t *p, unsigned v);
unsigned session_get_u16(const uint8_t *p);

/* ---- an output queue: bytes waiting for a non-blocking fd --------------------------------- */

struct session_queue {
    uint8_t *buf;
    size_t head, len, cap;       /* queued bytes are buf[head .. head+len) */
};

void session_queue_done(struct session_queue *q);
/* Raw bytes. */
void session_queue_put(struct session_queue *q, const void *p, size_t n);
/* One frame; data longer than SESSION_FRAME_MAX goes as several frames of the same type. */
void session_queue_frame(struct session_queue *q, int type, const void *p, size_t n);
/* Writes what fd takes now. 0 (EAGAIN included), -1 on a write error (errno set). */
int session_queue_flush(struct session_queue *q, int fd);

/* ---- the socket directory and the socket ------------------------------------------------- */

/* The per-user directory of the sockets, the one place that picks it (run, attach, the run
 * notes): $XDG_RUNTIME_DIR/ddptop when XDG_RUNTIME_DIR is set and is a directory of ours; else
 * $HOME/.cache/ddptop/run-HOST when that exists and passes session_dir_check (it was made
 * because of what follows, and stays in use so that every ddptop agrees); else /tmp/ddptop-UID;
 * and when that one exists but fails session_dir_check (another user made it first, a link,
 * a file), $HOME/.cache/ddptop/run-HOST, made 0700. create: make the one picked when missing.
 * -1 with err filled when it cannot be made or fails session_dir_check (errno ENOENT: there
 * is none and !create; out names the one looked for). */
int session_dir(char *out, size_t n, bool create, char *err, size_t errlen);
/* When dir (from session_dir) is the $HOME fallback: true, and a line for the user saying
 * why it is used (what is wrong with /tmp/ddptop-UID). */
bool session_dir_fallback_note(const char *dir, char *note, size_t n);
/* dir must be a real directory (not a link), owned by us, closed to group and others.
 * create: mkdir it 0700 first when it does not exist. 0, or -1 with a message in err saying
 * what is wrong and what to do; errno ENOENT when it does not exist and !create. */
int session_dir_check(const char *dir, bool create, char *err, size_t errlen);
/* Where run's directory is (DIR/RUN.dir, 0600): noted when a run starts, so that `ddptop
 * attach RUN` finds a run whose controller is gone from any directory. Best effort. */
void session_note_run(const char *run_id, const char *run_dir);
/* Removes the notes in dir, older than an hour, of runs whose directory is gone (done by
 * session_note_run before it writes one). */
void session_prune_notes(const char *dir);
/* The run's directory as noted (malloc'd), or NULL. */
char *session_find_run(const char *run_id);
/* DIR/RUN.sock; -1 when it does not fit a Unix socket address. */
int session_sock_path(char *out, size_t n, const char *dir, const char *run_id,
                      char *err, size_t errlen);
/* The run id in a socket's path: "DIR/RUN.sock" -> "RUN" (into out). */
void session_run_of_path(const char *path, char *out, size_t n);

/* A listening socket at path, 0600 (a stale file of a dead session is replaced). -1 with err
 * filled; a live session of the same name is an error. */
int session_listen(const char *path, const char *run_id, char *err, size_t errlen);
/* A connected, close-on-exec socket, or -1 with errno (ENOENT no file, ECONNREFUSED nothing
 * listens: a stale file, EACCES not ours). */
int session_connect(const char *path);
/* The uid of the process at the other end of a Unix socket (SO_PEERCRED). */
int session_peer_uid(int fd, uid_t *uid);
/* Removes path when it is a socket of ours with nothing listening. 1 removed, 0 not. */
int session_remove_stale(const char *path);

#endif
