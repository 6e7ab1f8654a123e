/* ddptop-agent's loop: hello, request lines from the controller's link dispatched by "op",
 * messages queued in the outbox (agent_outbox.h) and written when the link takes them, and the
 * handlers' watched fds, all in one util/evloop.h loop. The handlers' struct agent_watch (an fd,
 * its events and a deadline they change in place) is handed to the event loop before each pass;
 * the deadlines, called again on every pass until moved, stay here. The link is stdin/stdout at first; a bridge may hand
 * over another (agent_sock.c), and the ranks side decides whether a lost link ends the agent.
 * See agent.h. */
#include "agent.h"
#include "agent_outbox.h"
#include "agent_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "wire/json_num.h"
#include "wire/protocol.h"
#include "util/evloop.h"
#include "util/util.h"
#include "util/version.h"

/* How long a quitting agent keeps trying to hand its last answers to a slow controller. */
#define AGENT_FLUSH_MS 2000
#define AGENT_READ_CHUNK 65536

struct agent {
    int in_fd, out_fd;      /* the link; -1 while there is none */
    int conn_fd;            /* the bridge's socket of a handed-over link (told "bye" at its end) */
    int link_orig;          /* the link is our own stdin/stdout: /dev/null takes their numbers */
    const struct agent_op *ops;
    struct strbuf in;       /* bytes of a request line not yet ended by '\n' */
    size_t in_scanned;      /* prefix of in known to hold no '\n' */
    int in_discarding;      /* inside an over-long line: drop bytes up to the next '\n' */
    struct outbox *ob;      /* messages not yet written, and the durable ones not yet acknowledged */
    int out_broken;         /* the link's output is gone */
    int quitting, status;
    int64_t quit_deadline;
    void (*on_quit)(struct agent *ag, void *ctx);
    void *on_quit_ctx;
    int (*on_link_lost)(struct agent *ag, void *ctx);
    void (*on_relink)(struct agent *ag, void *ctx);
    void *link_ctx;
    int in_flags, out_flags;/* the original fds' flags, put back on the way out */
    int64_t last_input_ms;  /* mono_ms() of the last bytes read from the controller */
    struct agent_watch *watches;
    int nwatches;
    struct evloop *el;
    struct evloop_watch *out_w, *in_w;   /* the link's */
};

static void link_close(struct agent *ag);

struct agent *agent_new(int in_fd, int out_fd, const struct agent_op *ops)
{
    struct agent *ag = xcalloc(1, sizeof *ag);
    ag->in_fd = in_fd;
    ag->out_fd = out_fd;
    ag->conn_fd = -1;
    ag->link_orig = 1;
    ag->ops = ops;
    ag->last_input_ms = mono_ms();
    strbuf_init(&ag->in);
    ag->ob = outbox_new();
    ag->el = evloop_new();
    return ag;
}

struct evloop *agent_evloop(struct agent *ag)
{
    return ag->el;
}

static void watch_release(struct agent_watch *w)
{
    evloop_unwatch(w->ag->el, w->ew);
    w->ew = NULL;
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    if (w->free_ctx && w->ctx) w->free_ctx(w->ctx);
    w->ctx = NULL;
    w->dead = 1;
}

void agent_free(struct agent *ag)
{
    if (!ag) return;
    while (ag->watches) {
        struct agent_watch *w = ag->watches;
        ag->watches = w->next;
        if (!w->dead) watch_release(w);
        free(w);
    }
    link_close(ag);
    strbuf_done(&ag->in);
    outbox_free(ag->ob);
    evloop_free(ag->el);
    free(ag);
}

struct agent_watch *agent_watch_add(struct agent *ag, int fd, short events, agent_watch_fn fn,
                                    void *ctx, void (*free_ctx)(void *ctx))
{
    struct agent_watch *w = xcalloc(1, sizeof *w);
    w->fd = fd;
    w->events = events;
    w->fn = fn;
    w->ctx = ctx;
    w->free_ctx = free_ctx;
    w->ag = ag;
    w->next = ag->watches;
    ag->watches = w;
    ag->nwatches++;
    return w;
}

