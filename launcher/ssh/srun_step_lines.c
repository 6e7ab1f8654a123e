/* srun's output and messages, sorted into the step's members (srun_step_int.h): the relays'
 * greetings and pieces (wire/relay.h), the agents' exit statuses, and what srun and slurmstepd
 * say about a task (a node lost, an exec that failed), matched to the node they name.
 *
 * Everything here comes from other processes (srun, slurmstepd, the relays, and whatever else
 * writes to the step's output), so every field may be missing, empty, cut short or huge, and
 * what is kept is bounded as over SSH (wire/protocol.h): a line of at most PROTOCOL_MAX_LINE
 * bytes, at most PROTOCOL_BACKLOG_MAX bytes of a node's lines not yet taken. */
#include "srun_step_int.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/protocol.h"

/* Bytes of a message of srun's kept in a node's reason: a line, not a page. */
#define WHY_TEXT_MAX 200

static struct member *member_of_task(struct srun_step *s, int task)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->m[i].task == task) return &s->m[i];
    return NULL;
}

bool srun_step_member_reads(const struct member *m)
{
    return !m->closed_by_us && !m->released && !m->cut;
}

bool srun_step_backlogged(const struct srun_step *s)
{
    if (!s->backlog_hit) return false;
    for (size_t i = 0; i < s->n; i++)
        if (!s->m[i].direct && srun_step_member_reads(&s->m[i]) && line_reader_pending(&s->m[i].in) >= PROTOCOL_BACKLOG_MAX)
            return true;
    return false;
}

void srun_step_queue(struct srun_step *s, struct member *m, const char *line, size_t len)
{
    if (m->direct) {
        srun_step_direct_queue(m, line, len); /* its own connection, no address */
        return;
    }
    strbuf_addf(&s->wbuf, "%d ", m->task);
    strbuf_add(&s->wbuf, line, len);
    strbuf_add(&s->wbuf, "\n", 1);
}

static void log_bytes(struct srun_step *s, const char *p, size_t n)
{
    if (s->log_fd >= 0 && util_write_all(s->log_fd, p, n) < 0) {
        close(s->log_fd);
        s->log_fd = -1;
    }
}

