/* Unit tests for tui/theme*.c: the four shipped themes parse and set every role, the compiled-in
 * default equals themes/default.theme, errors name FILE:LINE and what to write, colour words,
 * 256 -> 16 -> 8 colour degradation that stays readable, NO_COLOR / no colours -> attributes
 * that keep ok, warn, fail, stalled and straggler apart, and the lookup of --theme NAME in the
 * user's directory, the themes/ folder next to the build, and the built-in default. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "theme.h"

static char err[1024];
static const uint64_t ALL_ROLES = (ROLE_COUNT == 64) ? ~0ull : ((1ull << ROLE_COUNT) - 1);
static const char *shipped[] = { "default", "light", "high-contrast", "mono" };

static int parse(struct theme *t, const char *text)
{
    theme_init_default(t);
    t->set = 0;
    err[0] = '\0';
    return theme_parse(t, text, strlen(text), "my.theme", err, sizeof err);
}

#define EXPECT_ERR(text, msg) do { struct theme t_; CHECK_INT(parse(&t_, text), -1); \
    CHECK(strncmp(err, msg, strlen(msg)) == 0); \
    if (strncmp(err, msg, strlen(msg)) != 0) printf("#   got: %s\n", err); } while (0)

static void test_shipped_themes_set_every_role(void)
{
    for (size_t i = 0; i < sizeof shipped / sizeof *shipped; i++) {
        char path[256];
        struct theme t;
        snprintf(path, sizeof path, "themes/%s.theme", shipped[i]);
        int rc = theme_load_file(&t, path, err, sizeof err);
        if (rc) printf("#   %s\n", err);
        CHECK_INT(rc, 0);
        CHECK_STR(t.name, shipped[i]);
        if (t.set != ALL_ROLES)
            for (int r = 0; r < ROLE_COUNT; r++)
                if (!(t.set >> r & 1)) printf("#   %s does not set %s\n", path, theme_role_name(r));
        CHECK(t.set == ALL_ROLES);
    }
}

static void test_builtin_default_equals_file(void)
{
    FILE *f = fopen("themes/default.theme", "rb");
    CHECK(f != NULL);
    if (!f) return;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    CHECK_STR(theme_default_text, buf);
    struct theme a, b;
    theme_init_default(&a);
    CHECK_INT(theme_load_file(&b, "themes/default.theme", err, sizeof err), 0);
    CHECK(memcmp(a.style, b.style, sizeof a.style) == 0);
    CHECK(a.set == ALL_ROLES);
}

static void test_parse_format(void)
{
    struct theme t;
    CHECK_INT(parse(&t, "# comment\n\n  ok = bright-green on 17 bold underline  # trailing\n"
                        "fail=#ff0000 reverse\r\nchart-band = on blue\nWARN = 214 dim italic\n"
                        "help = default\n"), 0);
    CHECK_INT(t.style[ROLE_OK].fg, 10);
    CHECK_INT(t.style[ROLE_OK].bg, 17);
    CHECK_INT(t.style[ROLE_OK].attrs, THEME_BOLD | THEME_UNDERLINE);
    CHECK_INT(t.style[ROLE_FAIL].fg, 9);   /* #ff0000: nearest is bright red */
    CHECK_INT(t.style[ROLE_FAIL].attrs, THEME_REVERSE);
    CHECK_INT(t.style[ROLE_CHART_BAND].fg, THEME_COLOR_DEFAULT);
    CHECK_INT(t.style[ROLE_CHART_BAND].bg, 4);
    CHECK_INT(t.style[ROLE_WARN].attrs, THEME_DIM | THEME_ITALIC);
    CHECK_INT(t.style[ROLE_HELP].fg, THEME_COLOR_DEFAULT);
    CHECK_INT(t.style[ROLE_HELP].attrs, 0);
    CHECK(t.set == ((1ull << ROLE_OK) | (1ull << ROLE_FAIL) | (1ull << ROLE_CHART_BAND) |
                    (1ull << ROLE_WARN) | (1ull << ROLE_HELP)));
    /* roles a file leaves out keep the default's style */
    struct theme d;
    theme_init_default(&d);
    CHECK(memcmp(&t.style[ROLE_HEADER], &d.style[ROLE_HEADER], sizeof d.style[0]) == 0);
}

