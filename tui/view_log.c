/* The log pane: the selected rank's log ring (or every rank merged by arrival, or the stacks
 * `s` captured), with scrollback, follow mode, search highlighting and error lines in their
 * own colour. Lines are addressed by stable positions (a rank's seq numbers, the merged
 * list's counter, stack line numbers), so a position the user scrolled to stays put while new
 * lines arrive, and the search keys share this code with the drawing. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "util/sanitize.h"
#include "views.h"

static struct strbuf line_buf;   /* scratch: one sanitized line */

static const struct log_ring *rank_ring(const struct job *j, int rank)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return NULL;
    return &j->ranks[rank].log;
}

/* A rank's line by its seq number: seqs are consecutive, the ring holds the newest count. */
static const struct log_line *ring_line(const struct log_ring *r, uint64_t seq)
{
    if (!r || r->count == 0 || seq == 0 || seq > r->total) return NULL;
    uint64_t first = r->total - r->count + 1;
    if (seq < first) return NULL;
    const struct log_line *l = log_ring_at(r, (size_t)(seq - first));
    return l && l->seq == seq ? l : NULL;
}

void log_src_range(const struct job *j, const struct ui_state *ui, uint64_t *first,
                   uint64_t *end)
{
    switch (ui->log_mode) {
    case LOGV_ALL: {
        uint64_t held = ui->merged_total < ui->merged_cap ? ui->merged_total : ui->merged_cap;
        *first = ui->merged_total - held + 1;
        *end = ui->merged_total + 1;
        return;
    }
    case LOGV_STACKS:
        *first = 1;
        *end = ui->n_stacks + 1;
        return;
    case LOGV_RANK:
        break;
    }
    const struct log_ring *r = rank_ring(j, ui->selected);
    if (!r) { *first = *end = 1; return; }
    *first = r->total - r->count + 1;
    *end = r->total + 1;
}

const char *log_src_text(const struct job *j, const struct ui_state *ui, uint64_t pos,
                         size_t *len, int *rank, int *stream)
{
    const struct log_line *l = NULL;
    int rk = -1;
    switch (ui->log_mode) {
    case LOGV_STACKS:
        if (pos == 0 || pos > ui->n_stacks) return NULL;
        if (rank) *rank = -1;
        if (stream) *stream = LOG_SYSTEM;
        *len = strlen(ui->stacks[pos - 1]);
        return ui->stacks[pos - 1];
    case LOGV_ALL: {
        uint64_t first, end;
        log_src_range(j, ui, &first, &end);
        if (pos < first || pos >= end) return NULL;
        const struct merged_ref *m = &ui->merged[(pos - 1) % ui->merged_cap];
        rk = m->rank;
        l = ring_line(rank_ring(j, rk), m->seq);
        break;
    }
    case LOGV_RANK:
        rk = ui->selected;
        l = ring_line(rank_ring(j, rk), pos);
        break;
    }
    if (!l) return NULL;
    if (rank) *rank = rk;
    if (stream) *stream = l->stream;
    *len = l->len;
    return l->text ? l->text : "";
}

