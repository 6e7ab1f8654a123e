/* The key table of the dashboard (see keymap.h): which key does what in which mode, the names
 * of keys and actions, the help overlay generated from the same table, and which actions ask
 * first. Curses is used for its KEY_* constants only; nothing here touches a terminal. */
#include "keymap.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTRL(c) ((c) & 0x1f)
#define ESC 27

#define M(m) KM_BIT(KM_##m)
#define FOCUS KM_FOCUS
#define SCROLLERS (KM_FOCUS | M(CHECK) | M(HELP))

static const struct km_binding table[] = {
    /* moving: the same keys everywhere something scrolls or selects */
    { SCROLLERS, KEY_UP, UI_UP, "select the previous rank / scroll up" },
    { SCROLLERS, 'k', UI_UP, "select the previous rank / scroll up" },
    { SCROLLERS, KEY_DOWN, UI_DOWN, "select the next rank / scroll down" },
    { SCROLLERS, 'j', UI_DOWN, "select the next rank / scroll down" },
    { FOCUS, KEY_LEFT, UI_LEFT, "grid: previous rank; log: scroll left" },
    { FOCUS, 'h', UI_LEFT, "grid: previous rank; log: scroll left" },
    { FOCUS, KEY_RIGHT, UI_RIGHT, "grid: next rank; log: scroll right" },
    { FOCUS, 'l', UI_RIGHT, "grid: next rank; log: scroll right" },
    { SCROLLERS, KEY_PPAGE, UI_PAGE_UP, "a page up" },
    { SCROLLERS, KEY_NPAGE, UI_PAGE_DOWN, "a page down" },
    { SCROLLERS, KEY_HOME, UI_HOME, "first rank / top of the scrollback" },
    { SCROLLERS, KEY_END, UI_END, "last rank / newest line" },
    /* Enter depends on the pane */
    { M(RANKS), '\n', UI_OPEN, "open the rank's log; node view: that node's ranks" },
    { M(RANKS), '\r', UI_OPEN, "open the rank's log; node view: that node's ranks" },
    { M(RANKS), KEY_ENTER, UI_OPEN, "open the rank's log; node view: that node's ranks" },
    /* issue 19: thousands of ranks */
    { M(RANKS), 'v', UI_NODES, "ranks pane: one row per rank / one row per node" },
    { FOCUS, 'C', UI_NCCL, "nodes: what NCCL said on each (version, network, bootstrap, init) / usual columns" },
    { M(RANKS), 'o', UI_ORDER, "ranks: attention first / by rank" },
    { M(RANKS), 'F', UI_FILTER_STATE, "ranks: next state filter (attention, failed, ...)" },
    { M(RANKS), 'H', UI_FILTER_HOST, "ranks: filter by host (a glob or part of a name)" },
    { M(EVENTS), '\n', UI_OPEN, "open the log of the event's rank" },
    { M(EVENTS), '\r', UI_OPEN, "open the log of the event's rank" },
    { M(EVENTS), KEY_ENTER, UI_OPEN, "open the log of the event's rank" },
    { M(LOG), '\n', UI_MAXIMIZE, "maximize / restore the log" },
    { M(LOG), '\r', UI_MAXIMIZE, "maximize / restore the log" },
    { M(LOG), KEY_ENTER, UI_MAXIMIZE, "maximize / restore the log" },
    { FOCUS, 'z', UI_MAXIMIZE, "maximize / restore the log" },
    { FOCUS, '\t', UI_FOCUS_NEXT, "focus the next pane" },
    { FOCUS, KEY_BTAB, UI_FOCUS_PREV, "focus the previous pane" },
    /* the job */
    { FOCUS, 'r', UI_RESTART, "restart the job (asks first while it runs)" },
    { FOCUS, 'K', UI_STOP, "stop the job (every rank)" },
    { FOCUS, 's', UI_STACKS, "stacks of the selected rank (gdb, py-spy or /proc)" },
    /* the log */
    { FOCUS, '/', UI_SEARCH, "search the log" },
    { FOCUS, 'n', UI_SEARCH_NEXT, "next search match" },
    { FOCUS, 'N', UI_SEARCH_PREV, "previous search match" },
    { FOCUS, 'e', UI_NEXT_ERROR, "next error line (Traceback, error, NCCL WARN)" },
    { FOCUS, 'f', UI_FOLLOW, "follow the log on / off" },
    { FOCUS, 'I', UI_NCCL_LINES, "log: show / fold NCCL's INFO lines (folded by default)" },
    { FOCUS, 'a', UI_ALL_RANKS, "all ranks merged / the selected rank" },
    { FOCUS, 'u', UI_UNFOLD, "all ranks: unfold / fold a line several ranks printed ([r0-63 ...])" },
    { FOCUS, '[', UI_ATTEMPT_PREV, "log: the attempt before (after a restart)" },
    { FOCUS, ']', UI_ATTEMPT_NEXT, "log: the next attempt; at the newest, follow it" },
    { FOCUS, 'w', UI_EVENTS_WRAP, "events: wrap long events / one row each, cut" },
    /* the view */
    { FOCUS, 'g', UI_GRID, "ranks as a table / a grid" },
    { FOCUS, 'L', UI_LOG_SCALE, "loss chart: log / linear scale" },
    { FOCUS | M(CHECK), 't', UI_NEXT_THEME, "next theme" },
    { FOCUS, 'G', UI_GPUS, "GPUs: every GPU of every node, now and its last minute" },
    { FOCUS | M(CHECK), '?', UI_HELP, "this help" },
    { FOCUS | M(CHECK), KEY_F(1), UI_HELP, "this help" },
    { FOCUS | M(CHECK) | M(HELP) | M(SEARCH) | M(CONFIRM), CTRL('L'), UI_REDRAW,
      "redraw the screen" },
    { FOCUS, ESC, UI_CANCEL, "back: a maximized log, the search, then filters" },
    { FOCUS | M(CHECK), 'q', UI_QUIT, "quit (stops the ranks; asks while they run)" },
    { FOCUS | M(CHECK), 'd', UI_DETACH, "detach: the job goes on (ddptop attach comes back)" },
    /* preflight refused */
    { M(CHECK), '\n', UI_LAUNCH_ANYWAY, "launch anyway" },
    { M(CHECK), '\r', UI_LAUNCH_ANYWAY, "launch anyway" },
    { M(CHECK), KEY_ENTER, UI_LAUNCH_ANYWAY, "launch anyway" },
    /* help overlay */
    { M(HELP), ESC, UI_CANCEL, "close the help" },
    { M(HELP), 'q', UI_CANCEL, "close the help" },
    { M(HELP), '?', UI_CANCEL, "close the help" },
    { M(HELP), 'G', UI_CANCEL, "close the GPU view" },
    /* typing a search */
    { M(SEARCH), '\n', UI_TEXT_ACCEPT, "search / set the host filter (empty: none)" },
    { M(SEARCH), '\r', UI_TEXT_ACCEPT, "search / set the host filter (empty: none)" },
    { M(SEARCH), KEY_ENTER, UI_TEXT_ACCEPT, "search / set the host filter (empty: none)" },
    { M(SEARCH), ESC, UI_CANCEL, "cancel" },
    { M(SEARCH), KEY_BACKSPACE, UI_TEXT_DELETE, "delete a character" },
    { M(SEARCH), 127, UI_TEXT_DELETE, "delete a character" },
    { M(SEARCH), CTRL('H'), UI_TEXT_DELETE, "delete a character" },
    /* a question */
    { M(CONFIRM), 'y', UI_CONFIRM, "yes" },
    { M(CONFIRM), 'Y', UI_CONFIRM, "yes" },
    { M(CONFIRM), '\n', UI_CONFIRM, "yes" },
    { M(CONFIRM), '\r', UI_CONFIRM, "yes" },
    { M(CONFIRM), KEY_ENTER, UI_CONFIRM, "yes" },
    { M(CONFIRM), 'n', UI_CANCEL, "no" },
    { M(CONFIRM), 'N', UI_CANCEL, "no" },
    { M(CONFIRM), ESC, UI_CANCEL, "no" },
    { M(CONFIRM), 'q', UI_CANCEL, "no" },
    { M(CONFIRM), 'd', UI_DETACH, "the quit question: detach instead (the job goes on)" },
};