void agent_watch_del(struct agent *ag, struct agent_watch *w)
{
    (void)ag;
    if (!w->dead) watch_release(w);
}

struct agent_watch *agent_watch_find(struct agent *ag, agent_watch_fn wfn,
                                     int (*match)(const struct agent_watch *w, const void *arg),
                                     const void *arg)
{
    for (struct agent_watch *w = ag->watches; w; w = w->next)
        if (!w->dead && w->fn == wfn && match(w, arg)) return w;
    return NULL;
}

static void watches_sweep(struct agent *ag)
{
    struct agent_watch **pp = &ag->watches;
    while (*pp) {
        struct agent_watch *w = *pp;
        if (w->dead) {
            *pp = w->next;
            free(w);
            ag->nwatches--;
        } else {
            pp = &w->next;
        }
    }
}

/* ---- output ---- */

static void out_flush(struct agent *ag)
{
    if (ag->out_broken || ag->out_fd < 0) return;
    if (outbox_write(ag->ob, ag->out_fd) < 0) {
        /* The controller or its connection is gone (EPIPE). */
        ag->out_broken = 1;
    }
}

size_t agent_output_pending(const struct agent *ag)
{
    return ag->out_fd < 0 ? 0 : outbox_unsent(ag->ob);
}

struct outbox *agent_outbox(struct agent *ag)
{
    return ag->ob;
}

int agent_linked(const struct agent *ag)
{
    return ag->in_fd >= 0;
}

void agent_send(struct agent *ag, cJSON *msg)
{
    char *line = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!line) util_fatal("out of memory printing an agent message");
    /* Without a link nobody will read an answer or a status: only durable messages wait. */
    if (ag->in_fd >= 0 && !ag->out_broken) {
        outbox_add(ag->ob, line, strlen(line));
        out_flush(ag); /* usually the whole line goes now; the rest waits for POLLOUT */
    }
    free(line);
}

void agent_send_urgent(struct agent *ag, cJSON *msg)
{
    char *line = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!line) util_fatal("out of memory printing an agent message");
    if (ag->in_fd >= 0 && !ag->out_broken) {
        outbox_add_urgent(ag->ob, line, strlen(line));
        out_flush(ag);
    }
    free(line);
}

/* Rank output comes in bursts of many lines from one read: they are written together, once the
 * handlers of this poll round are done (agent_run), or as soon as 64 KiB wait: one write for
 * hundreds of lines instead of one each. A GPU sample is plain; a rank's output is durable. */
void agent_send_line(struct agent *ag, const char *json, size_t len)
{
    if (ag->in_fd < 0 || ag->out_broken) return;
    outbox_add(ag->ob, json, len);
    if (agent_output_pending(ag) >= AGENT_READ_CHUNK) out_flush(ag);
}

void agent_send_durable(struct agent *ag, int rank, uint64_t seq, const char *json, size_t len)
{
    outbox_add_durable(ag->ob, rank, seq, json, len);
    if (agent_output_pending(ag) >= AGENT_READ_CHUNK) out_flush(ag);
}

cJSON *agent_reply_new(const char *ev, const cJSON *id)
{
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "ev", ev);
    if (id) cJSON_AddItemToObject(msg, "id", cJSON_Duplicate(id, 1));
    return msg;
}

void agent_send_error(struct agent *ag, const cJSON *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    cJSON *msg = agent_reply_new(WIRE_EV_ERROR, id);
    cJSON_AddStringToObject(msg, "error", text);
    free(text);
    agent_send(ag, msg);
}

void agent_quit(struct agent *ag, int status)
{
    if (ag->quitting) return;
    ag->quitting = 1;
    ag->status = status;
    ag->quit_deadline = mono_ms() + AGENT_FLUSH_MS;
    if (ag->on_quit) ag->on_quit(ag, ag->on_quit_ctx);
}

