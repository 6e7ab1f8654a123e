/* The ranks side of ddptop-agent, its core: the ranks' lifecycle (a small state machine freed only
 * after both pipes reached EOF, the exit status arrived and the keeper was reaped), their output
 * as "out" messages with back-pressure, the once-a-second "status" heartbeat, "exit" messages,
 * what happens to output while the controller is slow or away (back-pressure, spool, drops),
 * and the teardown that leaves no rank behind. See agent_ranks.h; the request handlers are in
 * agent_ranks_ops.c, the messages about one rank in agent_ranks_msg.c, the link's grace and
 * resume in agent_ranks_link.c. */
#include "agent_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "agent_outbox.h"
#include "agent_proc.h"
#include "agent_ranks_int.h"
#include "agent_sock.h"
#include "util/evloop.h"
#include "util/util.h"
#include "wire/base64.h"
#include "wire/protocol.h"

#define STATUS_EVERY_MS 1000
/* While the controller answers (it sent something within RESPONSIVE_MS), rank output is read
 * only while fewer than OUT_HIGH bytes wait for the link and the spool holds less than its
 * bound, and again once below OUT_LOW: a rank that outpaces the controller blocks on its pipe;
 * nothing is lost and the agent's memory stays bounded. While the controller is silent or gone
 * the ranks must not wait on it: output is read into the spool up to its bound, and past it
 * read and dropped, counted, and said in the rank's log once there is room again. */
#define OUT_HIGH (4u << 20)
#define OUT_LOW (1u << 20)
#define RESPONSIVE_MS 3000
#define PAUSE_CHECK_MS 20
/* A read that brought less than STREAM_REST_BELOW bytes lets that stream rest STREAM_REST_MS
 * before the next one: a rank printing steadily is then read in a few large pieces instead of
 * its every 4 KiB stdio write (a poll, a read and a write each, here and in sshd), and one
 * that prints now and then is read at once, as the rest only follows a read. */
#define STREAM_REST_BELOW (32 * 1024)
#define STREAM_REST_MS 2
/* After a rank's exit status, how long anything it left holding its pipes may keep them open
 * before the agent stops waiting for their end of file. */
#define EOF_WAIT_MS 2000
#define REAP_RETRY_MS 100
/* Teardown (stdin EOF, exit, watchdog, signals): SIGTERM, SIGKILL after the grace, and give up
 * waiting for keepers after the limit: all within 5 s of the trigger. */
#define TEARDOWN_GRACE_MS 1000
#define TEARDOWN_LIMIT_MS 2500

static struct {
    struct agent *ag;
    struct agent_rank *list; /* every rank the agent holds, newest first */
    struct agent_watch *timer;
    int heartbeat;
    int64_t next_status_ms;
    int slurm_step;         /* a task of a Slurm step (--relay): Slurm signals the ranks itself */
    int slurm_term;         /* Slurm sent the step SIGTERM: the ranks have it, Slurm's KillWait rules */
    enum out_mode mode;     /* reading rank output, paused (back-pressure), or dropping it */
    cJSON *stops;           /* ids of stop requests waiting for every exit */
    int64_t kill_at;        /* SIGKILL every rank still running then; 0 none */
    int quitting;
    struct strbuf line;     /* an out message being formatted */
    int64_t piece_ns;       /* mono_ns of the read whose lines are being sent */
} ranks;

/* ---- output ---- */

/* The rank's last step, from each whole line of the block that may be the runtime's step line
 * (one scan turns away a block that holds none). */
static void note_steps(struct agent_rank *r, const char *data, size_t len)
{
    const char *end = data + len;
    if (!util_memmem_rare(data, len, "\"step\"", 6)) return;
    while (data < end) {
        const char *nl = memchr(data, '\n', (size_t)(end - data));
        size_t n = nl ? (size_t)(nl - data) : (size_t)(end - data);
        ranks_note_step(r, data, n);
        data += n + 1;
    }
}

/* text: as a JSON string, when data is valid UTF-8 without NUL; returns 0 (nothing sent) when
 * it is not. Otherwise as base64. */
