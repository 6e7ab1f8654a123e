/* The sealed lines of a direct connection (direct_line.h). */
#include "direct_line.h"

#include <stdio.h>
#include <string.h>

#include "util/chacha_poly.h"

void direct_line_init(struct direct_line_key *d, const unsigned char key[DIRECT_KEY_LEN], const char *role,
                      int task, const char *na, const char *nc)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg, "ddptop-direct %s %d %s %s", role, task, na, nc);
    direct_hmac(key, DIRECT_KEY_LEN, msg, n > 0 ? (size_t)n : 0, d->key);
    d->seq = 0;
}

static void line_tag(struct direct_line_key *d, const char *line, size_t len, unsigned char tag[16])
{
    unsigned char nonce[12] = {0}, block[64];
    struct poly1305 p;
    for (int i = 0; i < 8; i++) nonce[4 + i] = (unsigned char)(d->seq >> (8 * i));
    chacha20_block(d->key, 0, nonce, block);
    poly1305_init(&p, block);
    explicit_bzero(block, sizeof block);
    poly1305_update(&p, line, len);
    poly1305_final(&p, tag);
}

void direct_line_seal(struct direct_line_key *d, const char *line, size_t len, struct strbuf *out)
{
    unsigned char tag[16];
    char hex[DIRECT_TAG_HEX + 2];
    line_tag(d, line, len, tag);
    d->seq++;
    util_hex(tag, sizeof tag, hex);
    hex[DIRECT_TAG_HEX] = ' ';
    strbuf_reserve(out, DIRECT_LINE_OVERHEAD + len + 1);
    strbuf_add(out, hex, DIRECT_LINE_OVERHEAD);
    strbuf_add(out, line, len);
    strbuf_add(out, "\n", 1);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int direct_line_open(struct direct_line_key *d, const char *line, size_t len)
{
    unsigned char tag[16], got[16], diff = 0;
    if (len < DIRECT_LINE_OVERHEAD || line[DIRECT_TAG_HEX] != ' ') return -1;
    for (int i = 0; i < 16; i++) {
        int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        got[i] = (unsigned char)(hi << 4 | lo);
    }
    line_tag(d, line + DIRECT_LINE_OVERHEAD, len - DIRECT_LINE_OVERHEAD, tag);
    /* time independent of where they differ */
    for (int i = 0; i < 16; i++) diff |= (unsigned char)(tag[i] ^ got[i]);
    if (diff) return -1;
    d->seq++;
    return DIRECT_LINE_OVERHEAD;
}

void direct_line_wipe(struct direct_line_key *d)
{
    explicit_bzero(d, sizeof *d);
}
