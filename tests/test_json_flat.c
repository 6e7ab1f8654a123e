/* Unit tests for launcher/json_flat.c: the agents' "out" messages and the runtime's metrics
 * lines read the same as through cJSON (strings with every escape, \u pairs, numbers in every
 * JSON form, null/true/false, what follows the object), and what it must leave to cJSON
 * (nesting, lone surrogates, \u0000, broken objects) is refused rather than misread; the scan
 * that decodes in the same pass (json_flat_scan_decoded) reads the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/util.h"
#include "wire/json_flat.h"
#include "tap.h"

/* json_flat_scan_decoded on s: every string value as cJSON reads it, decoded inside the n
 * bytes it is given (a guard of 32 bytes after them must stay as it was). */
static void same_decoded_as_cjson(const char *s)
{
    size_t n = strlen(s);
    char *buf = xmalloc(n + 32);
    struct json_flat o;
    cJSON *c = cJSON_Parse(s);
    memset(buf + n, 0x5a, 32);
    CHECK(json_flat_scan_decoded(s, n, &o, buf));
    for (int k = 0; c && k < o.n; k++) {
        const struct json_flat_field *f = &o.f[k];
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)f->key_len, f->key);
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(c, key);
        if (f->type != JF_STRING) continue;
        CHECK(!f->str_escaped && cJSON_IsString(it));
        CHECK(it && f->str_len == strlen(it->valuestring) && memcmp(f->str, it->valuestring, f->str_len) == 0);
    }
    for (size_t g = 0; g < 32; g++) CHECK((unsigned char)buf[n + g] == 0x5a);
    cJSON_Delete(c);
    free(buf);
}

/* Every member of a flat object agrees with cJSON's reading. */
static void same_as_cjson(const char *s)
{
    struct json_flat o;
    cJSON *c = cJSON_Parse(s);
    int n = 0;
    const cJSON *it;
    CHECK(c != NULL);
    CHECK(json_flat_scan(s, strlen(s), &o));
    if (!c) return;
    cJSON_ArrayForEach(it, c) n++;
    CHECK_INT(o.n, n);
    for (int k = 0; k < o.n && k < n; k++) {
        const struct json_flat_field *f = &o.f[k];
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)f->key_len, f->key);
        it = cJSON_GetObjectItemCaseSensitive(c, key);
        CHECK(it != NULL);
        if (!it) continue;
        if (f->type == JF_STRING) {
            char *buf = xmalloc(f->str_len + 1);
            CHECK(cJSON_IsString(it));
            CHECK(json_flat_unescape(f->str, f->str_len, buf) != (size_t)-1);
            CHECK_STR(buf, it->valuestring);
            free(buf);
        } else if (f->type == JF_NUMBER) {
            CHECK(cJSON_IsNumber(it));
            CHECK(f->num == it->valuedouble);
        } else if (f->type == JF_NULL) {
            CHECK(cJSON_IsNull(it));
        } else {
            CHECK(f->type == JF_TRUE ? cJSON_IsTrue(it) : cJSON_IsFalse(it));
        }
    }
    cJSON_Delete(c);
    same_decoded_as_cjson(s);
}

