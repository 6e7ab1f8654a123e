/* The host table every reader fills (hostfile_int.h): adding hosts with their duplicates
 * found by name and port, the checks a host or user name must pass before it reaches ssh,
 * and the finished list (hostlist_free, host_env_get). */
#include "hostfile_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostlist.h"
#include "util/util.h"

#define NAME_MAX_LEN   253             /* DNS name limit */

int hostfile_fail(char *err, size_t errlen, const char *fmt, ...)
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

size_t hostfile_parser_find(const struct hostfile_parser *ps, const char *name, int port)
{
    return index_find(&ps->ix, ps->hl.hosts, name, port);
}

/* ---- names ---- */

bool hostfile_is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '-' || c == '_';
}

/* Host and user names end up as ssh arguments and in ~/.ssh/config lookups: a leading '-'
 * would read as an option, anything outside [A-Za-z0-9._-] has no business there. */
int hostfile_name_check(const char *what, const char *s, char *err, size_t errlen)
{
    size_t n = strlen(s);
    if (n == 0) return hostfile_fail(err, errlen, "empty %s", what);
    if (n > NAME_MAX_LEN)
        return hostfile_fail(err, errlen, "%s '%.40s...' is longer than %d characters", what, s,
                    NAME_MAX_LEN);
    if (s[0] == '-' || s[0] == '.')
        return hostfile_fail(err, errlen, "bad %s '%s' (may not start with '%c')", what, s, s[0]);
    for (size_t i = 0; i < n; i++)
        if (!hostfile_is_name_char(s[i]))
            return hostfile_fail(err, errlen, "bad %s '%s' (letters, digits, '.', '-' and '_' only)",
                        what, s);
    return 0;
}

/* ---- building the list ---- */

size_t hostfile_parser_add(struct hostfile_parser *ps, const char *name, const struct line_spec *ls, int line)
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

int hostfile_parser_add_spec(struct hostfile_parser *ps, const struct line_spec *ls, int line,
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
        if (!ls->ipv6 && hostfile_name_check("host name", names[i], err, errlen) < 0) rc = -1;
        else if (ps->hl.n >= HOSTS_MAX)
            rc = hostfile_fail(err, errlen, "too many hosts (at most %d)", HOSTS_MAX);
        else {
            size_t dup = hostfile_parser_add(ps, names[i], ls, line);
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

void hostfile_parser_done(struct hostfile_parser *ps, struct hostlist *out)
{
    free(ps->ix.slot);
    if (out) {
        hostlist_seal(&ps->hl, ps->source);
        *out = ps->hl;
    } else {
        hostlist_free(&ps->hl);
    }
}