void agent_on_quit(struct agent *ag, void (*fn)(struct agent *ag, void *ctx), void *ctx)
{
    ag->on_quit = fn;
    ag->on_quit_ctx = ctx;
}

int64_t agent_last_input_ms(const struct agent *ag)
{
    return ag->last_input_ms;
}

void agent_on_link(struct agent *ag, int (*lost)(struct agent *ag, void *ctx),
                   void (*relinked)(struct agent *ag, void *ctx), void *ctx)
{
    ag->on_link_lost = lost;
    ag->on_relink = relinked;
    ag->link_ctx = ctx;
}

/* Lets go of the link's descriptors. Our own stdin/stdout keep their numbers (on /dev/null):
 * the relay of a Slurm step, or anything that writes to fd 1 later, must not meet a reused
 * number. A bridge is told "bye" so that it exits and its SSH channel or srun task ends. */
static void link_close(struct agent *ag)
{
    if (ag->in_fd < 0) return;
    if (ag->link_orig) {
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (ag->in_flags >= 0) fcntl(ag->in_fd, F_SETFL, ag->in_flags);
        if (ag->out_flags >= 0) fcntl(ag->out_fd, F_SETFL, ag->out_flags);
        if (nul >= 0) {
            dup2(nul, ag->in_fd);
            dup2(nul, ag->out_fd);
            close(nul);
        }
    } else {
        close(ag->in_fd);
        if (ag->out_fd != ag->in_fd) close(ag->out_fd);
    }
    if (ag->conn_fd >= 0) {
        ssize_t n = write(ag->conn_fd, "bye\n", 4);
        (void)n;
        close(ag->conn_fd);
        ag->conn_fd = -1;
    }
    ag->in_fd = ag->out_fd = -1;
    ag->link_orig = 0;
    strbuf_reset(&ag->in);
    ag->in_scanned = 0;
    ag->in_discarding = 0;
    ag->out_broken = 0;
}

/* The link ended (end of input, or its output broke): the ranks side decides whether the agent
 * waits for a controller to come back (its grace) or leaves as before. */
static void link_drop(struct agent *ag)
{
    link_close(ag);
    outbox_unlink(ag->ob);
    if (ag->quitting) return;
    if (!ag->on_link_lost || !ag->on_link_lost(ag, ag->link_ctx)) agent_quit(ag, 0);
}

void agent_relink(struct agent *ag, int in_fd, int out_fd, int conn_fd)
{
    link_close(ag);
    ag->in_fd = in_fd;
    ag->out_fd = out_fd;
    ag->conn_fd = conn_fd;
    fd_set_nonblock(in_fd);
    fd_set_nonblock(out_fd);
    ag->last_input_ms = mono_ms();
    outbox_relink(ag->ob);
    if (ag->on_relink) ag->on_relink(ag, ag->link_ctx);
    out_flush(ag);
}

int agent_req_int(struct agent *ag, const cJSON *req, const cJSON *id, const char *name,
                  long lo, long hi, long def, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
    if (!v) {
        *out = def;
        return 0;
    }
    long long x;
    /* json_int_in checks the range before it converts: (long)1e300 is undefined */
    if (!json_int_in(v, lo, hi, &x)) {
        agent_send_error(ag, id, "\"%s\" must be an integer from %ld to %ld", name, lo, hi);
        return -1;
    }
    *out = (long)x;
    return 0;
}