#define N_TABLE (sizeof table / sizeof *table)

const struct km_binding *keymap_table(size_t *n)
{
    *n = N_TABLE;
    return table;
}

enum ui_action keymap_lookup(enum km_mode mode, int key)
{
    if ((int)mode < 0 || mode >= KM_COUNT) return UI_NONE;
    for (size_t i = 0; i < N_TABLE; i++)
        if ((table[i].modes & KM_BIT(mode)) && table[i].key == key) return table[i].action;
    if (mode == KM_SEARCH && key >= ' ' && key != 127 && key < KEY_MIN) return UI_TEXT_INPUT;
    return UI_NONE;
}

char *keymap_key_name(int key, char *buf, size_t n)
{
    static const struct {
        int key;
        const char *name;
    } names[] = {
        { KEY_UP, "Up" },       { KEY_DOWN, "Down" },   { KEY_LEFT, "Left" },
        { KEY_RIGHT, "Right" }, { KEY_PPAGE, "PgUp" },  { KEY_NPAGE, "PgDn" },
        { KEY_HOME, "Home" },   { KEY_END, "End" },     { KEY_ENTER, "Enter" },
        { '\n', "Enter" },      { '\r', "Enter" },      { '\t', "Tab" },
        { KEY_BTAB, "S-Tab" },  { ESC, "Esc" },         { KEY_BACKSPACE, "Backspace" },
        { 127, "Backspace" },   { CTRL('H'), "Backspace" }, { ' ', "Space" },
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].key == key) {
            snprintf(buf, n, "%s", names[i].name);
            return buf;
        }
    if (key >= KEY_F(1) && key <= KEY_F(63))
        snprintf(buf, n, "F%d", key - KEY_F0);
    else if (key >= 0 && key < ' ')
        snprintf(buf, n, "Ctrl-%c", key + '@');
    else if (key > ' ' && key < 127)
        snprintf(buf, n, "%c", key);
    else
        snprintf(buf, n, "key %d", key);
    return buf;
}

