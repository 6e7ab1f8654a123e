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

#include "wire/step_line.h"
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
 * other byte maps onto those), so one 4-byte compare per 'l' or 'L' does it. This runs over
 * every byte every rank prints (metrics_block_may_hold). */
static bool has_loss_word(const char *s, size_t n)
{
    /* Only 'l' and 'L' become 'l' with the 0x20 bit set, so the word starts at one of them:
     * libc's memchr for each (many bytes a cycle) finds the next, then the 4-byte compare. A
     * word at a time of our own was 3% of the controller's samples in a flood. */
    uint32_t want;
    const char *end = s + n, *lo, *up;
    if (n < 4) return false;
    memcpy(&want, "loss", 4);
    lo = memchr(s, 'l', n - 3);
    up = memchr(s, 'L', n - 3);
    while (lo || up) {
        const char *at = !up || (lo && lo < up) ? lo : up;
        uint32_t w4;
        memcpy(&w4, at, 4);
        if ((w4 | 0x20202020u) == want) return true;
        if (at == lo) lo = memchr(at + 1, 'l', (size_t)(end - 3 - (at + 1)));
        else up = memchr(at + 1, 'L', (size_t)(end - 3 - (at + 1)));
    }
    return false;
}

/* The runtime's {"event":"step",...} (wire/step_line.c, shared with the agent); false for
 * anything else (which may still match the regex: a user's JSON with a "loss" key, say). */
static bool parse_runtime_json(const char *s, size_t n, struct metrics_sample *out)
{
    struct step_line sl;
    if (!step_line_parse(s, n, &sl)) return false;
    *out = (struct metrics_sample){
        .has_step = sl.has_step, .has_loss = sl.has_loss, .has_step_ms = sl.has_step_ms,
        .has_tokens = sl.has_tokens, .step = sl.step, .loss = sl.loss, .step_ms = sl.step_ms,
        .tokens_per_s = sl.tokens_per_s,
        .loss_bad = sl.has_loss && isinf(sl.loss) ? LOSS_NULL : LOSS_FINITE, /* JSON has no inf: null */
    };
    return true;
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
    out->loss_bad = isnan(v) ? LOSS_NAN : !isinf(v) ? LOSS_FINITE : v > 0 ? LOSS_INF : LOSS_NEG_INF;
    if (regexec(&p->step_re, buf, 10, m, 0) == 0 && m[METRICS_STEP_GROUP].rm_so >= 0) {
        out->has_step = true;
        out->step = strtol(buf + m[METRICS_STEP_GROUP].rm_so, NULL, 10);
    }
    return true;
}

bool metrics_parse_runtime(const char *text, size_t len, struct metrics_sample *out)
{
    *out = (struct metrics_sample){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
    if (len > METRICS_SCAN_MAX) len = METRICS_SCAN_MAX;
    return parse_runtime_json(text, len, out);
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
    job_metric_add_as(j, rank, s.has_step ? s.step : JOB_STEP_UNKNOWN, s.has_loss ? s.loss : NAN,
                      s.has_loss ? s.loss_bad : LOSS_FINITE, s.has_step_ms ? s.step_ms : NAN,
                      s.has_tokens ? s.tokens_per_s : NAN);
    return true;
}

bool metrics_block_may_hold(const struct metrics_parser *p, const char *text, size_t len)
{
    if (!p->is_default) return true;
    return util_memmem_rare(text, len, "\"step\"", 6) || has_loss_word(text, len);
}