static int send_out(struct rank_stream *s, const char *data, size_t len, int flags, int text)
{
    struct strbuf *sb = &ranks.line;
    uint64_t seq = outbox_next_seq(agent_outbox(ranks.ag), s->r->rank);
    strbuf_reset(sb);
    strbuf_addf(sb, "{\"ev\":\"out\",\"rank\":%d,\"q\":%llu,\"a\":%d,\"s\":\"%c\",", s->r->rank,
                (unsigned long long)seq, s->r->attempt, s->name);
    if (text) {
        strbuf_adds(sb, "\"t\":");
        if (!stream_json_text(sb, data, len)) return 0;
    } else {
        strbuf_adds(sb, "\"b64\":\"");
        base64_encode(sb, data, len);
        strbuf_adds(sb, "\"");
    }
    strbuf_addf(sb, ",\"f\":\"%s%s\",\"mono_ns\":%lld", flags & STREAM_PARTIAL ? "p" : "",
                flags & STREAM_SPLIT ? "s" : "", (long long)ranks.piece_ns);
    if (s->r->dropped_lines || s->r->dropped_bytes) {
        strbuf_addf(sb, ",\"dropped\":{\"lines\":%llu,\"bytes\":%llu}",
                    (unsigned long long)s->r->dropped_lines, (unsigned long long)s->r->dropped_bytes);
        s->r->dropped_lines = s->r->dropped_bytes = 0;
    }
    strbuf_adds(sb, "}");
    agent_send_durable(ranks.ag, s->r->rank, seq, sb->buf, sb->len);
    return 1;
}

/* One out message for one block (agent_stream.h): whole lines with their newlines, or one
 * piece of a line, as JSON text when it is valid UTF-8 without NUL. A block that is not goes
 * line by line, so that only a line that is not valid text travels as base64. */
static void emit_piece(void *ctx, const char *data, size_t len, int flags)
{
    struct rank_stream *s = ctx;
    if (send_out(s, data, len, flags, 1)) {
        /* sent as text */
    } else if (flags) {
        send_out(s, data, len, flags, 0);
    } else {
        const char *end = data + len, *text_start = data, *p = data;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *next = nl ? nl + 1 : end;
            if (!stream_utf8_valid(p, (size_t)(next - p))) {
                if (p > text_start) send_out(s, text_start, (size_t)(p - text_start), 0, 1);
                send_out(s, p, (size_t)(next - p), 0, 0);
                text_start = next;
            }
            p = next;
        }
        if (end > text_start) send_out(s, text_start, (size_t)(end - text_start), 0, 1);
    }
    if (!flags) note_steps(s->r, data, len);
}

/* The fd a stream's watch polls: none while output is paused or the stream rests. */
static void stream_watch_fd(struct rank_stream *s)
{
    if (s->w) s->w->fd = ranks.mode == OUT_PAUSE || s->rest_until ? -1 : s->fd;
}

/* What to do with rank output now (see OUT_HIGH). */
static enum out_mode want_mode(void)
{
    struct outbox *ob = agent_outbox(ranks.ag);
    size_t held = outbox_bytes(ob), pend = agent_output_pending(ranks.ag);
    size_t hi = ranks_spool_max(), lo = hi - hi / 8;
    int responsive = agent_linked(ranks.ag) && mono_ms() - agent_last_input_ms(ranks.ag) < RESPONSIVE_MS;
    if (responsive) {
        if (ranks.mode == OUT_PAUSE) return pend < OUT_LOW && held < lo ? OUT_READ : OUT_PAUSE;
        return pend > OUT_HIGH || held > hi ? OUT_PAUSE : OUT_READ;
    }
    if (ranks.mode == OUT_DROP) return held < lo ? OUT_READ : OUT_DROP;
    return held > hi ? OUT_DROP : OUT_READ;
}

