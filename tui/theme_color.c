/* Themes, part 2: colour words, the xterm palette, and resolving a theme for one terminal:
 * 256-colour values mapped to the nearest of the 16 (or 8) basic colours, and no colour at
 * all (NO_COLOR, a monochrome terminal) turned into attributes that keep every state
 * apart. Pure functions; the panes turn the result into curses pairs and attributes. */
#include "theme.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const base_names[8] = { "black", "red", "green", "yellow",
                                           "blue", "magenta", "cyan", "white" };

/* xterm's default RGB for the 16 basic colours */
static const unsigned char base_rgb[16][3] = {
    { 0, 0, 0 },       { 205, 0, 0 },     { 0, 205, 0 },     { 205, 205, 0 },
    { 0, 0, 238 },     { 205, 0, 205 },   { 0, 205, 205 },   { 229, 229, 229 },
    { 127, 127, 127 }, { 255, 0, 0 },     { 0, 255, 0 },     { 255, 255, 0 },
    { 92, 92, 255 },   { 255, 0, 255 },   { 0, 255, 255 },   { 255, 255, 255 },
};

static const int cube_level[6] = { 0, 95, 135, 175, 215, 255 };

static void xterm_rgb(int c, int rgb[3])
{
    if (c < 16) {
        for (int i = 0; i < 3; i++) rgb[i] = base_rgb[c][i];
    } else if (c < 232) {
        c -= 16;
        rgb[0] = cube_level[c / 36];
        rgb[1] = cube_level[c / 6 % 6];
        rgb[2] = cube_level[c % 6];
    } else {
        rgb[0] = rgb[1] = rgb[2] = 8 + 10 * (c - 232);
    }
}

static long dist2(const int a[3], const int b[3])
{
    long d = 0;
    for (int i = 0; i < 3; i++) d += (long)(a[i] - b[i]) * (a[i] - b[i]);
    return d;
}

/* Nearest xterm colour in [first, last] to rgb. */
static int nearest(const int rgb[3], int first, int last)
{
    int best = first;
    long best_d = -1;
    for (int c = first; c <= last; c++) {
        int p[3];
        xterm_rgb(c, p);
        long d = dist2(rgb, p);
        if (best_d < 0 || d < best_d) best = c, best_d = d;
    }
    return best;
}

int theme_color_parse(const char *w)
{
    if (strcasecmp(w, "default") == 0 || strcasecmp(w, "none") == 0) return THEME_COLOR_DEFAULT;
    if (strcasecmp(w, "grey") == 0 || strcasecmp(w, "gray") == 0) return 8;
    const char *base = w;
    int bright = 0;
    if (strncasecmp(w, "bright", 6) == 0) {
        base = w + 6;
        if (*base == '-' || *base == '_') base++;
        bright = 8;
    }
    for (int i = 0; i < 8; i++)
        if (strcasecmp(base, base_names[i]) == 0) return i + bright;
    if (bright) return -2;
    if (w[0] == '#') {
        if (strlen(w) != 7) return -2;
        char *end;
        long v = strtol(w + 1, &end, 16);
        if (*end || v < 0) return -2;
        int rgb[3] = { (int)(v >> 16) & 0xff, (int)(v >> 8) & 0xff, (int)v & 0xff };
        return nearest(rgb, 0, 255);
    }
    if (w[0] >= '0' && w[0] <= '9') {
        char *end;
        long v = strtol(w, &end, 10);
        if (*end || v > 255) return -2;
        return (int)v;
    }
    return -2;
}

int theme_color_degrade(int c, int palette)
{
    if (c < 0) return THEME_COLOR_DEFAULT;
    if (c > 255) c = 255;
    if (c >= 16) {
        int rgb[3];
        xterm_rgb(c, rgb);
        c = nearest(rgb, 0, 15);
    }
    if (palette <= 8 && c >= 8) c -= 8;
    return c;
}

/* What each role looks like without colours: states stay apart by attributes alone (the same
 * as themes/mono.theme). */
