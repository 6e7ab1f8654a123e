/* libFuzzer harness for the theme parser (tui/theme.c) and the UTF-8 width/truncation helpers
 * (tui/format.c), the two places where bytes from a user's file or a rank's output are
 * interpreted. Built and run by `make fuzz-programs`, `make fuzz` and
 * `make test` (docs/testing.md, "Fuzzing"). With -DFUZZ_SMOKE_MAIN, a main() without libFuzzer
 * feeds mutations of the seeds below instead (any C compiler).
 *
 * Invariants: a parsed theme has every colour in -1..255 and only known attribute bits, and
 * resolves to colours inside the terminal's palette; a failure says "fuzz.theme:LINE: ...";
 * a truncated string is a prefix of the input (plus the ellipsis) and never wider than asked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "theme.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_theme: invariant failed: %s\n", #cond); abort(); } } while (0)

#define ALL_ATTRS (THEME_BOLD | THEME_DIM | THEME_REVERSE | THEME_UNDERLINE | THEME_ITALIC)

static void check_theme(const uint8_t *data, size_t size)
{
    struct theme t;
    char err[512];
    theme_init_default(&t);
    err[0] = '\0';
    if (theme_parse(&t, (const char *)data, size, "fuzz.theme", err, sizeof err) == 0) {
        static const int palettes[] = { 0, 8, 16, 256 };
        for (int r = 0; r < ROLE_COUNT; r++) {
            EXPECT(t.style[r].fg >= -1 && t.style[r].fg <= 255);
            EXPECT(t.style[r].bg >= -1 && t.style[r].bg <= 255);
            EXPECT((t.style[r].attrs & ~ALL_ATTRS) == 0);
        }
        for (size_t p = 0; p < 4; p++) {
            struct theme_resolved res;
            theme_resolve(&t, palettes[p], false, &res);
            for (int r = 0; r < ROLE_COUNT; r++) {
                int max = res.mono ? -1 : res.colors - 1;
                EXPECT(res.style[r].fg >= -1 && res.style[r].fg <= max);
                EXPECT(res.style[r].bg >= -1 && res.style[r].bg <= max);
                EXPECT(res.style[r].fg < 0 || res.style[r].fg != res.style[r].bg ||
                       t.style[r].fg == t.style[r].bg);
            }
        }
    } else {
        EXPECT(strncmp(err, "fuzz.theme:", 11) == 0);
        EXPECT(err[11] >= '1' && err[11] <= '9');
    }
}

static void check_truncate(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), out[64];
    if (!s) return;
    memcpy(s, data, size);
    s[size] = '\0';
    size_t len = strlen(s);
    for (int cols = 0; cols < 24; cols += 5) {
        format_truncate(out, sizeof out, s, cols, cols & 1);
        size_t ol = strlen(out);
        EXPECT(format_width(out, ol) <= cols);
        const char *ell = (cols & 1) ? "~" : "\xe2\x80\xa6";
        size_t el = strlen(ell);
        bool whole = ol <= len && memcmp(out, s, ol) == 0;
        bool cut = ol >= el && memcmp(out + ol - el, ell, el) == 0 && ol - el <= len &&
                   memcmp(out, s, ol - el) == 0;
        EXPECT(whole || cut);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_theme(data, size);
    check_truncate(data, size);
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "ok = bright-green on 17 bold underline # c\nfail=#ff0000 reverse\r\n",
    "# theme\n\nchart-band = on blue\nWARN = 214 dim italic\nhelp = default\n",
    "selection = default on 238\nstatus = 252 on 236\nrank_prefix_7 = 44\n",
    "ok = red blue\n", "ok = on\n", "foo = red\n", "ok\n", "ok = 999\n",
    "log = \xe4\xb8\xad\xe6\x96\x87 \xff\xfe e\xcc\x81\n",
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = "=#_- \t\n\r0123456789abcdefonboldrevgrey\x01\x7f\xff\xe4\xcc";
    int rc = fuzz_smoke_run(argc, argv, "fuzz_theme", seeds, sizeof seeds / sizeof seeds[0], alphabet,
                            sizeof alphabet - 1);
    return rc;
}
#endif