static const char *const action_names[UI_ACTION_COUNT] = {
    [UI_NONE] = "none", [UI_UP] = "up", [UI_DOWN] = "down", [UI_LEFT] = "left",
    [UI_RIGHT] = "right", [UI_PAGE_UP] = "page-up", [UI_PAGE_DOWN] = "page-down",
    [UI_HOME] = "home", [UI_END] = "end", [UI_OPEN] = "open",
    [UI_FOCUS_NEXT] = "focus-next", [UI_FOCUS_PREV] = "focus-prev", [UI_RESTART] = "restart",
    [UI_STOP] = "stop", [UI_STACKS] = "stacks", [UI_SEARCH] = "search",
    [UI_SEARCH_NEXT] = "search-next", [UI_SEARCH_PREV] = "search-prev",
    [UI_NEXT_ERROR] = "next-error", [UI_FOLLOW] = "follow", [UI_ALL_RANKS] = "all-ranks",
    [UI_ATTEMPT_PREV] = "attempt-prev", [UI_ATTEMPT_NEXT] = "attempt-next",
    [UI_EVENTS_WRAP] = "events-wrap",
    [UI_GRID] = "grid", [UI_NODES] = "nodes", [UI_NCCL] = "nccl", [UI_ORDER] = "order",
    [UI_FILTER_STATE] = "filter-state", [UI_FILTER_HOST] = "filter-host", [UI_LOG_SCALE] = "log-scale", [UI_NCCL_LINES] = "nccl-lines", [UI_UNFOLD] = "unfold", [UI_MAXIMIZE] = "maximize",
    [UI_NEXT_THEME] = "next-theme", [UI_HELP] = "help", [UI_GPUS] = "gpus", [UI_QUIT] = "quit",
    [UI_CANCEL] = "cancel", [UI_CONFIRM] = "confirm", [UI_LAUNCH_ANYWAY] = "launch-anyway",
    [UI_REDRAW] = "redraw", [UI_DETACH] = "detach", [UI_QUIT_OR_DETACH] = "quit-or-detach",
    [UI_TEXT_INPUT] = "text-input", [UI_TEXT_DELETE] = "text-delete",
    [UI_TEXT_ACCEPT] = "text-accept",
};

const char *ui_action_name(enum ui_action a)
{
    if ((int)a < 0 || a >= UI_ACTION_COUNT) return NULL;
    return action_names[a];
}

/* Each mode's name and its section of the help, in the order the help lists them. */
static const struct {
    const char *name, *section;
} modes[KM_COUNT] = {
    [KM_RANKS] = { "Ranks pane", "Ranks pane:" },
    [KM_LOG] = { "Log pane", "Log pane:" },
    [KM_EVENTS] = { "Events pane", "Events pane:" },
    [KM_CHECK] = { "Preflight results",
                   "Preflight results (the moving keys, t, ?, q and Ctrl-L work too):" },
    [KM_HELP] = { "Help", "This help (the moving keys scroll it):" },
    [KM_SEARCH] = { "Typing a search", "Typing a search (/) or a host filter (H):" },
    [KM_CONFIRM] = { "A question", "A question:" },
};

