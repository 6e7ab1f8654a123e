/* NCCL's WARN lines grouped by their shape (nccl.h, docs/nccl.md "Odd ones out"): one group
 * per kind of warning, with how often, on which ranks and nodes, its first line, and for an IB
 * completion error the peers it names. nccl.c hands each WARN line here as it parses it;
 * nccl_odd.c says the groups. A leaf: it only fills the model. */
#include "nccl.h"

#include <string.h>

#include "job.h"
#include "util/util.h"

/* The message with each token that holds a digit made "#", cut before its first " (": one
 * shape for one kind of warning (an IB completion error's "(Recv)" and "(Send)" are one). */
static void shape_of(const char *m, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    const char *paren = memmem(m, len, " (", 2);
    if (paren) len = (size_t)(paren - m);
    for (size_t i = 0; i < len && k + 2 < cap;) {
        size_t e = i;
        bool digit = false;
        while (e < len && m[e] != ' ' && m[e] != ',') digit |= (m[e] >= '0' && m[e] <= '9'), e++;
        if (digit && !(e - i >= 4 && memcmp(m + i, "NET/", 4) == 0)) out[k++] = '#';
        else for (size_t c = i; c < e && k + 1 < cap; c++) out[k++] = m[c];
        if (e < len && k + 1 < cap) out[k++] = m[e];
        i = e + 1;
    }
    out[k] = '\0';
}

void nccl_warn_take(struct job *j, struct nccl_job *n, int rank, const char *m, size_t len, int64_t now_ms)
{
    char shape[sizeof n->warn[0].shape];
    shape_of(m, len, shape, sizeof shape);
    struct nccl_warn_group *g = NULL;
    for (size_t i = 0; i < n->n_warn && !g; i++)
        if (strcmp(n->warn[i].shape, shape) == 0) g = &n->warn[i];
    if (!g) {
        if (n->n_warn == NCCL_WARN_GROUPS) {
            n->warn_dropped++;
            return;
        }
        g = &n->warn[n->n_warn++];
        memcpy(g->shape, shape, sizeof shape);
        size_t k = len < sizeof g->example - 1 ? len : sizeof g->example - 1;
        for (size_t i = 0; i < k; i++) g->example[i] = (unsigned char)m[i] < 0x20 ? '?' : m[i];
        g->example[k] = '\0';
        g->first_ms = now_ms ? now_ms : 1;
        g->nodes = xcalloc(j->n_nodes ? j->n_nodes : 1, 1);
        g->ranks = xcalloc(j->n_ranks ? j->n_ranks : 1, 1);
    }
    g->count++;
    g->ranks[rank] = true;
    int nd = j->ranks[rank].node;
    if (nd >= 0 && (size_t)nd < j->n_nodes) g->nodes[nd] = true;
    /* "NET/IB : Got completion from peer 10.0.0.2<44455> with error 12, ..." (net_ib.cc) */
    const char *p = memmem(m, len, "completion from peer ", 21);
    if (p) {
        p += 21;
        size_t rest = len - (size_t)(p - m), al = 0;
        while (al < rest && p[al] != ' ' && p[al] != '<') al++;
        for (size_t k = 0; al && al < sizeof g->peers[0] && k < sizeof g->peers / sizeof *g->peers; k++) {
            if (g->peers[k][0] && (strlen(g->peers[k]) != al || memcmp(g->peers[k], p, al) != 0)) continue;
            memcpy(g->peers[k], p, al);
            g->peers[k][al] = '\0';
            break;
        }
    }
}