/* A line that says what was dropped, on each stream that dropped some, once there is room. */
static void say_dropped(struct agent_rank *r)
{
    if (!r->dropped_lines && !r->dropped_bytes) return;
    char *line = xasprintf("ddptop-agent: %llu line%s (%llu bytes) of this rank's output were dropped here "
                           "while the controller was away: the agent's spool (--agent-spool) was full\n",
                           (unsigned long long)r->dropped_lines, r->dropped_lines == 1 ? "" : "s",
                           (unsigned long long)r->dropped_bytes);
    ranks.piece_ns = mono_ns();
    send_out(&r->st[1], line, strlen(line), 0, 1); /* carries the counts and clears them */
    free(line);
}

static void apply_mode(void)
{
    enum out_mode m = want_mode();
    if (m == ranks.mode) return;
    if (m == OUT_DROP) {
        /* what a stream holds of a line goes now, so the dropped bytes cut no line in two */
        ranks.piece_ns = mono_ns();
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            for (int i = 0; i < 2; i++)
                if (r->st[i].w) stream_flush(&r->st[i].buf, emit_piece, &r->st[i]);
    }
    int was_drop = ranks.mode == OUT_DROP;
    ranks.mode = m;
    if (was_drop)
        for (struct agent_rank *r = ranks.list; r; r = r->next) say_dropped(r);
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        for (int i = 0; i < 2; i++) stream_watch_fd(&r->st[i]);
}

/* Reads and counts what a stream brings while output is dropped. */
static void stream_drop(struct rank_stream *s, const char *buf, size_t n)
{
    s->r->dropped_bytes += n;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))) != NULL; p++) s->r->dropped_lines++;
}

static void stream_close(struct rank_stream *s)
{
    if (!s->w) return;
    ranks.piece_ns = mono_ns();
    stream_flush(&s->buf, emit_piece, s);
    s->w->fd = s->fd; /* so that deleting the watch closes it, paused or not */
    agent_watch_del(ranks.ag, s->w);
    s->w = NULL;
    s->fd = -1;
}

static void rank_try_finish(struct agent_rank *r);

static void stream_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct rank_stream *s = w->ctx;
    char buf[65536];
    if (!revents) return;
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
        struct agent_rank *r = s->r;
        stream_close(s);
        rank_try_finish(r);
    } else {
        ranks.piece_ns = mono_ns();   /* one clock reading for every line of this read */
        int64_t now = ranks.piece_ns / 1000000;
        s->r->last_out_ms = now;
        if (ranks.mode == OUT_DROP) stream_drop(s, buf, (size_t)n);
        else stream_feed(&s->buf, buf, (size_t)n, now, emit_piece, s);
        if ((size_t)n < STREAM_REST_BELOW) {
            s->rest_until = now + STREAM_REST_MS;
            stream_watch_fd(s);
        }
        if (ranks.mode == OUT_READ &&
            (agent_output_pending(ag) > OUT_HIGH || outbox_bytes(agent_outbox(ag)) > ranks_spool_max()))
            apply_mode();
    }
    ranks_schedule();
}

/* ---- exits ---- */