const char *km_mode_name(enum km_mode m)
{
    return (int)m >= 0 && m < KM_COUNT ? modes[m].name : "?";
}

enum action ui_action_controller(enum ui_action a)
{
    switch (a) {
    case UI_RESTART: return ACT_RESTART;
    case UI_STOP: return ACT_STOP;
    case UI_QUIT: case UI_QUIT_OR_DETACH: return ACT_QUIT;
    case UI_STACKS: return ACT_STACKS;
    case UI_LAUNCH_ANYWAY: return ACT_LAUNCH_ANYWAY;
    default: return ACT_NONE;
    }
}

bool ui_action_needs_confirm(enum ui_action a, enum job_state s, size_t n_running)
{
    if (a == UI_RESTART)
        return s == JOB_LAUNCHING || s == JOB_RUNNING || s == JOB_STALLED;
    if (a == UI_QUIT) return n_running > 0;
    return false;
}

const char *ui_action_confirm_text(enum ui_action a)
{
    switch (a) {
    case UI_RESTART: return "Restart the running job? Ranks resume from their snapshots. (y/n)";
    case UI_QUIT: return "Quit? This stops every running rank. (y/n)";
    case UI_QUIT_OR_DETACH:
        return "Quit? y stops every running rank; d detaches instead, the job goes on. (y/n/d)";
    default: return NULL;
    }
}

/* Help overlay ---------------------------------------------------------------------------- */

struct lines {
    char **v;
    size_t n, cap;
    bool oom;
};

static void add_line(struct lines *l, const char *s)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->oom = true;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    size_t len = strlen(s) + 1;
    char *c = malloc(len);
    if (!c) {
        l->oom = true;
        return;
    }
    memcpy(c, s, len);
    l->v[l->n++] = c;
}

/* Whether binding b belongs in the section of mode m (section -1: common to all panes). */
static bool in_section(const struct km_binding *b, int m)
{
    bool all_focus = (b->modes & KM_FOCUS) == KM_FOCUS;
    if (m < 0) return all_focus;
    if (!(b->modes & KM_BIT(m))) return false;
    /* shown once in the common section; the modal states list only their own keys */
    return !all_focus;
}

static void add_section(struct lines *l, int m, const char *title)
{
    bool done[N_TABLE] = { false };
    bool any = false;
    for (size_t i = 0; i < N_TABLE; i++) {
        if (done[i] || !in_section(&table[i], m)) continue;
        if (!any) {
            if (l->n) add_line(l, "");
            add_line(l, title);
            any = true;
        }
        /* every key of the same action and text in this section, on one line */
        char keys[96] = "", name[32];
        for (size_t k = i; k < N_TABLE; k++) {
            if (done[k] || !in_section(&table[k], m) || table[k].action != table[i].action ||
                strcmp(table[k].help, table[i].help) != 0)
                continue;
            done[k] = true;
            keymap_key_name(table[k].key, name, sizeof name);
            char padded[40];
            snprintf(padded, sizeof padded, " %s ", name);
            char have[100];
            snprintf(have, sizeof have, " %s ", keys);
            if (strstr(have, padded)) continue;   /* Enter from '\n', '\r' and KEY_ENTER */
            size_t kl = strlen(keys);
            snprintf(keys + kl, sizeof keys - kl, "%s%s", kl ? " " : "", name);
        }
        char line[192];
        snprintf(line, sizeof line, "  %-18s %s", keys, table[i].help);
        add_line(l, line);
    }
    if (m == KM_SEARCH) add_line(l, "  any character      type into the search");
}

char **keymap_help_lines(size_t *n_lines)
{
    struct lines l = { 0 };
    add_section(&l, -1, "Ranks, log and events panes (Tab moves between them):");
    for (int m = 0; m < KM_COUNT; m++) add_section(&l, m, modes[m].section);
    if (l.oom) {
        keymap_help_free(l.v, l.n);
        *n_lines = 0;
        return NULL;
    }
    *n_lines = l.n;
    return l.v;
}

void keymap_help_free(char **lines, size_t n_lines)
{
    for (size_t i = 0; i < n_lines; i++) free(lines[i]);
    free(lines);
}