static void test_agrees_with_cjson(void)
{
    same_as_cjson("{\"ev\":\"out\",\"rank\":2,\"s\":\"o\",\"t\":\"step 10 loss 2.31\",\"f\":\"\",\"mono_ns\":123}");
    same_as_cjson("{\"ev\":\"out\",\"rank\":7,\"s\":\"e\",\"t\":\"{\\\"event\\\":\\\"step\\\",\\\"loss\\\":1.5}\","
                  "\"f\":\"p\",\"mono_ns\":9007199254740993}");
    same_as_cjson("{\"t\":\"a\\\\b\\/c\\b\\f\\n\\r\\t\\\"\",\"u\":\"\\u00e9\\u20ac\\ud83d\\ude00\\u0041\"}");
    same_as_cjson("{\"t\":\"raw \xc3\xa9 \xff bytes\"}");
    same_as_cjson("  { \"a\" : -0.5e-3 , \"b\":0, \"c\":1E+2,\"d\":-12.25,\"e\":null,\"f\":true,\"g\":false } ");
    same_as_cjson("{}");
    same_as_cjson("{\"event\":\"step\",\"v\":1,\"rank\":3,\"step\":12,\"loss\":4.87654,\"step_ms\":100} trailing");
    /* an escaped backslash right before the closing quote; escaped quotes before the next key */
    same_as_cjson("{\"t\":\"x\\\\\",\"u\":\"\\\"a\\\"\\\\\",\"v\":\"\\\\\\\"\"}");
    /* a block of 3,000 lines as one "out" text: a "\n" escape every line */
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "{\"ev\":\"out\",\"rank\":1,\"s\":\"o\",\"t\":\"");
    for (int i = 0; i < 3000; i++) strbuf_addf(&sb, "line %d \\\"q\\\" \\t end\\n", i);
    strbuf_adds(&sb, "\",\"f\":\"\",\"mono_ns\":5}");
    same_as_cjson(sb.buf);
    strbuf_done(&sb);
}

/* Strings made of backslash runs, quotes escaped and not, "\n" escapes and plain text, in an
 * out message: whatever json_flat takes, cJSON takes and reads the same (the closing quote
 * found by the parity of the backslashes before it, as cJSON finds it byte by byte). */
static void test_random_escapes_agree(void)
{
    static const char *const piece[] = { "x", "ab", "\\\\", "\\\"", "\\n", "\\", "\"", "\\u0041", "\\\\\\" };
    unsigned seed = 31337;
    size_t taken = 0, refused = 0, bad = 0;
    for (int round = 0; round < 50000; round++) {
        struct strbuf sb;
        struct json_flat o;
        strbuf_init(&sb);
        strbuf_adds(&sb, "{\"ev\":\"out\",\"t\":\"");
        seed = seed * 1103515245u + 12345u;
        for (unsigned k = (seed >> 8) % 12; k > 0; k--) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = (seed >> 8) % 100;
            strbuf_adds(&sb, piece[r < 40 ? 0 : r < 50 ? 1 : 2 + (seed >> 16) % 7]);
        }
        strbuf_adds(&sb, "\",\"f\":\"p\",\"mono_ns\":5}");
        cJSON *c = cJSON_Parse(sb.buf);
        if (json_flat_scan(sb.buf, sb.len, &o)) {
            const struct json_flat_field *t = json_flat_get(&o, "t"), *f = json_flat_get(&o, "f");
            const cJSON *ct = cJSON_GetObjectItemCaseSensitive(c, "t");
            char *buf = t ? xmalloc(t->str_len + 1) : NULL;
            size_t n = buf ? json_flat_unescape(t->str, t->str_len, buf) : (size_t)-1;
            /* a bad escape (unescape says no) goes to cJSON: refused like a failed scan */
            bool same = n == (size_t)-1 || (c && t && f && cJSON_IsString(ct) && strcmp(buf, ct->valuestring) == 0 &&
                        t->str_escaped == (memchr(t->str, '\\', t->str_len) != NULL) &&
                        f->str_len == 1 && f->str[0] == 'p');
            /* the one pass takes exactly what the two take, and reads the same */
            struct json_flat od;
            char *dbuf = xmalloc(sb.len + 1);
            bool dec = json_flat_scan_decoded(sb.buf, sb.len, &od, dbuf);
            const struct json_flat_field *dt = dec ? json_flat_get(&od, "t") : NULL;
            same = same && dec == (n != (size_t)-1) &&
                   (!dec || (dt && dt->str_len == n && memcmp(dt->str, buf, n) == 0 && !dt->str_escaped));
            free(dbuf);
            if (!same && !bad++) printf("#   differs from cJSON: %s\n", sb.buf);
            n == (size_t)-1 ? refused++ : taken++;
            free(buf);
        } else {
            struct json_flat od;
            char *dbuf = xmalloc(sb.len + 1);
            if (json_flat_scan_decoded(sb.buf, sb.len, &od, dbuf) && !bad++)
                printf("#   the one pass takes what the scan refuses: %s\n", sb.buf);
            free(dbuf);
            refused++;
        }
        cJSON_Delete(c);
        strbuf_done(&sb);
    }
    CHECK_INT(bad, 0);
    CHECK(taken > 10000 && refused > 1000);
}

