/* The agent's side of the direct connection under srun (agent_direct.h, wire/direct.h).
 * Blocking with deadlines: it runs once, before the agent's loop exists (and before any keeper
 * or rank is forked: they inherit what is left of the key, which is nothing). */
#include "agent_direct.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"
#include "wire/direct.h"

#define CONNECT_MS 1000
#define HANDSHAKE_MS 3000

static int connect_by(const struct addrinfo *a, int64_t deadline, char *why, size_t wl)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol), err = 0;
    socklen_t el = sizeof err;
    if (fd < 0) {
        snprintf(why, wl, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        snprintf(why, wl, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int64_t left = deadline - mono_ms();
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, wl, "no answer in %d ms", CONNECT_MS);
            close(fd);
            return -1;
        }
        break;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
        snprintf(why, wl, "%s", strerror(err ? err : errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* One line (without '\n') into line[DIRECT_LINE_MAX], by the deadline. */
static int read_line(int fd, char *line, int64_t deadline)
{
    size_t n = 0;
    while (n < DIRECT_LINE_MAX - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - mono_ms();
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t got = recv(fd, line + n, 1, 0); /* byte by byte: nothing after the line is ours */
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return -1;
        if (line[n] == '\n') {
            line[n] = '\0';
            return 0;
        }
        n++;
    }
    return -1;
}

static int send_line(int fd, const char *line)
{
    size_t n = strlen(line);
    return send(fd, line, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int handshake(int fd, const unsigned char key[DIRECT_KEY_LEN], int task, const char *greeting,
                     struct direct_line_key *tx, struct direct_line_key *rx, char *why, size_t wl)
{
    unsigned char rnd[DIRECT_NONCE_HEX / 2];
    char na[DIRECT_NONCE_HEX + 1], nc[DIRECT_NONCE_HEX + 1], mc[DIRECT_MAC_HEX + 1], want[65];
    char line[DIRECT_LINE_MAX];
    int64_t deadline = mono_ms() + HANDSHAKE_MS;
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(why, wl, "getrandom: %s", strerror(errno));
        return -1;
    }
    util_hex(rnd, sizeof rnd, na);
    /* HM: ddptop keeps a key holder's handshake when strangers' connections crowd its port */
    direct_mac(key, "hello", task, na, NULL, want);
    snprintf(line, sizeof line, "ddptop-direct 2 %d %s %s\n", task, na, want);
    if (send_line(fd, line) != 0 || read_line(fd, line, deadline) != 0) {
        snprintf(why, wl, "ddptop did not answer its greeting");
        return -1;
    }
    if (direct_reply_parse(line, nc, mc) != 0) {
        snprintf(why, wl, "the answer is not ddptop's");
        return -1;
    }
    direct_mac(key, "controller", task, na, nc, want);
    if (!direct_mac_equal(mc, want)) {
        /* whoever listens there does not hold the key ddptop gave this step */
        snprintf(why, wl, "the listener there could not prove it is this step's ddptop");
        return -1;
    }
    direct_mac(key, "agent", task, na, nc, want);
    if (strlen(greeting) + DIRECT_MAC_HEX + 3 > sizeof line) {
        snprintf(why, wl, "the greeting is too long");
        return -1;
    }
    snprintf(line, sizeof line, "%s %s\n", want, greeting);
    if (send_line(fd, line) != 0) {
        snprintf(why, wl, "the connection broke during the handshake");
        return -1;
    }
    direct_line_init(tx, key, DIRECT_ROLE_AGENT_LINES, task, na, nc);
    direct_line_init(rx, key, DIRECT_ROLE_CONTROLLER_LINES, task, na, nc);
    return 0;
}

/* The key's text (64 hex digits) where it is: the variable's value in the block the kernel
 * wrote at exec, which /proc/PID/environ reads for the life of the process whatever unsetenv
 * does (it only drops the pointer from environ[]), and which a fork copies. Overwritten in place,
 * then removed. */
static void env_wipe(const char *name)
{
    char *v = getenv(name);
    if (v) explicit_bzero(v, strlen(v));
    unsetenv(name);
}

/* Wipes the key and says why there is no connection: the process is dumpable again, since
 * it holds nothing (the user's debugger and a core dump work on it, as on any process). */
static int give_up(unsigned char key[DIRECT_KEY_LEN], int fd)
{
    explicit_bzero(key, DIRECT_KEY_LEN);
    if (fd >= 0) close(fd);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    return -1;
}

int agent_direct_connect(int task, const char *greeting, struct direct_line_key *tx, struct direct_line_key *rx,
                         char *why, size_t wl)
{
    const char *port = getenv(DIRECT_ENV_PORT), *keyhex = getenv(DIRECT_ENV_KEY);
    const char *host = getenv("SLURM_SRUN_COMM_HOST");
    unsigned char key[DIRECT_KEY_LEN];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char hostcopy[256], portcopy[16];
    int fd = -1, one = 1, rc;
    int64_t deadline;
    why[0] = '\0';
    if (keyhex) {
        /* no other process of the user (a rank, a job of theirs on this node) may read the key
         * or what is made of it from our memory or /proc while we hold them */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    if (!port || !keyhex) {
        unsetenv(DIRECT_ENV_PORT);
        env_wipe(DIRECT_ENV_KEY);
        return keyhex ? give_up(key, -1) : -1;
    }
    rc = direct_key_parse(keyhex, key);
    snprintf(portcopy, sizeof portcopy, "%s", port);
    env_wipe(DIRECT_ENV_KEY); /* the ranks inherit the agent's environment: never the key */
    unsetenv(DIRECT_ENV_PORT);
    if (rc != 0) {
        snprintf(why, wl, "%s is not 64 hex digits", DIRECT_ENV_KEY);
        return give_up(key, -1);
    }
    if (!host || !*host) host = getenv("SLURM_LAUNCH_NODE_IPADDR");
    if (!host || !*host) {
        snprintf(why, wl, "neither SLURM_SRUN_COMM_HOST nor SLURM_LAUNCH_NODE_IPADDR says where ddptop runs");
        return give_up(key, -1);
    }
    snprintf(hostcopy, sizeof hostcopy, "%s", host);
    if ((rc = getaddrinfo(hostcopy, portcopy, &hints, &res)) != 0) {
        snprintf(why, wl, "%s: %s", hostcopy, gai_strerror(rc));
        return give_up(key, -1);
    }
    deadline = mono_ms() + CONNECT_MS;
    for (const struct addrinfo *a = res; a && fd < 0; a = a->ai_next) fd = connect_by(a, deadline, why, wl);
    freeaddrinfo(res);
    if (fd < 0) {
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s", why);
        snprintf(why, wl, "connect to %s port %s: %s", hostcopy, portcopy, tmp);
        return give_up(key, -1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (handshake(fd, key, task, greeting, tx, rx, why, wl) != 0) return give_up(key, fd);
    /* the lines' keys stay (the relay's), and so does PR_SET_DUMPABLE 0 */
    explicit_bzero(key, sizeof key);
    /* the relay's thread writes with blocking sends (its back-pressure, as on srun's stdout) */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}
