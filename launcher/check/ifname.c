/* NCCL_SOCKET_IFNAME as NCCL reads it (src/misc/socket.cc and utils.cc, ncclFindInterfaces,
 * parseStringList, matchIfList), so that `ddptop check` predicts what NCCL will pick:
 *  - a value of one character or less counts as unset (NCCL tests strlen(env) > 1);
 *  - a leading '^' excludes, then a leading '=' asks for exact names (so "^=docker0" works and
 *    "=^eth" is the exact name "^eth");
 *  - the rest is a comma-separated list; empty items are skipped, ":port" after a name is
 *    ignored for interface names, and only the first 16 items count (NCCL's MAX_IFS);
 *  - without a value NCCL tries, in turn, "ib", "^docker,lo,virbr", "docker", "lo", "virbr"
 *    and takes the first that selects anything (its NCCL_COMM_ID subnet step is left out: it
 *    needs addresses we do not model).
 * An interface is usable when it is up and has an IPv4 address. */
#include "ifname.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define IF_LIST_MAX 16      /* NCCL's MAX_IFS */

struct ifspec {
    bool exclude, exact;
    char *item[IF_LIST_MAX];
    size_t n;
};

static bool spec_set(const char *spec)
{
    return spec && strlen(spec) > 1;
}

static void spec_parse(const char *spec, struct ifspec *sp)
{
    memset(sp, 0, sizeof *sp);
    if ((sp->exclude = spec[0] == '^')) spec++;
    if ((sp->exact = spec[0] == '=')) spec++;
    while (*spec && sp->n < IF_LIST_MAX) {
        size_t len = strcspn(spec, ",");
        size_t name_len = strcspn(spec, ",:");
        if (name_len > 0) sp->item[sp->n++] = xstrndup(spec, name_len);
        spec += len;
        if (*spec == ',') spec++;
    }
}

static void spec_done(struct ifspec *sp)
{
    for (size_t i = 0; i < sp->n; i++) free(sp->item[i]);
}

static bool spec_match(const struct ifspec *sp, const char *name)
{
    bool hit = sp->n == 0;          /* NCCL: an empty list matches everything */
    for (size_t i = 0; i < sp->n && !hit; i++)
        hit = sp->exact ? strcmp(name, sp->item[i]) == 0
                        : strncmp(name, sp->item[i], strlen(sp->item[i])) == 0;
    return hit != sp->exclude;
}

/* The interfaces NCCL avoids unless nothing else is there. */
static bool is_fallback_name(const char *name)
{
    return strncmp(name, "docker", 6) == 0 || strncmp(name, "lo", 2) == 0 ||
           strncmp(name, "virbr", 5) == 0;
}

static bool usable(const struct iface *f)
{
    return f->up && f->has_ipv4 && f->name;
}

bool ifname_match(const char *spec, const char *name)
{
    struct ifspec sp;
    if (!name) return false;
    /* Unset: whether the name is one NCCL's default rule would pick when it has a choice. */
    if (!spec_set(spec)) return !is_fallback_name(name);
    spec_parse(spec, &sp);
    bool hit = spec_match(&sp, name);
    spec_done(&sp);
    return hit;
}

static size_t select_with(const char *spec, const struct iface *ifs, size_t n, size_t *idx)
{
    struct ifspec sp;
    size_t k = 0;
    spec_parse(spec, &sp);
    for (size_t i = 0; i < n; i++)
        if (usable(&ifs[i]) && spec_match(&sp, ifs[i].name)) idx[k++] = i;
    spec_done(&sp);
    return k;
}

size_t ifname_select(const char *spec, const struct iface *ifs, size_t n, size_t *idx)
{
    static const char *const defaults[] = { "ib", "^docker,lo,virbr", "docker", "lo", "virbr" };
    if (spec_set(spec)) return select_with(spec, ifs, n, idx);
    for (size_t d = 0; d < sizeof defaults / sizeof defaults[0]; d++) {
        size_t k = select_with(defaults[d], ifs, n, idx);
        if (k) return k;
    }
    return 0;
}

/* ---- suggestion ---- */

/* How many usable interfaces of one node the first plen bytes of p select (as a prefix or an
 * exact name), and whether any of them is a fallback interface. */
