/* Base64 (RFC 4648, standard alphabet) for the protocol's "b64" fields: rank output that is not
 * valid UTF-8 travels this way so every byte survives a JSON string. The agent encodes, the
 * controller decodes; both live here so they cannot drift apart. */
#ifndef DDPTOP_BASE64_H
#define DDPTOP_BASE64_H

#include <stddef.h>

#include "util/util.h"

/* Appends the base64 of data[0..n), with '=' padding. */
void base64_encode(struct strbuf *sb, const void *data, size_t n);

/* Decodes in[0..n) (padding optional; bytes outside the alphabet, such as padding and
 * whitespace, are skipped) into a malloc'd, NUL-terminated buffer; *out_len gets its length. */
char *base64_decode(const char *in, size_t n, size_t *out_len);

#endif
