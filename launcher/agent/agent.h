/* The ddptop-agent core: one loop (util/evloop.h) over the controller's stdin, the agent's queued
 * stdout, whatever file descriptors the request handlers watch (listeners, pending connects, rank
 * pipes) and the signals (agent_ranks.c catches them through agent_evloop). Requests are JSON lines dispatched through a table keyed by "op"; answers are JSON
 * lines queued and written only when stdout is writable, so a slow reader never blocks the loop.
 * Protocol: docs/protocol.md and protocol.h. */
#ifndef DDPTOP_AGENT_H
#define DDPTOP_AGENT_H

#include <stdint.h>

#include <cJSON.h>

struct agent;
struct evloop;
struct evloop_watch;

/* A request handler. req is the parsed request object; id is its "id" member or NULL. A handler
 * answers now with agent_send/agent_send_error, or later from a watch callback (keep a copy of
 * id with cJSON_Duplicate). */
typedef void (*agent_op_fn)(struct agent *ag, const cJSON *req, const cJSON *id);

struct agent_op {
    const char *name; /* the request's "op" */
    agent_op_fn fn;
};

/* A file descriptor the loop polls for a handler. The agent owns the struct and the fd (it
 * closes the fd when the watch is deleted or the agent stops); the handler owns ctx, released
 * through free_ctx (called only when ctx is not NULL). fn is called with the poll revents, or
 * with revents 0 once deadline_ms (mono_ms() clock, 0 for none) has passed; it must then delete
 * the watch or move the deadline, or it is called again on every pass. */
struct agent_watch;
typedef void (*agent_watch_fn)(struct agent *ag, struct agent_watch *w, short revents);
struct agent_watch {
    int fd;
    short events;        /* POLLIN / POLLOUT; may be changed by the callback */
    int64_t deadline_ms; /* 0: none */
    agent_watch_fn fn;
    void *ctx;
    void (*free_ctx)(void *ctx);
    int dead;            /* deleted; freed by the loop after the current pass */
    struct agent_watch *next;
    struct agent *ag;    /* the loop's own: */
    struct evloop_watch *ew; /* fd and events handed to the event loop before each pass */
};

/* ops is terminated by an entry with name NULL. */
struct agent *agent_new(int in_fd, int out_fd, const struct agent_op *ops);
/* Runs until agent_quit (stdin's end, unless a lost-link hook keeps it); sends hello first.
 * Returns the exit status. */
int agent_loop(struct agent *ag);
/* The agent's event loop, for what is not an fd with a deadline: its signals (evloop_signal). */
struct evloop *agent_evloop(struct agent *ag);
/* Closes every watched fd (listeners included) and frees the agent. */
void agent_free(struct agent *ag);

struct agent_watch *agent_watch_add(struct agent *ag, int fd, short events, agent_watch_fn fn,
                                    void *ctx, void (*free_ctx)(void *ctx));
/* Closes the fd and frees ctx now; the struct itself goes after the loop's current pass. */
void agent_watch_del(struct agent *ag, struct agent_watch *w);
/* The first live watch with callback wfn for which match(w, arg) is true, or NULL (how the
 * net handlers find a listener by port). */
struct agent_watch *agent_watch_find(struct agent *ag, agent_watch_fn wfn,
                                     int (*match)(const struct agent_watch *w, const void *arg),
                                     const void *arg);

/* A new answer object {"ev":ev,"id":id} (no "id" when id is NULL). */
cJSON *agent_reply_new(const char *ev, const cJSON *id);
/* Queues msg as one line on stdout and frees it. */
void agent_send(struct agent *ag, cJSON *msg);
/* {"ev":"error","id":id,"error":"..."}; id may be NULL. */
void agent_send_error(struct agent *ag, const cJSON *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Bytes queued for the link that can be written now (not those a new link holds until its
 * resume): for handlers that must throttle. */
size_t agent_output_pending(const struct agent *ag);
/* Stops reading requests; the loop flushes queued output (bounded wait) and returns status. */
void agent_quit(struct agent *ag, int status);
/* fn(ag, ctx) is called once, when the agent starts quitting for any reason (stdin EOF, stdout
 * gone, {"op":"exit"}, agent_quit): the run handlers start stopping their ranks there. While
 * quitting, the loop no longer polls watched fds but still calls their deadlines. */
void agent_on_quit(struct agent *ag, void (*fn)(struct agent *ag, void *ctx), void *ctx);
/* mono_ms() when bytes last arrived from the controller (agent_new's time before any, or the
 * last relink's): the run watchdog and the grace. */
int64_t agent_last_input_ms(const struct agent *ag);
/* Queues one preformatted JSON object (len bytes, no newline in it) as a line on stdout: for
 * high-volume messages (GPU samples) that skip building a cJSON tree. */
void agent_send_line(struct agent *ag, const char *json, size_t len);
/* A durable message of rank (its output, its exit): numbered seq (outbox_next_seq), kept until
 * the controller acknowledges it and sent again on a new link (agent_outbox.h). Queued even
 * while there is no link. */
void agent_send_durable(struct agent *ag, int rank, uint64_t seq, const char *json, size_t len);
/* Written before anything queued, even while the outbox waits for a new link's resume. */
void agent_send_urgent(struct agent *ag, cJSON *msg);
struct outbox *agent_outbox(struct agent *ag);

/* The hello message ({"ev":"hello","protocol":...}); the caller may add to it and sends it. */
cJSON *agent_hello_new(void);

/* The controller's link. At first stdin/stdout; when its input ends or its output breaks, lost
 * is called: nonzero keeps the agent running without a link (a run's grace), zero ends it as
 * before. agent_relink hands the agent a new link (descriptors a bridge passed, agent_sock.c;
 * conn_fd: the bridge's socket, told "bye" when this link ends): the old one is let go, the
 * outbox waits for a resume, and relinked is called (it sends the hello). */
void agent_on_link(struct agent *ag, int (*lost)(struct agent *ag, void *ctx),
                   void (*relinked)(struct agent *ag, void *ctx), void *ctx);
void agent_relink(struct agent *ag, int in_fd, int out_fd, int conn_fd);
int agent_linked(const struct agent *ag);

/* Helpers for handlers: a member that must be a number in [lo, hi] (def when absent; -1 after
 * sending an error when present but wrong), and a string member (NULL when absent or not one). */
int agent_req_int(struct agent *ag, const cJSON *req, const cJSON *id, const char *name,
                  long lo, long hi, long def, long *out);
const char *agent_req_str(const cJSON *req, const char *name);

#endif