/* An escape at every offset of strings of 0 to 40 bytes, before, between and after other
 * strings (the eight-byte words: a quote or backslash in each lane, a string ending in each
 * lane, the word stores past a decoded text), read by both scans as cJSON reads them. */
static void test_escape_at_every_offset(void)
{
    static const char *const esc[] = { "\\n", "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", "" };
    char t[48], msg[256];
    for (int k = 0; k < 40; k++) t[k] = (char)('a' + k % 26);
    for (int len = 0; len <= 40; len++)
        for (int at = 0; at <= len; at++)
            for (size_t e = 0; e < sizeof esc / sizeof *esc; e++) {
                snprintf(msg, sizeof msg, "{\"ev\":\"out\",\"t\":\"%.*s%s%.*s\",\"u\":\"x\\\\%s\",\"f\":\"p\"}", at,
                         t, esc[e], len - at, t + at, esc[e]);
                same_as_cjson(msg);
            }
}

static void test_refuses(void)
{
    static const char *const bad[] = {
        "{\"a\":{\"b\":1}}", "{\"a\":[1]}", "{\"a\":1", "{\"a\" 1}", "{\"a\":\"x}", "[1]", "",
        "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":+1}", "{\"a\":tru}", "{\"a\":1,}",
        "{\"k\\u0061\":1}",
    };
    struct json_flat o;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) CHECK(!json_flat_scan(bad[k], strlen(bad[k]), &o));
    char many[1024] = "{";
    for (int k = 0; k <= JSON_FLAT_MAX; k++) snprintf(many + strlen(many), 20, "%s\"k%d\":1", k ? "," : "", k);
    strcat(many, "}");
    CHECK(!json_flat_scan(many, strlen(many), &o));
}

static void test_unescape_refuses(void)
{
    static const char *const bad[] = { "\\ud800", "\\udc00", "\\ud800\\u0041", "\\u00g0", "\\u12", "\\x", "\\",
                                       "\\u0000" };
    char buf[64];
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        CHECK(json_flat_unescape(bad[k], strlen(bad[k]), buf) == (size_t)-1);
    CHECK_INT((int)json_flat_unescape("ab\\n", 4, buf), 3);
    CHECK_STR(buf, "ab\n");
}

static void test_get(void)
{
    struct json_flat o;
    const char *s = "{\"rank\":1,\"rank\":2,\"ran\":3}";
    CHECK(json_flat_scan(s, strlen(s), &o));
    CHECK(json_flat_get(&o, "rank") && json_flat_get(&o, "rank")->num == 1); /* the first, as cJSON */
    CHECK(json_flat_get(&o, "ran") && json_flat_get(&o, "ran")->num == 3);
    CHECK(json_flat_get(&o, "r") == NULL);
    /* a length, not a terminator: the object may sit inside a longer buffer */
    CHECK(!json_flat_scan(s, 10, &o));
}

/* Whole numbers are read without strtod (issue 32): up to 19 digits, signs, zeros, the
 * largest that fit, and what lies past them (20 digits, fractions, exponents) read as cJSON
 * reads them. */
