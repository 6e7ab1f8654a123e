/* The log pane: the selected rank's log ring (or every rank merged by arrival, or the stacks
 * `s` captured), with scrollback, follow mode, search highlighting and error lines in their
 * own colour. Lines are addressed by stable positions (a rank's seq numbers, the merged
 * list's counter, stack line numbers), so a position the user scrolled to stays put while new
 * lines arrive, and the search keys share this code with the drawing. One attempt is shown
 * at a time (the current one unless [ pinned an earlier one), after a marker line of our own;
 * the runtime's JSON step lines are shown in words (the ring and the log file keep them
 * raw). NCCL's INFO lines are folded away unless I shows them (the model flags each once,
 * LOG_LINE_NCCL): the rows, the scrolling and the search walk over the lines shown. The
 * all-ranks log is folded unless u unfolds it: a line several ranks printed is one position,
 * drawn once with its ranks ("[r0-63 n[01-08]] "), its text the first rank's line. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "job/log_fold.h"
#include "job/metrics_parse.h"
#include "util/sanitize.h"
#include "panes.h"

static struct strbuf line_buf;   /* scratch: one sanitized line */
static struct strbuf where_buf;  /* scratch: a folded line's ranks and nodes */
static int *fold_ranks;          /* scratch: their ranks */
static size_t fold_ranks_cap;
static char marker_buf[96];      /* the attempt marker's text (log_src_text) */

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

int log_shown_attempt(const struct job *j, const struct ui_state *ui)
{
    if (ui->log_pinned && ui->log_attempt >= 0 && ui->log_attempt < j->attempt)
        return ui->log_attempt;
    return j->attempt;
}

bool log_src_folding(const struct ui_state *ui)
{
    return ui->log_mode == LOGV_ALL && !ui->unfold && ui->folds;
}

/* The merged list holds entry m (1-based). */
static bool merged_held(const struct ui_state *ui, uint64_t m)
{
    return m > 0 && m <= ui->merged_total && ui->merged_total - m < ui->merged_cap;
}

const struct fold_ref *log_src_fold(const struct ui_state *ui, uint64_t pos)
{
    if (!log_src_folding(ui) || pos == 0 || pos > ui->folds_total || ui->folds_total - pos >= ui->merged_cap)
        return NULL;
    const struct fold_ref *f = &ui->folds[(pos - 1) % ui->merged_cap];
    return merged_held(ui, f->first) ? f : NULL;
}

/* The folded lines held: [*first, *end), the oldest whose first line the merged list still
 * holds first (their first lines come in order, so a binary search finds it). */
static void fold_range(const struct ui_state *ui, uint64_t *first, uint64_t *end)
{
    uint64_t held = ui->folds_total < ui->merged_cap ? ui->folds_total : ui->merged_cap;
    uint64_t lo = ui->folds_total - held + 1, hi = ui->folds_total + 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (log_src_fold(ui, mid)) hi = mid; else lo = mid + 1;
    }
    *first = lo;
    *end = ui->folds_total + 1;
}

uint64_t log_src_fold_saved(const struct ui_state *ui)
{
    if (!ui->folds) return 0;
    uint64_t first, end;
    fold_range(ui, &first, &end);
    if (end <= first) return 0;
    /* the lines held from the oldest folded line shown on, less the folded lines */
    return ui->merged_total + 1 - log_src_fold(ui, first)->first - (end - first);
}

/* Every line the mode holds, of every attempt: [*first, *end). */
static void raw_range(const struct job *j, const struct ui_state *ui, uint64_t *first,
                      uint64_t *end)
{
    if (log_src_folding(ui)) {
        fold_range(ui, first, end);
        return;
    }
    if (ui->log_mode == LOGV_ALL) {
        uint64_t held = ui->merged_total < ui->merged_cap ? ui->merged_total : ui->merged_cap;
        *first = ui->merged_total - held + 1;
        *end = ui->merged_total + 1;
        return;
    }
    const struct log_ring *r = rank_ring(j, ui->selected);
    if (!r) { *first = *end = 1; return; }
    *first = r->total - r->count + 1;
    *end = r->total + 1;
}

