/* Themes: semantic roles (ok, fail, selection, chart, ...) mapped to colours and attributes,
 * read from *.theme files (format in docs/themes.md), and resolved for what the terminal can
 * show (256, 16, 8 colours, or none / NO_COLOR -> attributes only). No curses here: colours
 * are plain ints (-1 the terminal's default, 0-255 xterm indexes) and attributes our own bits,
 * which the panes turn into A_BOLD etc. and colour pairs. The default theme is compiled in,
 * so ddptop looks right from any directory. */
#ifndef DDPTOP_THEME_H
#define DDPTOP_THEME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum theme_role {
    ROLE_NORMAL,          /* plain text in panes */
    ROLE_HEADER,          /* the header lines */
    ROLE_TITLE,           /* pane titles */
    ROLE_TITLE_FOCUS,     /* the focused pane's title */
    ROLE_BORDER,          /* separators */
    ROLE_STATUS,          /* the status / key-hint line */
    ROLE_HELP,            /* the help overlay */
    ROLE_DIM,             /* secondary text: units, pending ranks, timestamps */
    ROLE_OK,              /* running, exited 0, checks passed */
    ROLE_WARN,            /* warnings, restarting */
    ROLE_FAIL,            /* failed, lost */
    ROLE_STALLED,         /* stalled ranks / job */
    ROLE_STRAGGLER,       /* stragglers */
    ROLE_SELECTION,       /* the selected row */
    ROLE_CHART,           /* the mean loss line */
    ROLE_CHART_BAND,      /* the min-max band */
    ROLE_CHART_AXIS,      /* axis labels */
    ROLE_LOG,             /* rank output (stdout) */
    ROLE_LOG_STDERR,      /* rank output (stderr) */
    ROLE_LOG_SYSTEM,      /* ddptop's own notes in a log */
    ROLE_LOG_ERROR,       /* lines that look like errors (Traceback, error, NCCL WARN) */
    ROLE_SEARCH_MATCH,    /* search hits */
    ROLE_RANK_PREFIX_0,   /* merged logs: "[r3]" coloured by rank % 8 */
    ROLE_RANK_PREFIX_1,
    ROLE_RANK_PREFIX_2,
    ROLE_RANK_PREFIX_3,
    ROLE_RANK_PREFIX_4,
    ROLE_RANK_PREFIX_5,
    ROLE_RANK_PREFIX_6,
    ROLE_RANK_PREFIX_7,
    ROLE_COUNT
};

#define THEME_COLOR_DEFAULT (-1)   /* the terminal's own foreground / background */

/* Attribute bits (the panes map them to curses attributes). */
#define THEME_BOLD      0x01u
#define THEME_DIM       0x02u
#define THEME_REVERSE   0x04u
#define THEME_UNDERLINE 0x08u
#define THEME_ITALIC    0x10u

struct theme_style {
    short fg, bg;        /* THEME_COLOR_DEFAULT or 0-255 */
    unsigned attrs;      /* THEME_* bits */
};

struct theme {
    char name[64];                       /* "default", or the file's base name */
    struct theme_style style[ROLE_COUNT];
    uint64_t set;                        /* bit r: role r was given by the file */
};

/* "ok", "rank_prefix_3", ...; NULL for an invalid role. */
const char *theme_role_name(enum theme_role r);
/* The role of a name ("chart-band" and "chart_band" both work), or -1. */
int theme_role_lookup(const char *name);

/* The compiled-in default theme (dark). Never fails. */
void theme_init_default(struct theme *t);
/* The compiled-in text of themes/default.theme (kept identical; a test checks). */
extern const char theme_default_text[];

/* Parses theme text on top of t's current contents (start from theme_init_default so that
 * roles a file leaves out keep the default's style). Errors: -1 with err "FILE:LINE: what is
 * wrong (what to write instead)". file names the source in messages. */
int theme_parse(struct theme *t, const char *text, size_t len, const char *file,
                char *err, size_t errlen);
/* Reads and parses one file (default theme underneath; name from the file's base name). */
int theme_load_file(struct theme *t, const char *path, char *err, size_t errlen);

/* Where themes are looked up, in order. */
#define THEME_MAX_DIRS 4
struct theme_dirs {
    char *dir[THEME_MAX_DIRS];
    size_t n;
};
/* $XDG_CONFIG_HOME/ddptop/themes (else $HOME/.config/ddptop/themes), DIR_OF(exe)/../themes
 * (the source tree's, for build/ddptop), DIR_OF(exe)/../share/ddptop/themes (`make install`'s,
 * for PREFIX/bin/ddptop), /usr/share/ddptop/themes. Arguments NULL: taken from getenv and /proc/self/exe. */
void theme_dirs_init(struct theme_dirs *d, const char *xdg_config_home, const char *home,
                     const char *exe_path);
void theme_dirs_done(struct theme_dirs *d);

/* --theme NAME: a path (contains '/') is read as is; else NAME.theme is looked up in d's
 * directories; "default" not found anywhere is the compiled-in one. -1 with err when it is
 * not found (the message lists where it looked) or does not parse. */
int theme_load(struct theme *t, const char *name, const struct theme_dirs *d,
               char *err, size_t errlen);

/* The theme names available, for the `t` key: default, light, high-contrast, mono first (those
 * present; default always), then other *.theme files of d alphabetically, no duplicates.
 * Returns a malloc'd array of malloc'd names (theme_names_free). */
char **theme_names(const struct theme_dirs *d, size_t *n);
void theme_names_free(char **names, size_t n);
/* The name after current in theme_names order (wraps; an unknown current gives the first).
 * Writes into buf; returns buf. */
char *theme_next_name(const struct theme_dirs *d, const char *current, char *buf, size_t n);

/* A theme made concrete for one terminal. */
struct theme_resolved {
    struct theme_style style[ROLE_COUNT];
    bool mono;           /* no colours: fg = bg = THEME_COLOR_DEFAULT everywhere */
    int colors;          /* the palette the colours were mapped into: 0, 8, 16 or 256 */
};

/* Maps t onto a terminal with `colors` colours (tigetnum("colors"): 0/-1 none, 8, 16, 88,
 * 256 or more). no_color (NO_COLOR set and non-empty) or fewer than 8 colours: mono, where
 * states stay apart by attributes (ok plain, warn underline, fail bold+reverse, stalled
 * reverse, straggler bold+underline, selection reverse, ...). 256-colour values degrade to the
 * nearest of 16, then to 8 (bright fg -> base colour + bold); a fg that would end up equal
 * to its bg is changed so text stays readable. Pure. */
void theme_resolve(const struct theme *t, int colors, bool no_color,
                   struct theme_resolved *out);

/* Nearest colour of the first `palette` (8 or 16) ANSI colours to xterm colour c (0-255);
 * THEME_COLOR_DEFAULT stays. Exposed for tests. */
int theme_color_degrade(int c, int palette);

/* Parses a colour word: black..white, bright-black..bright-white (also brightred), grey/gray,
 * default, 0-255 or #rrggbb (nearest xterm-256). -2 when invalid. */
int theme_color_parse(const char *word);

#endif