const char *agent_req_str(const cJSON *req, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- input ---- */

static void dispatch_line(struct agent *ag, const char *line, size_t len)
{
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    if (!len) return; /* blank lines are keep-alives, not errors */
    cJSON *req = cJSON_ParseWithLength(line, len);
    if (!req) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at && at >= line && at <= line + len ? (long)(at - line) : -1;
        agent_send_error(ag, NULL, "malformed JSON request (near byte %ld of %zu)", pos, len);
        return;
    }
    if (!cJSON_IsObject(req)) {
        agent_send_error(ag, NULL, "request is not a JSON object");
        goto out;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
    if (id && !cJSON_IsNumber(id)) {
        agent_send_error(ag, NULL, "request \"id\" must be a number");
        goto out;
    }
    const char *op = agent_req_str(req, "op");
    if (!op) {
        agent_send_error(ag, id, "request has no \"op\" string");
        goto out;
    }
    for (const struct agent_op *o = ag->ops; o->name; o++) {
        if (strcmp(o->name, op) == 0) {
            o->fn(ag, req, id);
            goto out;
        }
    }
    agent_send_error(ag, id, "unknown op '%.64s'", op);
out:
    cJSON_Delete(req);
}

static void too_long(struct agent *ag)
{
    agent_send_error(ag, NULL, "request line longer than %d bytes; discarded", PROTOCOL_MAX_LINE);
    ag->in_discarding = 1;
    strbuf_reset(&ag->in);
    ag->in_scanned = 0;
}

static void in_take(struct agent *ag, const char *data, size_t n)
{
    while (n && ag->in_discarding) {
        const char *nl = memchr(data, '\n', n);
        if (!nl) return;
        n -= (size_t)(nl + 1 - data);
        data = nl + 1;
        ag->in_discarding = 0;
    }
    strbuf_add(&ag->in, data, n);
    size_t start = 0;
    while (!ag->quitting) {
        char *base = ag->in.buf + start;
        size_t avail = ag->in.len - start;
        size_t skip = ag->in_scanned > start ? ag->in_scanned - start : 0;
        char *nl = avail > skip ? memchr(base + skip, '\n', avail - skip) : NULL;
        if (!nl) {
            ag->in_scanned = ag->in.len;
            break;
        }
        size_t len = (size_t)(nl - base);
        if (len > PROTOCOL_MAX_LINE)
            agent_send_error(ag, NULL, "request line longer than %d bytes; discarded",
                             PROTOCOL_MAX_LINE);
        else
            dispatch_line(ag, base, len);
        start += len + 1;
    }
    if (start) {
        strbuf_consume(&ag->in, start < ag->in.len ? start : ag->in.len);
        ag->in_scanned = ag->in_scanned > start ? ag->in_scanned - start : 0;
    }
    if (ag->in.len > PROTOCOL_MAX_LINE) too_long(ag);
}

static void in_read(struct agent *ag)
{
    char buf[AGENT_READ_CHUNK];
    ssize_t n = read(ag->in_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
        /* EOF: the controller or its SSH connection is gone. A last unterminated line counts. */
        if (ag->in.len && !ag->in_discarding) in_take(ag, "\n", 1);
        if (ag->in_fd >= 0) link_drop(ag);
        return;
    }
    ag->last_input_ms = mono_ms();
    in_take(ag, buf, (size_t)n);
}

/* ---- the loop ---- */

cJSON *agent_hello_new(void)
{
    struct utsname u;
    char host[256] = "";
    cJSON *msg = agent_reply_new(WIRE_EV_HELLO, NULL);
    cJSON_AddNumberToObject(msg, "protocol", PROTOCOL_VERSION);
    cJSON_AddStringToObject(msg, "version", DDPTOP_VERSION);
    if (uname(&u) == 0) cJSON_AddStringToObject(msg, "arch", u.machine);
    else cJSON_AddNullToObject(msg, "arch");
    /* the C library it runs on: ddptop says which agent a node got and why (docs/check.md) */
    cJSON_AddStringToObject(msg, "glibc", gnu_get_libc_version());
    if (gethostname(host, sizeof host - 1) == 0 && host[0]) cJSON_AddStringToObject(msg, "hostname", host);
    else cJSON_AddNullToObject(msg, "hostname");
    cJSON_AddNumberToObject(msg, "pid", (double)getpid());
    /* which machine this is, whatever its name or address: the kernel's boot id (nodes of a
     * hostfile that share one, simulated nodes, are measured once by check --bench) */
    char boot[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        close(fd);
        boot[n > 0 ? n : 0] = '\0';
        boot[strcspn(boot, "\n")] = '\0';
    }
    if (boot[0]) cJSON_AddStringToObject(msg, "boot_id", boot);
    else cJSON_AddNullToObject(msg, "boot_id");
    if (agent_relay_note()) cJSON_AddStringToObject(msg, "link_note", agent_relay_note());
    return msg;
}

static int next_timeout(struct agent *ag, int64_t now)
{
    int64_t soonest = -1;
    if (ag->quitting) soonest = ag->quit_deadline;
    for (struct agent_watch *w = ag->watches; w; w = w->next)
        if (!w->dead && w->deadline_ms && (soonest < 0 || w->deadline_ms < soonest))
            soonest = w->deadline_ms;
    if (soonest < 0) return -1;
    return soonest <= now ? 0 : (int)(soonest - now > 60000 ? 60000 : soonest - now);
}

static void out_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    (void)el;
    (void)w;
    (void)revents;
    out_flush(ctx);
}

