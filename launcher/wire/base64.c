/* Base64 both ways: see base64.h. */
#include "base64.h"

static const char b64_tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode(struct strbuf *sb, const void *data, size_t n)
{
    const unsigned char *p = data;
    char quad[4 * 1024];
    size_t q = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        quad[q++] = b64_tab[v >> 18];
        quad[q++] = b64_tab[(v >> 12) & 63];
        quad[q++] = i + 1 < n ? b64_tab[(v >> 6) & 63] : '=';
        quad[q++] = i + 2 < n ? b64_tab[v & 63] : '=';
        if (q == sizeof quad) {
            strbuf_add(sb, quad, q);
            q = 0;
        }
    }
    strbuf_add(sb, quad, q);
}

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

char *base64_decode(const char *in, size_t n, size_t *out_len)
{
    size_t k = 0;
    char *out = xmalloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i]);
        if (v < 0) continue;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[k] = '\0';
    *out_len = k;
    return out;
}
