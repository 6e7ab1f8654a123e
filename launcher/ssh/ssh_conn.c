/* SSH transport to one node: resolve, TCP connect, handshake, host key, auth, exec channel.
 * A nonblocking state machine pumped from the caller's poll() loop; see ssh_conn.h.
 * We connect the TCP socket ourselves and hand it to libssh (SSH_OPTIONS_FD) because
 * ssh_connect would otherwise resolve and connect blocking, and a dead host would then stall
 * every other host. Agent deployment (probe, upload) lives in ssh_deploy.c, the agent's lines
 * in ssh_stream.c. */
#include "ssh_conn_int.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "hosts/hostfile.h"
#include "util/util.h"
#include "wire/protocol.h"

/* A bridge's connect unanswered for RESYN_MS starts again on a fresh socket: the node is
 * likely behind a link that is down, and the kernel's own SYN retries (1, 3, 7 s) would notice
 * the link back only seconds later. A fresh SYN costs the node nothing; four a second (at most
 * --fanout bridges at once) find a link back within 250 ms: with one a second the reconnect
 * alone took a second of the replay's time after a partition (issue 32). */
#define RESYN_MS 250

struct ssh_conn *ssh_conn_new(const struct host *h, const struct ssh_conn_opts *o)
{
    struct ssh_conn *c = xcalloc(1, sizeof *c);
    c->h = h;
    c->o = o;
    c->fd = -1;
    c->login_ms = -1;
    c->upload_pipe[0] = c->upload_pipe[1] = -1;
    c->address = xstrdup(h->name);
    c->port = h->port ? h->port : 22;
    line_reader_init(&c->in, PROTOCOL_MAX_LINE);
    strbuf_init(&c->out);
    strbuf_init(&c->errtail);
    strbuf_init(&c->tried);
    return c;
}

void ssh_conn_fail(struct ssh_conn *c, const char *hint, const char *fmt, ...)
{
    va_list ap;
    struct strbuf sb;
    if (c->state == SSH_CONN_FAILED) return;
    strbuf_init(&sb);
    va_start(ap, fmt);
    strbuf_vaddf(&sb, fmt, ap);
    va_end(ap);
    free(c->err);
    free(c->hint);
    c->err = sb.buf;
    c->hint = hint ? xstrdup(hint) : NULL;
    c->state = SSH_CONN_FAILED;
    ssh_conn_teardown(c);
}

