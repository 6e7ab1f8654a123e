/* Numbers from the other end of the wire. cJSON keeps every JSON number as a double; an agent's
 * message, a controller's request or a node's facts may hold 1e300, -1e300 or 2.5 where an
 * index, a pid or a count is meant, and converting a double that is out of the range of an
 * integer type is undefined behaviour (C11 6.3.1.4). Every number that becomes an integer goes
 * through json_whole_in: it refuses NaN, infinities, fractions and anything outside [lo, hi],
 * and converts only what is in range. (cJSON's own valueint saturates instead: 1e300 reads as
 * INT_MAX and 2.5 as 2, which passes a range check it should fail.) */
#ifndef DDPTOP_JSON_NUM_H
#define DDPTOP_JSON_NUM_H

#include <stdbool.h>

#include <cjson/cJSON.h>

/* 2^53: every whole number up to it is exact in a double (a count, a message number). */
#define JSON_EXACT_MAX 9007199254740992LL

/* v is a whole number in [lo, hi]: *out gets it. False (out untouched) otherwise. */
bool json_whole_in(double v, long long lo, long long hi, long long *out);

/* item is a JSON number that json_whole_in takes. */
bool json_int_in(const cJSON *item, long long lo, long long hi, long long *out);
/* The same into an int (lo and hi are ints, so the value fits). */
bool json_int_in_i(const cJSON *item, int lo, int hi, int *out);

/* item is a finite JSON number in [lo, hi] (a measurement: a temperature, a time). */
bool json_real_in(const cJSON *item, double lo, double hi, double *out);

/* A number as a short text for a message ("1e+300", "-2.5"); "not a number" for another type. */
const char *json_num_text(const cJSON *item, char *buf, unsigned cap);

#endif
