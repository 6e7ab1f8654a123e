/* libFuzzer harness for the srun relay (docs/protocol.md "Through srun"): what srun's stdout
 * and stderr carry into the controller (launcher/ssh/srun_step_lines.c: srun_step_out_line,
 * srun_step_err_line, with the framing of launcher/wire/relay.c), and what the agent's relay
 * reads from srun's stdin (relay_address). The step is a real struct srun_step with three
 * members (nodes n1, n2, n3) and no process: the lines are fed as srun_step.c's reader does.
 *
 * Input: lines. A line that begins with 'E' is one of srun's stderr (the rest of it), one that
 * begins with 'O' one of its stdout (the rest), one that begins with 'D' a line of member 0's
 * direct connection (launcher/ssh/srun_step_dlink.c), sealed here with the connection's key as
 * its agent seals it (wire/direct_line.h) so that what is behind the MAC check is reached, one
 * that begins with 'R' raw bytes of that connection (the rest, and its '\n' unless it ends the
 * input: a forged line), any other line is stdout as it is; every line is also tried as "K LINE"
 * from the controller, as each line of the direct connection's handshake (wire/direct.h) and as
 * a sealed line (direct_line_open). Lines are NUL-terminated copies of exactly their length, as
 * strbuf_take_line gives them.
 *
 * Invariants: a member's task is -1 or one srun gave; what a member collected is whole lines;
 * a reassembled line never holds more than was fed; a forged line is never taken, and ends the
 * connection (nothing after it is taken either); a line opens only at its own number. */
#include "fuzz_common.h"

#include "ssh/srun_step_int.h"
#include "wire/direct.h"
#include "wire/direct_line.h"
#include "wire/protocol.h"
#include "wire/relay.h"

static const char *const names[] = { "n1", "n2", "n3" };
#define N_MEMBERS (sizeof names / sizeof *names)
#define NA "00112233445566778899aabbccddeeff"
#define NC "ffeeddccbbaa99887766554433221100"
static const unsigned char step_key[DIRECT_KEY_LEN] = { 42 };

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
        line_reader_init(&m->in, PROTOCOL_MAX_LINE);
        strbuf_init(&m->pending);
        strbuf_init(&m->dq);
        line_reader_init(&m->dr, (size_t)PROTOCOL_MAX_LINE + DIRECT_LINE_OVERHEAD);
        m->dfd = -1;
        m->direct = i == 0; /* member 0 speaks over a direct connection (no socket here) */
        if (m->direct) direct_line_init(&m->drx, step_key, DIRECT_ROLE_AGENT_LINES, 0, NA, NC); /* = agent_tx */
        /* a request sent before the task was known: queued when the relay announces itself */
        strbuf_adds(&m->pending, "{\"op\":\"ping\"}\n");
        m->closed_by_us = i == 2;
    }
    strbuf_init(&s->wbuf);
    line_reader_init(&s->olines, PROTOCOL_MAX_LINE);
    line_reader_init(&s->elines, PROTOCOL_MAX_LINE);
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
        EXPECT(m->in.data.len == 0 || m->in.data.buf[m->in.data.len - 1] == '\n');
        EXPECT(m->in.data.len <= fed + s->n);
        EXPECT(strlen(m->last_err) < sizeof m->last_err && strlen(m->addr) < sizeof m->addr);
        char *line;
        while ((line = line_reader_take(&m->in)) != NULL) free(line);
        EXPECT(line_reader_pending(&m->in) == 0);
        free(m->name);
        free(m->why);
        strbuf_done(&m->piece.line);
        line_reader_done(&m->in);
        strbuf_done(&m->pending);
        EXPECT(line_reader_pending(&m->dr) <= fed);
        strbuf_done(&m->dq);
        line_reader_done(&m->dr);
    }
    EXPECT(strlen(s->srun_err) < sizeof s->srun_err);
    strbuf_done(&s->wbuf);
    line_reader_done(&s->olines);
    line_reader_done(&s->elines);
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
    static struct direct_line_key agent_key, ctl_key; /* made once: an HMAC each */
    struct direct_line_key agent_tx, scratch;
    size_t at = 0;
    if (agent_key.key[0] == 0 && agent_key.key[1] == 0) {
        direct_line_init(&agent_key, step_key, DIRECT_ROLE_AGENT_LINES, 0, NA, NC);
        direct_line_init(&ctl_key, step_key, DIRECT_ROLE_CONTROLLER_LINES, 0, NA, NC);
    }
    agent_tx = agent_key;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
        const uint8_t *p = data + at;
        at += n + 1;
        bool err = n && p[0] == 'E';
        if (n && p[0] == 'D') {
            struct strbuf sealed;
            struct member *m = &s->m[0];
            size_t before = line_reader_pending(&m->in);
            bool whole = line_reader_pending(&m->dr) == 0; /* else it ends a forged line begun by 'R' bytes */
            strbuf_init(&sealed);
            direct_line_seal(&agent_tx, (const char *)p + 1, n - 1, &sealed);
            srun_step_direct_feed(s, m, sealed.buf, sealed.len);
            strbuf_done(&sealed);
            if (m->dforged) EXPECT(line_reader_pending(&m->in) == before);
            /* its own line, in order, on a connection nobody forged: taken (its exit status not) */
            else if (whole && !m->cut && n - 1 <= (size_t)PROTOCOL_MAX_LINE && (n == 1 || p[1] != '!'))
                EXPECT(line_reader_pending(&m->in) == before + n);
            continue;
        }
        if (n && p[0] == 'R') {
            size_t before = line_reader_pending(&s->m[0].in);
            srun_step_direct_feed(s, &s->m[0], (const char *)p + 1, nl ? n : n - 1);
            /* bytes that were not sealed with the key are never taken */
            EXPECT(line_reader_pending(&s->m[0].in) == before);
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
            if (direct_hello_parse(line, &task, na, mac) == 0)
                EXPECT(task >= 0 && strlen(na) == DIRECT_NONCE_HEX && strlen(mac) == DIRECT_MAC_HEX);
            if (direct_reply_parse(line, nc, mac) == 0) EXPECT(strlen(nc) == DIRECT_NONCE_HEX && strlen(mac) == DIRECT_MAC_HEX);
            if (direct_proof_parse(line, mac, &g) == 0) EXPECT(g > line && g <= line + n && strlen(mac) == DIRECT_MAC_HEX);
            /* a line the fuzzer made up opens under no key (2^-128), and leaves the number alone */
            scratch = ctl_key;
            EXPECT(direct_line_open(&scratch, line, n) == -1 && scratch.seq == 0);
        }
        free(line);
    }
    step_free(s, size);
    return 0;
}
