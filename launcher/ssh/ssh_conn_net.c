/* SSH transport, first stages: name resolution (getaddrinfo_a, so a slow DNS server never
 * stalls the poll loop), nonblocking TCP connect over every address of the host, and public
 * key authentication that never prompts (agent, -i, hostfile identity=, IdentityFile). */
#include "ssh_conn_int.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hosts/hostfile.h"

/* getaddrinfo_a keeps pointers into the request until it completes; when a lookup cannot be
 * cancelled the request is leaked rather than waited for (a few hundred bytes per dead name). */
struct gai_req {
    struct gaicb cb;
    struct addrinfo hints;
    char *name;
    char port[16];
};

static void gai_req_free(struct gai_req *g)
{
    if (g->cb.ar_result) freeaddrinfo(g->cb.ar_result);
    free(g->name);
    free(g);
}

void ssh_conn_resolve_begin(struct ssh_conn *c)
{
    struct addrinfo hints = {0};
    struct gaicb *list[1];
    struct sigevent sev = {0};
    int rc;

    snprintf(c->port_str, sizeof c->port_str, "%d", c->port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(c->address, c->port_str, &hints, &c->ai_head) == 0) {
        c->ai_next = c->ai_head;
        ssh_conn_connect_next(c);
        return;
    }
    c->gai = xcalloc(1, sizeof *c->gai);
    c->gai->hints = hints;
    c->gai->hints.ai_flags = AI_NUMERICSERV;
    c->gai->name = xstrdup(c->address);
    memcpy(c->gai->port, c->port_str, sizeof c->gai->port);
    c->gai->cb.ar_name = c->gai->name;
    c->gai->cb.ar_service = c->gai->port;
    c->gai->cb.ar_request = &c->gai->hints;
    list[0] = &c->gai->cb;
    sev.sigev_notify = SIGEV_NONE;
    rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &sev);
    if (rc != 0) {
        gai_req_free(c->gai);
        c->gai = NULL;
        ssh_conn_fail(c, "check the host name", "cannot resolve %s: %s", c->address, gai_strerror(rc));
        return;
    }
    c->state = SSH_CONN_RESOLVING;
}

void ssh_conn_resolve_poll(struct ssh_conn *c)
{
    int rc;
    if (!c->gai) return;
    rc = gai_error(&c->gai->cb);
    if (rc == EAI_INPROGRESS) return;
    if (rc != 0) {
        gai_req_free(c->gai);
        c->gai = NULL;
        ssh_conn_fail(c, "check the host name (DNS, /etc/hosts, HostName in the ssh config)",
                      "cannot resolve %s: %s", c->address, gai_strerror(rc));
        return;
    }
    c->ai_head = c->ai_next = c->gai->cb.ar_result;
    c->gai->cb.ar_result = NULL;
    gai_req_free(c->gai);
    c->gai = NULL;
    ssh_conn_connect_next(c);
}

void ssh_conn_resolve_cancel(struct ssh_conn *c)
{
    if (!c->gai) return;
    if (gai_cancel(&c->gai->cb) == EAI_NOTCANCELED) {
        c->gai = NULL; /* still in use by the resolver thread: leaked on purpose */
        return;
    }
    gai_req_free(c->gai);
    c->gai = NULL;
}

/* Tries the next address; on the last failure, fails the connection with the last error. */
void ssh_conn_connect_next(struct ssh_conn *c)
{
    while (c->ai_next) {
        struct addrinfo *ai = c->ai_next;
        int one = 1, fd;
        c->ai_next = ai->ai_next;
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            snprintf(c->connect_err, sizeof c->connect_err, "%s", strerror(errno));
            continue;
        }
        /* clock samples are single small round trips: no Nagle delay */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
            c->fd = fd;
            c->ai_cur = ai;
            c->syn_ms = mono_ms();
            c->state = SSH_CONN_CONNECTING;
            return;
        }
        snprintf(c->connect_err, sizeof c->connect_err, "%s", strerror(errno));
        close(fd);
    }
    c->connect_err[0] = (char)tolower((unsigned char)c->connect_err[0]); /* "connection refused" */
    ssh_conn_fail(c, "check that the node is up and sshd listens on that port",
                  "cannot connect to %s port %d: %s", c->address, c->port,
                  c->connect_err[0] ? c->connect_err : "no address");
}

