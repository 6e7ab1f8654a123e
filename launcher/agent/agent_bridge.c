/* `ddptop-agent --attach`: the bridge a controller starts on a node to reach the agent that
 * kept its ranks while the controller was away (docs/protocol.md "Reconnecting"). It says
 * {"ev":"bridge"}, reads one line from the controller ({"op":"attach","run":R,"node":N}),
 * finds that agent's socket (agent_sock.h), checks that the agent is our user, and hands it its
 * own stdin and stdout: from then on the controller talks to the agent directly, no byte is
 * copied here. It waits until the agent lets go of the link ("bye") and exits 0; when there is
 * no such agent, or it dies holding the link, it says {"ev":"gone","error":...} and exits 3. */
#include "agent_bridge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cJSON.h>

#include "agent_sock.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define ATTACH_LINE_WAIT_MS 60000
#define AGENT_ANSWER_MS 10000

static void say(int out_fd, cJSON *msg)
{
    char *line = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!line) return;
    util_write_all(out_fd, line, strlen(line));
    util_write_all(out_fd, "\n", 1);
    free(line);
}

/* final: the agent is known to be gone (nothing listens where it would, or it died holding
 * the link); else this bridge failed and another may do better (a slow agent, a refusal). */
static int gone(int out_fd, bool final, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int gone(int out_fd, bool final, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "ev", WIRE_EV_GONE);
    cJSON_AddBoolToObject(m, "final", final);
    cJSON_AddStringToObject(m, "error", text);
    /* a newline first ends whatever half line a dying agent left on the link */
    util_write_all(out_fd, "\n", 1);
    say(out_fd, m);
    free(text);
    return 3;
}

/* One line from fd, a byte at a time: nothing after it may be taken from the agent's link. */
static int read_line(int fd, char *buf, size_t cap, int wait_ms)
{
    size_t n = 0;
    int64_t until = mono_ms() + wait_ms;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = wait_ms < 0 ? -1 : until - mono_ms();
        if (wait_ms >= 0 && left <= 0) return -1;
        int r = poll(&p, 1, left < 0 ? -1 : (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        char c;
        ssize_t k = read(fd, &c, 1);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return -1;
        if (c == '\n') {
            buf[n] = '\0';
            return (int)n;
        }
        buf[n++] = c;
    }
    return -1;
}

/* Connects to the first candidate path that has a listener; -1 when none has, with *absent
 * true when no candidate had anything listening (not merely one we could not reach). */
static int connect_agent(const char *run, int node, char *tried, size_t triedlen, bool *absent)
{
    *absent = true;
    char **paths = agent_sock_paths(run, node);
    int fd = -1;
    tried[0] = '\0';
    for (size_t i = 0; paths[i] && fd < 0; i++) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(paths[i]) >= sizeof sa.sun_path) continue;
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", paths[i]);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof sa) == 0) {
            fd = s;
            break;
        }
        int e = errno;
        if (s >= 0) close(s);
        if (e != ENOENT && e != ECONNREFUSED && e != ENOTDIR) *absent = false;
        size_t l = strlen(tried);
        snprintf(tried + l, triedlen - l, "%s%s%s", l ? ", " : "", paths[i],
                 e == EACCES || e == EPERM ? " (permission denied)" : "");
    }
    agent_sock_paths_free(paths);
    return fd;
}

int agent_bridge_main(int in_fd, int out_fd)
{
    char line[AGENT_SOCK_LINE_MAX], host[256] = "?", tried[1024];
    gethostname(host, sizeof host - 1);
    cJSON *hi = cJSON_CreateObject();
    cJSON_AddStringToObject(hi, "ev", WIRE_EV_BRIDGE);
    cJSON_AddNumberToObject(hi, "protocol", PROTOCOL_VERSION);
    cJSON_AddStringToObject(hi, "version", DDPTOP_VERSION);
    cJSON_AddNumberToObject(hi, "pid", (double)getpid());
    say(out_fd, hi);

    int len = read_line(in_fd, line, sizeof line, ATTACH_LINE_WAIT_MS);
    if (len < 0) return gone(out_fd, false, "the bridge on %s got no attach request", host);
    cJSON *req = cJSON_ParseWithLength(line, (size_t)len);
    const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op"));
    const char *run = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "run"));
    int node;
    if (!op || strcmp(op, WIRE_OP_ATTACH) != 0 || !util_run_id_ok(run) ||
        !json_int_in_i(cJSON_GetObjectItemCaseSensitive(req, "node"), 0, 1000000, &node)) {
        cJSON_Delete(req);
        return gone(out_fd, false, "the bridge on %s got a malformed attach request", host);
    }
    char *run_id = xstrdup(run);
    cJSON_Delete(req);

    bool absent;
    int s = connect_agent(run_id, node, tried, sizeof tried, &absent);
    if (s < 0 && !absent) {
        int rc = gone(out_fd, false, "cannot reach the agent of run %s node %d on %s (tried %s)", run_id, node,
                      host, tried);
        free(run_id);
        return rc;
    }
    if (s < 0) {
        int rc = gone(out_fd, true, "no agent of run %s node %d on %s (nothing listens at %s): it has exited "
                      "(its --agent-grace ended, or it was stopped), it was killed, or the node rebooted",
                      run_id, node, host, tried);
        free(run_id);
        return rc;
    }
    free(run_id);
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.uid != geteuid()) {
        close(s);
        return gone(out_fd, false, "the agent's socket on %s is not served by our user: not attaching", host);
    }
    /* The attach line and our two descriptors in one message. */
    int fds[2] = {in_fd, out_fd};
    char cbuf[CMSG_SPACE(sizeof fds)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {.iov_base = line, .iov_len = (size_t)len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent;
    do sent = sendmsg(s, &mh, MSG_NOSIGNAL); while (sent < 0 && errno == EINTR);
    if (sent != len) {
        close(s);
        return gone(out_fd, false, "cannot hand the link to the agent on %s: %s", host, strerror(errno));
    }
    char ans[256];
    int alen = read_line(s, ans, sizeof ans, AGENT_ANSWER_MS);
    if (alen < 0) {
        close(s);
        return gone(out_fd, false, "the agent on %s did not answer the bridge", host);
    }
    if (strncmp(ans, "ok ", 3) != 0) {
        close(s);
        return gone(out_fd, false, "the agent on %s refused: %s", host,
                    strncmp(ans, "error ", 6) == 0 ? ans + 6 : ans);
    }
    long agent_pid = strtol(ans + 3, NULL, 10); /* for the message only; strtol saturates */
    /* The agent owns the link now. Wait for its "bye" (it let go of the link) or its end. */
    char bye[16];
    int blen = read_line(s, bye, sizeof bye, -1);
    close(s);
    if (blen >= 0 && strcmp(bye, "bye") == 0) return 0;
    return gone(out_fd, true, "the agent (pid %ld) on %s ended while it held this link (killed?)", agent_pid, host);
}