/* Case-insensitive (ASCII) search of needle in s[0..len); the offset or -1. */
static long find_icase(const char *s, size_t len, const char *needle, size_t nlen)
{
    if (nlen == 0 || nlen > len) return -1;
    for (size_t i = 0; i + nlen <= len; i++) {
        size_t k = 0;
        while (k < nlen && tolower((unsigned char)s[i + k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == nlen) return (long)i;
    }
    return -1;
}

static long find_exact(const char *s, size_t len, const char *needle)
{
    size_t nlen = strlen(needle);
    if (nlen > len) return -1;
    for (size_t i = 0; i + nlen <= len; i++)
        if (memcmp(s + i, needle, nlen) == 0) return (long)i;
    return -1;
}

bool log_is_error_line(const char *s, size_t len)
{
    return find_exact(s, len, "Traceback") >= 0 || find_exact(s, len, "NCCL WARN") >= 0 ||
           find_icase(s, len, "error", 5) >= 0;
}

uint64_t log_src_find(const struct job *j, const struct ui_state *ui, uint64_t from, int dir,
                      const char *needle)
{
    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    if (end <= first) return 0;
    int64_t span = (int64_t)(end - first);
    int64_t cur = from >= first && from < end ? (int64_t)(from - first) : (dir < 0 ? span : -1);
    int step = dir < 0 ? -1 : 1;
    size_t nlen = needle ? strlen(needle) : 0;
    for (int64_t i = 1; i <= span; i++) {
        int64_t off = ((cur + step * i) % span + span) % span;   /* wraps around once */
        uint64_t pos = first + (uint64_t)off;
        size_t len;
        const char *t = log_src_text(j, ui, pos, &len, NULL, NULL);
        if (!t) continue;
        bool hit = needle ? find_icase(t, len, needle, nlen) >= 0 : log_is_error_line(t, len);
        if (hit) return pos;
    }
    return 0;
}

static attr_t line_attr(const struct paint *p, int stream, bool error)
{
    if (error) return p->role[ROLE_LOG_ERROR];
    if (stream == LOG_STDERR) return p->role[ROLE_LOG_STDERR];
    if (stream == LOG_SYSTEM) return p->role[ROLE_LOG_SYSTEM];
    return p->role[ROLE_LOG];
}

/* One line: sanitized, scrolled sideways, search hits in their own colour. */
static void draw_line(WINDOW *w, const struct paint *p, int y, int x0, const char *t,
                      size_t len, attr_t a, const char *needle, int hscroll)
{
    int wd = getmaxx(w) - x0;
    if (wd <= 0) return;
    strbuf_reset(&line_buf);
    sanitize_append(&line_buf, t, len, 0);
    const char *s = line_buf.buf ? line_buf.buf : "";
    size_t n = line_buf.len;
    wmove(w, y, x0);
    size_t nlen = needle ? strlen(needle) : 0;
    int x = 0;
    /* scrolled sideways: skip whole characters worth hscroll columns */
    size_t i = hscroll > 0 ? format_fit(s, n, hscroll, NULL) : 0;
    while (i < n && x < wd) {
        long hit = nlen ? find_icase(s + i, n - i, needle, nlen) : -1;
        size_t plain = hit < 0 ? n - i : (size_t)hit;
        if (plain) x += view_put(w, p, s + i, plain, wd - x, a);
        i += plain;
        if (hit >= 0 && x < wd) {
            x += view_put(w, p, s + i, nlen, wd - x, p->role[ROLE_SEARCH_MATCH]);
            i += nlen;
        }
    }
}

void view_log_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                   const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    char title[400];
    const char *host = "?";
    if (ui->selected >= 0 && (size_t)ui->selected < j->n_ranks) {
        int node = j->ranks[ui->selected].node;
        if (node >= 0 && (size_t)node < j->n_nodes && j->nodes[node].name)
            host = j->nodes[node].name;
    }
    char hostbuf[64];
    format_truncate(hostbuf, sizeof hostbuf, host, 24, p->ascii);
    const char *flags = ui->follow ? "  [follow]" : "  [scrolled: End follows]";
    switch (ui->log_mode) {
    case LOGV_RANK:
        snprintf(title, sizeof title, " Log of rank %d (%s)%s%s%s", ui->selected, hostbuf, flags,
                 ui->search[0] ? "  search: " : "", ui->search);
        break;
    case LOGV_ALL:
        snprintf(title, sizeof title, " Log of all ranks, by arrival%s%s%s", flags,
                 ui->search[0] ? "  search: " : "", ui->search);
        break;
    case LOGV_STACKS:
        snprintf(title, sizeof title, " Stacks of rank %d (Esc: back to the log)",
                 ui->stacks_rank);
        break;
    }
    werase(w);
    view_title(w, p, title, ui->focus == KM_LOG);
    int rows = h - 1;
    if (rows <= 0) return;

    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    if (end <= first) {
        wmove(w, 1, 1);
        const char *m = ui->log_mode == LOGV_STACKS ? "(no stacks)" : "(no output yet)";
        view_put(w, p, m, strlen(m), wd - 1, p->role[ROLE_DIM]);
        return;
    }
    uint64_t bottom = end - 1;
    if (!ui->follow && ui->log_pos >= first && ui->log_pos < end) bottom = ui->log_pos;
    uint64_t top = bottom + 1 >= first + (uint64_t)rows ? bottom + 1 - (uint64_t)rows : first;
    int y = 1;
    for (uint64_t pos = top; pos <= bottom && y < h; pos++, y++) {
        size_t len;
        int rank = -1, stream = LOG_STDOUT;
        const char *t = log_src_text(j, ui, pos, &len, &rank, &stream);
        if (!t) continue;
        int x = 0;
        wmove(w, y, 0);
        if (ui->log_mode == LOGV_ALL && rank >= 0) {
            char pre[24];
            snprintf(pre, sizeof pre, "[r%d] ", rank);
            x = view_put(w, p, pre, strlen(pre), wd, p->role[ROLE_RANK_PREFIX_0 + rank % 8]);
        }
        bool err = log_is_error_line(t, len);
        attr_t a = line_attr(p, stream, err) | (pos == ui->mark ? A_BOLD | A_UNDERLINE : 0);
        draw_line(w, p, y, x, t, len, a, ui->search[0] ? ui->search : NULL, ui->log_hscroll);
    }
}
