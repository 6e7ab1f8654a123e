/* The relay framing (relay.h). */
#include "relay.h"

#include <ctype.h>
#include <stdlib.h>

void relay_frame(const char *line, size_t len, struct strbuf *out)
{
    do {
        size_t n = len > RELAY_PIECE_MAX ? RELAY_PIECE_MAX : len;
        strbuf_add(out, n < len ? "+" : ".", 1);
        strbuf_add(out, line, n);
        strbuf_add(out, "\n", 1);
        line += n;
        len -= n;
    } while (len > 0);
}

static int parse_task(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p)) return -1;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p++ - '0');
        if (v > 1000000) return -1;
    }
    *end = p;
    return (int)v;
}

int relay_label(const char *line, const char **rest)
{
    const char *p = line, *end;
    int task;
    *rest = line;
    while (*p == ' ') p++;
    task = parse_task(p, &end);
    if (task < 0 || end[0] != ':' || end[1] != ' ') return -1;
    *rest = end + 2;
    return task;
}

int relay_address(const char *line, int *task, const char **rest)
{
    const char *end;
    int t = parse_task(line, &end);
    if (t < 0 || *end != ' ') return -1;
    *task = t;
    *rest = end + 1;
    return 0;
}
