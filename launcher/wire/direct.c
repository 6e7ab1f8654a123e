/* The direct connection's handshake (direct.h). */
#include "direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"
#include "relay.h"

void direct_hmac(const unsigned char *key, size_t key_len, const void *msg, size_t len, unsigned char out[32])
{
    unsigned char k[64] = {0}, pad[64], inner[32];
    struct sha256 h;
    if (key_len > sizeof k) {
        sha256_init(&h);
        sha256_update(&h, key, key_len);
        sha256_final(&h, k);
    } else {
        memcpy(k, key, key_len);
    }
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = k[i] ^ 0x36;
    sha256_init(&h);
    sha256_update(&h, pad, sizeof pad);
    sha256_update(&h, msg, len);
    sha256_final(&h, inner);
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = k[i] ^ 0x5c;
    sha256_init(&h);
    sha256_update(&h, pad, sizeof pad);
    sha256_update(&h, inner, sizeof inner);
    sha256_final(&h, out);
    /* the padded key, and a hash state that has taken it in, are as good as the key */
    explicit_bzero(k, sizeof k);
    explicit_bzero(pad, sizeof pad);
    explicit_bzero(&h, sizeof h);
}

void direct_hmac_hex(const unsigned char *key, size_t key_len, const char *msg, size_t len, char out[65])
{
    unsigned char mac[32];
    direct_hmac(key, key_len, msg, len, mac);
    sha256_hex(mac, out);
}

void direct_mac(const unsigned char key[DIRECT_KEY_LEN], const char *role, int task, const char *na,
                const char *nc, char out[65])
{
    char msg[160];
    int n = nc ? snprintf(msg, sizeof msg, "ddptop-direct %s %d %s %s", role, task, na, nc)
               : snprintf(msg, sizeof msg, "ddptop-direct %s %d %s", role, task, na);
    direct_hmac_hex(key, DIRECT_KEY_LEN, msg, n > 0 ? (size_t)n : 0, out);
}

bool direct_mac_equal(const char *a, const char *b)
{
    unsigned char d = 0;
    if (strlen(a) != DIRECT_MAC_HEX || strlen(b) != DIRECT_MAC_HEX) return false;
    for (size_t i = 0; i < DIRECT_MAC_HEX; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* n lower-case hex digits at s, followed by what `after` allows ('\0' or ' '). */
static bool hex_run(const char *s, size_t n, char after)
{
    for (size_t i = 0; i < n; i++)
        if (hexval(s[i]) < 0) return false;
    return s[n] == after;
}

int direct_key_parse(const char *hex, unsigned char key[DIRECT_KEY_LEN])
{
    if (!hex || !hex_run(hex, 2 * DIRECT_KEY_LEN, '\0')) return -1;
    for (size_t i = 0; i < DIRECT_KEY_LEN; i++) key[i] = (unsigned char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    return 0;
}

int direct_hello_parse(const char *line, int *task, char na[DIRECT_NONCE_HEX + 1], char hm[DIRECT_MAC_HEX + 1])
{
    static const char head[] = "ddptop-direct 2 ";
    const char *end;
    int t;
    if (strncmp(line, head, sizeof head - 1) != 0) return -1;
    t = relay_number(line + sizeof head - 1, &end);
    if (t < 0 || *end != ' ' || !hex_run(end + 1, DIRECT_NONCE_HEX, ' ') ||
        !hex_run(end + 2 + DIRECT_NONCE_HEX, DIRECT_MAC_HEX, '\0'))
        return -1;
    *task = t;
    memcpy(na, end + 1, DIRECT_NONCE_HEX);
    na[DIRECT_NONCE_HEX] = '\0';
    memcpy(hm, end + 2 + DIRECT_NONCE_HEX, DIRECT_MAC_HEX + 1);
    return 0;
}

int direct_reply_parse(const char *line, char nc[DIRECT_NONCE_HEX + 1], char mc[DIRECT_MAC_HEX + 1])
{
    if (!hex_run(line, DIRECT_NONCE_HEX, ' ') || !hex_run(line + DIRECT_NONCE_HEX + 1, DIRECT_MAC_HEX, '\0'))
        return -1;
    memcpy(nc, line, DIRECT_NONCE_HEX);
    nc[DIRECT_NONCE_HEX] = '\0';
    memcpy(mc, line + DIRECT_NONCE_HEX + 1, DIRECT_MAC_HEX + 1);
    return 0;
}

int direct_proof_parse(const char *line, char ma[DIRECT_MAC_HEX + 1], const char **greeting)
{
    if (!hex_run(line, DIRECT_MAC_HEX, ' ') || line[DIRECT_MAC_HEX + 1] != '=') return -1;
    memcpy(ma, line, DIRECT_MAC_HEX);
    ma[DIRECT_MAC_HEX] = '\0';
    *greeting = line + DIRECT_MAC_HEX + 2;
    return 0;
}