/* libssh asks for a passphrase through this callback; answering "none" skips the key instead
 * of letting OpenSSL prompt on the terminal (ddptop never prompts). */
static int no_passphrase(const char *prompt, char *buf, size_t len, int echo, int verify,
                         void *userdata)
{
    struct ssh_conn *c = userdata;
    (void)prompt, (void)buf, (void)len, (void)echo, (void)verify;
    c->passphrase_needed = true;
    return -1;
}

#if LIBSSH_VERSION_INT >= SSH_VERSION_INT(0, 10, 0)
static void tried_add(struct ssh_conn *c, const char *what)
{
    /* the same identity is reported at every step while it is being tried */
    const char *p = c->tried.buf;
    size_t n = strlen(what);
    while (p && (p = strstr(p, what)) != NULL) {
        if ((p == c->tried.buf || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return;
        p += n;
    }
    if (c->tried.len) strbuf_adds(&c->tried, ", ");
    strbuf_adds(&c->tried, what);
}
#endif

void ssh_conn_auth_begin(struct ssh_conn *c)
{
    ssh_callbacks_init(&c->cb);
    c->cb.userdata = c;
    c->cb.auth_function = no_passphrase;
    ssh_set_callbacks(c->session, &c->cb);
    c->tried_agent = getenv("SSH_AUTH_SOCK") != NULL;
}

static void auth_failed(struct ssh_conn *c, int rc)
{
    int methods = ssh_userauth_list(c->session, NULL);
    struct strbuf msg, hint;
    strbuf_init(&msg);
    strbuf_init(&hint);
    strbuf_addf(&msg, "authentication failed for %s@%s:%d (tried: %s%s%s%s", c->user, c->address, c->port,
                c->tried_agent ? "agent" : "", c->tried_agent && c->tried.len ? ", " : "",
                c->tried.len ? "keys " : "", c->tried.len ? c->tried.buf : "");
    if (!c->tried_agent && !c->tried.len) strbuf_adds(&msg, "no agent and no key file found");
    if (rc == SSH_AUTH_PARTIAL)
        strbuf_adds(&msg, "; the key was accepted but the server wants a second factor");
    if (!(methods & SSH_AUTH_METHOD_PUBLICKEY) &&
        (methods & (SSH_AUTH_METHOD_PASSWORD | SSH_AUTH_METHOD_INTERACTIVE)))
        strbuf_adds(&msg, "; the server asks for a password");
    strbuf_adds(&msg, "; password auth is not supported: set up a key)");
    strbuf_addf(&hint, "install your public key on the node (ssh-copy-id -p %d %s@%s), or load it "
                "into ssh-agent, or pass -i FILE", c->port, c->user, c->address);
    if (c->passphrase_needed)
        strbuf_adds(&hint, "; a key needs a passphrase: add it to ssh-agent with ssh-add");
    ssh_conn_fail(c, hint.buf, "%s", msg.buf);
    strbuf_done(&msg);
    strbuf_done(&hint);
}

void ssh_conn_auth_pump(struct ssh_conn *c)
{
    int rc = ssh_userauth_publickey_auto(c->session, NULL, NULL);
#if LIBSSH_VERSION_INT >= SSH_VERSION_INT(0, 10, 0)
    char *id = NULL;
    if (ssh_userauth_publickey_auto_get_current_identity(c->session, &id) == SSH_OK && id) {
        tried_add(c, id);
        ssh_string_free_char(id);
    }
#endif /* libssh 0.9 (the tarball's, Debian 11's) cannot say which key it tried */
    if (rc == SSH_AUTH_AGAIN) return;
    if (rc == SSH_AUTH_SUCCESS) {
        ssh_conn_exec_begin(c);
        return;
    }
    if (rc == SSH_AUTH_ERROR) {
        ssh_conn_fail(c, "run ssh -v to the node to see why", "authentication with %s@%s:%d failed: %s",
                      c->user, c->address, c->port, ssh_get_error(c->session));
        return;
    }
    auth_failed(c, rc);
}
