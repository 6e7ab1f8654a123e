/* Hostfile parsing (format: docs/hostfile.md): one `[user@]host[:port] [key=value ...]` per
 * line, Slurm-style hostlists, IPv6, DeepSpeed hostfiles as-is. Pure: the only I/O is reading
 * the file. Every error names FILE:LINE and what to do. The hosts go into the table of
 * hostfile_build.c; the scheduler sources (--slurm, --pbs) are hostfile_sched.c. */
#include "hostfile_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostlist.h"
#include "util/util.h"

#define HOSTFILE_MAX_BYTES (16u << 20)

static const char KNOWN_KEYS_HINT[] =
    "(known: slots, port, user, identity, or an upper-case environment variable such as "
    "NCCL_SOCKET_IFNAME)";

/* ---- checks on values ---- */

static int ipv6_check(const char *addr, char *err, size_t errlen)
{
    char buf[INET6_ADDRSTRLEN + 1];
    struct in6_addr a;
    const char *zone = strchr(addr, '%');
    size_t n = zone ? (size_t)(zone - addr) : strlen(addr);
    bool zone_ok = true;
    if (zone) {
        zone_ok = zone[1] != '\0';
        for (const char *z = zone + 1; *z; z++) zone_ok = zone_ok && hostfile_is_name_char(*z);
    }
    if (n < sizeof buf) {
        memcpy(buf, addr, n);
        buf[n] = '\0';
    }
    if (n >= sizeof buf || !zone_ok || inet_pton(AF_INET6, buf, &a) != 1)
        return hostfile_fail(err, errlen, "bad IPv6 address '%s' (e.g. ::1 or [fe80::1%%eth0]:2222)",
                    addr);
    return 0;
}

static int port_parse(const char *s, const char *ctx, int *port, char *err, size_t errlen)
{
    size_t n = strlen(s);
    unsigned long v = is_digits(s, n) && n <= 5 ? digits_value(s, n) : 0;
    if (v < 1 || v > 65535)
        return hostfile_fail(err, errlen, "bad port '%s' in %s (a number 1-65535)", s, ctx);
    *port = (int)v;
    return 0;
}

static bool is_env_name(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
    return true;
}

/* ---- one hostfile line ---- */

static void line_spec_done(struct line_spec *ls)
{
    free(ls->user);
    free(ls->expr);
    free(ls->identity);
    for (size_t i = 0; i < ls->n_env; i++) {
        free(ls->env[i].key);
        free(ls->env[i].value);
    }
    free(ls->env);
}

/* `[user@]host[:port]`, with host a hostlist, [IPv6] or a bare IPv6 address. */
static int host_spec_parse(const char *tok, struct line_spec *ls, char *err, size_t errlen)
{
    const char *rest = tok, *at = strchr(tok, '@'), *port_s = NULL;
    if (at) {
        char *user = xstrndup(tok, (size_t)(at - tok));
        int rc = hostfile_name_check("user", user, err, errlen);
        if (rc < 0 && !*user) hostfile_fail(err, errlen, "empty user before '@' in %s", tok);
        if (rc < 0) { free(user); return -1; }
        ls->user = user;
        rest = at + 1;
        if (strchr(rest, '@')) return hostfile_fail(err, errlen, "more than one '@' in %s", tok);
    }
    if (*rest == '[' && rest[strcspn(rest, ":]")] == ':') {  /* [v6addr] or [v6addr]:port */
        const char *close = strchr(rest, ']');
        if (!close) return hostfile_fail(err, errlen, "unterminated bracket in %s (write [addr]:port)",
                                tok);
        if (close[1] == ':') port_s = close + 2;
        else if (close[1])
            return hostfile_fail(err, errlen, "unexpected '%s' after the address in %s (write "
                        "[addr]:port)", close + 1, tok);
        ls->expr = xstrndup(rest + 1, (size_t)(close - rest - 1));
        ls->ipv6 = true;
    } else {
        const char *colon = NULL;
        int colons = 0, depth = 0;
        for (const char *p = rest; *p; p++) {
            if (*p == '[') depth++;
            else if (*p == ']') depth--;
            else if (*p == ':' && depth == 0 && colons++ == 0) colon = p;
        }
        if (colons >= 2) {                               /* a bare IPv6 address, no port */
            ls->expr = xstrdup(rest);
            ls->ipv6 = true;
        } else {
            ls->expr = colon ? xstrndup(rest, (size_t)(colon - rest)) : xstrdup(rest);
            if (colon) port_s = colon + 1;
        }
    }
    if (!*ls->expr) return hostfile_fail(err, errlen, "empty host in '%s'", tok);
    if (ls->ipv6 && ipv6_check(ls->expr, err, errlen) < 0) return -1;
    /* bracket errors before option errors, in reading order */
    if (!ls->ipv6 && hostlist_validate(ls->expr, err, errlen) < 0) return -1;
    if (port_s && port_parse(port_s, tok, &ls->port, err, errlen) < 0) return -1;
    return 0;
}

