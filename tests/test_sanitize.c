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

/* ---- the sanitizer as it was before its printable runs were found 16 bytes a step (the
 * reference the current one must match byte for byte) ---- */
static const char ref_replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), 0 when it is not one.
 * When it is not, *bad is the length of the maximal ill-formed piece to replace by one
 * U+FFFD (Unicode's "maximal subpart" practice: a truncated sequence is one piece). */
static size_t ref_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad)
{
    unsigned char b = s[0];
    size_t need, i;
    unsigned char lo = 0x80, hi = 0xbf;
    uint32_t v;
    if (b >= 0xc2 && b <= 0xdf) {
        need = 2;
        v = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        need = 3;
        v = b & 0x0f;
        if (b == 0xe0) lo = 0xa0;        /* overlong */
        else if (b == 0xed) hi = 0x9f;   /* surrogates */
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 4;
        v = b & 0x07;
        if (b == 0xf0) lo = 0x90;        /* overlong */
        else if (b == 0xf4) hi = 0x8f;   /* above U+10FFFF */
    } else {
        *bad = 1;                        /* 0x80..0xc1 and 0xf5..0xff never start a sequence */
        return 0;
    }
    for (i = 1; i < need; i++) {
        unsigned char c = i < n ? s[i] : 0;
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (i >= n || c < l || c > h) {
            *bad = i;
            return 0;
        }
        v = (v << 6) | (c & 0x3f);
    }
    *cp = v;
    return need;
}

/* Whether the 8 bytes at s are all printable ASCII (0x20..0x7e), asked of a whole word at once:
 * headless output runs every line every rank prints through here. */
static bool ref_printable8(const unsigned char *s)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t w, del;
    memcpy(&w, s, 8);
    if (w & highs) return false;                          /* a byte >= 0x80 */
    if ((w - ones * 0x20) & ~w & highs) return false;     /* a byte < 0x20 */
    del = w ^ (ones * 0x7f);
    return !((del - ones) & ~del & highs);                /* no DEL */
}

static void ref_add_caret(struct strbuf *sb, unsigned c)
{
    char t[3] = {'^', (char)(c == 0x7f ? '?' : (char)(c + '@')), '\0'};
    strbuf_add(sb, t, 2);
}

static bool ref_is_format_control(uint32_t cp)
{
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 ||
           cp == 0x2029;
}

static void ref_sanitize_append(struct strbuf *sb, const char *in, size_t len, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, col = 0, run = 0;
    /* runs of plain printable ASCII are copied in one go: the common case */
#define FLUSH_RUN() do { if (run) { strbuf_add(sb, s + i - run, run); run = 0; } } while (0)
    if (!len) {
        strbuf_add(sb, "", 0);
        return;
    }
    while (i < len) {
        unsigned char b = s[i];
        if (b >= 0x20 && b < 0x7f) {
            size_t k = i + 1;
            while (k + 8 <= len && ref_printable8(s + k)) k += 8;
            while (k < len && s[k] >= 0x20 && s[k] < 0x7f) k++;
            run += k - i;
            col += k - i;
            i = k;
            continue;
        }
        FLUSH_RUN();
        if (b == '\t' && !(flags & SANITIZE_KEEP_TAB)) {
            size_t to = (col / 8 + 1) * 8;
            while (col < to) {
                strbuf_add(sb, " ", 1);
                col++;
            }
            i++;
        } else if (b == '\t') {
            strbuf_add(sb, "\t", 1);
            col = (col / 8 + 1) * 8;
            i++;
        } else if (b < 0x20 || b == 0x7f) {
            ref_add_caret(sb, b);
            col += 2;
            i++;
        } else {
            uint32_t cp = 0;
            size_t bad = 0, n = ref_utf8_seq(s + i, len - i, &cp, &bad);
            if (!n) {
                strbuf_add(sb, ref_replacement, 3);
                i += bad;
                col++;
            } else if (cp >= 0x80 && cp <= 0x9f) {
                strbuf_add(sb, "M-", 2);
                ref_add_caret(sb, cp - 0x80);
                col += 4;
                i += n;
            } else if (ref_is_format_control(cp)) {
                strbuf_addf(sb, "<U+%04X>", (unsigned)cp);
                col += 8;
                i += n;
            } else {
                strbuf_add(sb, s + i, n);
                col++;
                i += n;
            }
        }
    }
    FLUSH_RUN();
#undef FLUSH_RUN
}


/* sanitize_append against the reference on random input: printable runs of every length cut
 * by controls, tabs, DEL, C1 controls, bidi controls, UTF-8 good and bad, any byte at all;
 * both flag settings; appended after text already in the buffer. */
static void test_same_as_before(void)
{
    static const char *const odd[] = { "\t", "\x1b", "\x7f", "\r", "\n", "\0", "\xc3\xa9", "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80", "\xc3", "\xff", "\xc2\x85", "\xe2\x80\xae",
                                       "\xed\xa0\x80", "\xe0\x80\xaf", "\xf4\x90\x80\x80", "\x80", "~", " " };
    unsigned seed = 777;
    size_t diff = 0;
    char in[700];
    for (int round = 0; round < 100000; round++) {
        size_t n = 0, want;
        seed = seed * 1103515245u + 12345u;
        want = (seed >> 8) % (round % 10 ? 80 : sizeof in - 8);
        while (n < want) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = (seed >> 8) % 100;
            if (r < (round % 3 ? 95u : 70u)) {
                in[n++] = (char)(0x20 + (seed >> 16) % 95);
            } else if (round % 5 == 0) {
                in[n++] = (char)(seed >> 16);
            } else {
                const char *o = odd[(seed >> 16) % (sizeof odd / sizeof *odd)];
                size_t k = o[0] ? strlen(o) : 1;
                memcpy(in + n, o, k);
                n += k;
            }
        }
        unsigned flags = round % 2 ? SANITIZE_KEEP_TAB : 0;
        struct strbuf a, b;
        strbuf_init(&a);
        strbuf_init(&b);
        strbuf_adds(&a, "[r1 h] ");
        strbuf_adds(&b, "[r1 h] ");
        ref_sanitize_append(&a, in, n, flags);
        sanitize_append(&b, in, n, flags);
        if ((a.len != b.len || memcmp(a.buf, b.buf, a.len + 1) != 0) && !diff++)
            printf("#   round %d differs: %s | %s\n", round, a.buf, b.buf);
        strbuf_done(&a);
        strbuf_done(&b);
    }
    CHECK_INT(diff, 0);
}

int main(void)
{
    RUN(test_hostile_table);
    RUN(test_keep_tab);
    RUN(test_every_byte_pair);
    RUN(test_random_idempotent);
    RUN(test_word_at_a_time);
    RUN(test_same_as_before);
    return tap_done();
}
