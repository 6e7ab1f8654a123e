/* Keys to UI actions: one table, per input mode (the focused pane, or a modal state), that the
 * dashboard looks keys up in and that the help overlay is generated from, so the help always
 * lists every key. Keys are wgetch()-style ints: characters as themselves (Ctrl-L is 12,
 * Esc 27, Enter '\n'), function keys as curses KEY_* codes. A view reading with get_wch passes
 * function keys as their KEY_* code and characters as code points. Pure: no terminal needed. */
#ifndef DDPTOP_KEYMAP_H
#define DDPTOP_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/controller.h"
#include "job/job.h"

enum km_mode {
    KM_RANKS,     /* focus on the ranks table / grid */
    KM_LOG,       /* focus on the log pane */
    KM_EVENTS,    /* focus on the events pane */
    KM_CHECK,     /* preflight results on screen (refused: Enter launches anyway) */
    KM_HELP,      /* help overlay open */
    KM_SEARCH,    /* typing a search after '/' */
    KM_CONFIRM,   /* a y/n question (restart while running, quit while ranks run) */
    KM_COUNT
};

#define KM_BIT(m)  (1u << (m))
#define KM_FOCUS   (KM_BIT(KM_RANKS) | KM_BIT(KM_LOG) | KM_BIT(KM_EVENTS))

enum ui_action {
    UI_NONE,
    UI_UP, UI_DOWN,           /* select the previous/next rank; scroll the log/events/help */
    UI_LEFT, UI_RIGHT,        /* grid: previous/next rank cell; log: scroll sideways */
    UI_PAGE_UP, UI_PAGE_DOWN,
    UI_HOME, UI_END,          /* first/last rank; top of the scrollback / newest line */
    UI_OPEN,                  /* ranks: open the selected rank's log; events: the event's rank */
    UI_FOCUS_NEXT, UI_FOCUS_PREV,
    UI_RESTART,               /* controller ACT_RESTART (ask first while running) */
    UI_STOP,                  /* controller ACT_STOP */
    UI_STACKS,                /* controller ACT_STACKS for the selected rank */
    UI_SEARCH,                /* start typing a search (KM_SEARCH) */
    UI_SEARCH_NEXT, UI_SEARCH_PREV,
    UI_NEXT_ERROR,            /* next line like Traceback / error / NCCL WARN */
    UI_FOLLOW,                /* toggle follow mode of the log */
    UI_ALL_RANKS,             /* toggle the merged log of all ranks */
    UI_ATTEMPT_PREV,          /* the log shows the attempt before the one shown */
    UI_ATTEMPT_NEXT,          /* the log shows the next attempt (at the current: follows it) */
    UI_EVENTS_WRAP,           /* toggle wrapped / one-row events */
    UI_GRID,                  /* toggle ranks table / grid */
    UI_NODES,                 /* toggle the ranks pane: one row per rank / per node */
    UI_NCCL,                  /* the node view with NCCL's columns / its usual ones */
    UI_ORDER,                 /* ranks: attention first / by rank */
    UI_FILTER_STATE,          /* ranks: the next state filter (all, attention, failed, ...) */
    UI_FILTER_HOST,           /* ranks: type a host filter (KM_SEARCH with ui->input_host) */
    UI_LOG_SCALE,             /* toggle the chart's log scale */
    UI_NCCL_LINES,            /* toggle the log pane's folding of NCCL's INFO lines */
    UI_UNFOLD,                /* the all-ranks log: every line as it came / lines of several ranks folded */
    UI_MAXIMIZE,              /* toggle the log taking the body */
    UI_NEXT_THEME,
    UI_HELP,                  /* open the help overlay */
    UI_GPUS,                  /* open the GPU view (the overlay with every GPU) */
    UI_QUIT,                  /* controller ACT_QUIT (ask first while ranks run) */
    UI_CANCEL,                /* close the overlay / cancel the search or question */
    UI_CONFIRM,               /* yes to the question */
    UI_LAUNCH_ANYWAY,         /* controller ACT_LAUNCH_ANYWAY after a refused preflight */
    UI_REDRAW,                /* repaint the whole screen */
    UI_DETACH,                /* a session's dashboard: detach this terminal, the job goes on */
    UI_QUIT_OR_DETACH,        /* no key: the quit question of a session (y quits, d detaches) */
    UI_TEXT_INPUT,            /* KM_SEARCH: a printable character to append (the key itself) */
    UI_TEXT_DELETE,           /* KM_SEARCH: delete the last character */
    UI_TEXT_ACCEPT,           /* KM_SEARCH: run the search */
    UI_ACTION_COUNT
};

struct km_binding {
    unsigned modes;           /* KM_BIT()s this binding applies in */
    int key;
    enum ui_action action;
    const char *help;         /* what it does, for the help overlay */
};

/* The action of key in mode; UI_NONE when unbound. KM_SEARCH: printable characters (>= ' ',
 * not DEL, below KEY_MIN) that are not bound give UI_TEXT_INPUT. */
enum ui_action keymap_lookup(enum km_mode mode, int key);

/* The whole table (for the help text and tests). */
const struct km_binding *keymap_table(size_t *n);

/* "Up", "PgDn", "Enter", "Tab", "S-Tab", "Esc", "Backspace", "F1", "Ctrl-L", "Space", "j", "?".
 * Returns buf. */
char *keymap_key_name(int key, char *buf, size_t n);
/* "restart", "search-next", ...; NULL if out of range. */
const char *ui_action_name(enum ui_action a);
/* "Ranks, log and events", "Preflight results", ... */
const char *km_mode_name(enum km_mode m);

/* The help overlay's text, generated from the table: sections by mode, one line per action
 * with all its keys ("  j k Up       select the previous rank / scroll up"). Returns a malloc'd
 * array of malloc'd lines (keymap_help_free); *n_lines the count. */
char **keymap_help_lines(size_t *n_lines);
void keymap_help_free(char **lines, size_t n_lines);

/* The controller action a UI action asks for (ACT_NONE for UI-only actions). */
enum action ui_action_controller(enum ui_action a);
/* Whether the action must be confirmed first: restart while the job runs (launching,
 * running, stalled), quit while ranks run (n_running > 0). */
bool ui_action_needs_confirm(enum ui_action a, enum job_state s, size_t n_running);
/* The question for KM_CONFIRM ("Restart the running job? y/n"); NULL when none. */
const char *ui_action_confirm_text(enum ui_action a);

#endif