/* The session and its socket; safe to call twice. Never while the upload thread runs. */
void ssh_conn_teardown(struct ssh_conn *c)
{
    if (c->upload_running) return; /* the thread owns the session; pump() finishes later */
    ssh_conn_resolve_cancel(c);
    if (c->channel) {
        ssh_channel_free(c->channel);
        c->channel = NULL;
    }
    if (c->session) {
        if (c->fd_given) ssh_disconnect(c->session); /* closes the socket we handed over */
        ssh_free(c->session);
        c->session = NULL;
        if (c->fd_given) c->fd = -1;
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    if (c->ai_head) freeaddrinfo(c->ai_head);
    c->ai_head = c->ai_next = NULL;
    for (int i = 0; i < 2; i++) {
        if (c->upload_pipe[i] >= 0) close(c->upload_pipe[i]);
        c->upload_pipe[i] = -1;
    }
}

void ssh_conn_set_attach(struct ssh_conn *c)
{
    c->attach = true;
}

void ssh_conn_free(struct ssh_conn *c)
{
    if (!c) return;
    if (c->upload_running) {
        /* the thread's blocking I/O fails once the socket is shut down */
        if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
        pthread_join(c->upload_tid, NULL);
        c->upload_running = false;
    }
    ssh_conn_teardown(c);
    free(c->address);
    free(c->user);
    free(c->err);
    free(c->hint);
    free(c->remote_dir);
    free(c->exec_cmd);
    free(c->upload_err);
    free(c->upload_hint);
    free(c->known_hosts);
    line_reader_done(&c->in);
    strbuf_done(&c->out);
    strbuf_done(&c->errtail);
    strbuf_done(&c->tried);
    free(c);
}

static char *default_known_hosts(void)
{
    const char *home = getenv("HOME");
    return xasprintf("%s/.ssh/known_hosts", home && *home ? home : "/");
}

/* The ciphers we offer, best first. libssh (like OpenSSH's client) puts chacha20-poly1305
 * first; on a CPU with AES instructions AES-GCM costs a fraction of it, on both ends (the
 * node's sshd encrypts every byte of rank output, we decrypt it): aes128-gcm first there. The
 * list holds only libssh's own defaults (all AEAD or CTR with encrypt-then-MAC, no CBC, no
 * 3DES), reordered, so nothing weaker can be chosen. A "Ciphers" line in the ssh config wins
 * (it is applied after this). docs/security.md, docs/performance.md. */
#define CIPHERS_AES_FIRST \
    "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-ctr,aes192-ctr,aes128-ctr"

static bool cpu_has_aes(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#elif defined(__aarch64__) && defined(HWCAP_AES) && defined(HWCAP_PMULL)
    unsigned long hw = getauxval(AT_HWCAP);
    return (hw & HWCAP_AES) && (hw & HWCAP_PMULL);
#else
    return false;
#endif
}

/* Builds the libssh session: config first, then our explicit options so that nothing in the
 * config can weaken host key checking or point at another known_hosts file. */
static int session_setup(struct ssh_conn *c)
{
    const struct host *h = c->h;
    const struct ssh_conn_opts *o = c->o;
    int verbosity = o->verbose > 1 ? SSH_LOG_INFO : o->verbose ? SSH_LOG_WARN : SSH_LOG_NONE;
    int strict = 1, no = 0;
    unsigned int port = 0;
    char *s = NULL;

    c->session = ssh_new();
    if (!c->session) util_fatal("out of memory (ssh_new)");
    /* what libssh reads of its socket: whether a call took bytes (ssh_stream.c) */
    ssh_set_counters(c->session, &c->lib_io, NULL);
    ssh_options_set(c->session, SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
    ssh_options_set(c->session, SSH_OPTIONS_HOST, h->name);
    if (cpu_has_aes()) {
        ssh_options_set(c->session, SSH_OPTIONS_CIPHERS_C_S, CIPHERS_AES_FIRST);
        ssh_options_set(c->session, SSH_OPTIONS_CIPHERS_S_C, CIPHERS_AES_FIRST);
    }
    if (ssh_options_parse_config(c->session, o->ssh_config) < 0) {
        ssh_conn_fail(c, "fix the ssh config file (or pass another with -F FILE)",
                      "cannot use ssh config %s: %s", o->ssh_config ? o->ssh_config : "~/.ssh/config",
                      ssh_get_error(c->session));
        return -1;
    }
    ssh_options_set(c->session, SSH_OPTIONS_PROCESS_CONFIG, &no); /* parsed once, above */
    if (h->port) ssh_options_set(c->session, SSH_OPTIONS_PORT, &h->port);
    if (h->user) ssh_options_set(c->session, SSH_OPTIONS_USER, h->user);
    /* IDENTITY prepends: the hostfile's key goes first, then -i, then the config's */
    if (o->identity) ssh_options_set(c->session, SSH_OPTIONS_IDENTITY, o->identity);
    if (h->identity) ssh_options_set(c->session, SSH_OPTIONS_IDENTITY, h->identity);
    c->known_hosts = o->known_hosts ? xstrdup(o->known_hosts) : default_known_hosts();
    ssh_options_set(c->session, SSH_OPTIONS_KNOWNHOSTS, c->known_hosts);
    ssh_options_set(c->session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, c->known_hosts);
    ssh_options_set(c->session, SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict);
    ssh_options_set(c->session, SSH_OPTIONS_PASSWORD_AUTH, &no);
    ssh_options_set(c->session, SSH_OPTIONS_KBDINT_AUTH, &no);
    ssh_options_set(c->session, SSH_OPTIONS_GSSAPI_AUTH, &no);

    if (ssh_options_get(c->session, SSH_OPTIONS_HOST, &s) == SSH_OK && s) {
        free(c->address);
        c->address = xstrdup(s);
        ssh_string_free_char(s);
    }
    if (ssh_options_get_port(c->session, &port) == SSH_OK && port) c->port = (int)port;
    s = NULL;
    if (ssh_options_get(c->session, SSH_OPTIONS_USER, &s) == SSH_OK && s) {
        c->user = xstrdup(s);
        ssh_string_free_char(s);
    } else {
        const char *u = getenv("USER");
        c->user = xstrdup(u && *u ? u : "root");
    }
    s = NULL;
    if (ssh_options_get(c->session, SSH_OPTIONS_PROXYCOMMAND, &s) == SSH_OK && s) {
        /* ProxyCommand/ProxyJump: libssh runs the command; we cannot own the socket */
        c->proxy = true;
        ssh_string_free_char(s);
    }
    ssh_set_blocking(c->session, 0);
    return 0;
}

void ssh_conn_start(struct ssh_conn *c)
{
    c->deadline_ms = mono_ms() + (int64_t)c->o->timeout_s * 1000;
    if (session_setup(c) < 0) return;
    if (c->proxy) {
        c->state = SSH_CONN_HANDSHAKE;
        return;
    }
    ssh_conn_resolve_begin(c);
}

bool ssh_conn_pollfd(struct ssh_conn *c, struct pollfd *p)
{
    p->revents = 0;
    switch (c->state) {
    case SSH_CONN_CONNECTING:
        p->fd = c->fd;
        p->events = POLLOUT;
        return true;
    case SSH_CONN_HANDSHAKE:
    case SSH_CONN_AUTH:
    case SSH_CONN_EXEC:
    case SSH_CONN_PROBING:
    case SSH_CONN_READY: {
        int fd = ssh_get_fd(c->session);
        if (fd < 0) return false;
        p->fd = fd;
        p->events = POLLIN;
        if (ssh_get_poll_flags(c->session) & SSH_WRITE_PENDING) p->events |= POLLOUT;
        return true;
    }
    case SSH_CONN_UPLOADING:
        p->fd = c->upload_pipe[0];
        p->events = POLLIN;
        return true;
    default:
        return false;
    }
}

bool ssh_conn_pending(const struct ssh_conn *c)
{
    /* the agent's output read by libssh and left in its channel's buffer (ssh_stream.c), with
     * room for it in the backlog now: a pump takes it without any fd saying so */
    return (c->state == SSH_CONN_READY || c->state == SSH_CONN_PROBING) && c->more_in &&
           line_reader_pending(&c->in) < PROTOCOL_BACKLOG_MAX;
}

int64_t ssh_conn_deadline_ms(const struct ssh_conn *c)
{
    if (c->state == SSH_CONN_READY || c->state == SSH_CONN_NEW ||
        c->state == SSH_CONN_FAILED || c->state == SSH_CONN_CLOSED)
        return 0;
    if (c->state == SSH_CONN_RESOLVING) {
        /* getaddrinfo_a has no fd to poll: look again soon */
        int64_t soon = mono_ms() + 10;
        return soon < c->deadline_ms ? soon : c->deadline_ms;
    }
    if (c->state == SSH_CONN_CONNECTING && c->attach && c->syn_ms + RESYN_MS < c->deadline_ms)
        return c->syn_ms + RESYN_MS;
    return c->deadline_ms;
}

static void fail_timeout(struct ssh_conn *c)
{
    int t = c->o->timeout_s;
    switch (c->state) {
    case SSH_CONN_RESOLVING:
        ssh_conn_fail(c, "check the host name (DNS, /etc/hosts, HostName in the ssh config)",
                      "resolving %s timed out after %d s", c->address, t);
        break;
    case SSH_CONN_CONNECTING:
        ssh_conn_fail(c, "check that the node is up and that no firewall drops port traffic",
                      "TCP connect to %s port %d timed out after %d s", c->address, c->port, t);
        break;
    case SSH_CONN_HANDSHAKE:
        ssh_conn_fail(c, "check that sshd answers on that port (ssh -v to see where it stops)",
                      "SSH handshake with %s port %d timed out after %d s (no banner or key exchange)",
                      c->address, c->port, t);
        break;
    case SSH_CONN_AUTH:
        ssh_conn_fail(c, "check sshd's logs on the node", "authentication as %s@%s:%d timed out after %d s",
                      c->user, c->address, c->port, t);
        break;
    case SSH_CONN_UPLOADING:
        /* the thread notices the dead socket; pump() reports once it has finished */
        if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
        c->upload_timed_out = true;
        break;
    case SSH_CONN_PROBING:
        ssh_conn_fail(c, "a slow ~/.bashrc, ~/.profile or /etc/profile (conda, pyenv, environment modules) "
                         "delays every login: make it faster for non-interactive shells, or raise --login-timeout",
                      "the login shell on %s did not start ddptop-agent within %d s%s%s", c->h->name,
                      ssh_conn_login_timeout_s(c), c->errtail.len ? ": " : "", c->errtail.len ? c->errtail.buf : "");
        break;
    default:
        ssh_conn_fail(c, "run the agent by hand with ssh to see what it prints",
                      "starting ddptop-agent on %s timed out after %d s%s%s", c->h->name, t,
                      c->errtail.len ? ": " : "", c->errtail.len ? c->errtail.buf : "");
        break;
    }
}

int ssh_conn_login_timeout_s(const struct ssh_conn *c)
{
    return c->o->login_timeout_s > 0 ? c->o->login_timeout_s : 60;
}

int64_t ssh_conn_login_ms(const struct ssh_conn *c)
{
    return c->login_ms;
}

static const char *known_hosts_name(struct ssh_conn *c, char *buf, size_t n)
{
    if (c->port == 22) snprintf(buf, n, "%s", c->address);
    else snprintf(buf, n, "[%s]:%d", c->address, c->port);
    return buf;
}

static char *server_fingerprint(struct ssh_conn *c)
{
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    size_t hlen = 0;
    char *fp = NULL, *out;
    if (ssh_get_server_publickey(c->session, &key) != SSH_OK) return xstrdup("unknown key");
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == 0)
        fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    out = xasprintf("%s %s", ssh_key_type_to_char(ssh_key_type(key)), fp ? fp : "?");
    ssh_clean_pubkey_hash(&hash);
    free(fp);
    ssh_key_free(key);
    return out;
}

/* Our own verification, whatever the ssh config says: changed keys are always refused. */
static int verify_host_key(struct ssh_conn *c)
{
    char kh[300];
    struct strbuf hint;
    char *fp;
    enum ssh_known_hosts_e k = ssh_session_is_known_server(c->session);
    known_hosts_name(c, kh, sizeof kh);
    if (k == SSH_KNOWN_HOSTS_OK) return 0;
    strbuf_init(&hint);
    fp = server_fingerprint(c);
    if (k == SSH_KNOWN_HOSTS_CHANGED || k == SSH_KNOWN_HOSTS_OTHER) {
        strbuf_adds(&hint, "if the node was reinstalled remove the old key with: ssh-keygen -R ");
        strbuf_add_shell_quoted(&hint, kh);
        strbuf_adds(&hint, " -f ");
        strbuf_add_shell_quoted(&hint, c->known_hosts);
        ssh_conn_fail(c, hint.buf, "host key for %s %s %s: possible man-in-the-middle (server offers %s)",
                      c->h->name, kh, k == SSH_KNOWN_HOSTS_CHANGED ? "CHANGED" : "of another type is known",
                      fp);
    } else if (k == SSH_KNOWN_HOSTS_UNKNOWN || k == SSH_KNOWN_HOSTS_NOT_FOUND) {
        if (c->o->accept_new_hosts) {
            if (ssh_session_update_known_hosts(c->session) == SSH_OK) {
                free(fp);
                strbuf_done(&hint);
                c->accepted_new = true;
                return 0;
            }
            ssh_conn_fail(c, "check that the known_hosts file is writable",
                          "cannot add the host key of %s %s to %s: %s", c->h->name, kh, c->known_hosts,
                          ssh_get_error(c->session));
        } else {
            strbuf_adds(&hint, "check the fingerprint, then trust it with: ssh-keyscan ");
            if (c->port != 22) strbuf_addf(&hint, "-p %d ", c->port);
            strbuf_add_shell_quoted(&hint, c->address);
            strbuf_adds(&hint, " >> ");
            strbuf_add_shell_quoted(&hint, c->known_hosts);
            strbuf_adds(&hint, " (or pass --accept-new-hosts)");
            ssh_conn_fail(c, hint.buf, "host key for %s %s is unknown (%s, not in %s)", c->h->name, kh,
                          fp, c->known_hosts);
        }
    } else {
        ssh_conn_fail(c, "check the known_hosts file", "cannot check the host key of %s %s against %s: %s",
                      c->h->name, kh, c->known_hosts, ssh_get_error(c->session));
    }
    free(fp);
    strbuf_done(&hint);
    return -1;
}

static void resyn(struct ssh_conn *c)
{
    struct addrinfo *ai = c->ai_cur;
    close(c->fd);
    c->fd = -1;
    c->ai_next = ai; /* ssh_conn_connect_next takes it again, then the rest */
    ssh_conn_connect_next(c);
}

static void step_connecting(struct ssh_conn *c, short revents)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) {
        if (c->attach && c->ai_cur && mono_ms() - c->syn_ms >= RESYN_MS) resyn(c);
        return;
    }
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == 0) {
        /* a bridge's login gets its whole time, however long its fresh SYNs went on: a link
         * back late in a try left its login too little, and the try that failed for it cost a
         * login, then seconds of backoff (issue 32) */
        if (c->attach) c->deadline_ms = mono_ms() + (int64_t)c->o->timeout_s * 1000;
        ssh_options_set(c->session, SSH_OPTIONS_FD, &c->fd);
        c->fd_given = true;
        c->state = SSH_CONN_HANDSHAKE;
        return;
    }
    close(c->fd);
    c->fd = -1;
    snprintf(c->connect_err, sizeof c->connect_err, "%s", strerror(err));
    ssh_conn_connect_next(c);
}

