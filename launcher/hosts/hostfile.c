/* Hostfile parsing (format: docs/hostfile.md): one `[user@]host[:port] [key=value ...]` per
 * line, Slurm-style hostlists, IPv6, DeepSpeed hostfiles as-is; plus the scheduler sources
 * --slurm (SLURM_JOB_NODELIST) and --pbs (PBS_NODEFILE). Pure: the only I/O is reading the
 * file and the environment. Every error names FILE:LINE (or the variable) and what to do. */
#include "hostfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hostlist.h"
#include "util/util.h"

#define HOSTFILE_MAX_BYTES (16u << 20)
#define SLOTS_MAX      65535
#define NAME_MAX_LEN   253             /* DNS name limit */

static const char KNOWN_KEYS_HINT[] =
    "(known: slots, port, user, identity, or an upper-case environment variable such as "
    "NCCL_SOCKET_IFNAME)";

/* Writes the message to err (when there is room) and returns -1: the parser's error path. */
static int hostfile_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int hostfile_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- host records and the duplicate index ---- */

/* Two entries are the same host when the name (case-insensitive, as DNS is) and the port
 * (unset = 22) agree. The user does not matter: alice@gpu1 and bob@gpu1 are one machine. */
static int effective_port(int port) { return port ? port : 22; }

static uint64_t host_hash(const char *name, int port)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        h = (h ^ c) * 1099511628211ull;
    }
    return (h ^ (uint64_t)effective_port(port)) * 1099511628211ull;
}

struct host_index { size_t *slot; size_t cap; };     /* open addressing; slot = index + 1 */

static size_t index_find(const struct host_index *ix, const struct host *hosts,
                         const char *name, int port)
{
    if (!ix->cap) return SIZE_MAX;
    for (size_t i = host_hash(name, port) & (ix->cap - 1);; i = (i + 1) & (ix->cap - 1)) {
        if (!ix->slot[i]) return SIZE_MAX;
        const struct host *h = &hosts[ix->slot[i] - 1];
        if (effective_port(h->port) == effective_port(port) && strcasecmp(h->name, name) == 0)
            return ix->slot[i] - 1;
    }
}

static void index_put(struct host_index *ix, const struct host *hosts, size_t n_hosts, size_t k)
{
    if (2 * n_hosts >= ix->cap) {                        /* keep the load under one half */
        free(ix->slot);
        ix->cap = ix->cap ? ix->cap * 2 : 64;
        while (2 * n_hosts >= ix->cap) ix->cap *= 2;
        ix->slot = xcalloc(ix->cap, sizeof *ix->slot);
        for (size_t j = 0; j < n_hosts; j++)
            if (j != k) index_put(ix, hosts, 0, j);
    }
    size_t i = host_hash(hosts[k].name, hosts[k].port) & (ix->cap - 1);
    while (ix->slot[i]) i = (i + 1) & (ix->cap - 1);
    ix->slot[i] = k + 1;
}

static void host_clear(struct host *h)
{
    free(h->name);
    free(h->user);
    free(h->identity);
    for (size_t i = 0; i < h->n_env; i++) {
        free(h->env[i].key);
        free(h->env[i].value);
    }
    free(h->env);
    memset(h, 0, sizeof *h);
}

void hostlist_free(struct hostlist *hl)
{
    if (!hl) return;
    for (size_t i = 0; i < hl->n; i++) host_clear(&hl->hosts[i]);
    free(hl->hosts);
    hl->hosts = NULL;
    hl->n = 0;
}

const char *host_env_get(const struct host *h, const char *key)
{
    for (size_t i = 0; h && key && i < h->n_env; i++)
        if (strcmp(h->env[i].key, key) == 0) return h->env[i].value;
    return NULL;
}

/* The hosts point at one copy of the source name stored after the array, in the same
 * allocation, so hostlist_free needs no extra bookkeeping and hand-built lists stay valid. */
static void hostlist_seal(struct hostlist *hl, const char *source)
{
    size_t len = strlen(source) + 1;
    hl->hosts = xrealloc(hl->hosts, hl->n * sizeof *hl->hosts + len);
    char *copy = (char *)(hl->hosts + hl->n);
    memcpy(copy, source, len);
    for (size_t i = 0; i < hl->n; i++) hl->hosts[i].source = copy;
}