static void in_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct agent *ag = ctx;
    (void)el;
    (void)revents;
    if (ag->in_fd >= 0 && ag->in_fd == evloop_watch_fd(w)) in_read(ag);   /* the link polled */
}

static void watch_ready(struct evloop *el, struct evloop_watch *ew, short revents, void *ctx)
{
    struct agent_watch *w = ctx;
    (void)el;
    (void)ew;
    if (!w->dead) w->fn(w->ag, w, revents);
}

/* What the next poll waits for: the link's output while some is queued, its input unless the
 * agent is quitting, and (not while quitting) each live watch's fd for its events. The event
 * loop's own watches follow the handlers' structs: a changed fd makes a new one, fd -1 pauses. */
static void watches_sync(struct agent *ag)
{
    ag->out_w = evloop_watch_update(ag->el, ag->out_w, agent_output_pending(ag) ? ag->out_fd : -1, POLLOUT,
                                    out_ready, ag);
    ag->in_w = evloop_watch_update(ag->el, ag->in_w, !ag->quitting ? ag->in_fd : -1, POLLIN, in_ready, ag);
    for (struct agent_watch *w = ag->watches; w; w = w->next)
        if (!w->dead) w->ew = evloop_watch_update(ag->el, w->ew, ag->quitting ? -1 : w->fd, w->events, watch_ready, w);
}

int agent_loop(struct agent *ag)
{
    /* O_NONBLOCK belongs to the open file, which a terminal shares with the shell that started
     * us by hand: put the flags back on the way out. */
    ag->in_flags = fcntl(ag->in_fd, F_GETFL);
    ag->out_flags = fcntl(ag->out_fd, F_GETFL);
    fd_set_nonblock(ag->in_fd);
    fd_set_nonblock(ag->out_fd);
    agent_send(ag, agent_hello_new());
    for (;;) {
        if (ag->out_broken && ag->in_fd >= 0) link_drop(ag);
        if (ag->quitting && (agent_output_pending(ag) == 0 || ag->in_fd < 0 ||
                             mono_ms() >= ag->quit_deadline))
            break;
        watches_sync(ag);
        if (evloop_run_once(ag->el, next_timeout(ag, mono_ms())) < 0) util_fatal("poll: %s", strerror(errno));
        int64_t now = mono_ms();
        for (struct agent_watch *w = ag->watches; w; w = w->next)
            if (!w->dead && w->deadline_ms && w->deadline_ms <= now) w->fn(ag, w, 0);
        watches_sweep(ag);
        if (agent_output_pending(ag)) out_flush(ag);   /* what this round queued */
    }
    if (ag->link_orig && ag->in_fd >= 0) {
        if (ag->in_flags >= 0) fcntl(ag->in_fd, F_SETFL, ag->in_flags);
        if (ag->out_flags >= 0) fcntl(ag->out_fd, F_SETFL, ag->out_flags);
    }
    return ag->status;
}