static const unsigned mono_attrs[ROLE_COUNT] = {
    [ROLE_HEADER] = THEME_BOLD,
    [ROLE_TITLE] = THEME_BOLD,
    [ROLE_TITLE_FOCUS] = THEME_BOLD | THEME_REVERSE,
    [ROLE_BORDER] = THEME_DIM,
    [ROLE_STATUS] = THEME_REVERSE,
    [ROLE_DIM] = THEME_DIM,
    [ROLE_WARN] = THEME_UNDERLINE,
    [ROLE_FAIL] = THEME_BOLD | THEME_REVERSE,
    [ROLE_STALLED] = THEME_REVERSE,
    [ROLE_STRAGGLER] = THEME_BOLD | THEME_UNDERLINE,
    [ROLE_SELECTION] = THEME_REVERSE,
    [ROLE_CHART] = THEME_BOLD,
    [ROLE_CHART_BAND] = THEME_DIM,
    [ROLE_CHART_AXIS] = THEME_DIM,
    [ROLE_LOG_SYSTEM] = THEME_DIM,
    [ROLE_LOG_ERROR] = THEME_BOLD,
    [ROLE_SEARCH_MATCH] = THEME_REVERSE | THEME_UNDERLINE,
    [ROLE_RANK_PREFIX_0] = THEME_BOLD, [ROLE_RANK_PREFIX_1] = THEME_BOLD,
    [ROLE_RANK_PREFIX_2] = THEME_BOLD, [ROLE_RANK_PREFIX_3] = THEME_BOLD,
    [ROLE_RANK_PREFIX_4] = THEME_BOLD, [ROLE_RANK_PREFIX_5] = THEME_BOLD,
    [ROLE_RANK_PREFIX_6] = THEME_BOLD, [ROLE_RANK_PREFIX_7] = THEME_BOLD,
};

static bool theme_has_colour(const struct theme *t)
{
    for (int r = 0; r < ROLE_COUNT; r++)
        if (t->style[r].fg != THEME_COLOR_DEFAULT || t->style[r].bg != THEME_COLOR_DEFAULT)
            return true;
    return false;
}

static struct theme_style degrade_style(struct theme_style in, int palette)
{
    struct theme_style st = in;
    st.fg = (short)theme_color_degrade(in.fg, palette);
    st.bg = (short)theme_color_degrade(in.bg, palette);
    if (palette <= 8) {
        /* bright foregrounds: the base colour in bold, as 8-colour terminals show them */
        if (in.fg >= 8 && theme_color_degrade(in.fg, 16) >= 8) st.attrs |= THEME_BOLD;
        /* a background meant to stand out (a grey bar, a selection) that has become black
         * would vanish on a dark terminal: reverse video keeps it visible */
        if (st.bg == 0 && in.bg != 0 && in.bg != 16) {
            st.bg = THEME_COLOR_DEFAULT;
            st.attrs |= THEME_REVERSE;
        }
    }
    /* two colours that were different must not become one (unreadable text) */
    if (st.fg >= 0 && st.fg == st.bg && in.fg != in.bg)
        st.fg = (short)(st.bg == 0 || st.bg == 4 || st.bg == 8 ? (palette <= 8 ? 7 : 15) : 0);
    return st;
}

void theme_resolve(const struct theme *t, int colors, bool no_color,
                   struct theme_resolved *out)
{
    memset(out, 0, sizeof *out);
    if (no_color || colors < 8) {
        /* a theme without colours (mono.theme or a user's) is used as written */
        bool own = !theme_has_colour(t);
        out->mono = true;
        out->colors = 0;
        for (int r = 0; r < ROLE_COUNT; r++)
            out->style[r] = (struct theme_style){ THEME_COLOR_DEFAULT, THEME_COLOR_DEFAULT,
                                                  own ? t->style[r].attrs : mono_attrs[r] };
        return;
    }
    out->colors = colors >= 256 ? 256 : colors >= 16 ? 16 : 8;
    for (int r = 0; r < ROLE_COUNT; r++)
        out->style[r] = out->colors == 256 ? t->style[r] : degrade_style(t->style[r], out->colors);
}
