/* What each kind of transport implements, one file per kind: transport_ssh.c (ssh_conn),
 * transport_child.c (a child on two pipes: the local agent, pbs_tmrsh), transport_srun.c (a
 * member of a Slurm step of agents). transport.c dispatches every call of transport.h through
 * t->ops and fills in the defaults of the optional entries; nothing else tests which kind a
 * transport is (tests/it_rooms.sh checks it). Only the transport files include this. */
#ifndef DDPTOP_TRANSPORT_INT_H
#define DDPTOP_TRANSPORT_INT_H

#include "transport.h"

struct transport_ops {
    const char *name; /* "ssh", "child", "srun": for messages, never compared */

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

#endif