/* ---- checks on names and values ---- */

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '-' || c == '_';
}

/* Host and user names end up as ssh arguments and in ~/.ssh/config lookups: a leading '-'
 * would read as an option, anything outside [A-Za-z0-9._-] has no business there. */
static int name_check(const char *what, const char *s, char *err, size_t errlen)
{
    size_t n = strlen(s);
    if (n == 0) return hostfile_fail(err, errlen, "empty %s", what);
    if (n > NAME_MAX_LEN)
        return hostfile_fail(err, errlen, "%s '%.40s...' is longer than %d characters", what, s,
                    NAME_MAX_LEN);
    if (s[0] == '-' || s[0] == '.')
        return hostfile_fail(err, errlen, "bad %s '%s' (may not start with '%c')", what, s, s[0]);
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(s[i]))
            return hostfile_fail(err, errlen, "bad %s '%s' (letters, digits, '.', '-' and '_' only)",
                        what, s);
    return 0;
}

static int ipv6_check(const char *addr, char *err, size_t errlen)
{
    char buf[INET6_ADDRSTRLEN + 1];
    struct in6_addr a;
    const char *zone = strchr(addr, '%');
    size_t n = zone ? (size_t)(zone - addr) : strlen(addr);
    bool zone_ok = true;
    if (zone) {
        zone_ok = zone[1] != '\0';
        for (const char *z = zone + 1; *z; z++) zone_ok = zone_ok && is_name_char(*z);
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

struct line_spec {
    char *user, *expr, *identity;
    bool ipv6;
    int port, slots;
    struct host_env *env;
    size_t n_env;
};

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
        int rc = name_check("user", user, err, errlen);
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
        rc = name_check("user", val, err, errlen);
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

struct parser {
    const char *source;
    struct hostlist hl;
    size_t cap;
    struct host_index ix;
};

/* Adds one host; on a duplicate, returns the index of the first one. */
static size_t parser_add(struct parser *ps, const char *name, const struct line_spec *ls,
                         int line)
{
    size_t dup = index_find(&ps->ix, ps->hl.hosts, name, ls->port);
    if (dup != SIZE_MAX) return dup;
    if (ps->hl.n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 16;
        ps->hl.hosts = xrealloc(ps->hl.hosts, ps->cap * sizeof *ps->hl.hosts);
    }
    struct host *h = &ps->hl.hosts[ps->hl.n];
    memset(h, 0, sizeof *h);
    h->name = xstrdup(name);
    h->user = ls->user ? xstrdup(ls->user) : NULL;
    h->identity = ls->identity ? xstrdup(ls->identity) : NULL;
    h->port = ls->port;
    h->slots = ls->slots;
    h->line = line;
    if (ls->n_env) {
        h->env = xcalloc(ls->n_env, sizeof *h->env);
        for (size_t i = 0; i < ls->n_env; i++) {
            h->env[i].key = xstrdup(ls->env[i].key);
            h->env[i].value = xstrdup(ls->env[i].value);
        }
        h->n_env = ls->n_env;
    }
    index_put(&ps->ix, ps->hl.hosts, ps->hl.n + 1, ps->hl.n);
    ps->hl.n++;
    return SIZE_MAX;
}

/* Adds the hosts of a spec (its names expanded); errors come without the FILE:LINE prefix. */
static int parser_add_spec(struct parser *ps, const struct line_spec *ls, int line,
                           char *err, size_t errlen)
{
    char **names = NULL;
    int n;
    if (ls->ipv6) {
        names = xcalloc(1, sizeof *names);
        names[0] = xstrdup(ls->expr);
        n = 1;
    } else if ((n = hostlist_expand(ls->expr, &names, err, errlen)) < 0) {
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!ls->ipv6 && name_check("host name", names[i], err, errlen) < 0) rc = -1;
        else if (ps->hl.n >= HOSTS_MAX)
            rc = hostfile_fail(err, errlen, "too many hosts (at most %d)", HOSTS_MAX);
        else {
            size_t dup = parser_add(ps, names[i], ls, line);
            if (dup != SIZE_MAX && ps->hl.hosts[dup].line > 0)
                rc = hostfile_fail(err, errlen, "duplicate host %s (first on line %d)", names[i],
                          ps->hl.hosts[dup].line);
            else if (dup != SIZE_MAX)
                rc = hostfile_fail(err, errlen, "duplicate host %s", names[i]);
        }
    }
    hostlist_names_free(names, n);
    return rc;
}

static void parser_done(struct parser *ps, struct hostlist *out)
{
    free(ps->ix.slot);
    if (out) {
        hostlist_seal(&ps->hl, ps->source);
        *out = ps->hl;
    } else {
        hostlist_free(&ps->hl);
    }
}

/* One line, comment already cut off: 0 (also for a blank line) or -1 with a bare message. */
static int line_parse(struct parser *ps, char *text, int line, char *err, size_t errlen)
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
    if (rc == 0) rc = parser_add_spec(ps, &ls, line, err, errlen);
    line_spec_done(&ls);
    return rc;
}

