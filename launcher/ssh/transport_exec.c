/* A transport through a command that runs `sh -c CMD` on a node and carries its stdin and
 * stdout (transport_int.h's ops), for any kind that can exec there: `kubectl exec -i POD --`
 * would be its prefix; the tests' kind has none and runs sh on this machine. The
 * agent is deployed as over SSH, by agent_deploy.h's helper: the probe runs first (a child on
 * two pipes, transport_child.c) and, when it finds our agent, execs it in place, so its first
 * line is the agent's hello and that child is the agent from then on; when the node lacks it, a
 * second command takes the agent's bytes on its stdin, checks them with sha256sum there and
 * installs them, and the probe runs again. Nothing blocks: the upload's pipes are the loop's
 * like any other, and its deadlines are the login timeout and three times --timeout. */
#include "transport_int.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_deploy.h"
#include "agent_kit.h"
#include "util/util.h"

enum exec_stage {
    EXEC_NEW,
    EXEC_PROBING,    /* the probe's child runs: its first line says what it found */
    EXEC_UPLOADING,  /* the upload's child takes the agent's bytes */
    EXEC_READY,      /* the child is the agent */
    EXEC_FAILED,
};

struct exec_transport {
    struct transport base;
    char **argv;               /* the prefix, then "sh" "-c" and the command of the stage */
    size_t n_prefix;
    char *node, *address, *agent_local, *agent_dir, *stderr_path;
    int timeout_s, login_timeout_s;
    bool attach;
    enum exec_stage stage;
    struct transport *child;   /* the probe, which becomes the agent */
    struct strbuf first;       /* the agent's first line, taken to see it was no probe's */
    bool first_held;
    struct strbuf early;       /* lines sent before the agent ran */
    char *err, *hint;
    int64_t started_ms, deadline_ms, login_ms;
    bool uploaded;
    /* the upload's child */
    pid_t up_pid;
    int up_in, up_out;
    struct strbuf up_data, up_said;
    size_t up_off;
    char *up_dir, *up_name, up_hex[65];
};

static const struct transport_ops exec_ops;

static struct exec_transport *exec_of(const struct transport *t)
{
    return (struct exec_transport *)t;
}

struct transport *transport_exec_new(const char *const *prefix, const char *node, const char *address,
                                     const struct transport_exec_opts *o)
{
    struct exec_transport *x = xcalloc(1, sizeof *x);
    size_t n = 0;
    x->base.ops = &exec_ops;
    while (prefix[n]) n++;
    x->argv = xcalloc(n + 4, sizeof *x->argv);
    for (size_t i = 0; i < n; i++) x->argv[i] = xstrdup(prefix[i]);
    x->n_prefix = n;
    x->node = xstrdup(node);
    x->address = address ? xstrdup(address) : NULL;
    x->agent_local = o->agent_local ? xstrdup(o->agent_local) : NULL;
    x->agent_dir = o->agent_dir ? xstrdup(o->agent_dir) : NULL;
    x->stderr_path = o->stderr_path ? xstrdup(o->stderr_path) : NULL;
    x->timeout_s = o->timeout_s > 0 ? o->timeout_s : 10;
    x->login_timeout_s = o->login_timeout_s > 0 ? o->login_timeout_s : 60;
    x->attach = o->attach;
    x->login_ms = -1;
    x->up_pid = -1;
    x->up_in = x->up_out = -1;
    strbuf_init(&x->first);
    strbuf_init(&x->early);
    strbuf_init(&x->up_data);
    strbuf_init(&x->up_said);
    return &x->base;
}

