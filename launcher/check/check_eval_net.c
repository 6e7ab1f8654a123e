/* Verdicts of the nccl (interfaces under NCCL_SOCKET_IFNAME) and tcp (reachability) checks;
 * see check_eval.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"
#include "ifname.h"
#include "parity.h"
#include "util/util.h"
#include "wire/json_num.h"

/* An interface's MTU and speed as the facts give them: whole numbers in range, else unknown
 * (0). 64 KiB is the largest MTU Linux allows; 10 Tb/s leaves room for tomorrow's links. */
#define IF_MTU_MAX 65536
#define IF_SPEED_MAX 10000000

static int if_number(const cJSON *v, int hi)
{
    int x;
    return json_int_in_i(v, 0, hi, &x) ? x : 0;
}

struct node_ifaces {
    struct iface *ifs;
    const cJSON **src;       /* the facts entry of each interface */
    size_t n;
};

static void ifaces_from_facts(const cJSON *facts, struct node_ifaces *ni)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(facts, "ifaces");
    size_t n = (size_t)(cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0), k = 0;
    ni->ifs = xcalloc(n ? n : 1, sizeof *ni->ifs);
    ni->src = xcalloc(n ? n : 1, sizeof *ni->src);
    for (const cJSON *it = n ? arr->child : NULL; it; it = it->next) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *ipv4 = cJSON_GetObjectItemCaseSensitive(it, "ipv4");
        const cJSON *mtu = cJSON_GetObjectItemCaseSensitive(it, "mtu");
        if (!cJSON_IsString(name)) continue;
        ni->ifs[k].name = name->valuestring;
        ni->ifs[k].up = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "up"));
        ni->ifs[k].has_ipv4 = cJSON_IsArray(ipv4) && cJSON_GetArraySize(ipv4) > 0;
        ni->ifs[k].mtu = if_number(mtu, IF_MTU_MAX);
        ni->src[k] = it;
        k++;
    }
    ni->n = k;
}

static bool is_local_only(const char *name)
{
    return strcmp(name, "lo") == 0 || strncmp(name, "docker", 6) == 0;
}

static void describe_iface(struct strbuf *sb, const cJSON *it)
{
    const cJSON *ipv4 = cJSON_GetObjectItemCaseSensitive(it, "ipv4");
    const cJSON *mtu = cJSON_GetObjectItemCaseSensitive(it, "mtu");
    const cJSON *speed = cJSON_GetObjectItemCaseSensitive(it, "speed_mbps");
    strbuf_addf(sb, "%s (", cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring);
    if (cJSON_IsArray(ipv4) && cJSON_IsString(ipv4->child)) strbuf_addf(sb, "%s", ipv4->child->valuestring);
    else strbuf_adds(sb, "no IPv4");
    if (if_number(mtu, IF_MTU_MAX) > 0) strbuf_addf(sb, ", MTU %d", if_number(mtu, IF_MTU_MAX));
    if (if_number(speed, IF_SPEED_MAX) > 0) strbuf_addf(sb, ", %d Mb/s", if_number(speed, IF_SPEED_MAX));
    strbuf_adds(sb, ")");
}

