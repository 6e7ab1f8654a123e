/* Themes, part 1: the role names, the *.theme parser and the compiled-in default theme (the
 * same text as themes/default.theme; tests/test_theme.c checks they agree). A file only
 * overrides what it names: parsing starts from the default, so a user theme of three lines
 * is complete. Colours and terminal capabilities are in theme_color.c, files and search
 * directories in theme_files.c. */
#include "theme.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const role_names[ROLE_COUNT] = {
    [ROLE_NORMAL] = "normal",           [ROLE_HEADER] = "header",
    [ROLE_TITLE] = "title",             [ROLE_TITLE_FOCUS] = "title_focus",
    [ROLE_BORDER] = "border",           [ROLE_STATUS] = "status",
    [ROLE_HELP] = "help",               [ROLE_DIM] = "dim",
    [ROLE_OK] = "ok",                   [ROLE_WARN] = "warn",
    [ROLE_FAIL] = "fail",               [ROLE_STALLED] = "stalled",
    [ROLE_STRAGGLER] = "straggler",     [ROLE_SELECTION] = "selection",
    [ROLE_CHART] = "chart",             [ROLE_CHART_BAND] = "chart_band",
    [ROLE_CHART_AXIS] = "chart_axis",   [ROLE_LOG] = "log",
    [ROLE_LOG_STDERR] = "log_stderr",   [ROLE_LOG_SYSTEM] = "log_system",
    [ROLE_LOG_ERROR] = "log_error",     [ROLE_SEARCH_MATCH] = "search_match",
    [ROLE_RANK_PREFIX_0] = "rank_prefix_0", [ROLE_RANK_PREFIX_1] = "rank_prefix_1",
    [ROLE_RANK_PREFIX_2] = "rank_prefix_2", [ROLE_RANK_PREFIX_3] = "rank_prefix_3",
    [ROLE_RANK_PREFIX_4] = "rank_prefix_4", [ROLE_RANK_PREFIX_5] = "rank_prefix_5",
    [ROLE_RANK_PREFIX_6] = "rank_prefix_6", [ROLE_RANK_PREFIX_7] = "rank_prefix_7",
};

const char theme_default_text[] =
    "# ddptop default theme: for dark terminal backgrounds.\n"
    "# Format (docs/themes.md): ROLE = [FG] [on BG] [bold] [dim] [reverse] [underline] [italic]\n"
    "# Colours: default, black..white, bright-black..bright-white, 0-255, #rrggbb.\n"
    "# On 8- and 16-colour terminals the 256-colour values are mapped to the nearest colour;\n"
    "# without colours (NO_COLOR) ddptop keeps states apart with attributes.\n"
    "\n"
    "normal        = default\n"
    "header        = bright-white on 24 bold\n"
    "title         = 75 bold\n"
    "title_focus   = bright-white on 31 bold\n"
    "border        = 240\n"
    "status        = 252 on 236\n"
    "help          = 252 on 235\n"
    "dim           = 244\n"
    "\n"
    "ok            = 77\n"
    "warn          = 214 bold\n"
    "fail          = 203 bold\n"
    "stalled       = 201 bold\n"
    "straggler     = 220 underline\n"
    "selection     = default on 238\n"
    "\n"
    "chart         = 81 bold\n"
    "chart_band    = 25\n"
    "chart_axis    = 244\n"
    "\n"
    "log           = default\n"
    "log_stderr    = 223\n"
    "log_system    = 110\n"
    "log_error     = 203 bold\n"
    "search_match  = black on 220\n"
    "\n"
    "# merged logs: the \"[rN]\" prefix of rank N is coloured by N mod 8\n"
    "rank_prefix_0 = 81\n"
    "rank_prefix_1 = 141\n"
    "rank_prefix_2 = 114\n"
    "rank_prefix_3 = 215\n"
    "rank_prefix_4 = 75\n"
    "rank_prefix_5 = 211\n"
    "rank_prefix_6 = 186\n"
    "rank_prefix_7 = 44\n";

const char *theme_role_name(enum theme_role r)
{
    if ((int)r < 0 || r >= ROLE_COUNT) return NULL;
    return role_names[r];
}

int theme_role_lookup(const char *name)
{
    char norm[32];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof norm) return -1;
    for (size_t i = 0; i <= n; i++) norm[i] = name[i] == '-' ? '_' : name[i];
    for (int r = 0; r < ROLE_COUNT; r++)
        if (strcasecmp(norm, role_names[r]) == 0) return r;
    return -1;
}

static const struct {
    const char *name;
    unsigned bit;
} attr_words[] = {
    { "bold", THEME_BOLD }, { "dim", THEME_DIM }, { "reverse", THEME_REVERSE },
    { "underline", THEME_UNDERLINE }, { "italic", THEME_ITALIC },
};

