/* What srun_step.c (the step's life, its pipes, the members' side of the transport) and
 * srun_step_lines.c (reading srun's output and messages into the members) share. */
#ifndef DDPTOP_SRUN_STEP_INT_H
#define DDPTOP_SRUN_STEP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <sys/types.h>

#include "srun_step.h"
#include "util/util.h"
#include "wire/direct_line.h"
#include "wire/line_reader.h"
#include "wire/relay.h"

struct member {
    char *name;
    char addr[64];
    int task;                 /* srun's task id, -1 until the relay said who it is */
    bool announced, closed_by_us, ended, failed;
    bool cut;                 /* it sent a line longer than PROTOCOL_MAX_LINE: failed, and
                               * what it still sends is dropped */
    char *why;                /* why it ended */
    char last_err[256];       /* the last thing its task wrote on stderr */
    struct relay_piece piece; /* a protocol line whose pieces are still arriving */
    struct line_reader in;    /* whole protocol lines, each ended by '\n' */
    struct strbuf pending;    /* requests sent before its task was known */
    uint64_t bytes_in;
    bool released;
    bool kept;                /* its agent keeps a copy of itself (its greeting said "kept") */
    /* its direct connection (srun_step_direct.c, srun_step_dlink.c), when its agent made one */
    int dfd;                  /* -1: none (never, or ended) */
    bool direct;              /* it spoke over one: srun's stdout carries nothing of it */
    bool dforged;             /* a line failed its MAC: closed, and the member failed */
    struct direct_line_key drx, dtx; /* the keys of its agent's lines and of ours */
    bool dmore;               /* its last read stopped early (a bound, the backlog): read again
                               * without waiting for its poll */
    struct strbuf dq;         /* to send */
    struct line_reader dr;    /* read, not yet a whole line (a line too long is dropped) */
    int64_t deof_ms;          /* its socket ended without the exit status (0: not) */
    int deof_why;             /* errno of that end (0: closed) */
    int64_t dend_ms;          /* ended (srun said) while its socket was still open */
};

/* Handshakes in progress at most (besides the step's size). */
#define DIRECT_PENDING_MAX 8192
struct direct_pending;

/* Refused direct connections (srun_step_direct.c): the first is said in the step's log at
 * once, the rest counted by reason and said in one line when the listener closes (at most once
 * a minute while it stays open): a stranger's flood of connections writes a line a minute,
 * not one per try. */
#define DIRECT_REFUSAL_KINDS 12
struct direct_refusals {
    bool first_said;
    unsigned long total;                   /* counted, not said yet */
    const char *why[DIRECT_REFUSAL_KINDS]; /* static strings, matched by address */
    unsigned long count[DIRECT_REFUSAL_KINDS];
    char last_peer[64];
    int64_t said_ms;                       /* the last summary (mono_ms) */
};

/* A direct connection whose agent proved the step's key: its socket and its lines' keys. */
struct direct_link {
    int fd;
    struct direct_line_key rx, tx; /* the agent's lines, ddptop's */
};

struct srun_step {
    char *agent_path, *jobid, *stderr_path;
    char *bcast;              /* --bcast destination on every node, or NULL */
    bool bcast_dropped;       /* the agents were told to remove it (RELAY_UNLINK) */
    struct member *m;
    size_t n, refs;
    pid_t pid;
    bool started, exited, reaped;
    bool close_when_flushed;  /* every member closed: srun's stdin ends once wbuf went out */
    bool detached;            /* a member's agent waits for us: srun is never ended by us */
    bool abandoned;           /* bridges that got nowhere: srun killed without waiting */
    bool attach;              /* the tasks are bridges (ddptop-agent --relay --attach) */
    int status;
    int to_fd, out_fd, err_fd, log_fd;
    struct strbuf wbuf;
    struct line_reader olines, elines; /* srun's stdout and stderr, bounded by PROTOCOL_MAX_LINE */
    bool backlog_hit;         /* a member's lines reached PROTOCOL_BACKLOG_MAX since this was
                               * cleared: only then are the members looked at (they are many) */
    char srun_err[256];       /* srun's own last error line */
    int64_t poked_ms;         /* the last empty line written to acknowledge (srun_step.c) */
    char *sha256;             /* the agent's SHA-256 (hex) when the nodes keep a copy of it */
    bool cache_try;           /* this srun runs the nodes' kept copies (srun_step_cache.c):
                               * nothing goes either way until every node greeted */
    bool cache_noted;         /* the nodes of this --bcast step were noted as holding it */
    /* the agents' direct connections (srun_step_direct.c) */
    int lfd, efd, dport;      /* listening socket, epoll set (it and the handshakes), its port */
    bool direct_off;          /* DDPTOP_SRUN_DIRECT=0, or no socket: srun's I/O only */
    unsigned char dkey[32];
    char dkey_hex[65];
    struct direct_pending *pend;
    size_t npend, pend_cap;
    struct direct_refusals refused;
    pid_t tried_pid;          /* the srun that tried the kept copies and was given up: reaped
                               * when it ends (srun_step.c reap), never waited for; 0 none */
};

