/* libFuzzer harness for the srun relay (docs/protocol.md "Through srun"): what srun's stdout
 * and stderr carry into the controller (launcher/ssh/srun_step_lines.c: srun_step_out_line,
 * srun_step_err_line, with the framing of launcher/wire/relay.c), and what the agent's relay
 * reads from srun's stdin (relay_address). The step is a real struct srun_step with three
 * members (nodes n1, n2, n3) and no process: the lines are fed as srun_step.c's reader does.
 *
 * Input: lines. A line that begins with 'E' is one of srun's stderr (the rest of it), one that
 * begins with 'O' one of its stdout (the rest), one that begins with 'D' bytes of member 0's
 * direct connection (launcher/ssh/srun_step_direct.c; the rest, and its '\n' unless it ends the
 * input), any other line is stdout as it is; every line is also tried as "K LINE" from the
 * controller and as each line of the direct connection's handshake (wire/direct.h). Lines are NUL-terminated copies of exactly
 * their length, as strbuf_take_line gives them.
 *
 * Invariants: a member's task is -1 or one srun gave; what a member collected is whole lines;
 * a reassembled line never holds more than was fed. */
#include "fuzz_common.h"

#include "ssh/srun_step_int.h"
#include "wire/direct.h"
#include "wire/relay.h"

static const char *const names[] = { "n1", "n2", "n3" };
#define N_MEMBERS (sizeof names / sizeof *names)

static struct srun_step *step_new(void)
{
    struct srun_step *s = calloc(1, sizeof *s);
    EXPECT(s);
    s->n = N_MEMBERS;
    s->m = calloc(s->n, sizeof *s->m);
    EXPECT(s->m);
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        m->name = strdup(names[i]);
        m->task = -1;
        strbuf_init(&m->piece.line);
        strbuf_init(&m->in);
        strbuf_init(&m->pending);
        strbuf_init(&m->dq);
        strbuf_init(&m->dr);
        m->dfd = -1;
        m->direct = i == 0; /* member 0 speaks over a direct connection (no socket here) */
        /* a request sent before the task was known: queued when the relay announces itself */
        strbuf_adds(&m->pending, "{\"op\":\"ping\"}\n");
        m->closed_by_us = i == 2;
    }
    strbuf_init(&s->wbuf);
    strbuf_init(&s->obuf);
    strbuf_init(&s->ebuf);
    s->to_fd = s->out_fd = s->err_fd = s->log_fd = -1;
    s->lfd = s->efd = -1;
    return s;
}

static void step_free(struct srun_step *s, size_t fed)
{
    for (size_t i = 0; i < s->n; i++) {
        struct member *m = &s->m[i];
        EXPECT(m->task >= -1 && m->task <= 1000000);
        EXPECT(m->piece.line.len <= fed);
        EXPECT(m->in.len == 0 || m->in.buf[m->in.len - 1] == '\n');
        EXPECT(m->in.len <= fed + s->n);
        EXPECT(strlen(m->last_err) < sizeof m->last_err && strlen(m->addr) < sizeof m->addr);
        size_t off = 0;
        char *line;
        while ((line = strbuf_take_line(&m->in, &off)) != NULL) free(line);
        free(m->name);
        free(m->why);
        strbuf_done(&m->piece.line);
        strbuf_done(&m->in);
        strbuf_done(&m->pending);
        EXPECT(m->dr.len <= fed);
        strbuf_done(&m->dq);
        strbuf_done(&m->dr);
    }
    EXPECT(strlen(s->srun_err) < sizeof s->srun_err);
    strbuf_done(&s->wbuf);
    strbuf_done(&s->obuf);
    strbuf_done(&s->ebuf);
    free(s->m);
    free(s);
}

/* One line of srun's stderr (err) or stdout, as the step's reader hands it on. */
static void feed_line(struct srun_step *s, bool err, char *line, size_t n)
{
    /* the step's byte-level entry (srun_step_feed, with the relay's bounds): the line and its
     * '\n' in a buffer of exactly that size */
    char *b = malloc(n + 1);
    EXPECT(b);
    memcpy(b, line, n);
    b[n] = '\n';
    srun_step_feed(s, err ? SRUN_STDERR : SRUN_STDOUT, b, n + 1);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srun_step *s = step_new();
    size_t at = 0;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
        const uint8_t *p = data + at;
        at += n + 1;
        bool err = n && p[0] == 'E';
        if (n && p[0] == 'D') {
            srun_step_direct_feed(s, &s->m[0], (const char *)p + 1, nl ? n : n - 1);
            continue;
        }
        if (n && (p[0] == 'E' || p[0] == 'O')) {
            p++;
            n--;
        }
        char *line = fuzz_str(p, n);
        if (!line) break;
        feed_line(s, err, line, n);
        int task = -2;
        const char *rest = NULL;
        if (relay_address(line, &task, &rest) == 0) {
            EXPECT(task >= 0 && rest > line && rest <= line + n);
        }
        {
            char na[DIRECT_NONCE_HEX + 1], nc[DIRECT_NONCE_HEX + 1], mac[DIRECT_MAC_HEX + 1];
            const char *g = NULL;
            if (direct_hello_parse(line, &task, na) == 0) EXPECT(task >= 0 && strlen(na) == DIRECT_NONCE_HEX);
            if (direct_reply_parse(line, nc, mac) == 0) EXPECT(strlen(nc) == DIRECT_NONCE_HEX && strlen(mac) == DIRECT_MAC_HEX);
            if (direct_proof_parse(line, mac, &g) == 0) EXPECT(g > line && g <= line + n && strlen(mac) == DIRECT_MAC_HEX);
        }
        free(line);
    }
    step_free(s, size);
    return 0;
}