static void rank_free(struct agent_rank *r)
{
    for (struct agent_rank **pp = &ranks.list; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    for (int i = 0; i < 2; i++) {
        if (r->st[i].w) {
            r->st[i].w->fd = r->st[i].fd;
            agent_watch_del(ranks.ag, r->st[i].w);
        }
        stream_done(&r->st[i].buf);
    }
    if (r->status_w) agent_watch_del(ranks.ag, r->status_w);
    if (r->error_file && r->error_file_ours) unlink(r->error_file);
    free(r->error_file);
    free(r->start_error);
    free(r);
}

static void check_stopped(void)
{
    if (!ranks.stops || ranks_unfinished()) return;
    cJSON *id;
    cJSON_ArrayForEach(id, ranks.stops)
        agent_send(ranks.ag, agent_reply_new(WIRE_EV_STOPPED, cJSON_IsNull(id) ? NULL : id));
    cJSON_Delete(ranks.stops);
    ranks.stops = NULL;
    ranks.kill_at = 0;
}

static void rank_reap_keeper(struct agent_rank *r)
{
    if (r->keeper_reaped) return;
    pid_t w = waitpid(r->k.keeper_pid, NULL, WNOHANG);
    if (w == r->k.keeper_pid || (w < 0 && errno == ECHILD)) r->keeper_reaped = 1;
}

/* Sends the exit message once both pipes ended and the status is known; frees the rank once its
 * keeper is reaped too. */
static void rank_try_finish(struct agent_rank *r)
{
    if (r->spawn) return; /* its spawn is not answered yet: no exit before "spawned" */
    if (!r->exit_sent && r->have_status && !r->st[0].w && !r->st[1].w) {
        say_dropped(r);
        char *error_text = ranks_error_file_text(r); /* may say first why the file was ignored */
        struct outbox *ob = agent_outbox(ranks.ag);
        uint64_t seq = outbox_next_seq(ob, r->rank);
        cJSON *msg = ranks_exit_msg(r, error_text);
        free(error_text);
        cJSON_AddNumberToObject(msg, "q", (double)seq);
        char *line = cJSON_PrintUnformatted(msg);
        cJSON_Delete(msg);
        if (!line) util_fatal("out of memory printing an exit message");
        agent_send_durable(ranks.ag, r->rank, seq, line, strlen(line));
        free(line);
        r->exit_sent = 1;
    }
    if (r->exit_sent && r->keeper_reaped) {
        rank_free(r);
        check_stopped();
    } else if (r->exit_sent) {
        check_stopped();
    }
}

void rank_announce(struct agent_rank *r)
{
    rank_try_finish(r);
}

/* Whether the rank's end was ours: it died after our first stopping signal (the keeper saw it
 * dead no earlier than we sent it) and not by a signal we never sent (a SIGSEGV of its own
 * that merely raced our stop). */
static int ended_by_us(const struct agent_rank *r)
{
    if (!r->sig_ns) return 0;
    if (r->dead_ns && r->dead_ns < r->sig_ns) return 0;
    if (!r->keeper_died && WIFSIGNALED(r->wait_status)) {
        int s = WTERMSIG(r->wait_status);
        if (s < 1 || s > 63 || !(r->sig_mask & (1ull << s))) return 0;
    }
    return 1;
}

static void rank_take_msg(struct agent_rank *r, const struct keeper_msg *m)
{
    if (r->starting) {
        ranks_spawn_first_msg(r, m);
        return;
    }
    if (m->kind != KEEPER_EXITED || r->have_status) return;
    r->have_status = 1;
    r->wait_status = m->a;
    r->exit_cpu_s = (double)m->b / 1e6;
    r->dead_ns = m->c;
    r->exit_ns = mono_ns();
    r->by_us = ended_by_us(r);
}

/* Reads what the keeper said; at its end of file the keeper is gone. */
static void rank_read_status(struct agent_rank *r)
{
    struct keeper_msg m;
    int got;
    while (r->status_w && (got = keeper_read_msg(r->status_w->fd, &m)) != 0) {
        if (got > 0) {
            rank_take_msg(r, &m);
            continue;
        }
        agent_watch_del(ranks.ag, r->status_w);
        r->status_w = NULL;
        if (r->starting) {
            rank_start_failed(r, "its keeper process died before the rank started");
        } else if (!r->have_status) {
            r->have_status = 1;
            r->keeper_died = 1;
            r->exit_ns = mono_ns();
            r->by_us = r->sig_ns != 0;
        }
        rank_reap_keeper(r);
    }
}

static void status_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct agent_rank *r = w->ctx;
    struct rank_spawn *sp = r->spawn;
    (void)ag;
    if (!revents) return;
    rank_read_status(r);
    /* Answering the spawn announces its ranks, r among them (it may be freed then). */
    if (sp && !r->starting) ranks_spawn_resolved(sp);
    else if (!sp) rank_try_finish(r);
    ranks_schedule();
}

/* ---- ranks ---- */

struct agent_rank *ranks_all(void)
{
    return ranks.list;
}

