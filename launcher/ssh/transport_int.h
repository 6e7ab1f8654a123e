/* How an agent's lines flow, one ops table per way, one file each: transport_ssh.c
 * (ssh_conn), transport_child.c (a child on two pipes: the local agent, pbs_tmrsh),
 * transport_srun.c (a member of a Slurm step of agents). The kinds of transport
 * (transport_kind.h) build them through the constructors of transport.h. transport.c
 * dispatches every call of transport.h through t->ops and fills in the defaults of the
 * optional entries; nothing else looks at t->ops (tests/it_rooms.sh checks it). Only the
 * transport files include this. */
#ifndef DDPTOP_TRANSPORT_INT_H
#define DDPTOP_TRANSPORT_INT_H

#include <sys/types.h>

#include "transport.h"

struct transport_ops {
    void (*start)(struct transport *t);
    /* Up to max (fd, events) to poll; returns how many. */
    int (*pollfds)(struct transport *t, struct pollfd *p, int max);
    /* The revents of its fds (0 on a timer tick): flush, read, advance. Never blocks. */
    void (*pump)(struct transport *t, short revents);
    enum transport_state (*state)(const struct transport *t);
    bool (*connecting)(const struct transport *t);
    const char *(*error)(const struct transport *t);
    /* NULL result: 127.0.0.1 */
    const char *(*address)(const struct transport *t);

    void (*send_line)(struct transport *t, const char *line);
    /* The next complete line (malloc'd, without '\n'), or NULL: transport_next_line_into's
     * default when next_line_into is not given. */
    char *(*next_line)(struct transport *t);
    /* Optional [next_line copied into out]: the next line into out, no allocation. */
    bool (*next_line_into)(struct transport *t, struct strbuf *out);
    uint64_t (*bytes_in)(const struct transport *t);
    void (*close)(struct transport *t);
    /* Frees the kind's part and t itself, ending the far side, or not (t->detached), or at
     * once (t->abandoned): transport.h's transport_detach and transport_abandon. */
    void (*release)(struct transport *t);

    /* Optional (NULL: the default in brackets). */
    int64_t (*deadline_ms)(const struct transport *t);     /* [0: none] */
    bool (*pending)(const struct transport *t);            /* [false: its fds show all] */
    bool (*reached)(const struct transport *t);            /* [true: a process was started] */
    const char *(*hint)(const struct transport *t);        /* [NULL] */
    const char *(*user)(const struct transport *t);        /* [$USER, or "?"] */
    int (*port)(const struct transport *t);                /* [0] */
    bool (*uploaded)(const struct transport *t);           /* [false] */
    const char *(*upload_method)(const struct transport *t); /* [NULL] */
    int64_t (*login_ms)(const struct transport *t);        /* [-1] */
};

/* The part every transport shares: the first member of each kind's own struct, which its
 * file reaches by a cast. */
struct transport {
    const struct transport_ops *ops;
    bool detached;  /* freed without ending the far side */
    bool abandoned; /* freed ending the far side at once, without waiting */
};

/* transport_child.c: argv started in a session of its own on two nonblocking pipes (*to_fd its
 * stdin, *from_fd its stdout; its stderr appended to stderr_path, NULL: /dev/null). Its pid, or
 * -1 with a malloc'd message in *err. For an ops table that runs helper processes of its own
 * (transport_exec.c's upload). */
pid_t transport_child_spawn(char *const *argv, const char *stderr_path, int *to_fd, int *from_fd, char **err);
/* transport_child.c: a child let go of unreaped (killed, or left to live on) is reaped later by
 * transport_reap_orphans, so none stays a zombie. */
void transport_child_orphan(pid_t pid);

#endif