/* The line at raw position pos (rank or merged mode); NULL when gone from its ring. */
static const struct log_line *raw_line(const struct job *j, const struct ui_state *ui,
                                       uint64_t pos, int *rank)
{
    if (log_src_folding(ui)) {
        const struct fold_ref *f = log_src_fold(ui, pos);
        if (!f) return NULL;
        pos = f->first;
    }
    if (ui->log_mode == LOGV_ALL) {
        if (!ui->merged || !ui->merged_cap || pos == 0) return NULL;
        const struct merged_ref *m = &ui->merged[(pos - 1) % ui->merged_cap];
        *rank = m->rank;
        return ring_line(rank_ring(j, m->rank), m->seq);
    }
    *rank = ui->selected;
    return ring_line(rank_ring(j, ui->selected), pos);
}

/* The first raw position in [lo, hi) whose line belongs to an attempt after `after` (hi when
 * none). Lines come in attempt order: an attempt begins only once every rank of the one
 * before has ended. A line gone from its ring counts as older (rings drop the oldest). */
static uint64_t attempt_bound(const struct job *j, const struct ui_state *ui, uint64_t lo,
                              uint64_t hi, int after)
{
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int rk;
        const struct log_line *l = raw_line(j, ui, mid, &rk);
        if (l && l->attempt > after) hi = mid; else lo = mid + 1;
    }
    return lo;
}

/* The positions the pane shows in rank and merged mode: the lines of the shown attempt, after
 * an attempt marker (a line of our own at the position just before the attempt's first line)
 * when there was an attempt before it. *marker gets its position (0: none). */
static void shown_range(const struct job *j, const struct ui_state *ui, uint64_t *first,
                        uint64_t *end, uint64_t *marker)
{
    uint64_t f, e;
    raw_range(j, ui, &f, &e);
    int a = log_shown_attempt(j, ui);
    uint64_t lo = attempt_bound(j, ui, f, e, a - 1);
    uint64_t hi = a == j->attempt ? e : attempt_bound(j, ui, lo, e, a);
    *marker = a > 0 && lo > 1 ? lo - 1 : 0;
    *first = *marker ? *marker : lo;
    *end = hi;
}

void log_src_range(const struct job *j, const struct ui_state *ui, uint64_t *first,
                   uint64_t *end)
{
    if (ui->log_mode == LOGV_STACKS) {
        *first = 1;
        *end = ui->n_stacks + 1;
        return;
    }
    uint64_t marker;
    shown_range(j, ui, first, end, &marker);
}

const char *log_src_text(const struct job *j, const struct ui_state *ui, uint64_t pos,
                         size_t *len, int *rank, int *stream)
{
    if (ui->log_mode == LOGV_STACKS) {
        if (pos == 0 || pos > ui->n_stacks) return NULL;
        if (rank) *rank = -1;
        if (stream) *stream = LOG_SYSTEM;
        *len = strlen(ui->stacks[pos - 1]);
        return ui->stacks[pos - 1];
    }
    uint64_t first, end, marker;
    shown_range(j, ui, &first, &end, &marker);
    if (pos < first || pos >= end) return NULL;
    if (pos == marker) {
        int a = log_shown_attempt(j, ui);
        snprintf(marker_buf, sizeof marker_buf, "--- attempt %d %s ---", a,
                 a == j->attempt ? "([ shows the attempts before)" : "(] shows the next)");
        if (rank) *rank = -1;
        if (stream) *stream = LOG_SYSTEM;
        *len = strlen(marker_buf);
        return marker_buf;
    }
    int rk = -1;
    const struct log_line *l = raw_line(j, ui, pos, &rk);
    if (!l) return NULL;
    if (rank) *rank = rk;
    if (stream) *stream = l->stream;
    *len = l->len;
    return l->text ? l->text : "";
}

bool log_src_folded(const struct job *j, const struct ui_state *ui, uint64_t pos)
{
    if (ui->show_nccl || ui->log_mode == LOGV_STACKS) return false;
    int rk;
    const struct log_line *l = raw_line(j, ui, pos, &rk);
    return l && (l->flags & LOG_LINE_NCCL);
}