static int option_parse(const char *tok, struct line_spec *ls, char *err, size_t errlen)
{
    const char *eq = strchr(tok, '=');
    if (!eq)
        return hostfile_fail(err, errlen, "'%s' is not key=value (options look like slots=4)", tok);
    if (eq == tok) return hostfile_fail(err, errlen, "empty key in '%s'", tok);
    size_t klen = (size_t)(eq - tok);
    const char *val = eq + 1;
    char *key = xstrndup(tok, klen);
    int rc = 0;
    if (strcmp(key, "slots") == 0) {
        size_t n = strlen(val);
        if (ls->slots) rc = hostfile_fail(err, errlen, "slots given twice");
        else if (!is_digits(val, n))
            rc = hostfile_fail(err, errlen, "slots=%s: not a number (slots=N with N >= 1)", val);
        else if (n > 5 || digits_value(val, n) > SLOTS_MAX)
            rc = hostfile_fail(err, errlen, "slots=%s: at most %d slots per host", val, SLOTS_MAX);
        else if ((ls->slots = (int)digits_value(val, n)) == 0)
            rc = hostfile_fail(err, errlen, "slots=%s: a host needs at least one slot", val);
    } else if (strcmp(key, "port") == 0) {
        int port = 0;
        rc = port_parse(val, tok, &port, err, errlen);
        if (rc == 0 && ls->port && ls->port != port)
            rc = hostfile_fail(err, errlen, "port=%d conflicts with port %d (give the port once)", port,
                      ls->port);
        ls->port = port;
    } else if (strcmp(key, "user") == 0) {
        rc = hostfile_name_check("user", val, err, errlen);
        if (rc == 0 && ls->user && strcmp(ls->user, val) != 0)
            rc = hostfile_fail(err, errlen, "user=%s conflicts with user %s (give the user once)", val,
                      ls->user);
        if (rc == 0 && !ls->user) ls->user = xstrdup(val);
    } else if (strcmp(key, "identity") == 0) {
        if (ls->identity) rc = hostfile_fail(err, errlen, "identity given twice");
        else if (!*val) rc = hostfile_fail(err, errlen, "identity= needs a file name");
        else ls->identity = xstrdup(val);
    } else if (is_env_name(key)) {
        for (size_t i = 0; i < ls->n_env && rc == 0; i++)
            if (strcmp(ls->env[i].key, key) == 0)
                rc = hostfile_fail(err, errlen, "%s given twice", key);
        if (rc == 0) {
            ls->env = xrealloc(ls->env, (ls->n_env + 1) * sizeof *ls->env);
            ls->env[ls->n_env].key = key;
            ls->env[ls->n_env++].value = xstrdup(val);
            key = NULL;
        }
    } else {
        rc = hostfile_fail(err, errlen, "unknown key '%s' %s", key, KNOWN_KEYS_HINT);
    }
    free(key);
    return rc;
}

/* One line, comment already cut off: 0 (also for a blank line) or -1 with a bare message. */
static int line_parse(struct hostfile_parser *ps, char *text, int line, char *err, size_t errlen)
{
    static const char ws[] = " \t\r";
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
            return hostfile_fail(err, errlen, "control character 0x%02x (only printable text is "
                        "allowed)", c);
    }
    char *save = NULL, *tok = strtok_r(text, ws, &save);
    if (!tok) return 0;
    struct line_spec ls;
    memset(&ls, 0, sizeof ls);
    int rc = 0;
    if (strchr(tok, '=') && !strchr(tok, '[') && !strchr(tok, ':'))
        rc = hostfile_fail(err, errlen, "'%s' where a host should come first (e.g. gpu01 slots=4)", tok);
    else
        rc = host_spec_parse(tok, &ls, err, errlen);
    while (rc == 0 && (tok = strtok_r(NULL, ws, &save)) != NULL)
        rc = option_parse(tok, &ls, err, errlen);
    if (rc == 0) rc = hostfile_parser_add_spec(ps, &ls, line, err, errlen);
    line_spec_done(&ls);
    return rc;
}

int hostfile_parse_text(const char *source, const char *text, struct hostlist *out,
                        char *err, size_t errlen)
{
    struct hostfile_parser ps;
    char msg[512];
    memset(&ps, 0, sizeof ps);
    memset(out, 0, sizeof *out);
    ps.source = source ? source : "hostfile";
    if (strncmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3;   /* a UTF-8 BOM from an editor */
    int line = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        line++;
        char *buf = xstrndup(p, len);
        buf[strcspn(buf, "#")] = '\0';
        int rc = line_parse(&ps, buf, line, msg, sizeof msg);
        free(buf);
        if (rc < 0) {
            hostfile_fail(err, errlen, "%s:%d: %s", ps.source, line, msg);
            hostfile_parser_done(&ps, NULL);
            return -1;
        }
        p += len;
        if (*p == '\n') p++;
    }
    if (ps.hl.n == 0) {
        hostfile_fail(err, errlen, "%s: no hosts (write one per line, e.g. gpu01 slots=8)", ps.source);
        hostfile_parser_done(&ps, NULL);
        return -1;
    }
    hostfile_parser_done(&ps, out);
    return 0;
}

/* A NUL inside is reported by its line. */
char *hostfile_slurp(const char *path, const char *what, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hostfile_fail(err, errlen, "%s: cannot read: %s%s", path, strerror(errno), what);
        return NULL;
    }
    size_t len = 0, cap = 4096;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            hostfile_fail(err, errlen, "%s: cannot read: %s%s", path, strerror(errno), what);
            goto bad;
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len > HOSTFILE_MAX_BYTES) {
            hostfile_fail(err, errlen, "%s: larger than %u MiB (is this a hostfile?)%s", path,
                 HOSTFILE_MAX_BYTES >> 20, what);
            goto bad;
        }
    }
    close(fd);
    buf[len] = '\0';
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = buf; p < nul; p++) line += *p == '\n';
        hostfile_fail(err, errlen, "%s:%d: contains a NUL byte (is this a text file?)%s", path, line,
             what);
        free(buf);
        return NULL;
    }
    return buf;
bad:
    close(fd);
    free(buf);
    return NULL;
}

int hostfile_parse(const char *path, struct hostlist *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *text = hostfile_slurp(path, "", err, errlen);
    if (!text) return -1;
    int rc = hostfile_parse_text(path, text, out, err, errlen);
    free(text);
    return rc;
}