static void test_parse_errors(void)
{
    EXPECT_ERR("ok = red\nfoo = red\n", "my.theme:2: unknown role 'foo' (roles: normal,");
    EXPECT_ERR("\n\nok = purple\n", "my.theme:3: unknown colour or attribute 'purple' (use");
    EXPECT_ERR("ok red\n", "my.theme:1: expected 'ROLE = COLOUR [on COLOUR]");
    EXPECT_ERR("ok = red on\n", "my.theme:1: 'on' needs a background colour");
    EXPECT_ERR("ok = red on mauve\n", "my.theme:1: unknown background colour 'mauve'");
    EXPECT_ERR("ok = red blue\n", "my.theme:1: two foreground colours ('red' and 'blue'); "
               "write 'FG on BG'");
    EXPECT_ERR("ok = red\n# x\nok = blue\n", "my.theme:3: role 'ok' is set twice (first on "
               "line 1)");
    EXPECT_ERR("ok = 256\n", "my.theme:1: unknown colour or attribute '256'");
    EXPECT_ERR("ok = #12345\n", "my.theme:1: unknown colour");
    EXPECT_ERR("ok = bright-grey\n", "my.theme:1: unknown colour");
    struct theme t;
    theme_init_default(&t);
    CHECK_INT(theme_parse(&t, "ok = red\0x", 10, "bin.theme", err, sizeof err), -1);
    CHECK(strncmp(err, "bin.theme:1: a NUL byte", 23) == 0);
}

static void test_colour_words(void)
{
    CHECK_INT(theme_color_parse("black"), 0);
    CHECK_INT(theme_color_parse("White"), 7);
    CHECK_INT(theme_color_parse("bright-red"), 9);
    CHECK_INT(theme_color_parse("brightcyan"), 14);
    CHECK_INT(theme_color_parse("bright_white"), 15);
    CHECK_INT(theme_color_parse("grey"), 8);
    CHECK_INT(theme_color_parse("default"), THEME_COLOR_DEFAULT);
    CHECK_INT(theme_color_parse("0"), 0);
    CHECK_INT(theme_color_parse("255"), 255);
    CHECK_INT(theme_color_parse("#ffffff"), 15);
    CHECK_INT(theme_color_parse("#5f87af"), 67);   /* exactly a cube colour */
    CHECK_INT(theme_color_parse("-1"), -2);
    CHECK_INT(theme_color_parse("12x"), -2);
    CHECK_INT(theme_color_parse(""), -2);
}

static void test_degrade_256_to_16_and_8(void)
{
    CHECK_INT(theme_color_degrade(196, 16), 9);    /* bright red */
    CHECK_INT(theme_color_degrade(196, 8), 1);
    CHECK_INT(theme_color_degrade(46, 8), 2);      /* green */
    CHECK_INT(theme_color_degrade(21, 16), 4);     /* pure blue: blue, not bright blue */
    CHECK_INT(theme_color_degrade(214, 8), 3);     /* orange: yellow */
    CHECK_INT(theme_color_degrade(231, 16), 15);   /* white */
    CHECK_INT(theme_color_degrade(232, 16), 0);    /* darkest grey: black */
    CHECK_INT(theme_color_degrade(250, 16), 7);
    CHECK_INT(theme_color_degrade(5, 16), 5);
    CHECK_INT(theme_color_degrade(THEME_COLOR_DEFAULT, 8), THEME_COLOR_DEFAULT);

    for (size_t i = 0; i < sizeof shipped / sizeof *shipped; i++) {
        char path[256];
        struct theme t;
        snprintf(path, sizeof path, "themes/%s.theme", shipped[i]);
        CHECK_INT(theme_load_file(&t, path, err, sizeof err), 0);
        int palettes[] = { 8, 16, 88, 256 };
        for (size_t p = 0; p < 4; p++) {
            struct theme_resolved r;
            theme_resolve(&t, palettes[p], false, &r);
            int maxc = r.colors - 1;
            CHECK(!r.mono);
            for (int k = 0; k < ROLE_COUNT; k++) {
                struct theme_style s = r.style[k];
                CHECK(s.fg >= -1 && s.fg <= maxc && s.bg >= -1 && s.bg <= maxc);
                /* readable: never the same colour for text and background */
                if (s.fg >= 0 && s.fg == s.bg)
                    printf("#   %s at %d colours: %s is %d on %d\n", shipped[i], palettes[p],
                           theme_role_name(k), s.fg, s.bg);
                CHECK(s.fg < 0 || s.fg != s.bg);
            }
        }
    }
    /* the default's grey selection bar would turn black on 8 colours: reverse instead */
    struct theme d;
    struct theme_resolved r8, r16;
    theme_init_default(&d);
    theme_resolve(&d, 8, false, &r8);
    theme_resolve(&d, 16, false, &r16);
    CHECK(r8.style[ROLE_SELECTION].attrs & THEME_REVERSE);
    CHECK_INT(r16.style[ROLE_SELECTION].bg, 8);
    /* bright foregrounds become bold on 8 colours */
    CHECK_INT(r8.style[ROLE_HEADER].fg, 7);
    CHECK(r8.style[ROLE_HEADER].attrs & THEME_BOLD);
    /* the states keep different colours on 8 colours */
    CHECK(r8.style[ROLE_OK].fg != r8.style[ROLE_FAIL].fg);
    CHECK(r8.style[ROLE_OK].fg != r8.style[ROLE_WARN].fg);
    CHECK(r8.style[ROLE_WARN].fg != r8.style[ROLE_FAIL].fg);
    /* fg == bg after degradation is fixed */
    struct theme t;
    CHECK_INT(parse(&t, "ok = 236 on 234\nfail = 124 on 88\n"), 0);   /* both become one */
    theme_resolve(&t, 16, false, &r16);
    CHECK_INT(r16.style[ROLE_OK].bg, 0);
    CHECK_INT(r16.style[ROLE_OK].fg, 15);
    CHECK_INT(r16.style[ROLE_FAIL].bg, 1);
    CHECK_INT(r16.style[ROLE_FAIL].fg, 0);
    /* on 8 colours the dark grey background (now black) turns into reverse video */
    theme_resolve(&t, 8, false, &r8);
    CHECK_INT(r8.style[ROLE_OK].bg, THEME_COLOR_DEFAULT);
    CHECK(r8.style[ROLE_OK].attrs & THEME_REVERSE);
}