static unsigned attr_lookup(const char *w)
{
    for (size_t i = 0; i < sizeof attr_words / sizeof *attr_words; i++)
        if (strcasecmp(w, attr_words[i].name) == 0) return attr_words[i].bit;
    return 0;
}

#define PERR(...) do { int o_ = snprintf(err, errlen, "%s:%d: ", file, lineno); \
    if (o_ >= 0 && (size_t)o_ < errlen) snprintf(err + o_, errlen - (size_t)o_, __VA_ARGS__); \
    } while (0)

static const char COLOUR_HINT[] = "(use default, black, red, green, yellow, blue, magenta, "
    "cyan, white, bright-RED etc., 0-255 or #rrggbb)";

/* Parses the right side of "ROLE = ..." (NUL-terminated, may be modified). */
static int parse_style(char *rhs, struct theme_style *st, const char *file, int lineno,
                       char *err, size_t errlen)
{
    const char *fg_word = NULL;
    bool want_bg = false;
    *st = (struct theme_style){ THEME_COLOR_DEFAULT, THEME_COLOR_DEFAULT, 0 };
    for (char *save = NULL, *w = strtok_r(rhs, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        /* "# ..." after the style is a comment; "#rrggbb" (or a mistyped one) a colour */
        if (w[0] == '#' && (w[1] == '\0' || w[1] == '#')) break;
        if (want_bg) {
            int c = theme_color_parse(w);
            if (c == -2) {
                PERR("unknown background colour '%s' %s", w, COLOUR_HINT);
                return -1;
            }
            st->bg = (short)c;
            want_bg = false;
            continue;
        }
        if (strcasecmp(w, "on") == 0) {
            want_bg = true;
            continue;
        }
        unsigned a = attr_lookup(w);
        if (a) {
            st->attrs |= a;
            continue;
        }
        int c = theme_color_parse(w);
        if (c == -2) {
            PERR("unknown colour or attribute '%s' %s, or an attribute: bold, dim, reverse, "
                 "underline, italic", w, COLOUR_HINT);
            return -1;
        }
        if (fg_word) {
            PERR("two foreground colours ('%s' and '%s'); write 'FG on BG' for a background",
                 fg_word, w);
            return -1;
        }
        fg_word = w;
        st->fg = (short)c;
    }
    if (want_bg) {
        PERR("'on' needs a background colour after it, e.g. 'white on blue'");
        return -1;
    }
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

int theme_parse(struct theme *t, const char *text, size_t len, const char *file,
                char *err, size_t errlen)
{
    int first_line[ROLE_COUNT] = { 0 };
    char line[1024];
    int lineno = 0;
    size_t pos = 0;
    if (!file) file = "(theme)";
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        lineno++;
        size_t n = end - pos;
        if (n >= sizeof line) {
            PERR("line longer than %zu bytes", sizeof line - 1);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos = end + 1;
        if (memchr(line, '\0', n)) {
            PERR("a NUL byte: this is not a theme file");
            return -1;
        }
        char *s = trim(line);
        if (*s == '\0' || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            PERR("expected 'ROLE = COLOUR [on COLOUR] [bold] [dim] [reverse] [underline]', "
                 "got '%s'", s);
            return -1;
        }
        *eq = '\0';
        char *name = trim(s), *rhs = eq + 1;
        int r = theme_role_lookup(name);
        if (r < 0) {
            PERR("unknown role '%s' (roles: normal, header, title, title_focus, border, status, "
                 "help, dim, ok, warn, fail, stalled, straggler, selection, chart, chart_band, "
                 "chart_axis, log, log_stderr, log_system, log_error, search_match, "
                 "rank_prefix_0 .. rank_prefix_7)", name);
            return -1;
        }
        if (first_line[r]) {
            PERR("role '%s' is set twice (first on line %d); keep one", role_names[r],
                 first_line[r]);
            return -1;
        }
        struct theme_style st;
        if (parse_style(rhs, &st, file, lineno, err, errlen) < 0) return -1;
        first_line[r] = lineno;
        t->style[r] = st;
        t->set |= (uint64_t)1 << r;
    }
    return 0;
}

void theme_init_default(struct theme *t)
{
    char err[256];
    memset(t, 0, sizeof *t);
    for (int r = 0; r < ROLE_COUNT; r++)
        t->style[r] = (struct theme_style){ THEME_COLOR_DEFAULT, THEME_COLOR_DEFAULT, 0 };
    /* the embedded text is ours and tested; a failure here is a bug */
    if (theme_parse(t, theme_default_text, strlen(theme_default_text), "(built-in default)",
                    err, sizeof err) < 0)
        fprintf(stderr, "ddptop: bug: %s\n", err);
    snprintf(t->name, sizeof t->name, "default");
}
