/* Command-line helpers (cli.h), shared by `ddptop check`, `ddptop run` and the SSH options. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int cli_opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt, const char **val)
{
    const char *a = argv[*i];
    size_t ln = strlen(lng);
    if (strncmp(a, lng, ln) == 0 && a[ln] == '=') {
        *val = a + ln + 1;
        return 1;
    }
    if (strcmp(a, lng) == 0 || (shrt && strcmp(a, shrt) == 0)) {
        if (*i + 1 >= argc) return -1;
        *val = argv[++*i];
        return 1;
    }
    if (shrt && strncmp(a, shrt, 2) == 0 && a[2]) {
        *val = a + 2;
        return 1;
    }
    return 0;
}

int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out, char *err, size_t errlen)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_fail(err, errlen, "%s wants a whole number from %ld to %ld, not '%s'", opt, lo, hi, s);
    *out = (int)v;
    return 0;
}