static void test_no_color_is_mono(void)
{
    struct theme d;
    theme_init_default(&d);
    struct theme_resolved a, b, m;
    theme_resolve(&d, 256, true, &a);   /* NO_COLOR on a colour terminal */
    theme_resolve(&d, 0, false, &b);    /* a terminal without colours */
    CHECK(a.mono && b.mono);
    CHECK(memcmp(a.style, b.style, sizeof a.style) == 0);
    for (int r = 0; r < ROLE_COUNT; r++)
        CHECK(a.style[r].fg == THEME_COLOR_DEFAULT && a.style[r].bg == THEME_COLOR_DEFAULT);
    enum theme_role states[] = { ROLE_OK, ROLE_WARN, ROLE_FAIL, ROLE_STALLED, ROLE_STRAGGLER };
    for (size_t i = 0; i < 5; i++)
        for (size_t k = i + 1; k < 5; k++) {
            if (a.style[states[i]].attrs == a.style[states[k]].attrs)
                printf("#   %s and %s look the same without colour\n",
                       theme_role_name(states[i]), theme_role_name(states[k]));
            CHECK(a.style[states[i]].attrs != a.style[states[k]].attrs);
        }
    CHECK(a.style[ROLE_SELECTION].attrs != a.style[ROLE_NORMAL].attrs);
    CHECK(a.style[ROLE_LOG_ERROR].attrs != a.style[ROLE_LOG].attrs);
    /* themes/mono.theme looks exactly like the automatic fallback */
    struct theme mono;
    CHECK_INT(theme_load_file(&mono, "themes/mono.theme", err, sizeof err), 0);
    theme_resolve(&mono, 256, false, &m);
    CHECK(memcmp(m.style, a.style, sizeof a.style) == 0);
    theme_resolve(&mono, 256, true, &m);
    CHECK(memcmp(m.style, a.style, sizeof a.style) == 0);
}