static size_t count_selected(const struct iface *ifs, size_t n, const char *p, size_t plen,
                             bool exact, bool *fallback)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!usable(&ifs[i])) continue;
        bool hit = exact ? strlen(ifs[i].name) == plen && strncmp(ifs[i].name, p, plen) == 0
                         : strncmp(ifs[i].name, p, plen) == 0;
        if (!hit) continue;
        k++;
        if (fallback && is_fallback_name(ifs[i].name)) *fallback = true;
    }
    return k;
}

/* Selects something on every node and never a fallback interface. */
static bool on_every_node(const struct iface *const *nodes, const size_t *counts, size_t n_nodes,
                          const char *p, size_t plen, bool exact)
{
    for (size_t j = 0; j < n_nodes; j++) {
        bool fallback = false;
        if (count_selected(nodes[j], counts[j], p, plen, exact, &fallback) == 0) return false;
        if (fallback) return false;
    }
    return true;
}

/* A name present on every node, ib* first as NCCL prefers it: "eth0", or "=eth1" when the
 * prefix eth1 would also take eth10 somewhere. */
static char *suggest_common_name(const struct iface *const *nodes, const size_t *counts,
                                 size_t n_nodes)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < counts[0]; i++) {
            const char *name = nodes[0][i].name;
            if (!usable(&nodes[0][i]) || is_fallback_name(name)) continue;
            if ((strncmp(name, "ib", 2) == 0) != (pass == 0)) continue;
            size_t len = strlen(name);
            if (len < 2 || !on_every_node(nodes, counts, n_nodes, name, len, true)) continue;
            bool wider = false;
            for (size_t j = 0; j < n_nodes && !wider; j++)
                wider = count_selected(nodes[j], counts[j], name, len, false, NULL) >
                        count_selected(nodes[j], counts[j], name, len, true, NULL);
            return wider ? xasprintf("=%s", name) : xstrdup(name);
        }
    }
    return NULL;
}

/* The longest prefix (2+ characters: NCCL ignores shorter values) of some usable name on the
 * first node that selects something on every node and no lo/docker/virbr anywhere. */
static char *suggest_prefix(const struct iface *const *nodes, const size_t *counts,
                            size_t n_nodes)
{
    const char *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < counts[0]; i++) {
        const char *name = nodes[0][i].name;
        if (!usable(&nodes[0][i]) || is_fallback_name(name)) continue;
        for (size_t len = strlen(name); len >= 2 && len > best_len; len--) {
            if (!on_every_node(nodes, counts, n_nodes, name, len, false)) continue;
            best = name;
            best_len = len;
        }
    }
    return best ? xstrndup(best, best_len) : NULL;
}

/* Last resort: each node's own first choice, as a list ("eth0,ens5"). */
static char *suggest_list(const struct iface *const *nodes, const size_t *counts,
                          size_t n_nodes)
{
    const char *pick[IF_LIST_MAX];
    size_t n_pick = 0;
    for (size_t j = 0; j < n_nodes; j++) {
        const char *mine = NULL;
        for (size_t i = 0; i < counts[j] && !mine; i++)
            if (usable(&nodes[j][i]) && !is_fallback_name(nodes[j][i].name))
                mine = nodes[j][i].name;
        for (size_t i = 0; i < counts[j] && !mine; i++)
            if (usable(&nodes[j][i])) mine = nodes[j][i].name;
        if (!mine) return NULL;
        bool covered = false;
        for (size_t k = 0; k < n_pick && !covered; k++)
            covered = strncmp(mine, pick[k], strlen(pick[k])) == 0;
        if (covered) continue;
        if (n_pick == IF_LIST_MAX) return NULL;
        pick[n_pick++] = mine;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t k = 0; k < n_pick; k++) strbuf_addf(&sb, "%s%s", k ? "," : "", pick[k]);
    if (sb.len < 2) {               /* "e" alone would read as unset */
        strbuf_done(&sb);
        return NULL;
    }
    return sb.buf;
}

char *ifname_suggest(const struct iface *const *nodes, const size_t *counts, size_t n_nodes)
{
    if (!nodes || !counts || n_nodes == 0) return NULL;
    char *s = suggest_common_name(nodes, counts, n_nodes);
    if (!s) s = suggest_prefix(nodes, counts, n_nodes);
    if (!s) s = suggest_list(nodes, counts, n_nodes);
    return s;
}
