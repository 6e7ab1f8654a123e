/* What the ranks print, as "out" messages (docs/architecture.md "One output line"): each read
 * of a rank's pipe goes through its stream (agent_stream.h) and out as numbered, durable
 * messages, JSON text where it is valid UTF-8 and base64 where it is not; the step of the
 * runtime's step lines is noted for the status heartbeat; and what is done with output while
 * the controller is slow or away: back-pressure (the rank waits on its pipe), the spool, and
 * past its bound drops, counted and said in the rank's log once there is room again.
 * Below agent_ranks.c, which owns the ranks and their pipes' watches and calls in here. */
#include <stdlib.h>
#include <string.h>

#include "agent_outbox.h"
#include "agent_ranks_int.h"
#include "util/util.h"
#include "wire/base64.h"

/* While the controller answers (it sent something within RESPONSIVE_MS), rank output is read
 * only while fewer than OUT_HIGH bytes wait for the link and the spool holds less than its
 * bound, and again once below OUT_LOW: a rank that outpaces the controller blocks on its pipe;
 * nothing is lost and the agent's memory stays bounded. While the controller is silent or gone
 * the ranks must not wait on it: output is read into the spool up to its bound, and past it
 * read and dropped, counted, and said in the rank's log once there is room again. */
#define OUT_HIGH (4u << 20)
#define OUT_LOW (1u << 20)
#define RESPONSIVE_MS 3000
/* How often the mode is looked at again while output is paused or dropped. */
#define PAUSE_CHECK_MS 20
/* A read that brought less than STREAM_REST_BELOW bytes lets that stream rest STREAM_REST_MS
 * before the next one: a rank printing steadily is then read in a few large pieces instead of
 * its every 4 KiB stdio write (a poll, a read and a write each, here and in sshd), and one
 * that prints now and then is read at once, as the rest only follows a read. */
#define STREAM_REST_BELOW (32 * 1024)
#define STREAM_REST_MS 2
/* While the controller is silent or gone nobody waits for a line, and every message spooled
 * then is one the controller parses, numbers and files when it comes back: a rank printing
 * 1,000 lines a second made 500 messages a second of two lines each, and the replay after a
 * partition ran at 0.3x plain ssh (issue 32). Resting longer then makes each message ten times
 * larger. 20 ms keep a rank's 64 KiB pipe from filling below 3 MB/s, and a rank printing more
 * is read in pieces of 32 KiB or more, which never rest. */
#define SPOOL_REST_MS 20

static struct {
    struct agent *ag;
    enum out_mode mode;     /* reading rank output, paused (back-pressure), or dropping it */
    struct strbuf line;     /* an out message being formatted */
    int64_t piece_ns;       /* mono_ns of the read whose lines are being sent */
} out;

void ranks_out_init(struct agent *ag)
{
    out.ag = ag;
    strbuf_init(&out.line);
}

void ranks_out_done(void)
{
    strbuf_done(&out.line);
}

enum out_mode ranks_out_mode(void)
{
    return out.mode;
}

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
    struct strbuf *sb = &out.line;
    uint64_t seq = outbox_next_seq(agent_outbox(out.ag), s->r->rank);
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
                flags & STREAM_SPLIT ? "s" : "", (long long)out.piece_ns);
    if (s->r->dropped_lines || s->r->dropped_bytes) {
        strbuf_addf(sb, ",\"dropped\":{\"lines\":%llu,\"bytes\":%llu}",
                    (unsigned long long)s->r->dropped_lines, (unsigned long long)s->r->dropped_bytes);
        s->r->dropped_lines = s->r->dropped_bytes = 0;
    }
    strbuf_adds(sb, "}");
    agent_send_durable(out.ag, s->r->rank, seq, sb->buf, sb->len);
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

void ranks_out_watch_fd(struct rank_stream *s)
{
    if (s->w) s->w->fd = out.mode == OUT_PAUSE || s->rest_until ? -1 : s->fd;
}

/* What to do with rank output now (see OUT_HIGH). */
static int responsive(void)
{
    return agent_linked(out.ag) && mono_ms() - agent_last_input_ms(out.ag) < RESPONSIVE_MS;
}

