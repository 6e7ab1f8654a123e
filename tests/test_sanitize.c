/* Terminal sanitizer: hostile byte sequences a rank could print (escape sequences that move
 * the cursor, set the title, write the clipboard, ask the terminal to answer; C1 controls;
 * malformed UTF-8) come out as inert visible text and valid UTF-8. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/sanitize.h"
#include "tap.h"

/* No C0 control (tab too: the default expands it), no DEL, no C1 as raw bytes or as UTF-8,
 * and the whole string is well-formed UTF-8 (no overlong, surrogate or > U+10FFFF). */
static bool terminal_safe(const char *out)
{
    const unsigned char *s = (const unsigned char *)out;
    size_t n = strlen(out), i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t need;
        uint32_t cp;
        if (b < 0x20 || b == 0x7f) return false;
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b >= 0xc2 && b <= 0xdf) need = 2, cp = b & 0x1f;
        else if (b >= 0xe0 && b <= 0xef) need = 3, cp = b & 0x0f;
        else if (b >= 0xf0 && b <= 0xf4) need = 4, cp = b & 0x07;
        else return false;
        if (i + need > n) return false;
        for (size_t k = 1; k < need; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) || cp > 0x10ffff) return false;
        if (cp >= 0xd800 && cp <= 0xdfff) return false;
        if (cp >= 0x80 && cp <= 0x9f) return false;
        i += need;
    }
    return true;
}

struct hostile {
    const char *name;
    const char *in;
    size_t len;       /* 0: strlen */
    const char *want; /* exact output, or NULL: only "safe" is checked */
};

#define S(x) x, sizeof(x) - 1

