/* The terminal sanitizer (rules in sanitize.h). A byte-at-a-time UTF-8 decoder that accepts
 * exactly the well-formed sequences of Unicode's table 3-7, so overlong forms, surrogates and
 * code points above U+10FFFF never reach the terminal; each control is rewritten as visible
 * caret text. Escape sequences need no parser of their own: once ESC is "^[", what follows
 * it is inert text. */
#include "sanitize.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ascii_run.h"
#include "utf8.h"

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

static void add_caret(struct strbuf *sb, unsigned c)
{
    char t[3] = {'^', (char)(c == 0x7f ? '?' : (char)(c + '@')), '\0'};
    strbuf_add(sb, t, 2);
}

static bool is_format_control(uint32_t cp)
{
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 ||
           cp == 0x2029;
}

void sanitize_append(struct strbuf *sb, const char *in, size_t len, unsigned flags)
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
            size_t k = i + 1 + ascii_printable_run(s + i + 1, len - i - 1);
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
            add_caret(sb, b);
            col += 2;
            i++;
        } else {
            uint32_t cp = 0;
            size_t bad = 0, n = utf8_decode(s + i, len - i, &cp, &bad);
            if (!n) {
                strbuf_add(sb, replacement, 3);
                i += bad;
                col++;
            } else if (cp >= 0x80 && cp <= 0x9f) {
                strbuf_add(sb, "M-", 2);
                add_caret(sb, cp - 0x80);
                col += 4;
                i += n;
            } else if (is_format_control(cp)) {
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

char *sanitize_str(const char *in, size_t len, unsigned flags)
{
    struct strbuf sb;
    strbuf_init(&sb);
    sanitize_append(&sb, in, len, flags);
    if (!sb.buf) return xstrdup("");
    return sb.buf;
}
