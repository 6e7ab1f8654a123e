/* The agent's socket for bridges (agent_sock.h): the private directory, the listener, and the
 * hand-over of a bridge's descriptors (SCM_RIGHTS) into a new link. */
#include "agent_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_nodedir.h"
#include "util/util.h"
#include "wire/protocol.h"

/* A bridge that connected must say what it wants within this long. */
#define HANDOVER_MS 10000

static struct {
    struct agent_watch *listen_w;
    char *path;
    char *run;
    int node;
    ino_t ino;             /* the socket's inode: removed at the end only while still ours */
} sk = {.node = -1};

/* The candidate directories, each DIR/ddptop-UID/agents (the session sockets of the dashboard
 * may share DIR/ddptop-UID on a login node that is also a node). */
static char **bases(void)
{
    return agent_nodedir_bases("agents");
}

char *agent_sock_in(const char *dir, const char *run, int node)
{
    return xasprintf("%s/agent-%s.n%d.sock", dir, run, node);
}

char *agent_sock_path(const char *run, int node, char *err, size_t errlen)
{
    char **dirs = bases(), *path = NULL;
    char why[300] = "";
    for (size_t i = 0; dirs[i] && !path; i++) {
        char w[300];
        if (!agent_nodedir_private(dirs[i], w, sizeof w)) {
            if (!why[0]) snprintf(why, sizeof why, "%s", w);
            continue;
        }
        char *p = agent_sock_in(dirs[i], run, node);
        if (strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            snprintf(why, sizeof why, "the socket path %s is too long", p);
            free(p);
            continue;
        }
        path = p;
    }
    if (!path) snprintf(err, errlen, "no private directory for the agent's socket: %s", why);
    agent_nodedir_free(dirs);
    return path;
}

/* ---- hand-over ---------------------------------------------------------------------------- */

static void handover_refuse(int fd, const char *why)
{
    char *line = xasprintf("error %s\n", why);
    ssize_t n = write(fd, line, strlen(line));
    (void)n;
    free(line);
}

/* One message from the bridge: the controller's attach line and two descriptors (its stdin,
 * its stdout). On success the agent takes them as its link and keeps fd to say "bye" later. */
static void handover_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    char buf[AGENT_SOCK_LINE_MAX + 1];
    char cbuf[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {.iov_base = buf, .iov_len = AGENT_SOCK_LINE_MAX};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    int fds[2] = {-1, -1}, nfds = 0;
    if (!revents) { /* nothing came in time */
        agent_watch_del(ag, w);
        return;
    }
    ssize_t n = recvmsg(w->fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (nfds < 2) fds[nfds++] = fd;
            else close(fd);
        }
    }
    const char *why = NULL;
    cJSON *req = NULL;
    if (n <= 0) why = "no attach message";
    else if (nfds != 2) why = "the attach message must carry two descriptors";
    if (!why) {
        buf[n] = '\0';
        req = cJSON_ParseWithLength(buf, (size_t)n);
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(req, "run");
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(req, "node");
        const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op"));
        if (!req || !op || strcmp(op, WIRE_OP_ATTACH) != 0) why = "not an attach request";
        else if (!cJSON_IsString(run) || !sk.run || strcmp(run->valuestring, sk.run) != 0)
            why = "this agent serves another run";
        else if (!cJSON_IsNumber(node) || node->valuedouble != (double)sk.node) why = "this agent serves another node";
    }
    cJSON_Delete(req);
    if (why) {
        handover_refuse(w->fd, why);
        for (int i = 0; i < nfds; i++) close(fds[i]);
        agent_watch_del(ag, w);
        return;
    }
    char ok[48];
    int len = snprintf(ok, sizeof ok, "ok %d\n", (int)getpid());
    ssize_t wr = write(w->fd, ok, (size_t)len);
    (void)wr;
    int conn = w->fd;
    w->fd = -1; /* the link owns it now: deleting the watch must not close it */
    agent_watch_del(ag, w);
    agent_relink(ag, fds[0], fds[1], conn);
}

static void listen_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    if (!revents) return;
    int fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.uid != geteuid()) {
        /* the directory is ours alone, so this cannot happen unless root got in: say no */
        handover_refuse(fd, "not the agent's user");
        close(fd);
        return;
    }
    struct agent_watch *h = agent_watch_add(ag, fd, POLLIN, handover_ready, NULL, NULL);
    h->deadline_ms = mono_ms() + HANDOVER_MS;
}

int agent_sock_listen(struct agent *ag, const char *run, int node, char *err, size_t errlen)
{
    if (sk.listen_w && sk.run && strcmp(sk.run, run) == 0 && sk.node == node) return 0;
    if (!util_run_id_ok(run)) {
        snprintf(err, errlen, "\"run\" must be 1 to 64 letters, digits, '.', '_' or '-'");
        return -1;
    }
    agent_sock_close(ag);
    char *path = agent_sock_path(run, node, err, errlen);
    if (!path) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    /* A socket left by an agent of the same run and node (one that gave up) is replaced. */
    unlink(path);
    mode_t old = umask(0177); /* the socket: 0600 */
    int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || listen(fd, 8) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        free(path);
        return -1;
    }
    struct stat st;
    sk.ino = lstat(path, &st) == 0 ? st.st_ino : 0;
    sk.listen_w = agent_watch_add(ag, fd, POLLIN, listen_ready, NULL, NULL);
    sk.path = path;
    sk.run = xstrdup(run);
    sk.node = node;
    return 0;
}

void agent_sock_close(struct agent *ag)
{
    if (sk.listen_w) agent_watch_del(ag, sk.listen_w);
    struct stat st;
    /* a newer agent of the same run and node may have taken the name over */
    if (sk.path && lstat(sk.path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == sk.ino) unlink(sk.path);
    free(sk.path);
    free(sk.run);
    sk.listen_w = NULL;
    sk.path = sk.run = NULL;
    sk.node = -1;
}
