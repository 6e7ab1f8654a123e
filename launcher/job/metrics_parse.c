/* Metrics out of rank output lines (metrics_parse.h). The controller runs this on every line
 * of every rank, so the common case (a line with no metric) must cost a scan and nothing
 * more: a line reaches cJSON only when it looks like the runtime's JSON, and reaches regexec
 * only when it contains "loss" (with the default regex). */
#include "metrics_parse.h"

#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_flat.h"
#include "util/util.h"

struct metrics_parser {
    regex_t loss_re, step_re;
    bool is_default;   /* the default regex: pre-check for "loss" */
    int num_group;     /* the loss number starts at this group; 0: right after the match */
};

struct metrics_parser *metrics_parser_new(const char *loss_regex, char *err, size_t errlen)
{
    struct metrics_parser *p = xcalloc(1, sizeof *p);
    p->is_default = loss_regex == NULL;
    const char *re = loss_regex ? loss_regex : METRICS_DEFAULT_LOSS_REGEX;
    int rc = regcomp(&p->loss_re, re, REG_EXTENDED | REG_ICASE);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &p->loss_re, msg, sizeof msg);
        snprintf(err, errlen, "--loss-regex '%s': %s (a POSIX extended regex; group 1, when "
                 "there is one, is the loss number; see docs/logs.md)", re, msg);
        free(p);
        return NULL;
    }
    if (p->is_default) p->num_group = METRICS_DEFAULT_LOSS_GROUP;
    else p->num_group = p->loss_re.re_nsub >= 1 ? 1 : 0;
    rc = regcomp(&p->step_re, METRICS_STEP_REGEX, REG_EXTENDED | REG_ICASE);
    if (rc != 0) {     /* a bug: the built-in expression is fixed */
        regerror(rc, &p->step_re, err, errlen);
        regfree(&p->loss_re);
        free(p);
        return NULL;
    }
    return p;
}

void metrics_parser_free(struct metrics_parser *p)
{
    if (!p) return;
    regfree(&p->loss_re);
    regfree(&p->step_re);
    free(p);
}

/* "loss" in any ASCII case. OR-ing 0x20 into each byte folds exactly L/O/S onto l/o/s (no
 * other byte maps onto those), so one 4-byte compare per position does it. */
static bool has_loss_word(const char *s, size_t n)
{
    uint32_t want;
    memcpy(&want, "loss", 4);
    for (size_t i = 0; i + 4 <= n; i++) {
        uint32_t w;
        memcpy(&w, s + i, 4);
        if ((w | 0x20202020u) == want) return true;
    }
    return false;
}

static double json_number(const cJSON *o, const char *key, bool *has)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *has = cJSON_IsNumber(v);
    return *has ? v->valuedouble : NAN;
}

static double flat_number(const struct json_flat *o, const char *key, bool *has)
{
    const struct json_flat_field *v = json_flat_get(o, key);
    *has = v && v->type == JF_NUMBER;
    return *has ? v->num : NAN;
}

/* parse_runtime_json without a cJSON tree, for the flat line the runtime writes. Returns -1
 * when it cannot tell (not flat, an escaped "event"): cJSON decides then. */
static int parse_runtime_flat(const char *s, size_t n, struct metrics_sample *out)
{
    struct json_flat o;
    if (!json_flat_scan(s, n, &o)) return -1;
    const struct json_flat_field *ev = json_flat_get(&o, "event");
    if (ev && ev->type == JF_STRING && ev->str_escaped) return -1;
    if (!ev || ev->type != JF_STRING || ev->str_len != 4 || memcmp(ev->str, "step", 4) != 0) return 0;
    double step = flat_number(&o, "step", &out->has_step);
    out->step = out->has_step ? (long)step : 0;
    const struct json_flat_field *loss = json_flat_get(&o, "loss");
    if (loss && loss->type == JF_NUMBER) { out->has_loss = true; out->loss = loss->num; }
    else if (loss && loss->type == JF_NULL) { out->has_loss = true; out->loss = INFINITY; }
    out->step_ms = flat_number(&o, "step_ms", &out->has_step_ms);
    out->tokens_per_s = flat_number(&o, "tokens_per_s", &out->has_tokens);
    return out->has_step || out->has_loss;
}

/* The runtime's {"event":"step",...}; false for anything else (which may still match the
 * regex: a user's JSON with a "loss" key, say). */
