/* Range checks for numbers read from the wire: see json_num.h. */
#include "json_num.h"

#include <math.h>
#include <stdio.h>

bool json_whole_in(double v, long long lo, long long hi, long long *out)
{
    /* The range of long long first (NaN fails it too): only then is the conversion defined.
     * 0x1p63 is exact; every double below it converts. */
    if (!(v >= -0x1p63 && v < 0x1p63)) return false;
    long long x = (long long)v;
    if ((double)x != v || x < lo || x > hi) return false;   /* a fraction, or out of [lo, hi] */
    *out = x;
    return true;
}

bool json_int_in(const cJSON *item, long long lo, long long hi, long long *out)
{
    return cJSON_IsNumber(item) && json_whole_in(item->valuedouble, lo, hi, out);
}

bool json_int_in_i(const cJSON *item, int lo, int hi, int *out)
{
    long long x;
    if (!json_int_in(item, lo, hi, &x)) return false;
    *out = (int)x;
    return true;
}

bool json_real_in(const cJSON *item, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < lo || item->valuedouble > hi)
        return false;
    *out = item->valuedouble;
    return true;
}

const char *json_num_text(const cJSON *item, char *buf, unsigned cap)
{
    if (!cJSON_IsNumber(item)) snprintf(buf, cap, "not a number");
    else snprintf(buf, cap, "%.6g", item->valuedouble);
    return buf;
}
