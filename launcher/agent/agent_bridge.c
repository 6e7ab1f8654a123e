/* `ddptop-agent --attach`: the bridge a controller starts on a node to reach the agent that
 * kept its ranks while the controller was away (docs/protocol.md "Reconnecting"). It says
 * {"ev":"bridge"}, reads one line from the controller ({"op":"attach","run":R,"node":N}),
 * finds that agent's socket (agent_sock.h), checks that the agent is our user, and hands it its
 * own stdin and stdout: from then on the controller talks to the agent directly, no byte is
 * copied here. It waits until the agent lets go of the link ("bye") and exits 0; when there is
 * no such agent, or it dies holding the link, it says {"ev":"gone","error":...} and exits 3.
 * Other users of the node can make /tmp/ddptop-UID first and listen at our socket's name there
 * (issue 28): so the bridge looks only in directories the agent itself would have used,
 * connects with a deadline, and passes over whatever is not our user's. */
#include "agent_bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "agent_nodedir.h"
#include "agent_sock.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define ATTACH_LINE_WAIT_MS 60000
#define AGENT_ANSWER_MS 10000
/* An agent's listener takes a connection within its loop's next pass: a socket whose backlog
 * stays full this long is not one to wait for. */
#define CONNECT_WAIT_MS 3000

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

/* Whether our agent could be listening in dir (one of agent_nodedir_bases("agents")), asked
 * as the agent asked when it chose it (agent_nodedir_private), without making or changing
 * anything: CAND_OURS, dir and its parent are ours and nobody else can write them, so what
 * listens there was put there by our user; CAND_NOT_OURS, missing, not a directory, a link or
 * another user's: our agent never listens there (whoever does is not asked); CAND_LAX, ours
 * but others may write it now (the agent made it 0700; someone loosened it since): whatever
 * listens there is not trusted, and it is not known that our agent is absent. */
enum cand { CAND_OURS, CAND_NOT_OURS, CAND_LAX };

static enum cand candidate_dir(const char *dir, char *why, size_t whylen)
{
    char *parent = xstrdup(dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    enum cand c = CAND_OURS;
    const char *d[2] = {parent, dir};
    for (int i = 0; i < 2 && c == CAND_OURS; i++) {
        char w[200];
        /* 022, not 077: who could have put a socket there is what counts, not who can read */
        if (agent_nodedir_ours(d[i], 022, false, w, sizeof w)) continue;
        struct stat st;
        if (lstat(d[i], &st) != 0) {
            snprintf(why, whylen, "%s %s", d[i], errno == ENOENT ? "does not exist" : strerror(errno));
            c = CAND_NOT_OURS;
        } else {
            snprintf(why, whylen, "%s %s", d[i], w);
            c = S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? CAND_LAX : CAND_NOT_OURS;
        }
    }
    free(parent);
    return c;
}

/* Connects to path within CONNECT_WAIT_MS: -1 with errno set when it cannot (ETIMEDOUT for a
 * listener that does not take the connection: a full backlog of a listen(0) holds a blocking
 * connect() for ever). */
static int connect_within(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return -1;
    int64_t until = mono_ms() + CONNECT_WAIT_MS;
    for (;;) {
        if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0) break;
        int e = errno, left = (int)(until - mono_ms());
        if (e == EINTR) continue;
        if (left <= 0 && (e == EAGAIN || e == EINPROGRESS)) e = ETIMEDOUT;
        if (e == EAGAIN) { /* a Unix socket's full backlog: no connection is in progress */
            struct timespec pause = {0, (left < 20 ? left : 20) * 1000000L};
            nanosleep(&pause, NULL);
            continue;
        }
        if (e == EINPROGRESS) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            int soerr = 0;
            socklen_t len = sizeof soerr;
            if (poll(&p, 1, left) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && !soerr) break;
            e = soerr ? soerr : ETIMEDOUT;
        }
        close(s);
        errno = e;
        return -1;
    }
    /* the hand-over below waits with poll and a deadline of its own */
    if (fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) != 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Connects to the agent's socket in the first candidate directory where our agent could be
 * listening and where a process of our user takes the connection. -1 when none did, with
 * *absent true when it is known that nobody of ours listens at any of them (a missing socket
 * or directory, a directory our agent would not have used), not merely that one of them could
 * not be reached (refused, busy, another user's listener in a directory that is ours). Every
 * candidate and what it said goes into tried. */
static int connect_agent(const char *run, int node, struct strbuf *tried, bool *absent)
{
    *absent = true;
    char **dirs = agent_nodedir_bases("agents");
    int fd = -1;
    for (size_t i = 0; dirs[i] && fd < 0; i++) {
        char why[400];
        char *path = agent_sock_in(dirs[i], run, node);
        if (tried->len) strbuf_adds(tried, "; ");
        enum cand c = candidate_dir(dirs[i], why, sizeof why);
        if (c != CAND_OURS) {
            if (c == CAND_LAX) *absent = false;
            strbuf_addf(tried, "%s: not tried, %s", path, why);
            free(path);
            continue;
        }
        int s = connect_within(path);
        if (s < 0) {
            int e = errno;
            /* a name too long for a socket is one the agent could not have listened at either */
            if (e != ENOENT && e != ECONNREFUSED && e != ENAMETOOLONG) *absent = false;
            strbuf_addf(tried, "%s: %s", path,
                        e == ENOENT || e == ECONNREFUSED ? "nothing listens"
                        : e == ETIMEDOUT ? "its listener did not take the connection in time"
                        : e == ENAMETOOLONG ? "too long for a socket's path" : strerror(e));
            free(path);
            continue;
        }
        struct ucred cr;
        socklen_t crlen = sizeof cr;
        if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.uid != geteuid()) {
            /* another user cannot put a socket there while the directory is ours: root did */
            *absent = false;
            strbuf_addf(tried, "%s: not served by our user", path);
            close(s);
            free(path);
            continue;
        }
        fd = s;
        free(path);
    }
    agent_nodedir_free(dirs);
    return fd;
}

int agent_bridge_main(int in_fd, int out_fd)
{
    char line[AGENT_SOCK_LINE_MAX], host[256] = "?";
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
    struct strbuf tried;
    strbuf_init(&tried);
    int s = connect_agent(run_id, node, &tried, &absent);
    if (s < 0) {
        int rc = absent ? gone(out_fd, true, "no agent of run %s node %d on %s (nothing of ours listens: %s): it has "
                               "exited (its --agent-grace ended, or it was stopped), it was killed, or the node "
                               "rebooted", run_id, node, host, tried.buf ? tried.buf : "")
                        : gone(out_fd, false, "cannot reach the agent of run %s node %d on %s (%s)", run_id, node,
                               host, tried.buf ? tried.buf : "");
        strbuf_done(&tried);
        free(run_id);
        return rc;
    }
    strbuf_done(&tried);
    free(run_id);
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