static bool parse_runtime_json(const char *s, size_t n, struct metrics_sample *out)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i == n || s[i] != '{' || !memmem(s, n, "\"step\"", 6)) return false;
    int fast = parse_runtime_flat(s + i, n - i, out);
    if (fast >= 0) return fast;
    *out = (struct metrics_sample){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
    cJSON *o = cJSON_ParseWithLength(s + i, n - i);
    if (!o) return false;
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    bool ok = cJSON_IsString(ev) && strcmp(ev->valuestring, "step") == 0;
    if (ok) {
        double step = json_number(o, "step", &out->has_step);
        out->step = out->has_step ? (long)step : 0;
        const cJSON *loss = cJSON_GetObjectItemCaseSensitive(o, "loss");
        /* The runtime writes a non-finite loss as null: a diverged run, not a missing loss. */
        if (cJSON_IsNumber(loss)) { out->has_loss = true; out->loss = loss->valuedouble; }
        else if (cJSON_IsNull(loss)) { out->has_loss = true; out->loss = INFINITY; }
        out->step_ms = json_number(o, "step_ms", &out->has_step_ms);
        out->tokens_per_s = json_number(o, "tokens_per_s", &out->has_tokens);
        ok = out->has_step || out->has_loss;
    }
    cJSON_Delete(o);
    return ok;
}

/* Copies the text a regex should see into buf (NUL-terminated): the last \r-separated
 * segment (a progress bar's newest state), without terminal escape sequences (coloured
 * logs put "\e[32m" right before "loss"). */
static size_t prepare_text(const char *s, size_t n, char *buf)
{
    size_t start = 0;
    for (size_t i = n; i-- > 0;) {
        if (s[i] != '\r') continue;
        if (i + 1 < n) { start = i + 1; break; }
        n = i;            /* a trailing \r: look before it */
    }
    size_t o = 0;
    for (size_t i = start; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0x1b && i + 1 < n && s[i + 1] == '[') {      /* CSI ... final byte */
            i += 2;
            while (i < n && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)) i++;
            continue;
        }
        if (c == 0x1b) { i++; continue; }                      /* ESC x */
        buf[o++] = c ? (char)c : ' ';
    }
    buf[o] = '\0';
    return o;
}

static bool parse_regex(const struct metrics_parser *p, const char *buf,
                        struct metrics_sample *out)
{
    regmatch_t m[10];
    if (regexec(&p->loss_re, buf, 10, m, 0) != 0) return false;
    const char *num;
    if (p->num_group > 0 && m[p->num_group].rm_so >= 0) {
        num = buf + m[p->num_group].rm_so;
    } else {
        num = buf + m[0].rm_eo;
        while (*num && strchr(" \t:=\"'", *num)) num++;
    }
    char *end;
    double v = strtod(num, &end);
    if (end == num) return false;
    out->has_loss = true;
    out->loss = isfinite(v) ? v : INFINITY;
    if (regexec(&p->step_re, buf, 10, m, 0) == 0 && m[METRICS_STEP_GROUP].rm_so >= 0) {
        out->has_step = true;
        out->step = strtol(buf + m[METRICS_STEP_GROUP].rm_so, NULL, 10);
    }
    return true;
}

bool metrics_parse_line(const struct metrics_parser *p, const char *text, size_t len,
                        struct metrics_sample *out)
{
    *out = (struct metrics_sample){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
    if (len > METRICS_SCAN_MAX) len = METRICS_SCAN_MAX;
    if (parse_runtime_json(text, len, out)) return true;
    *out = (struct metrics_sample){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
    if (p->is_default && !has_loss_word(text, len)) return false;
    char small[4096];
    char *buf = len < sizeof small ? small : xmalloc(len + 1);
    prepare_text(text, len, buf);
    bool ok = parse_regex(p, buf, out);
    if (buf != small) free(buf);
    if (!ok) *out = (struct metrics_sample){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
    return ok;
}

bool metrics_feed_line(const struct metrics_parser *p, struct job *j, int rank,
                       const char *text, size_t len)
{
    struct metrics_sample s;
    if (!metrics_parse_line(p, text, len, &s)) return false;
    job_metric_add(j, rank, s.has_step ? s.step : JOB_STEP_UNKNOWN, s.has_loss ? s.loss : NAN,
                   s.has_step_ms ? s.step_ms : NAN, s.has_tokens ? s.tokens_per_s : NAN);
    return true;
}