static void test_whole_numbers_agree(void)
{
    static const char *const nums[] = { "0", "-0", "7", "-7", "123456789", "9007199254740993", "9007199254740992",
                                        "18014398509481985", "999999999999999999", "9999999999999999999",
                                        "18446744073709551615", "18446744073709551616", "99999999999999999999",
                                        "-9223372036854775808", "12345678901234567890123", "10.5", "1e3", "-2E-2",
                                        "0.1", "-0.0", "2.896", "4.87654", "0.000000000000001", "123456789.012345",
                                        "1234567890.123456", "9007199254.740993", "0.30000000000000004", "1.5e3" };
    unsigned seed = 4242;
    char buf[96];
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++) {
        snprintf(buf, sizeof buf, "{\"q\":%s,\"r\":%s}", nums[k], nums[k]);
        same_as_cjson(buf);
    }
    for (int round = 0; round < 20000; round++) {
        char digits[24];
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)((seed >> 8) % 20);
        for (int d = 0; d < n; d++) {
            seed = seed * 1103515245u + 12345u;
            digits[d] = (char)('0' + (d == 0 && n > 1 ? 1 + (seed >> 12) % 9 : (seed >> 12) % 10));
        }
        digits[n] = '\0';
        snprintf(buf, sizeof buf, "{\"q\":%s%s}", (seed >> 20) & 1 ? "-" : "", digits);
        struct json_flat o;
        cJSON *c = cJSON_Parse(buf);
        CHECK(json_flat_scan(buf, strlen(buf), &o) && o.n == 1);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "q");
        if (!(q && o.n == 1 && o.f[0].num == q->valuedouble)) {
            CHECK(!"a whole number read as cJSON reads it");
            printf("#   %s\n", buf);
            cJSON_Delete(c);
            break;
        }
        cJSON_Delete(c);
    }
    /* fractions: random digits on both sides of the point, up to 17 in all */
    for (int round = 0; round < 50000; round++) {
        char digits[24];
        seed = seed * 1103515245u + 12345u;
        int n = 2 + (int)((seed >> 8) % 16), point = 1 + (int)((seed >> 14) % (unsigned)(n - 1));
        for (int d = 0, o = 0; d < n; d++) {
            seed = seed * 1103515245u + 12345u;
            if (d == point) digits[o++] = '.';
            digits[o++] = (char)('0' + (d == 0 && point > 1 ? 1 + (seed >> 12) % 9 : (seed >> 12) % 10));
            digits[o] = '\0';
        }
        snprintf(buf, sizeof buf, "{\"q\":%s%s}", (seed >> 20) & 1 ? "-" : "", digits);
        struct json_flat o;
        cJSON *c = cJSON_Parse(buf);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "q");
        if (!(json_flat_scan(buf, strlen(buf), &o) && o.n == 1 && q && o.f[0].num == q->valuedouble)) {
            CHECK(!"a fraction read as cJSON reads it");
            printf("#   %s\n", buf);
            cJSON_Delete(c);
            break;
        }
        cJSON_Delete(c);
    }
    struct json_flat z;
    CHECK(json_flat_scan("{\"a\":-0}", 8, &z) && z.n == 1 && signbit(z.f[0].num));
}

/* An object inside a larger text: the bytes up to its closing brace (the status heartbeat's
 * ranks, one after the other). */
static void test_scan_at(void)
{
    const char *s = "{\"rank\":0,\"state\":\"S\"},{\"rank\":1,\"cpu_s\":0.25}]}";
    struct json_flat o;
    size_t used = json_flat_scan_at(s, strlen(s), &o);
    CHECK_INT(used, strlen("{\"rank\":0,\"state\":\"S\"}"));
    CHECK_INT(o.n, 2);
    size_t more = json_flat_scan_at(s + used + 1, strlen(s) - used - 1, &o);
    CHECK_INT(more, strlen("{\"rank\":1,\"cpu_s\":0.25}"));
    CHECK(o.n == 2 && o.f[1].num == 0.25);
    CHECK_INT(json_flat_scan_at("{}", 2, &o), 2);
    CHECK_INT(json_flat_scan_at("{\"a\":[1]}", 9, &o), 0);
    CHECK_INT(json_flat_scan_at("{\"a\":1", 6, &o), 0);
}

int main(void)
{
    RUN(test_whole_numbers_agree);
    RUN(test_scan_at);
    RUN(test_agrees_with_cjson);
    RUN(test_random_escapes_agree);
    RUN(test_escape_at_every_offset);
    RUN(test_refuses);
    RUN(test_unescape_refuses);
    RUN(test_get);
    return tap_done();
}