struct agent_rank *rank_find(int rank)
{
    /* A rank whose exit went out is gone for the controller, though its keeper may not be
     * reaped yet: a restart's spawn right after "stopped" must not meet it. */
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (r->rank == rank && !r->exit_sent) return r;
    return NULL;
}

struct agent_rank *rank_add_starting(int rank, int attempt, const struct keeper *k, char *error_file,
                                       int error_file_ours, int64_t spawn_wall_ns,
                                       struct rank_spawn *sp, int64_t start_deadline_ms)
{
    struct agent_rank *r = xcalloc(1, sizeof *r);
    r->rank = rank;
    r->attempt = attempt;
    r->k = *k;
    r->error_file = error_file;
    r->error_file_ours = error_file_ours;
    r->spawn_wall_ns = spawn_wall_ns;
    r->starting = 1;
    r->spawn = sp;
    r->start_deadline_ms = start_deadline_ms;
    int fds[2] = { k->out_fd, k->err_fd };
    for (int i = 0; i < 2; i++) {
        struct rank_stream *s = &r->st[i];
        s->r = r;
        s->name = i ? 'e' : 'o';
        s->fd = fds[i];
        stream_init(&s->buf);
        s->w = agent_watch_add(ranks.ag, ranks.mode == OUT_PAUSE ? -1 : s->fd, POLLIN, stream_ready, s, NULL);
    }
    r->status_w = agent_watch_add(ranks.ag, k->status_fd, POLLIN, status_ready, r, NULL);
    r->next = ranks.list;
    ranks.list = r;
    return r;
}

void rank_say(struct agent_rank *r, const char *text)
{
    char *line = xasprintf("ddptop-agent: %s\n", text); /* a whole line: newline kept */
    ranks.piece_ns = mono_ns();
    emit_piece(&r->st[1], line, strlen(line), 0); /* a path need not be UTF-8 */
    r->last_out_ms = mono_ms();
    free(line);
}

void rank_start_failed(struct agent_rank *r, const char *why)
{
    char *line = xasprintf("ddptop-agent: %s\n", why); /* a whole line: newline kept */
    r->starting = 0;
    free(r->start_error);
    r->start_error = xstrdup(why);
    r->have_status = 1;
    r->wait_status = 127 << 8; /* exited 127, as a shell reports a command it cannot run */
    r->exit_ns = mono_ns();
    r->by_us = 0;
    /* On the rank's stderr, where the person reading its log looks for why it ended. */
    ranks.piece_ns = r->exit_ns;
    emit_piece(&r->st[1], line, strlen(line), 0);
    r->last_out_ms = mono_ms();
    free(line);
}

int rank_signal(struct agent_rank *r, int sig, int by_us)
{
    if (r->have_status || r->keeper_reaped) return -1;
    int stopping = by_us && sig != SIGCONT;
    if (r->starting) {
        /* Not started yet: it is killed as soon as its keeper reports the exec. */
        if (stopping) {
            r->doomed = 1;
            r->sig_mask |= 1ull << SIGKILL;
            if (!r->sig_ns) r->sig_ns = mono_ns();
        }
        return 0;
    }
    if (stopping && sig > 0 && sig < 64) {
        /* A rank already dead (a zombie its keeper has not reaped yet) did not die of this. */
        struct proc_stat ps;
        int dead = proc_stat_read(r->k.rank_pid, &ps) == 0 && (ps.state == 'Z' || ps.state == 'X');
        if (!dead) {
            r->sig_mask |= 1ull << sig;
            if (!r->sig_ns) r->sig_ns = mono_ns();
        }
    }
    /* A rank that left its group (setsid of its own) is still reached by its pid. */
    if (kill(-r->k.rank_pid, sig) < 0 && errno == ESRCH) return kill(r->k.rank_pid, sig);
    return 0;
}

int ranks_kill_all(int sig)
{
    int n = 0;
    ranks_spawn_doom();
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        if (r->have_status) continue;
        /* after Slurm's SIGTERM a second one could cut a rank's checkpoint short */
        if (sig == SIGTERM && ranks.slurm_term) {
            n++;
            continue;
        }
        if (sig == SIGTERM) rank_signal(r, SIGCONT, 1); /* a stopped rank cannot act on TERM */
        rank_signal(r, sig, 1);
        n++;
    }
    return n;
}