/* What the wrapper says on stderr when a node has no usable copy. */
#define SRUN_CACHE_MISS "ddptop-agent-cache: no usable copy on"
/* The sh script that runs the node's kept copy after checking it (srun_step_cache.c). */
const char *srun_step_cache_wrapper(void);
/* At the step's creation: s->sha256, and whether the nodes' copies are tried first. */
void srun_step_cache_plan(struct srun_step *s);
/* Every node of a --bcast step greeted: notes them as holding the agent, for later steps. */
void srun_step_cache_note(struct srun_step *s);
/* While the nodes' copies are tried (s->cache_try): true once every node greeted (the step goes
 * on), false while it waits or after the step started again with --bcast. */
bool srun_step_cache_settle(struct srun_step *s);
/* A fresh --bcast destination (srun_step.c). */
char *srun_step_bcast_target(void);
/* Writes what is queued for srun's stdin, as far as the pipe takes it. */
void srun_step_flush(struct srun_step *s);
/* Waits up to ms for srun to exit, reading what it still says (it never blocks on a pipe). */
void srun_step_wait_exit(struct srun_step *s, int ms);

/* The step's log (its stderr file): a line of ddptop's own. */
void srun_step_log(struct srun_step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "NAME ADDR[ kept]" from task's relay: the member it names, now announced (NULL: none waits for
 * it). link: its direct connection (taken over: its keys are copied, the caller wipes its own),
 * or NULL (srun's I/O). */
struct member *srun_step_announce(struct srun_step *s, int task, const char *text, const struct direct_link *link);
/* The agent's exit status (the relay's "!STATUS" without its '!'). */
void srun_step_member_exited(struct member *m, const char *status);
/* m sent a line longer than PROTOCOL_MAX_LINE: it fails as over SSH. */
void srun_step_member_cut(struct srun_step *s, struct member *m);

/* srun_step_direct.c: before srun starts, the listening socket and the key (unless
 * DDPTOP_SRUN_DIRECT=0); in srun's child, the environment that gives them to the agents. */
void srun_step_direct_open(struct srun_step *s);
void srun_step_direct_env(const struct srun_step *s);
/* New connections and handshakes; closes the listener once every agent said where it is. */
void srun_step_direct_accept(struct srun_step *s);
/* srun_step_dlink.c: a member's own connection once its agent proved the key. */
/* m's connection: what is queued goes, what came is read into m->in; its end. */
void srun_step_direct_pump(struct srun_step *s, struct member *m);
/* Bytes of m's connection as read: each line's MAC checked, its line into m->in (tests and the
 * fuzz target feed it). A line that fails its check closes the connection and fails m. */
void srun_step_direct_feed(struct srun_step *s, struct member *m, const char *buf, size_t len);
/* A line for m's agent, sealed (direct_line.h), on its connection. */
void srun_step_direct_queue(struct member *m, const char *line, size_t len);
void srun_step_direct_flush(struct member *m);
/* m's socket to poll (0 or 1 filled). */
int srun_step_direct_pollfds(const struct srun_step *s, const struct member *m, struct pollfd *p, int max);
/* m's connection closed (if open) and its keys wiped. */
void srun_step_direct_drop(struct member *m);
/* The step starts again (srun_step_cache.c): every connection closed, a new key. */
void srun_step_direct_reset(struct srun_step *s);
/* Everything closed (the step is freed). */
void srun_step_direct_close(struct srun_step *s);

/* Queues "TASK LINE" for m's task on srun's stdin (the task must be known). */
void srun_step_queue(struct srun_step *s, struct member *m, const char *line, size_t len);
/* Queues what was sent to m before its task was known (its end too, if closed). */
void srun_step_flush_pending(struct srun_step *s, struct member *m);
/* Whether m's lines are still taken by its transport (else they are dropped, unstored). */
bool srun_step_member_reads(const struct member *m);

#endif