uint64_t log_src_move(const struct job *j, const struct ui_state *ui, uint64_t pos, long delta,
                      long *moved)
{
    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    long n = 0;
    if (end > first) {
        if (pos < first) pos = first;
        if (pos >= end) pos = end - 1;
        uint64_t p = pos;
        while (delta < 0 ? n > delta : n < delta) {
            if (delta < 0 ? p == first : p + 1 >= end) break;
            p = delta < 0 ? p - 1 : p + 1;
            if (log_src_folded(j, ui, p)) continue;
            pos = p;
            n += delta < 0 ? -1 : 1;
        }
    }
    if (moved) *moved = n;
    return pos;
}

size_t log_src_folded_count(const struct job *j, const struct ui_state *ui)
{
    if (ui->log_mode == LOGV_STACKS) return 0;
    if (ui->log_mode == LOGV_RANK) {
        const struct log_ring *r = rank_ring(j, ui->selected);
        return r ? r->nccl : 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < j->n_ranks; i++) n += j->ranks[i].log.nccl;
    return n;
}

bool log_step_text(const char *s, size_t len, char *buf, size_t n)
{
    struct metrics_sample m;
    if (!metrics_parse_runtime(s, len, &m)) return false;
    format_step_line(buf, n, &m);
    return true;
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
        if (log_src_folded(j, ui, pos)) continue;   /* like less: what is shown */
        size_t len;
        int stream = LOG_STDOUT;
        const char *t = log_src_text(j, ui, pos, &len, NULL, &stream);
        if (!t) continue;
        bool hit = needle ? find_icase(t, len, needle, nlen) >= 0 : log_is_error_line(t, len);
        /* a step line is found by its raw JSON (as in the log file) and by the words shown */
        char shown[160];
        if (!hit && needle && stream != LOG_SYSTEM && log_step_text(t, len, shown, sizeof shown))
            hit = find_icase(shown, strlen(shown), needle, nlen) >= 0;
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
        if (plain) x += pane_put(w, p, s + i, plain, wd - x, a);
        i += plain;
        if (hit >= 0 && x < wd) {
            x += pane_put(w, p, s + i, nlen, wd - x, p->role[ROLE_SEARCH_MATCH]);
            i += nlen;
        }
    }
}

/* where_buf: "[r0-63 n[01-08]] ", the ranks of a folded line and their nodes, from its lines
 * in the merged list (all held while its first is), at most 48 columns ("...]" past them). */
static void fold_where(const struct job *j, const struct ui_state *ui, const struct fold_ref *f)
{
    if (f->n > fold_ranks_cap) {
        fold_ranks_cap = f->n;
        fold_ranks = xrealloc(fold_ranks, fold_ranks_cap * sizeof *fold_ranks);
    }
    size_t n = 0;
    for (uint64_t m = f->first; n < f->n && merged_held(ui, m); m = ui->merged[(m - 1) % ui->merged_cap].fold_next)
        fold_ranks[n++] = ui->merged[(m - 1) % ui->merged_cap].rank;
    strbuf_reset(&where_buf);
    strbuf_adds(&where_buf, "[");
    log_fold_where(&where_buf, j, fold_ranks, n);
    if (where_buf.len > 47) {
        strbuf_truncate(&where_buf, 44);
        strbuf_adds(&where_buf, "...");
    }
    strbuf_adds(&where_buf, "] ");
}

