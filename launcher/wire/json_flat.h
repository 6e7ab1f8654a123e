/* A scanner for flat JSON objects (string, number, true/false/null values; no nesting), for the
 * two kinds of line the controller decodes 10,000 times a second: the agents' "out" messages
 * and the runtime's metrics lines. It builds no tree and allocates nothing. Anything it does not
 * take (nested values, odd numbers, bad escapes) makes it answer false, and the caller falls
 * back to cJSON, so it never decides differently from cJSON on what it accepts. */
#ifndef DDPTOP_JSON_FLAT_H
#define DDPTOP_JSON_FLAT_H

#include <stdbool.h>
#include <stddef.h>

enum json_flat_type { JF_STRING, JF_NUMBER, JF_TRUE, JF_FALSE, JF_NULL };

struct json_flat_field {
    const char *key;          /* between the quotes (a key with escapes fails the scan) */
    size_t key_len;
    enum json_flat_type type;
    const char *str;          /* JF_STRING: between the quotes, escapes not decoded */
    size_t str_len;
    bool str_escaped;         /* str holds a backslash: decode with json_flat_unescape */
    double num;               /* JF_NUMBER */
};

#define JSON_FLAT_MAX 16

struct json_flat {
    struct json_flat_field f[JSON_FLAT_MAX];
    int n;
};

/* Scans the object at s (leading blanks allowed; what follows the closing brace is ignored,
 * as cJSON does). False: not a flat object of at most JSON_FLAT_MAX members. */
bool json_flat_scan(const char *s, size_t n, struct json_flat *out);

/* The same, for an object inside a larger text (an array's element): the bytes read up to and
 * with its closing brace, or 0 when it is not a flat object. */
size_t json_flat_scan_at(const char *s, size_t n, struct json_flat *out);

/* The same, with every string value's escapes decoded in the same pass: a value with escapes
 * is decoded into buf (room for n bytes) and its field's str points there, NUL-terminated;
 * str_escaped is never set. False also for an escape cJSON would refuse (json_flat_unescape's
 * -1). The controller's "out" messages: one pass over their text instead of two. */
bool json_flat_scan_decoded(const char *s, size_t n, struct json_flat *out, char *buf);

/* The first member named key, or NULL (cJSON_GetObjectItemCaseSensitive's answer). */
const struct json_flat_field *json_flat_get(const struct json_flat *o, const char *key);

/* Decodes a string value's escapes into out (room for len + 1 bytes; the result is never
 * longer) and NUL-terminates it. Returns the length, or (size_t)-1 for an escape cJSON would
 * refuse (a lone surrogate, a bad \u). */
size_t json_flat_unescape(const char *s, size_t len, char *out);

#endif