int hostfile_parse_text(const char *source, const char *text, struct hostlist *out,
                        char *err, size_t errlen)
{
    struct parser ps;
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
            parser_done(&ps, NULL);
            return -1;
        }
        p += len;
        if (*p == '\n') p++;
    }
    if (ps.hl.n == 0) {
        hostfile_fail(err, errlen, "%s: no hosts (write one per line, e.g. gpu01 slots=8)", ps.source);
        parser_done(&ps, NULL);
        return -1;
    }
    parser_done(&ps, out);
    return 0;
}

/* Reads a whole file into a NUL-terminated buffer; a NUL inside is reported by line. */
static char *file_slurp(const char *path, const char *what, char *err, size_t errlen)
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
    char *text = file_slurp(path, "", err, errlen);
    if (!text) return -1;
    int rc = hostfile_parse_text(path, text, out, err, errlen);
    free(text);
    return rc;
}

/* ---- schedulers ---- */

/* Slurm's per-node counts: "4" (every node) or "2(x3),1" (compressed, one per node). */
static int slurm_counts(const char *var, const char *val, size_t n_hosts, int *slots,
                        char *err, size_t errlen)
{
    const char *p = val;
    size_t k = 0;
    bool single = !strchr(val, ',') && !strchr(val, '(');
    while (*p) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10), times = 1;
        if (end == p || *p == '-' || *p == '+' || errno || v > SLOTS_MAX) goto bad;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            times = strtoul(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times == 0 || times > HOSTS_MAX) goto bad;
            p = end + 1;
        }
        if (*p == ',') p++;
        else if (*p) goto bad;
        for (unsigned long t = 0; t < times && k + t < n_hosts; t++) slots[k + t] = (int)v;
        k += times;
    }
    if (single && k == 1) {
        for (size_t i = 1; i < n_hosts; i++) slots[i] = slots[0];
        return 0;
    }
    if (k == n_hosts) return 0;
    return hostfile_fail(err, errlen, "--slurm: %s=%s gives counts for %zu nodes but "
                "SLURM_JOB_NODELIST has %zu", var, val, k, n_hosts);
bad:
    return hostfile_fail(err, errlen, "--slurm: %s=%s is not a count such as 4 or 2(x3),1", var, val);
}