int ranks_unfinished(void)
{
    /* a rank whose exit went out keeps its slot until its keeper is reaped: "stopped" waits
     * for that too, or a restart's spawn right after it finds the rank "still running" */
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (!r->exit_sent || !r->keeper_reaped) return 1;
    return 0;
}

static int ranks_live(void)
{
    for (struct agent_rank *r = ranks.list; r; r = r->next)
        if (!r->have_status) return 1;
    return 0;
}

void ranks_stop_wait(const cJSON *id, int64_t kill_at_ms)
{
    if (!ranks.stops) ranks.stops = cJSON_CreateArray();
    cJSON_AddItemToArray(ranks.stops, id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    if (ranks_live() && (!ranks.kill_at || kill_at_ms < ranks.kill_at)) ranks.kill_at = kill_at_ms;
    check_stopped();
    ranks_schedule();
}

void ranks_heartbeat_start(void)
{
    if (ranks.heartbeat) return;
    ranks.heartbeat = 1;
    ranks.next_status_ms = mono_ms() + STATUS_EVERY_MS;
}

/* ---- status, timer ---- */

static void send_status(void)
{
    int64_t now = mono_ms();
    cJSON *msg = agent_reply_new(WIRE_EV_STATUS, NULL);
    ranks_add_mono_ns(msg, mono_ns());
    cJSON *arr = cJSON_AddArrayToObject(msg, "ranks");
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        if (!r->exit_sent && !r->spawn) cJSON_AddItemToArray(arr, ranks_status_entry(r, now));
        /* a rank that moved itself to another cgroup is followed there */
        if (!r->have_status && !r->starting && r->k.rank_pid > 0) oom_follow(&r->cg, r->k.rank_pid);
    }
    agent_send(ranks.ag, msg);
}

static int64_t eof_wait_until(const struct agent_rank *r)
{
    int64_t t = r->exit_ns / 1000000;
    if (r->last_out_ms > t) t = r->last_out_ms;
    return t + EOF_WAIT_MS;
}

#define SOONER(d, t) do { int64_t t_ = (t); if (t_ && (!(d) || t_ < (d))) (d) = t_; } while (0)

void ranks_schedule(void)
{
    if (!ranks.timer) return;
    int64_t now = mono_ms(), d = ranks.heartbeat && !ranks.quitting ? ranks.next_status_ms : 0;
    SOONER(d, ranks.kill_at);
    if (!ranks.quitting) {
        for (struct agent_rank *r = ranks.list; r; r = r->next) {
            for (int i = 0; i < 2; i++) {
                if (!r->st[i].w) continue;
                if (ranks.mode == OUT_READ) SOONER(d, stream_deadline(&r->st[i].buf));
                SOONER(d, r->st[i].rest_until);
                if (r->have_status && ranks.mode != OUT_PAUSE) SOONER(d, eof_wait_until(r));
            }
            if (!r->status_w && !r->keeper_reaped) SOONER(d, now + REAP_RETRY_MS);
            if (r->starting) SOONER(d, r->start_deadline_ms);
        }
        SOONER(d, ranks_spawn_deadline());
        SOONER(d, ranks_link_deadline());
        if (ranks.mode != OUT_READ) SOONER(d, now + PAUSE_CHECK_MS);
        /* a silent controller turns a pause into reading into the spool */
        else if (outbox_unsent(agent_outbox(ranks.ag)) > OUT_LOW) SOONER(d, now + PAUSE_CHECK_MS * 10);
    }
    ranks.timer->deadline_ms = d;
}

