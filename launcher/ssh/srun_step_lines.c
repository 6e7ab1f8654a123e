/* srun's output and messages, sorted into the step's members (srun_step_int.h): the relays'
 * greetings and pieces (wire/relay.h), the agents' exit statuses, and what srun and slurmstepd
 * say about a task (a node lost, an exec that failed), matched to the node they name. */
#include "srun_step_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct member *member_of_task(struct srun_step *s, int task)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->m[i].task == task) return &s->m[i];
    return NULL;
}

void srun_step_queue(struct srun_step *s, struct member *m, const char *line, size_t len)
{
    strbuf_addf(&s->wbuf, "%d ", m->task);
    strbuf_add(&s->wbuf, line, len);
    strbuf_add(&s->wbuf, "\n", 1);
}

/* "=NAME ADDR": the relay of task `task` says where it runs. */
static void announce(struct srun_step *s, int task, const char *text)
{
    const char *sp = strchr(text, ' ');
    size_t nl = sp ? (size_t)(sp - text) : strlen(text);
    struct member *m = NULL;
    for (size_t i = 0; i < s->n && !m; i++)
        if (s->m[i].task < 0 && strlen(s->m[i].name) == nl && strncmp(s->m[i].name, text, nl) == 0) m = &s->m[i];
    /* a name Slurm spells differently from the node list (an alias): task order is node order */
    if (!m && task >= 0 && (size_t)task < s->n && s->m[task].task < 0) m = &s->m[task];
    if (!m) return;
    m->task = task;
    m->announced = true;
    if (sp && strcmp(sp + 1, "-") != 0) snprintf(m->addr, sizeof m->addr, "%s", sp + 1);
    /* what the controller said before it knew the task */
    size_t off = 0;
    char *line;
    while ((line = strbuf_take_line(&m->pending, &off)) != NULL) {
        srun_step_queue(s, m, line, strlen(line));
        free(line);
    }
    strbuf_reset(&m->pending);
    if (m->closed_by_us) srun_step_queue(s, m, RELAY_EOF, strlen(RELAY_EOF));
}

static void member_exited(struct member *m, const char *status)
{
    if (m->ended) return;
    m->ended = true;
    free(m->why);
    if (atoi(status) == 128 + SIGTERM)
        m->why = xasprintf("Slurm stopped the agent on %s with SIGTERM (scancel, the job's time limit "
                           "or a preemption)", m->name);
    else
        m->why = xasprintf("the agent on %s exited with status %s", m->name, status);
}

void srun_step_out_line(struct srun_step *s, const char *line)
{
    const char *rest;
    int task = relay_label(line, &rest);
    struct member *m;
    if (task < 0) return; /* srun prints nothing unlabelled on stdout */
    m = member_of_task(s, task);
    /* the rest of a piece slurmstepd cut may begin with any byte, '=' included */
    if (m && (m->piece.need || m->piece.hdr_len || rest[0] == '+' || rest[0] == '.')) {
        int rc = relay_piece_feed(&m->piece, rest, strlen(rest));
        if (rc < 0) strbuf_reset(&m->piece.line);
        if (rc != 1) return;
        if (m->piece.line.len && m->piece.line.buf[0] == '!') {
            /* the relay's last line: the agent's exit status */
            strbuf_add(&m->piece.line, "", 1);
            member_exited(m, m->piece.line.buf + 1);
        } else {
            strbuf_add(&m->in, m->piece.line.buf, m->piece.line.len);
            strbuf_add(&m->in, "\n", 1);
            m->bytes_in += m->piece.line.len + 1;
        }
        strbuf_reset(&m->piece.line);
        return;
    }
    if (rest[0] == '=') {
        announce(s, task, rest + 1);
        return;
    }
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

/* srun's messages, and what the tasks wrote on stderr (labelled). */
void srun_step_err_line(struct srun_step *s, const char *line)
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
    /* "srun: error: n2: task 1: Exited with exit code 2", "...: task 1: Killed" */
    if ((t = strstr(line, ": task ")) != NULL && strncmp(line, "srun: ", 6) == 0) {
        task = atoi(t + 7);
        if (strncmp(line, "srun: error: ", 13) == 0) {
            name = line + 13;
            nl = (size_t)(t - name);
        }
        m = member_named(s, task, name, nl);
        if (m && !m->ended) {
            const char *what = strchr(t + 7, ':');
            m->ended = true;
            m->failed = !m->announced;
            free(m->why);
            m->why = xasprintf("the agent's task on %s ended: %s%s%s%s", m->name, what ? what + 2 : line,
                               m->last_err[0] ? " (" : "", m->last_err, m->last_err[0] ? ")" : "");
        }
        return;
    }
    if (strncmp(line, "srun: error: ", 13) == 0 || strncmp(line, "srun: fatal: ", 13) == 0)
        snprintf(s->srun_err, sizeof s->srun_err, "%s", line);
}