void pane_log_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
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
    /* the attempt, once there was a restart: the pane shows one attempt at a time */
    char att[48] = "";
    int shown = log_shown_attempt(j, ui);
    if (shown != j->attempt)
        snprintf(att, sizeof att, "  attempt %d of 0-%d (] next)", shown, j->attempt);
    else if (j->attempt > 0)
        snprintf(att, sizeof att, "  attempt %d", shown);
    /* NCCL's INFO lines: how many are folded away, and the key that shows them */
    char fold[64] = "";
    size_t nccl = log_src_folded_count(j, ui);
    if (nccl && !ui->show_nccl)
        snprintf(fold, sizeof fold, "  %zu NCCL line%s folded (I shows)", nccl, nccl == 1 ? "" : "s");
    else if (nccl)
        snprintf(fold, sizeof fold, "  NCCL lines shown (I folds)");
    switch (ui->log_mode) {
    case LOGV_RANK:
        snprintf(title, sizeof title, " Log of rank %d (%s)%s%s%s%s%s", ui->selected, hostbuf, att,
                 fold, flags, ui->search[0] ? "  search: " : "", ui->search);
        break;
    case LOGV_ALL: {
        /* lines of several ranks: how many are folded away, and the key that shows them */
        char ranks_fold[64] = "";
        uint64_t saved = log_src_fold_saved(ui);
        if (ui->unfold)
            snprintf(ranks_fold, sizeof ranks_fold, "  unfolded (u folds)");
        else if (saved)
            snprintf(ranks_fold, sizeof ranks_fold, "  %llu line%s folded (u unfolds)",
                     (unsigned long long)saved, saved == 1 ? "" : "s");
        snprintf(title, sizeof title, " Log of all ranks, by arrival%s%s%s%s%s%s", att, ranks_fold,
                 fold, flags, ui->search[0] ? "  search: " : "", ui->search);
        break;
    }
    case LOGV_STACKS:
        snprintf(title, sizeof title, " Stacks of rank %d (Esc: back to the log)",
                 ui->stacks_rank);
        break;
    }
    werase(w);
    pane_title(w, p, title, ui->focus == AREA_LOG);
    int rows = h - 1;
    if (rows <= 0) return;

    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    if (end <= first) {
        wmove(w, 1, 1);
        const char *m = ui->log_mode == LOGV_STACKS ? "(no stacks)"
                        : shown != j->attempt ? "(none of this attempt's lines is left in memory:"
                                                " see its log file)"
                        : "(no output yet)";
        pane_put(w, p, m, strlen(m), wd - 1, p->role[ROLE_DIM]);
        return;
    }
    uint64_t bottom = end - 1;
    if (!ui->follow && ui->log_pos >= first && ui->log_pos < end) bottom = ui->log_pos;
    /* the rows shown, from the bottom up, over the folded lines (the walk stops at the top of
     * the pane, so a frame costs its rows plus the folded lines between them) */
    if (log_src_folded(j, ui, bottom)) bottom = log_src_move(j, ui, bottom, -1, NULL);
    uint64_t top = log_src_move(j, ui, bottom, -(long)(rows - 1), NULL);
    int y = 1;
    for (uint64_t pos = top; pos <= bottom && y < h; pos++) {
        if (log_src_folded(j, ui, pos)) continue;
        int row = y++;
        size_t len;
        int rank = -1, stream = LOG_STDOUT;
        const char *t = log_src_text(j, ui, pos, &len, &rank, &stream);
        if (!t) continue;
        int x = 0;
        wmove(w, row, 0);
        const struct fold_ref *f = log_src_fold(ui, pos);
        if (f && f->n > 1) {
            fold_where(j, ui, f);
            x = pane_put(w, p, where_buf.buf, where_buf.len, wd, p->role[ROLE_RANK_PREFIX_0 + rank % 8]);
        } else if (ui->log_mode == LOGV_ALL && rank >= 0) {
            char pre[24];
            snprintf(pre, sizeof pre, "[r%d] ", rank);
            x = pane_put(w, p, pre, strlen(pre), wd, p->role[ROLE_RANK_PREFIX_0 + rank % 8]);
        }
        bool err = log_is_error_line(t, len);
        attr_t a = line_attr(p, stream, err);
        /* the runtime's metrics line in words, dimmed: the numbers are in the ranks table and
         * the chart already, and what the rank says in words stands out between them */
        char words[160];
        if (stream != LOG_SYSTEM && log_step_text(t, len, words, sizeof words)) {
            t = words;
            len = strlen(words);
            a = p->role[ROLE_DIM];
        }
        if (pos == ui->mark) a |= A_BOLD | A_UNDERLINE;
        draw_line(w, p, row, x, t, len, a, ui->search[0] ? ui->search : NULL, ui->log_hscroll);
    }
}