static void tick_ranks(int64_t now)
{
    for (struct agent_rank *r = ranks.list, *next; r; r = next) {
        next = r->next;
        for (int i = 0; i < 2; i++) {
            struct rank_stream *s = &r->st[i];
            if (!s->w) continue;
            if (s->rest_until && s->rest_until <= now) {
                s->rest_until = 0;
                stream_watch_fd(s);
            }
            /* While output is paused the rest of a waiting line is likely in the pipe already:
             * it is not cut as a partial line for a wait that is ours. */
            int64_t due = ranks.mode != OUT_READ ? 0 : stream_deadline(&s->buf);
            if (due && due <= now) {
                ranks.piece_ns = mono_ns();
                stream_flush(&s->buf, emit_piece, s);
            }
            /* Something the rank left behind (in another group) still holds its pipes. */
            if (r->have_status && ranks.mode != OUT_PAUSE && !s->rest_until && eof_wait_until(r) <= now) stream_close(s);
        }
        if (!r->status_w) rank_reap_keeper(r);
        if (r->starting) ranks_spawn_check_timeout(r, now);
        rank_try_finish(r);
    }
}

static void tick(struct agent *ag, struct agent_watch *w, short revents)
{
    int64_t now = mono_ms();
    (void)w;
    (void)revents;
    (void)ag;
    if (ranks.kill_at && now >= ranks.kill_at) {
        for (struct agent_rank *r = ranks.list; r; r = r->next) rank_read_status(r);
        ranks_kill_all(SIGKILL);
        ranks.kill_at = 0;
    }
    if (ranks.quitting) {
        ranks_schedule();
        return;
    }
    enum out_mode was = ranks.mode;
    apply_mode();
    if (was == OUT_PAUSE && ranks.mode != OUT_PAUSE)
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            for (int i = 0; i < 2; i++) stream_rewait(&r->st[i].buf, now);
    tick_ranks(now);
    ranks_spawn_pump(); /* the next batch of keepers, and spawns now answerable */
    if (ranks_link_check(now, ranks_live())) return; /* the watchdog or the grace ended the agent */
    if (ranks.heartbeat && now >= ranks.next_status_ms) {
        send_status();
        outbox_trim(agent_outbox(ranks.ag));
        ranks.next_status_ms += STATUS_EVERY_MS;
        if (ranks.next_status_ms <= now) ranks.next_status_ms = now + STATUS_EVERY_MS;
    }
    ranks_schedule();
}

/* ---- teardown ---- */

static void on_quit(struct agent *ag, void *ctx)
{
    (void)ag;
    (void)ctx;
    if (ranks.quitting) return;
    ranks.quitting = 1;
    if (ranks_kill_all(SIGTERM)) {
        int64_t grace = mono_ms() + (ranks.slurm_term ? SLURM_TERM_GRACE_MS : TEARDOWN_GRACE_MS);
        if (!ranks.kill_at || grace < ranks.kill_at) ranks.kill_at = grace;
    }
    ranks_schedule();
}

int ranks_slurm_terminated(void)
{
    return ranks.slurm_term;
}

void agent_ranks_set_slurm_step(int on)
{
    ranks.slurm_step = on;
}

/* SIGUSR1/SIGUSR2: a scheduler's warning (Slurm's --signal, a preemption notice). Under Slurm
 * every process of the agents' step got it, the ranks included; elsewhere the agent passes it
 * on. Either way the controller hears of it. */
static void warning_signal(struct agent *ag, int sig)
{
    const char *name = ranks_signal_name(sig);
    int n = 0;
    if (!ranks.slurm_step)
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            if (rank_signal(r, sig, 0) == 0) n++;
    cJSON *m = agent_reply_new(WIRE_EV_NOTICE, NULL);
    cJSON_AddStringToObject(m, "signal", name ? name : "?");
    if (ranks.slurm_step)
        cJSON_AddStringToObject(m, "text", "Slurm signalled the agents' step: every rank of the node got it from Slurm");
    else
        cJSON_AddNumberToObject(m, "passed_to", n);
    agent_send(ag, m);
}

/* From the agent's event loop (the handler only wrote the number to its self-pipe). A quitting
 * agent no longer answers signals: it is stopping every rank already. */