static void nccl_one(struct check_result *res, const struct check_node_info *node, const struct node_ifaces *ni,
                     const char *suggest, bool lo_is_fine, const char *mtu_desc)
{
    size_t *idx = xcalloc(ni->n ? ni->n : 1, sizeof *idx);
    size_t k = ifname_select(node->ifname_spec, ni->ifs, ni->n, idx);
    cJSON *f = check_result_fields(res), *sel = cJSON_AddArrayToObject(f, "selected");
    cJSON *ib = cJSON_GetObjectItemCaseSensitive(node->facts, "ib");
    bool only_local = k > 0;
    struct strbuf sb, hint;
    strbuf_init(&sb);
    strbuf_init(&hint);
    node->ifname_spec ? (void)cJSON_AddStringToObject(f, "ifname", node->ifname_spec)
                      : (void)cJSON_AddNullToObject(f, "ifname");
    suggest ? (void)cJSON_AddStringToObject(f, "suggest", suggest) : (void)cJSON_AddNullToObject(f, "suggest");
    if (cJSON_IsArray(ib)) cJSON_AddItemToObject(f, "ib", cJSON_Duplicate(ib, 1));
    for (size_t i = 0; i < k; i++) {
        cJSON_AddItemToArray(sel, cJSON_CreateString(ni->ifs[idx[i]].name));
        if (!is_local_only(ni->ifs[idx[i]].name)) only_local = false;
    }
    if (suggest) strbuf_addf(&hint, "set NCCL_SOCKET_IFNAME=%s (it works on every node)", suggest);

    if (k == 0) {
        strbuf_addf(&sb, "%s%s%s selects no interface that is up with an IPv4 address on %s (has:",
                    node->ifname_spec ? "NCCL_SOCKET_IFNAME=" : "",
                    node->ifname_spec ? node->ifname_spec : "NCCL's default rule", "", node->name);
        for (size_t i = 0; i < ni->n; i++)
            strbuf_addf(&sb, "%s %s%s%s", i ? "," : "", ni->ifs[i].name, ni->ifs[i].up ? "" : " (down)",
                        ni->ifs[i].up && !ni->ifs[i].has_ipv4 ? " (no IPv4)" : "");
        strbuf_adds(&sb, ni->n ? ")" : " none)");
        if (!suggest) strbuf_adds(&hint, "bring up an interface with an IPv4 address, then set NCCL_SOCKET_IFNAME to it");
        check_result_set(res, CHECK_FAIL, sb.buf, hint.buf);
    } else if (only_local && !lo_is_fine) {
        strbuf_adds(&sb, "only ");
        for (size_t i = 0; i < k; i++) strbuf_addf(&sb, "%s%s", i ? ", " : "", ni->ifs[idx[i]].name);
        strbuf_adds(&sb, " would be used: NCCL traffic cannot reach other nodes");
        if (!suggest) strbuf_adds(&hint, "give the nodes a shared network interface and set NCCL_SOCKET_IFNAME to it");
        check_result_set(res, CHECK_WARN, sb.buf, hint.buf);
    } else if (mtu_desc) {
        strbuf_addf(&sb, "MTU differs across nodes: %s", mtu_desc);
        check_result_set(res, CHECK_WARN, sb.buf, "use the same MTU on the NCCL interfaces of every node");
    } else {
        strbuf_adds(&sb, "NCCL would use ");
        for (size_t i = 0; i < k; i++) {
            if (i) strbuf_adds(&sb, ", ");
            describe_iface(&sb, ni->src[idx[i]]);
        }
        for (const cJSON *it = cJSON_IsArray(ib) ? ib->child : NULL; it; it = it->next) {
            const char *nm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
            const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "state"));
            if (nm) strbuf_addf(&sb, "; IB %s %s", nm, st ? st : "");
        }
        check_result_set(res, CHECK_PASS, sb.buf, NULL);
    }
    strbuf_done(&sb);
    strbuf_done(&hint);
    free(idx);
}