static void step_handshake(struct ssh_conn *c)
{
    int rc = ssh_connect(c->session);
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
        ssh_conn_fail(c, "check that sshd (not another service) listens there",
                      "SSH handshake with %s port %d failed: %s", c->address, c->port,
                      ssh_get_error(c->session));
        return;
    }
    if (c->proxy) c->fd = -1; /* libssh owns the proxy command's socket */
    if (verify_host_key(c) < 0) return;
    c->state = SSH_CONN_AUTH;
    ssh_conn_auth_begin(c);
}

static void step_once(struct ssh_conn *c, short revents)
{
    switch (c->state) {
    case SSH_CONN_RESOLVING: ssh_conn_resolve_poll(c); break;
    case SSH_CONN_CONNECTING: step_connecting(c, revents); break;
    case SSH_CONN_HANDSHAKE: step_handshake(c); break;
    case SSH_CONN_AUTH: ssh_conn_auth_pump(c); break;
    case SSH_CONN_EXEC: ssh_conn_exec_pump(c); break;
    case SSH_CONN_PROBING:
    case SSH_CONN_READY: ssh_conn_channel_io(c); break;
    case SSH_CONN_UPLOADING: ssh_conn_upload_poll(c, revents); break;
    default: break;
    }
}

void ssh_conn_pump(struct ssh_conn *c, short revents)
{
    /* a step that changes state may make the next one possible without new input */
    for (int guard = 0; guard < 16; guard++) {
        enum ssh_conn_state before = c->state;
        step_once(c, revents);
        revents = 0;
        if (c->state == before) break;
    }
    if (c->deadline_ms && c->state != SSH_CONN_READY && c->state != SSH_CONN_FAILED &&
        c->state != SSH_CONN_CLOSED && c->state != SSH_CONN_NEW && mono_ms() >= c->deadline_ms)
        fail_timeout(c);
}

enum ssh_conn_state ssh_conn_state(const struct ssh_conn *c) { return c->state; }

bool ssh_conn_reached(const struct ssh_conn *c)
{
    return c->fd_given || c->proxy;
}

bool ssh_conn_connecting(const struct ssh_conn *c)
{
    return c->state != SSH_CONN_NEW && c->state != SSH_CONN_READY && c->state != SSH_CONN_FAILED &&
           c->state != SSH_CONN_CLOSED;
}

const char *ssh_conn_error(const struct ssh_conn *c) { return c->err; }
const char *ssh_conn_hint(const struct ssh_conn *c) { return c->hint; }
const char *ssh_conn_address(const struct ssh_conn *c) { return c->address; }
int ssh_conn_port(const struct ssh_conn *c) { return c->port; }
const char *ssh_conn_user(const struct ssh_conn *c) { return c->user ? c->user : "?"; }
bool ssh_conn_uploaded(const struct ssh_conn *c) { return c->uploaded; }
