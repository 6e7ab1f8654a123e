/* The runtime's step line: see step_line.h. The flat scanner (json_flat.c) reads the line the
 * runtime writes without building a tree; cJSON decides whatever it cannot take. */
#include "step_line.h"

#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_flat.h"
#include "json_num.h"

/* A step is a whole number a long holds exactly; anything else (1e300, 2.5) is no step. The
 * line comes from the training program, which may print anything. */
static long step_of(double v, bool *has)
{
    long long x = 0;
    if (*has && !json_whole_in(v, -JSON_EXACT_MAX, JSON_EXACT_MAX, &x)) *has = false;
    return *has ? (long)x : 0;
}

static void sample_clear(struct step_line *out)
{
    *out = (struct step_line){ .loss = NAN, .step_ms = NAN, .tokens_per_s = NAN };
}

static double flat_number(const struct json_flat *o, const char *key, bool *has)
{
    const struct json_flat_field *v = json_flat_get(o, key);
    *has = v && v->type == JF_NUMBER;
    return *has ? v->num : NAN;
}

/* -1 when the flat scanner cannot tell (nested values, an escaped "event"): cJSON decides. */
static int parse_flat(const char *s, size_t n, struct step_line *out)
{
    struct json_flat o;
    if (!json_flat_scan(s, n, &o)) return -1;
    const struct json_flat_field *ev = json_flat_get(&o, "event");
    if (ev && ev->type == JF_STRING && ev->str_escaped) return -1;
    if (!ev || ev->type != JF_STRING || ev->str_len != 4 || memcmp(ev->str, "step", 4) != 0) return 0;
    double step = flat_number(&o, "step", &out->has_step);
    out->step = step_of(step, &out->has_step);
    const struct json_flat_field *loss = json_flat_get(&o, "loss");
    if (loss && loss->type == JF_NUMBER) { out->has_loss = true; out->loss = loss->num; }
    else if (loss && loss->type == JF_NULL) { out->has_loss = true; out->loss = INFINITY; }
    out->step_ms = flat_number(&o, "step_ms", &out->has_step_ms);
    out->tokens_per_s = flat_number(&o, "tokens_per_s", &out->has_tokens);
    return out->has_step || out->has_loss;
}

static double tree_number(const cJSON *o, const char *key, bool *has)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *has = cJSON_IsNumber(v);
    return *has ? v->valuedouble : NAN;
}

static bool parse_tree(const char *s, size_t n, struct step_line *out)
{
    cJSON *o = cJSON_ParseWithLength(s, n);
    if (!o) return false;
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    bool ok = cJSON_IsString(ev) && strcmp(ev->valuestring, "step") == 0;
    if (ok) {
        double step = tree_number(o, "step", &out->has_step);
        out->step = step_of(step, &out->has_step);
        const cJSON *loss = cJSON_GetObjectItemCaseSensitive(o, "loss");
        if (cJSON_IsNumber(loss)) { out->has_loss = true; out->loss = loss->valuedouble; }
        else if (cJSON_IsNull(loss)) { out->has_loss = true; out->loss = INFINITY; }
        out->step_ms = tree_number(o, "step_ms", &out->has_step_ms);
        out->tokens_per_s = tree_number(o, "tokens_per_s", &out->has_tokens);
        ok = out->has_step || out->has_loss;
    }
    cJSON_Delete(o);
    return ok;
}

bool step_line_maybe(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    return i < n && s[i] == '{' && memmem(s + i, n - i, "\"step\"", 6) != NULL;
}

bool step_line_parse(const char *s, size_t n, struct step_line *out)
{
    sample_clear(out);
    if (!step_line_maybe(s, n)) return false;
    while (*s == ' ' || *s == '\t') s++, n--;
    int fast = parse_flat(s, n, out);
    bool ok = fast >= 0 ? fast > 0 : parse_tree(s, n, out);
    if (!ok) sample_clear(out);
    return ok;
}