static char tmp[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_lookup_by_name(void)
{
    char exe[1024], dir[256], path[512];
    const char *b = getenv("DDPTOP_BUILD");
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    /* DIR(exe)/../themes is the repository's themes/ when exe is in the build directory */
    snprintf(exe, sizeof exe, "%s/ddptop", b && *b ? b : "build");
    if (exe[0] != '/') snprintf(exe, sizeof exe, "%s/%s/ddptop", cwd, b && *b ? b : "build");
    snprintf(tmp, sizeof tmp, "/tmp/ddptop-theme-XXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    snprintf(dir, sizeof dir, "%s/ddptop", tmp);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/ddptop/themes", tmp);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/mine.theme", dir);
    write_file(path, "ok = red\n");
    snprintf(path, sizeof path, "%s/high-contrast.theme", dir);   /* the user's wins */
    write_file(path, "fail = blue\n");
    snprintf(path, sizeof path, "%s/broken.theme", dir);
    write_file(path, "ok = red\nstalled = sparkly\n");

    struct theme_dirs d;
    theme_dirs_init(&d, tmp, "/nonexistent-home", exe);
    CHECK_INT(d.n, 4);
    CHECK_STR(d.dir[0], dir);
    CHECK_STR(d.dir[3], "/usr/share/ddptop/themes");

    struct theme t;
    CHECK_INT(theme_load(&t, "mine", &d, err, sizeof err), 0);
    CHECK_STR(t.name, "mine");
    CHECK_INT(t.style[ROLE_OK].fg, 1);
    CHECK_INT(theme_load(&t, "high-contrast", &d, err, sizeof err), 0);
    CHECK_INT(t.style[ROLE_FAIL].fg, 4);
    CHECK_INT(theme_load(&t, "light", &d, err, sizeof err), 0);   /* from DIR(exe)/../themes */
    if (err[0]) printf("#   %s\n", err);
    CHECK_STR(t.name, "light");
    CHECK(t.set != 0);
    CHECK_INT(theme_load(&t, "broken", &d, err, sizeof err), -1);
    char want[600];
    snprintf(want, sizeof want, "%s/broken.theme:2: unknown colour or attribute 'sparkly'", dir);
    CHECK(strncmp(err, want, strlen(want)) == 0);
    CHECK_INT(theme_load(&t, "nope", &d, err, sizeof err), -1);
    CHECK(strstr(err, "--theme 'nope': no nope.theme in ") == err);
    CHECK(strstr(err, dir) != NULL);
    CHECK(strstr(err, "themes: default, light, high-contrast, mono, broken, mine") != NULL);
    CHECK_INT(theme_load(&t, "a b", &d, err, sizeof err), -1);
    CHECK_INT(theme_load(&t, path, &d, err, sizeof err), -1);   /* a path is read as is */
    CHECK(strstr(err, "broken.theme:2:") != NULL);

    /* the `t` order: shipped first, then the user's alphabetically; wraps */
    size_t n;
    char **names = theme_names(&d, &n);
    CHECK_INT(n, 6);
    if (n == 6) {
        CHECK_STR(names[0], "default");
        CHECK_STR(names[3], "mono");
        CHECK_STR(names[5], "mine");
    }
    theme_names_free(names, n);
    char buf[64];
    CHECK_STR(theme_next_name(&d, "default", buf, sizeof buf), "light");
    CHECK_STR(theme_next_name(&d, "mono", buf, sizeof buf), "broken");
    CHECK_STR(theme_next_name(&d, "mine", buf, sizeof buf), "default");
    CHECK_STR(theme_next_name(&d, "gone", buf, sizeof buf), "default");
    theme_dirs_done(&d);

    /* from anywhere: no directories at all, "default" is compiled in */
    struct theme_dirs none = { .n = 0 };
    CHECK_INT(theme_load(&t, "default", &none, err, sizeof err), 0);
    CHECK(t.set == ALL_ROLES);
    CHECK_STR(theme_next_name(&none, "default", buf, sizeof buf), "default");

    /* $HOME/.config when XDG_CONFIG_HOME is unset or relative */
    theme_dirs_init(&d, "relative/dir", "/home/u", "/opt/ddptop/bin/ddptop");
    CHECK_STR(d.dir[0], "/home/u/.config/ddptop/themes");
    CHECK_STR(d.dir[1], "/opt/ddptop/bin/../themes");
    CHECK_STR(d.dir[2], "/opt/ddptop/bin/../share/ddptop/themes");   /* make install's */
    CHECK_STR(d.dir[3], "/usr/share/ddptop/themes");
    theme_dirs_done(&d);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_INT(system(cmd), 0);
}

int main(void)
{
    RUN(test_shipped_themes_set_every_role);
    RUN(test_builtin_default_equals_file);
    RUN(test_parse_format);
    RUN(test_parse_errors);
    RUN(test_colour_words);
    RUN(test_degrade_256_to_16_and_8);
    RUN(test_no_color_is_mono);
    RUN(test_lookup_by_name);
    return tap_done();
}