void check_eval_nccl(struct check_report *r, const struct check_node_info *nodes, size_t n)
{
    struct node_ifaces *ni = xcalloc(n ? n : 1, sizeof *ni);
    const struct iface **arrs = xcalloc(n ? n : 1, sizeof *arrs);
    size_t *counts = xcalloc(n ? n : 1, sizeof *counts), n_reach = 0;
    const char **names = xcalloc(n ? n : 1, sizeof *names);
    char **mtus = xcalloc(n ? n : 1, sizeof *mtus);
    size_t *reach = xcalloc(n ? n : 1, sizeof *reach);
    bool all_loopback = true;
    char *suggest, *mtu_desc;
    struct parity_group *g = NULL;
    size_t ng;

    for (size_t i = 0; i < n; i++) {
        if (!nodes[i].facts) continue;
        ifaces_from_facts(nodes[i].facts, &ni[i]);
        arrs[n_reach] = ni[i].ifs;
        counts[n_reach] = ni[i].n;
        names[n_reach] = nodes[i].name;
        reach[n_reach++] = i;
        if (!nodes[i].loopback) all_loopback = false;
    }
    suggest = n_reach ? ifname_suggest(arrs, counts, n_reach) : NULL;
    /* per node, the MTUs of the interfaces NCCL would use, compared across nodes */
    for (size_t j = 0; j < n_reach; j++) {
        size_t i = reach[j], *idx = xcalloc(ni[i].n ? ni[i].n : 1, sizeof *idx);
        size_t k = ifname_select(nodes[i].ifname_spec, ni[i].ifs, ni[i].n, idx);
        struct strbuf sb;
        strbuf_init(&sb);
        for (size_t m = 0; m < k; m++)
            if (ni[i].ifs[idx[m]].mtu) strbuf_addf(&sb, "%s%d", sb.len ? "," : "", ni[i].ifs[idx[m]].mtu);
        mtus[j] = sb.buf; /* NULL when unknown or nothing selected */
        free(idx);
    }
    mtu_desc = parity_describe(names, (const char *const *)mtus, n_reach);
    ng = mtu_desc ? parity_group((const char *const *)mtus, n_reach, &g) : 0;
    for (size_t j = 0; j < n_reach; j++) {
        size_t i = reach[j];
        bool minority = false;
        for (size_t gi = 1; gi < ng; gi++)
            for (size_t m = 0; m < g[gi].n; m++)
                if (g[gi].hosts[m] == j && mtus[j]) minority = true;
        /* one node, or every node on this machine: loopback is how they talk */
        nccl_one(&r->rows[i].checks[CHECK_NCCL], &nodes[i], &ni[i], suggest, all_loopback || n_reach < 2,
                 minority ? mtu_desc : NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].facts) continue;
        if (r->rows[i].checks[CHECK_NCCL].status == CHECK_PENDING)
            check_result_set(&r->rows[i].checks[CHECK_NCCL], CHECK_SKIP, "not run: no facts from the node", NULL);
    }
    if (ng) parity_groups_free(g, ng);
    for (size_t i = 0; i < n; i++) {
        free(ni[i].ifs);
        free(ni[i].src);
    }
    for (size_t j = 0; j < n_reach; j++) free(mtus[j]);
    free(mtu_desc);
    free(suggest);
    free(ni);
    free(arrs);
    free(counts);
    free(names);
    free(mtus);
    free(reach);
}

/* ---- tcp ---- */