static void exec_fail(struct exec_transport *x, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void exec_fail(struct exec_transport *x, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(x->err);
    free(x->hint);
    x->err = xvasprintf(fmt, ap);
    x->hint = hint ? xstrdup(hint) : NULL;
    va_end(ap);
    x->stage = EXEC_FAILED;
}

/* The stage's command after the prefix: sh -c cmd (taken). */
static void set_command(struct exec_transport *x, char *cmd)
{
    free(x->argv[x->n_prefix + 2]);
    free(x->argv[x->n_prefix]);
    free(x->argv[x->n_prefix + 1]);
    x->argv[x->n_prefix] = xstrdup("sh");
    x->argv[x->n_prefix + 1] = xstrdup("-c");
    x->argv[x->n_prefix + 2] = cmd;
}

static void probe_begin(struct exec_transport *x)
{
    set_command(x, agent_probe_for_kit(x->agent_local, x->agent_dir, x->attach ? "--attach" : NULL));
    x->child = transport_child_new((const char *const *)x->argv, x->address, x->stderr_path);
    transport_start(x->child);
    x->stage = EXEC_PROBING;
    x->deadline_ms = mono_ms() + (int64_t)x->login_timeout_s * 1000;
}

static void exec_start(struct transport *t)
{
    struct exec_transport *x = exec_of(t);
    if (x->stage != EXEC_NEW) return;
    x->started_ms = mono_ms();
    probe_begin(x);
}

/* ---- the upload ------------------------------------------------------------------------- */

static void upload_close(struct exec_transport *x)
{
    if (x->up_in >= 0) close(x->up_in);
    if (x->up_out >= 0) close(x->up_out);
    x->up_in = x->up_out = -1;
}

static void upload_begin(struct exec_transport *x, const struct agent_probe_reply *r)
{
    char *err = NULL;
    const char *local = r->agent->path;
    strbuf_reset(&x->up_data);
    strbuf_reset(&x->up_said);
    x->up_off = 0;
    if (agent_upload_load(local, &x->up_data, x->up_hex) < 0) {
        exec_fail(x, "check that --agent-dir is writable on the node", "cannot read %s: %s", local, strerror(errno));
        return;
    }
    if ((err = agent_upload_changed(local, x->up_hex, r->agent->sha256, x->node)) != NULL) {
        exec_fail(x, "check that --agent-dir is writable on the node", "%s", err);
        free(err);
        return;
    }
    free(x->up_dir);
    free(x->up_name);
    x->up_dir = xstrdup(r->dir);
    x->up_name = xstrdup(r->agent->remote_name);
    set_command(x, agent_upload_command(x->up_dir, x->up_name, x->up_hex, 0700));
    x->up_pid = transport_child_spawn(x->argv, x->stderr_path, &x->up_in, &x->up_out, &err);
    if (x->up_pid < 0) {
        exec_fail(x, NULL, "%s", err);
        free(err);
        return;
    }
    x->stage = EXEC_UPLOADING;
    x->deadline_ms = mono_ms() + (int64_t)x->timeout_s * 3000;
}

/* Writes what the pipe takes, reads what the command says, and judges it once it exited. */
static void upload_pump(struct exec_transport *x)
{
    char buf[4096];
    int status;
    while (x->up_in >= 0 && x->up_off < x->up_data.len) {
        ssize_t w = write(x->up_in, x->up_data.buf + x->up_off, x->up_data.len - x->up_off);
        if (w > 0) x->up_off += (size_t)w;
        else if (w < 0 && errno == EINTR) continue;
        else break; /* EAGAIN; or it is gone, which its output and status tell */
    }
    if (x->up_in >= 0 && x->up_off == x->up_data.len) {
        close(x->up_in); /* its end of file: the script checks and installs */
        x->up_in = -1;
    }
    for (;;) {
        ssize_t r = x->up_out >= 0 ? read(x->up_out, buf, sizeof buf) : 0;
        if (r > 0) {
            agent_upload_tail(&x->up_said, buf, (size_t)r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return;
        break;
    }
    upload_close(x);
    if (waitpid(x->up_pid, &status, WNOHANG) != x->up_pid) return; /* a moment after its output ends */
    x->up_pid = -1;
    struct strbuf none;
    char *hint = NULL, *err;
    strbuf_init(&none);
    err = agent_upload_verdict(&x->up_said, &none, WIFEXITED(status) ? WEXITSTATUS(status) : -1, x->node,
                               x->up_dir, x->up_name, x->up_hex, &hint);
    if (err) {
        exec_fail(x, hint ? hint : "check that --agent-dir is writable on the node", "%s", err);
    } else {
        x->uploaded = true;
        probe_begin(x);
    }
    free(hint);
    free(err);
    strbuf_done(&none);
}

static void upload_kill(struct exec_transport *x)
{
    upload_close(x);
    if (x->up_pid > 0) {
        kill(x->up_pid, SIGKILL);
        transport_child_orphan(x->up_pid);
    }
    x->up_pid = -1;
}

/* ---- the probe's answer ------------------------------------------------------------------- */

/* The probe's child ended, or its first line came: what it found. */
static void probe_pump(struct exec_transport *x, short revents)
{
    struct agent_probe_reply r;
    transport_pump(x->child, revents);
    if (!transport_next_line_into(x->child, &x->first)) {
        if (transport_state(x->child) == TRANSPORT_CLOSED || transport_state(x->child) == TRANSPORT_FAILED)
            exec_fail(x, "run the agent by hand through the kind's command to see why",
                      "starting ddptop-agent on %s failed: %s", x->node, transport_error(x->child));
        return;
    }
    if (x->login_ms < 0) x->login_ms = mono_ms() - x->started_ms;
    agent_probe_read(x->first.buf, x->node, x->agent_local, x->uploaded, &r);
    if (r.said == PROBE_AGENT) {
        x->first_held = true;
        x->stage = EXEC_READY;
        x->deadline_ms = 0;
        if (x->early.len) transport_send_line(x->child, x->early.buf); /* their '\n's kept, one added */
        strbuf_reset(&x->early);
    } else {
        /* the probe's shell exits after its word: reaped as an orphan */
        transport_detach(x->child);
        transport_free(x->child);
        x->child = NULL;
        if (r.said == PROBE_REFUSED) exec_fail(x, r.hint, "%s", r.error);
        else upload_begin(x, &r);
    }
    agent_probe_reply_done(&r);
}

static void exec_pump(struct transport *t, short revents)
{
    struct exec_transport *x = exec_of(t);
    if (x->stage == EXEC_PROBING) probe_pump(x, revents);
    else if (x->stage == EXEC_UPLOADING) upload_pump(x);
    else if (x->stage == EXEC_READY) transport_pump(x->child, revents);
    if (x->stage == EXEC_UPLOADING && mono_ms() >= x->deadline_ms) {
        upload_kill(x);
        exec_fail(x, "check the link to the node, or install the agent there by hand",
                  "uploading ddptop-agent to %s timed out", x->node);
    } else if (x->stage == EXEC_PROBING && mono_ms() >= x->deadline_ms) {
        exec_fail(x, "make the node's shell start faster, or raise --login-timeout",
                  "ddptop-agent did not start on %s within %d s", x->node, x->login_timeout_s);
    }
}

static int exec_pollfds(struct transport *t, struct pollfd *p, int max)
{
    struct exec_transport *x = exec_of(t);
    int n = 0;
    if (x->stage == EXEC_UPLOADING) {
        if (x->up_out >= 0 && n < max) p[n++] = (struct pollfd){.fd = x->up_out, .events = POLLIN};
        if (x->up_in >= 0 && n < max) p[n++] = (struct pollfd){.fd = x->up_in, .events = POLLOUT};
        return n;
    }
    return x->child && x->stage != EXEC_FAILED ? transport_pollfds(x->child, p, max) : 0;
}

static int64_t exec_deadline_ms(const struct transport *t)
{
    const struct exec_transport *x = exec_of(t);
    if (x->stage == EXEC_READY) return transport_deadline_ms(x->child);
    if (x->stage == EXEC_UPLOADING) {
        int64_t soon = mono_ms() + 50; /* its exit comes a moment after its output ends */
        return x->up_out < 0 && soon < x->deadline_ms ? soon : x->deadline_ms;
    }
    return x->stage == EXEC_PROBING ? x->deadline_ms : 0;
}

static enum transport_state exec_state(const struct transport *t)
{
    const struct exec_transport *x = exec_of(t);
    if (x->stage == EXEC_FAILED) return TRANSPORT_FAILED;
    if (x->stage != EXEC_READY) return TRANSPORT_CONNECTING;
    return x->first_held ? TRANSPORT_READY : transport_state(x->child);
}

static bool exec_connecting(const struct transport *t)
{
    return exec_of(t)->stage < EXEC_READY;
}

static const char *exec_error(const struct transport *t)
{
    const struct exec_transport *x = exec_of(t);
    return x->err || !x->child ? x->err : transport_error(x->child);
}

static const char *exec_hint(const struct transport *t)
{
    const struct exec_transport *x = exec_of(t);
    return x->err || !x->child ? x->hint : transport_hint(x->child);
}

static const char *exec_address(const struct transport *t)
{
    return exec_of(t)->address;
}

static bool exec_uploaded(const struct transport *t)
{
    return exec_of(t)->uploaded;
}

static const char *exec_upload_method(const struct transport *t)
{
    return exec_of(t)->uploaded ? "exec" : NULL;
}

static int64_t exec_login_ms(const struct transport *t)
{
    return exec_of(t)->login_ms;
}

static void exec_send_line(struct transport *t, const char *line)
{
    struct exec_transport *x = exec_of(t);
    if (x->stage == EXEC_READY) {
        transport_send_line(x->child, line);
    } else if (x->stage != EXEC_FAILED) {
        if (x->early.len) strbuf_adds(&x->early, "\n");
        strbuf_adds(&x->early, line);
    }
}

static bool exec_next_line_into(struct transport *t, struct strbuf *out)
{
    struct exec_transport *x = exec_of(t);
    if (x->stage != EXEC_READY) return false;
    if (x->first_held) {
        x->first_held = false;
        strbuf_reset(out);
        strbuf_add(out, x->first.buf, x->first.len);
        return true;
    }
    return transport_next_line_into(x->child, out);
}

static char *exec_next_line(struct transport *t)
{
    struct strbuf line;
    strbuf_init(&line);
    if (exec_next_line_into(t, &line)) return line.buf ? line.buf : xstrdup("");
    strbuf_done(&line);
    return NULL;
}

static uint64_t exec_bytes_in(const struct transport *t)
{
    const struct exec_transport *x = exec_of(t);
    return x->child && x->stage == EXEC_READY ? transport_bytes_in(x->child) : 0;
}

static void exec_close(struct transport *t)
{
    struct exec_transport *x = exec_of(t);
    upload_kill(x);
    if (x->child) transport_close(x->child);
    if (x->stage < EXEC_READY) exec_fail(x, NULL, "closed by ddptop");
    x->first_held = false;
}

/* The agent (or the probe) goes as a child transport does: detached, abandoned or ended. */
static void exec_release(struct transport *t)
{
    struct exec_transport *x = exec_of(t);
    upload_kill(x);
    if (x->child) {
        if (t->detached) transport_detach(x->child);
        if (t->abandoned) transport_abandon(x->child);
        transport_free(x->child);
    }
    for (size_t i = 0; x->argv && x->argv[i]; i++) free(x->argv[i]);
    free(x->argv);
    free(x->node);
    free(x->address);
    free(x->agent_local);
    free(x->agent_dir);
    free(x->stderr_path);
    free(x->err);
    free(x->hint);
    free(x->up_dir);
    free(x->up_name);
    strbuf_done(&x->first);
    strbuf_done(&x->early);
    strbuf_done(&x->up_data);
    strbuf_done(&x->up_said);
    free(x);
}

static const struct transport_ops exec_ops = {
    .start = exec_start,
    .pollfds = exec_pollfds,
    .pump = exec_pump,
    .state = exec_state,
    .connecting = exec_connecting,
    .error = exec_error,
    .address = exec_address,
    .send_line = exec_send_line,
    .next_line = exec_next_line,
    .next_line_into = exec_next_line_into,
    .bytes_in = exec_bytes_in,
    .close = exec_close,
    .release = exec_release,
    .deadline_ms = exec_deadline_ms,
    .hint = exec_hint,
    .uploaded = exec_uploaded,
    .upload_method = exec_upload_method,
    .login_ms = exec_login_ms,
};