static enum out_mode want_mode(void)
{
    struct outbox *ob = agent_outbox(out.ag);
    size_t held = outbox_bytes(ob), pend = agent_output_pending(out.ag);
    size_t hi = ranks_spool_max(), lo = hi - hi / 8;
    if (responsive()) {
        if (out.mode == OUT_PAUSE) return pend < OUT_LOW && held < lo ? OUT_READ : OUT_PAUSE;
        return pend > OUT_HIGH || held > hi ? OUT_PAUSE : OUT_READ;
    }
    if (out.mode == OUT_DROP) return held < lo ? OUT_READ : OUT_DROP;
    return held > hi ? OUT_DROP : OUT_READ;
}

void ranks_out_say_dropped(struct agent_rank *r)
{
    if (!r->dropped_lines && !r->dropped_bytes) return;
    char *line = xasprintf("ddptop-agent: %llu line%s (%llu bytes) of this rank's output were dropped here "
                           "while the controller was away: the agent's spool (--agent-spool) was full\n",
                           (unsigned long long)r->dropped_lines, r->dropped_lines == 1 ? "" : "s",
                           (unsigned long long)r->dropped_bytes);
    out.piece_ns = mono_ns();
    send_out(&r->st[1], line, strlen(line), 0, 1); /* carries the counts and clears them */
    free(line);
}

void ranks_out_apply_mode(struct agent_rank *list)
{
    enum out_mode m = want_mode();
    if (m == out.mode) return;
    if (m == OUT_DROP) {
        /* what a stream holds of a line goes now, so the dropped bytes cut no line in two */
        out.piece_ns = mono_ns();
        for (struct agent_rank *r = list; r; r = r->next)
            for (int i = 0; i < 2; i++)
                if (r->st[i].w) stream_flush(&r->st[i].buf, emit_piece, &r->st[i]);
    }
    int was_drop = out.mode == OUT_DROP;
    out.mode = m;
    if (was_drop)
        for (struct agent_rank *r = list; r; r = r->next) ranks_out_say_dropped(r);
    for (struct agent_rank *r = list; r; r = r->next)
        for (int i = 0; i < 2; i++) ranks_out_watch_fd(&r->st[i]);
}

int ranks_out_over(void)
{
    return out.mode == OUT_READ &&
           (agent_output_pending(out.ag) > OUT_HIGH || outbox_bytes(agent_outbox(out.ag)) > ranks_spool_max());
}

/* Counts what a stream brings while output is dropped. */
static void stream_drop(struct rank_stream *s, const char *buf, size_t n)
{
    s->r->dropped_bytes += n;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))) != NULL; p++) s->r->dropped_lines++;
}

void ranks_out_take(struct rank_stream *s, const char *buf, size_t n)
{
    out.piece_ns = mono_ns();   /* one clock reading for every line of this read */
    int64_t now = out.piece_ns / 1000000;
    s->r->last_out_ms = now;
    if (out.mode == OUT_DROP) stream_drop(s, buf, n);
    else stream_feed(&s->buf, buf, n, now, emit_piece, s);
    if (n < STREAM_REST_BELOW) {
        s->rest_until = now + (responsive() ? STREAM_REST_MS : SPOOL_REST_MS);
        ranks_out_watch_fd(s);
    }
}

void ranks_out_flush(struct rank_stream *s)
{
    out.piece_ns = mono_ns();
    stream_flush(&s->buf, emit_piece, s);
}

void ranks_out_close(struct rank_stream *s)
{
    if (!s->w) return;
    ranks_out_flush(s);
    s->w->fd = s->fd; /* so that deleting the watch closes it, paused or not */
    agent_watch_del(out.ag, s->w);
    s->w = NULL;
    s->fd = -1;
}

void rank_say_at(struct agent_rank *r, const char *text, int64_t ns)
{
    char *line = xasprintf("ddptop-agent: %s\n", text); /* a whole line: newline kept */
    out.piece_ns = ns;
    emit_piece(&r->st[1], line, strlen(line), 0); /* a path need not be UTF-8 */
    r->last_out_ms = mono_ms();
    free(line);
}

void rank_say(struct agent_rank *r, const char *text)
{
    rank_say_at(r, text, mono_ns());
}

int64_t ranks_out_deadline(int64_t now_ms)
{
    if (out.mode != OUT_READ) return now_ms + PAUSE_CHECK_MS;
    /* a silent controller turns a pause into reading into the spool */
    if (outbox_unsent(agent_outbox(out.ag)) > OUT_LOW) return now_ms + PAUSE_CHECK_MS * 10;
    return 0;
}