void srun_step_log(struct srun_step *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) log_bytes(s, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* A line longer than PROTOCOL_MAX_LINE from m's task: what SSH does (ssh_stream.c), the link
 * fails with the same message, and its agent's stdin ends (a closed channel, over SSH). */
void srun_step_member_cut(struct srun_step *s, struct member *m)
{
    if (m->cut) return;
    m->cut = true;
    strbuf_done(&m->piece.line);
    strbuf_init(&m->piece.line);
    if (m->ended) return;
    m->ended = true;
    m->failed = true;
    free(m->why);
    m->why = xasprintf(PROTOCOL_LONG_LINE_FMT, m->name, PROTOCOL_MAX_LINE);
    if (m->task >= 0 && !m->closed_by_us) srun_step_queue(s, m, RELAY_EOF, strlen(RELAY_EOF));
}

/* "=NAME ADDR[ kept]": the relay of task `task` says where it runs. ADDR is what MASTER_ADDR
 * uses: only a numeric address is taken ("-", empty, or anything else: the node's name).
 * "kept": the agent keeps a copy of itself for the job's later steps (srun_step_cache.c). */
struct member *srun_step_announce(struct srun_step *s, int task, const char *text, const struct direct_link *link)
{
    const char *sp = strchr(text, ' ');
    size_t nl = sp ? (size_t)(sp - text) : strlen(text);
    struct member *m = NULL;
    unsigned char bin[16];
    for (size_t i = 0; i < s->n && !m; i++)
        if (s->m[i].task < 0 && strlen(s->m[i].name) == nl && strncmp(s->m[i].name, text, nl) == 0) m = &s->m[i];
    /* a name Slurm spells differently from the node list (an alias): task order is node order */
    if (!m && task >= 0 && (size_t)task < s->n && s->m[task].task < 0) m = &s->m[task];
    if (!m) return NULL;
    m->task = task;
    m->announced = true;
    if (link) {
        m->dfd = link->fd;
        m->drx = link->rx;
        m->dtx = link->tx;
        m->direct = true;
    }
    if (sp) {
        char a[sizeof m->addr];
        const char *flag = strchr(sp + 1, ' ');
        size_t al = flag ? (size_t)(flag - sp - 1) : strlen(sp + 1);
        m->kept = flag && strcmp(flag + 1, "kept") == 0;
        if (al < sizeof a) {
            memcpy(a, sp + 1, al);
            a[al] = '\0';
            if (inet_pton(AF_INET, a, bin) == 1 || inet_pton(AF_INET6, a, bin) == 1)
                snprintf(m->addr, sizeof m->addr, "%s", a);
        }
    }
    /* what the controller said before it knew the task; while the nodes' copies are tried,
     * it waits for every node (the step may start again) */
    if (s->cache_try) return m;
    srun_step_flush_pending(s, m);
    return m;
}

void srun_step_flush_pending(struct srun_step *s, struct member *m)
{
    size_t off = 0;
    char *line;
    while ((line = strbuf_take_line(&m->pending, &off)) != NULL) {
        srun_step_queue(s, m, line, strlen(line));
        free(line);
    }
    strbuf_reset(&m->pending);
    if (m->closed_by_us || m->cut) srun_step_queue(s, m, RELAY_EOF, strlen(RELAY_EOF));
}

/* "!STATUS", the relay's last line: STATUS as the relay writes it (decimal), else unreadable. */
void srun_step_member_exited(struct member *m, const char *status)
{
    const char *end = status;
    int st = relay_number(status, &end);
    if (m->ended) return;
    m->ended = true;
    free(m->why);
    if (st < 0 || *end != '\0')
        m->why = xasprintf("the agent on %s exited (its relay sent an unreadable exit status)", m->name);
    else if (st == 128 + SIGTERM)
        m->why = xasprintf("Slurm stopped the agent on %s with SIGTERM (scancel, the job's time limit "
                           "or a preemption)", m->name);
    else
        m->why = xasprintf("the agent on %s exited with status %d", m->name, st);
}

/* One line of srun's stdout: a relay's greeting or a piece of a protocol line. */
static void out_line(struct srun_step *s, const char *line, size_t len)
{
    const char *rest;
    int task = relay_label(line, &rest);
    struct member *m;
    if (task < 0) return; /* srun prints nothing unlabelled on stdout */
    len -= (size_t)(rest - line);
    m = member_of_task(s, task);
    /* the rest of a piece slurmstepd cut may begin with any byte, '=' included */
    if (m && (m->piece.need || m->piece.hdr_len || rest[0] == '+' || rest[0] == '.')) {
        int rc = relay_piece_feed(&m->piece, rest, len);
        if (rc < 0) strbuf_reset(&m->piece.line);
        if (m->piece.line.len > (size_t)PROTOCOL_MAX_LINE) srun_step_member_cut(s, m);
        if (m->cut) {
            /* its pieces are still followed (their lengths say where the next begins), unkept */
            strbuf_reset(&m->piece.line);
            return;
        }
        if (rc != 1) return;
        if (m->piece.line.len && m->piece.line.buf[0] == '!') {
            /* the relay's last line: the agent's exit status */
            strbuf_add(&m->piece.line, "", 1);
            srun_step_member_exited(m, m->piece.line.buf + 1);
        } else if (srun_step_member_reads(m)) {
            line_reader_add(&m->in, m->piece.line.buf, m->piece.line.len);
            line_reader_add(&m->in, "\n", 1);
            m->bytes_in += m->piece.line.len + 1;
            if (line_reader_pending(&m->in) >= PROTOCOL_BACKLOG_MAX) s->backlog_hit = true;
        }
        strbuf_reset(&m->piece.line);
        return;
    }
    if (rest[0] == '=' && m == NULL) srun_step_announce(s, task, rest + 1, NULL);
}

/* The member a message of srun or slurmstepd is about: the task's, else the node it names
 * ("slurmstepd-n2: ...", "srun: error: n2: task 1: ..."), else the task's place in the list. */
static struct member *member_named(struct srun_step *s, int task, const char *name, size_t len)
{
    struct member *m = member_of_task(s, task);
    for (size_t i = 0; !m && name && i < s->n; i++)
        if (strlen(s->m[i].name) == len && strncmp(s->m[i].name, name, len) == 0) m = &s->m[i];
    if (!m && task >= 0 && (size_t)task < s->n && s->m[task].task < 0) m = &s->m[task];
    return m;
}

/* "srun: error: n2: task 1: Exited with exit code 2", "srun: error: n2: task 1: Killed": t
 * points at ": task ". Returns false when no task id follows (then it is no such message).
 * Any part may be missing or empty: srun's line can be cut, or not srun's at all. */
static bool task_message(struct srun_step *s, const char *line, const char *t)
{
    const char *end, *what, *name = NULL;
    size_t nl = 0;
    int task = relay_number(t + 7, &end);
    struct member *m;
    if (task < 0) return false;
    if (strncmp(line, "srun: error: ", 13) == 0 && t >= line + 13) {
        name = line + 13;
        nl = (size_t)(t - name);
    }
    m = member_named(s, task, name, nl);
    if (!m || m->ended) return true;
    what = end;
    if (*what == ':') what++;
    while (*what == ' ') what++;
    if (!*what) what = line; /* "...: task 0:" says no more than the line */
    m->ended = true;
    m->failed = !m->announced;
    free(m->why);
    m->why = xasprintf("the agent's task on %s ended: %.*s%s%s%s", m->name, WHY_TEXT_MAX, what,
                       m->last_err[0] ? " (" : "", m->last_err, m->last_err[0] ? ")" : "");
    return true;
}

/* srun's messages, and what the tasks wrote on stderr (labelled). */
static void err_line(struct srun_step *s, const char *line)
{
    const char *rest, *t, *name = NULL;
    int task = relay_label(line, &rest);
    size_t nl = 0;
    struct member *m;
    if (task >= 0) {
        if (strncmp(rest, "slurmstepd-", 11) == 0) {
            name = rest + 11;
            nl = strcspn(name, ":");
        }
        m = member_named(s, task, name, nl);
        if (m) snprintf(m->last_err, sizeof m->last_err, "%s", rest);
        return;
    }
    if (strncmp(line, "srun: ", 6) == 0 && (t = strstr(line, ": task ")) != NULL && task_message(s, line, t))
        return;
    if (strncmp(line, "srun: error: ", 13) == 0 || strncmp(line, "srun: fatal: ", 13) == 0)
        snprintf(s->srun_err, sizeof s->srun_err, "%s", line);
}

/* A whole line of the stream (no '\n'; it may hold NUL bytes, read as its end): p[n] is its
 * end, writable (line_reader.h). */
static void one_line(struct srun_step *s, enum srun_stream from, char *p, size_t n)
{
    if (from == SRUN_STDOUT) {
        out_line(s, p, strlen(p));
        return;
    }
    /* the step's log gets srun's messages as read, a long line only as far as it was read */
    p[n] = '\n';
    log_bytes(s, p, n + 1);
    p[n] = '\0';
    err_line(s, p);
}

/* A line longer than PROTOCOL_MAX_LINE (its head, the rest dropped): no line srun writes (the
 * relays' pieces are under 1 KiB, srun's own messages a line). */
static void long_line(struct srun_step *s, enum srun_stream from, char *p, size_t n)
{
    const char *rest;
    char note[160];
    if (from == SRUN_STDOUT) {
        int task = relay_label(p, &rest);
        struct member *m = task >= 0 ? member_of_task(s, task) : NULL;
        if (m) srun_step_member_cut(s, m);
        snprintf(note, sizeof note, "ddptop: a line of srun's output (task %d) was longer than %d bytes; dropped\n",
                 task, PROTOCOL_MAX_LINE);
        log_bytes(s, note, strlen(note));
        return;
    }
    one_line(s, from, p, n);
    snprintf(note, sizeof note, "ddptop: the line above was longer than %d bytes; the rest was dropped\n",
             PROTOCOL_MAX_LINE);
    log_bytes(s, note, strlen(note));
}

void srun_step_feed(struct srun_step *s, enum srun_stream from, const char *buf, size_t len)
{
    struct line_reader *r = from == SRUN_STDOUT ? &s->olines : &s->elines;
    enum line_got got;
    char *p;
    size_t n;
    line_reader_add(r, buf, len);
    while ((got = line_reader_next(r, &p, &n)) != LINE_NONE) {
        if (got == LINE_WHOLE) one_line(s, from, p, n);
        else long_line(s, from, p, n);
    }
}
