/* The relay framing (relay.h). */
#include "relay.h"

#include <ctype.h>
#include <stdlib.h>

void relay_frame(const char *line, size_t len, struct strbuf *out)
{
    do {
        size_t n = len > RELAY_PIECE_MAX ? RELAY_PIECE_MAX : len;
        strbuf_addf(out, "%c%03zx", n < len ? '+' : '.', n);
        strbuf_add(out, line, n);
        strbuf_add(out, "\n", 1);
        line += n;
        len -= n;
    } while (len > 0);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int relay_piece_feed(struct relay_piece *p, const char *text, size_t len)
{
    if (p->need == 0) {
        int a, b, c;
        if (p->hdr_len == 0 && (len == 0 || (text[0] != '+' && text[0] != '.'))) return -1;
        while (p->hdr_len < 4 && len > 0) {
            p->hdr[p->hdr_len++] = *text++;
            len--;
        }
        if (p->hdr_len < 4) return 0; /* cut inside the header: the rest follows */
        p->hdr_len = 0;
        if ((a = hexval(p->hdr[1])) < 0 || (b = hexval(p->hdr[2])) < 0 || (c = hexval(p->hdr[3])) < 0) return -1;
        p->need = (size_t)(a << 8 | b << 4 | c);
        p->last = p->hdr[0] == '.';
        if (p->need == 0) return p->last ? 1 : 0;
    }
    if (len > p->need) len = p->need; /* not ours to guess: the piece's length rules */
    strbuf_add(&p->line, text, len);
    p->need -= len;
    return p->need == 0 && p->last ? 1 : 0;
}

int relay_number(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p)) return -1;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p++ - '0');
        if (v > RELAY_NUMBER_MAX) return -1; /* no overflow, whatever the digits */
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
    task = relay_number(p, &end);
    if (task < 0 || end[0] != ':' || end[1] != ' ') return -1;
    *rest = end + 2;
    return task;
}

int relay_address(const char *line, int *task, const char **rest)
{
    const char *end;
    int t = relay_number(line, &end);
    if (t < 0 || *end != ' ') return -1;
    *task = t;
    *rest = end + 1;
    return 0;
}