static const struct hostile cases[] = {
    {"CSI colour", S("\x1b[31mred\x1b[0m"), "^[[31mred^[[0m"},
    {"CSI cursor home + clear", S("\x1b[H\x1b[2J"), "^[[H^[[2J"},
    {"OSC 0 title, BEL", S("\x1b]0;pwned\x07"), "^[]0;pwned^G"},
    {"OSC 2 title, ST", S("\x1b]2;pwned\x1b\\"), "^[]2;pwned^[\\"},
    {"OSC 52 clipboard write", S("\x1b]52;c;cm0gLXJmIC8K\x07"), "^[]52;c;cm0gLXJmIC8K^G"},
    {"DCS DECRQSS request", S("\x1bP$qm\x1b\\"), "^[P$qm^[\\"},
    {"APC", S("\x1b_payload\x1b\\"), "^[_payload^[\\"},
    {"PM", S("\x1b^payload\x1b\\"), "^[^payload^[\\"},
    {"SOS", S("\x1bXpayload\x1b\\"), "^[Xpayload^[\\"},
    {"title report request", S("\x1b[21t"), "^[[21t"},
    {"device attributes request", S("\x1b[c"), "^[[c"},
    {"charset switch SO/SI", S("a\x0e" "b\x0f"), "a^Nb^O"},
    {"CR and backspace", S("50%\r\b\b100%"), "50%^M^H^H100%"},
    {"NUL in the middle", "a\0b", 3, "a^@b"},
    {"DEL", S("x\x7fy"), "x^?y"},
    {"C1 CSI raw byte 0x9b", S("\x9b" "31m"), "\xef\xbf\xbd" "31m"},
    {"C1 OSC raw byte 0x9d", S("\x9d" "0;t\x9c"), "\xef\xbf\xbd" "0;t\xef\xbf\xbd"},
    {"C1 raw bytes 0x80..0x9f", S("\x80\x85\x8d\x90\x9f"), NULL},
    {"C1 CSI as UTF-8 U+009B", S("\xc2\x9b" "31m"), "M-^[31m"},
    {"C1 NEL as UTF-8 U+0085", S("a\xc2\x85" "b"), "aM-^Eb"},
    {"C1 U+0080 and U+009F", S("\xc2\x80\xc2\x9f"), "M-^@M-^_"},
    {"overlong slash C0 AF", S("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd"},
    {"overlong ESC C0 9B", S("\xc0\x9b"), "\xef\xbf\xbd\xef\xbf\xbd"},
    {"overlong 3 bytes E0 80 AF", S("\xe0\x80\xaf"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"overlong 4 bytes F0 80 80 AF", S("\xf0\x80\x80\xaf"), NULL},
    {"surrogate D800", S("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"surrogate pair", S("\xed\xa0\xbd\xed\xb8\x80"), NULL},
    {"above U+10FFFF", S("\xf4\x90\x80\x80"), NULL},
    {"F5..FF bytes", S("\xf5\xf8\xfc\xfe\xff"), NULL},
    {"truncated sequence at end", S("ok\xe2\x82"), "ok\xef\xbf\xbd"},
    {"truncated sequence before ASCII", S("\xe2\x82x"), "\xef\xbf\xbdx"},
    {"lone continuation", S("\xbf"), "\xef\xbf\xbd"},
    {"bidi override", S("a\xe2\x80\xae" "b"), "a<U+202E>b"},
    {"valid UTF-8 kept", S("loss \xce\xbb=0.5 \xe2\x9c\x93 \xf0\x9f\x9a\x80"), "loss \xce\xbb=0.5 \xe2\x9c\x93 \xf0\x9f\x9a\x80"},
    {"tab expanded", S("a\tb"), "a       b"},
    {"tab after 8 columns", S("12345678\tx"), "12345678        x"},
    {"escape split over ESC ESC", S("\x1b\x1b[1m"), "^[^[[1m"},
    {"empty", "", 0, ""},
};

static void test_hostile_table(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct hostile *h = &cases[k];
        char *out = sanitize_str(h->in, h->len, 0);
        if (!terminal_safe(out)) printf("#   case '%s': output not terminal-safe\n", h->name);
        CHECK(terminal_safe(out));
        if (h->want && strcmp(out, h->want) != 0) printf("#   case '%s'\n", h->name);
        if (h->want) CHECK_STR(out, h->want);
        free(out);
    }
}

static void test_keep_tab(void)
{
    char *out = sanitize_str("a\tb\x1b", 4, SANITIZE_KEEP_TAB);
    CHECK_STR(out, "a\tb^[");
    free(out);
}

/* Every byte value alone and every two-byte combination: always safe, never crashes. */
static void test_every_byte_pair(void)
{
    bool ok = true;
    for (int a = 0; a < 256 && ok; a++)
        for (int b = 0; b < 256 && ok; b++) {
            char in[3] = {(char)a, (char)b, (char)0xe2};
            char *out = sanitize_str(in, 3, 0);
            if (!terminal_safe(out)) {
                printf("#   bytes %02x %02x e2 unsafe\n", a, b);
                ok = false;
            }
            free(out);
        }
    CHECK(ok);
}

/* Long printable runs go 8 bytes at a time: a control, DEL, tab or UTF-8 byte at any offset
 * inside one is still seen, and the rest comes out as it went in. */
static void test_word_at_a_time(void)
{
    static const char *const odd[] = { "\x1b", "\x7f", "\t", "\x01", "\xc3\xa9" };
    static const char *const want[] = { "^[", "^?", "        ", "^A", "\xc3\xa9" };
    bool ok = true;
    for (size_t k = 0; k < 5 && ok; k++)
        for (size_t off = 0; off < 24 && ok; off++) {
            char in[40], expect[64];
            size_t ol = strlen(odd[k]);
            memset(in, 'a', sizeof in);
            memcpy(in + off, odd[k], ol);
            char *out = sanitize_str(in, 32, 0);
            if (k == 2) /* a tab goes to the next multiple of 8 columns */
                snprintf(expect, sizeof expect, "%.*s%.*s%.*s", (int)off, in, (int)(8 - off % 8), want[k],
                         (int)(32 - off - ol), in + off + ol);
            else
                snprintf(expect, sizeof expect, "%.*s%s%.*s", (int)off, in, want[k], (int)(32 - off - ol),
                         in + off + ol);
            if (strcmp(out, expect) != 0) {
                printf("#   byte %zu at %zu: '%s', want '%s'\n", k, off, out, expect);
                ok = false;
            }
            free(out);
        }
    CHECK(ok);
}

/* Random bytes: safe, and sanitizing the output again changes nothing except that carets
 * stay carets (idempotent on already safe text). */
static void test_random_idempotent(void)
{
    uint64_t x = 88172645463325252ULL;
    bool ok = true;
    for (int round = 0; round < 2000 && ok; round++) {
        char in[64];
        for (size_t i = 0; i < sizeof in; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            in[i] = (char)(x & 0xff);
        }
        char *once = sanitize_str(in, sizeof in, 0);
        char *twice = sanitize_str(once, strlen(once), 0);
        if (!terminal_safe(once) || strcmp(once, twice) != 0) ok = false;
        free(once);
        free(twice);
    }
    CHECK(ok);
}

int main(void)
{
    RUN(test_hostile_table);
    RUN(test_keep_tab);
    RUN(test_every_byte_pair);
    RUN(test_random_idempotent);
    RUN(test_word_at_a_time);
    return tap_done();
}