static void on_signal(struct evloop *el, int b, void *ctx)
{
    struct agent *ag = ctx;
    (void)el;
    if (ranks.quitting) return;
    if (b == SIGUSR1 || b == SIGUSR2) {
        warning_signal(ag, b);
        return;
    }
    const char *name = ranks_signal_name(b);
    if (ranks.slurm_step && b == SIGTERM) {
        /* scancel, a time limit, preemption: Slurm sent SIGTERM to every process of the step,
         * the ranks too, and SIGKILLs them after its KillWait. Until then the agent goes on
         * serving them (their output, their exits): they may be saving a checkpoint. It does
         * not signal them again; the controller hears why the job ends. */
        if (!ranks.slurm_term) {
            cJSON *m = agent_reply_new(WIRE_EV_NOTICE, NULL);
            cJSON_AddStringToObject(m, "signal", "SIGTERM");
            cJSON_AddStringToObject(m, "text", "Slurm sent SIGTERM to the agents' step (scancel, the job's "
                                    "time limit or a preemption)");
            agent_send(ag, m);
        }
        ranks.slurm_term = 1;
        return;
    }
    agent_send_error(ag, NULL, "the agent got %s; stopping every rank and exiting", name ? name : "a signal");
    agent_quit(ag, 128 + b);
}

void agent_ranks_init(struct agent *ag)
{
    ranks.ag = ag;
    strbuf_init(&ranks.line);
    ranks_link_init(ag);
    ranks.timer = agent_watch_add(ag, -1, 0, tick, NULL, NULL);
    agent_on_quit(ag, on_quit, NULL);
    /* SIGUSR1 and SIGUSR2 last: until they are caught, agent_main ignores them */
    static const int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGUSR2 };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) evloop_signal(agent_evloop(ag), sigs[i], on_signal, ag);
}

static int all_keepers_reaped(void)
{
    for (struct agent_rank *r = ranks.list; r; r = r->next) {
        rank_reap_keeper(r);
        if (!r->keeper_reaped) return 0;
    }
    return 1;
}

void agent_ranks_done(struct agent *ag)
{
    on_quit(ag, NULL);
    agent_sock_close(ag); /* no bridge finds this agent any more */
    int64_t give_up = (ranks.kill_at ? ranks.kill_at : mono_ms()) + TEARDOWN_LIMIT_MS;
    while (!all_keepers_reaped()) {
        int64_t now = mono_ms();
        /* Ranks that report their start now are doomed already: they get SIGKILL there. */
        for (struct agent_rank *r = ranks.list; r; r = r->next)
            if (r->starting) rank_read_status(r);
        if (ranks.kill_at && now >= ranks.kill_at) {
            for (struct agent_rank *r = ranks.list; r; r = r->next) rank_read_status(r);
            ranks_kill_all(SIGKILL);
            ranks.kill_at = 0;
        }
        if (now >= give_up) {
            /* A keeper stuck (a rank in D state?): kill it; its rank's PDEATHSIG follows. */
            for (struct agent_rank *r = ranks.list; r; r = r->next) {
                if (r->keeper_reaped) continue;
                kill(r->k.keeper_pid, SIGKILL);
                if (r->k.rank_pid > 0) kill(-r->k.rank_pid, SIGKILL);
                while (waitpid(r->k.keeper_pid, NULL, 0) < 0 && errno == EINTR) {}
                r->keeper_reaped = 1;
            }
            break;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    while (ranks.list) rank_free(ranks.list);
    ranks_spawn_done();
    agent_nodedir_remove(); /* the error files' directory, with what the ranks left there */
    /* in a Slurm step a time limit's second SIGTERM must not kill the agent before its last
     * line (its exit status) went out */
    signal(SIGTERM, ranks.slurm_step ? SIG_IGN : SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGUSR1, SIG_IGN); /* a late warning must not kill the agent while it exits */
    signal(SIGUSR2, SIG_IGN);
    if (ranks.timer) agent_watch_del(ag, ranks.timer);
    ranks.timer = NULL;
    cJSON_Delete(ranks.stops);
    ranks.stops = NULL;
    strbuf_done(&ranks.line);
}