void check_eval_tcp(struct check_report *r, const struct check_node_info *nodes, size_t n,
                    const bool *tested, const char *const *listen_err, const char *master_err,
                    int master_port, const struct check_tcp_result *res, size_t n_res)
{
    size_t *ok_out = xcalloc(n ? n : 1, sizeof *ok_out), *ok_in = xcalloc(n ? n : 1, sizeof *ok_in);
    size_t *probes = xcalloc(n ? n : 1, sizeof *probes), *probed_by = xcalloc(n ? n : 1, sizeof *probed_by);
    enum check_status *st = xcalloc(n ? n : 1, sizeof *st);
    struct strbuf *msg = xcalloc(n ? n : 1, sizeof *msg);
    double *max_ms = xcalloc(n ? n : 1, sizeof *max_ms);
    bool *rdv_ok = xcalloc(n ? n : 1, sizeof *rdv_ok);
    cJSON **failures = xcalloc(n ? n : 1, sizeof *failures);

    for (size_t i = 0; i < n; i++) {
        strbuf_init(&msg[i]);
        st[i] = CHECK_PASS;
    }
    for (size_t k = 0; k < n_res; k++) {
        const struct check_tcp_result *t = &res[k];
        if (!t->rendezvous) {
            probes[t->src]++;
            probed_by[t->dst]++;
        }
        if (t->done && t->ok) {
            if (t->rendezvous) {
                rdv_ok[t->src] = true;
            } else {
                ok_out[t->src]++;
                ok_in[t->dst]++;
            }
            if (t->ms > max_ms[t->src]) max_ms[t->src] = t->ms;
            continue;
        }
        /* --json keeps every failed pair, once, at its source (bounded by its probes) */
        if (!failures[t->src]) failures[t->src] = cJSON_CreateArray();
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "to", nodes[t->dst].name);
        cJSON_AddNumberToObject(e, "port", t->port);
        cJSON_AddBoolToObject(e, "rendezvous", t->rendezvous);
        cJSON_AddStringToObject(e, "error", t->done && t->error ? t->error : "no answer");
        cJSON_AddItemToArray(failures[t->src], e);
    }
    check_tcp_group(nodes, n, res, n_res, st, msg);
    for (size_t i = 0; i < n; i++) {
        struct check_result *cr = &r->rows[i].checks[CHECK_TCP];
        cJSON *f;
        if (!tested[i]) {
            if (cr->status == CHECK_PENDING)
                check_result_set(cr, CHECK_SKIP, "not run: the node's agent was not available", NULL);
            continue;
        }
        f = check_result_fields(cr);
        cJSON_AddNumberToObject(f, "peers_reached", (double)ok_out[i]);
        cJSON_AddNumberToObject(f, "reached_by", (double)ok_in[i]);
        cJSON_AddNumberToObject(f, "probes", (double)probes[i]);
        cJSON_AddNumberToObject(f, "probed_by", (double)probed_by[i]);
        cJSON_AddBoolToObject(f, "rendezvous_ok", rdv_ok[i]);
        check_fields_add_ms(f, "max_connect_ms", max_ms[i]);
        cJSON_AddItemToObject(f, "failures", failures[i] ? failures[i] : cJSON_CreateArray());
        failures[i] = NULL;
        if (i == 0 && master_err) {
            char hint[200];
            snprintf(hint, sizeof hint, "pick a free --master-port, or stop what listens on port %d on %s",
                     master_port, nodes[0].name);
            check_result_setf(cr, CHECK_FAIL, hint, "cannot listen on the rendezvous port %d: %s%s%s",
                              master_port, master_err, msg[0].len ? "; " : "", msg[0].len ? msg[0].buf : "");
            continue;
        }
        if (listen_err[i]) {
            check_result_setf(cr, CHECK_FAIL, "check the node's limits on open files and its port range",
                              "cannot listen on an ephemeral port: %s", listen_err[i]);
            continue;
        }
        if (st[i] == CHECK_PASS) {
            check_result_setf(cr, CHECK_PASS, NULL, "reached %zu peer%s%s, reached by %zu", ok_out[i],
                              ok_out[i] == 1 ? "" : "s",
                              rdv_ok[i] ? " and the rendezvous port"
                              : master_err ? " (rendezvous not tested: the first node cannot listen)" : "",
                              ok_in[i]);
        } else {
            check_result_set(cr, st[i], msg[i].buf,
                             st[i] == CHECK_FAIL
                                 ? "open TCP between the nodes (firewall, security groups, routes, /etc/hosts): "
                                   "NCCL connects to random ports, the rendezvous to --master-port"
                                 : "the other end of these connections fails with most peers: fix that end first");
        }
    }
    for (size_t i = 0; i < n; i++) {
        strbuf_done(&msg[i]);
        cJSON_Delete(failures[i]);
    }
    free(ok_out);
    free(ok_in);
    free(probes);
    free(probed_by);
    free(st);
    free(msg);
    free(max_ms);
    free(rdv_ok);
    free(failures);
}