int hostfile_from_slurm(struct hostlist *out, char *err, size_t errlen)
{
    static const char var[] = "SLURM_JOB_NODELIST";
    char msg[512];
    memset(out, 0, sizeof *out);
    const char *list = getenv(var);
    if (!list)
        return hostfile_fail(err, errlen, "--slurm: SLURM_JOB_NODELIST is not set (run inside an "
                    "allocation: salloc/sbatch)");
    struct parser ps;
    struct line_spec ls;
    memset(&ps, 0, sizeof ps);
    memset(&ls, 0, sizeof ls);
    ps.source = var;
    /* Split at top-level commas only: "gpu[01-02,05],cpu1" is two entries. */
    for (const char *p = list; *p;) {
        size_t len = 0;
        int depth = 0;
        while (p[len] && (p[len] != ',' || depth > 0)) {
            depth += p[len] == '[' ? 1 : p[len] == ']' ? -1 : 0;
            len++;
        }
        if (len > 0) {
            ls.expr = xstrndup(p, len);
            int rc = parser_add_spec(&ps, &ls, 0, msg, sizeof msg);
            free(ls.expr);
            ls.expr = NULL;
            if (rc < 0) {
                parser_done(&ps, NULL);
                return hostfile_fail(err, errlen, "--slurm: %s=%s: %s", var, list, msg);
            }
        }
        p += len;
        if (*p == ',') p++;
    }
    if (ps.hl.n == 0) {
        parser_done(&ps, NULL);
        return hostfile_fail(err, errlen, "--slurm: SLURM_JOB_NODELIST is empty (run inside an "
                    "allocation: salloc/sbatch)");
    }
    /* GPUs on the node are the natural slot count; tasks per node when no GPU was asked for. */
    const char *cvar = "SLURM_GPUS_ON_NODE", *cval = getenv(cvar);
    if (!cval || !*cval || strcmp(cval, "0") == 0) {
        cvar = "SLURM_NTASKS_PER_NODE";
        cval = getenv(cvar);
    }
    if (cval && *cval) {
        int *slots = xcalloc(ps.hl.n, sizeof *slots);
        int rc = slurm_counts(cvar, cval, ps.hl.n, slots, err, errlen);
        for (size_t i = 0; rc == 0 && i < ps.hl.n; i++) ps.hl.hosts[i].slots = slots[i];
        free(slots);
        if (rc < 0) {
            parser_done(&ps, NULL);
            return -1;
        }
    }
    parser_done(&ps, out);
    return 0;
}

int hostfile_from_pbs(struct hostlist *out, char *err, size_t errlen)
{
    char msg[512];
    memset(out, 0, sizeof *out);
    const char *path = getenv("PBS_NODEFILE");
    if (!path || !*path)
        return hostfile_fail(err, errlen, "--pbs: PBS_NODEFILE is not set (run inside a PBS job: "
                    "qsub -I or a job script)");
    char *text = file_slurp(path, " (PBS_NODEFILE)", err, errlen);
    if (!text) return -1;
    struct parser ps;
    struct line_spec ls;
    memset(&ps, 0, sizeof ps);
    memset(&ls, 0, sizeof ls);
    ps.source = path;
    int line = 0, rc = 0;
    char *end = text + strlen(text);
    for (char *p = text; p < end && rc == 0;) {
        size_t len = strcspn(p, "\n");
        char *next = p + len + (p[len] == '\n'), *save = NULL, *name, *extra;
        line++;
        p[len] = '\0';
        name = strtok_r(p, " \t\r", &save);
        extra = name ? strtok_r(NULL, " \t\r", &save) : NULL;
        p = next;
        if (!name) continue;
        if (extra)
            rc = hostfile_fail(err, errlen, "%s:%d: one host name per line expected, got '%s %s'",
                      path, line, name, extra);
        else if (name_check("host name", name, msg, sizeof msg) < 0)
            rc = hostfile_fail(err, errlen, "%s:%d: %s", path, line, msg);
        else {
            /* One line per slot: a repeated name adds a slot to its first entry. */
            size_t first = index_find(&ps.ix, ps.hl.hosts, name, 0);
            if (first != SIZE_MAX) {
                ps.hl.hosts[first].slots++;
            } else if (ps.hl.n >= HOSTS_MAX) {
                rc = hostfile_fail(err, errlen, "%s:%d: too many hosts (at most %d)", path, line,
                          HOSTS_MAX);
            } else {
                ls.slots = 1;
                parser_add(&ps, name, &ls, line);
            }
        }
    }
    free(text);
    if (rc == 0 && ps.hl.n == 0)
        rc = hostfile_fail(err, errlen, "%s: no hosts (PBS_NODEFILE is empty)", path);
    parser_done(&ps, rc == 0 ? out : NULL);
    return rc;
}
