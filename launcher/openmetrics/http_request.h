/* What an HTTP/1.x request asks of the --metrics endpoint, judged from its bytes alone (pure:
 * no socket, no clock), so that the server (http_serve.c) keeps only the reading and writing,
 * and a fuzz target (tests/fuzz/fuzz_http_request.c) can throw anything at the parsing. */
#ifndef DDPTOP_HTTP_REQUEST_H
#define DDPTOP_HTTP_REQUEST_H

#include <stddef.h>

/* req[0..n): what a client sent so far, at most max bytes (the server's buffer). Returns 0
 * while the request is not whole and may still be (more bytes are awaited), 200 for a GET of
 * path (a query after it allowed) whose headers ended, or the status that refuses it: 400 (a
 * bad request line or header line), 404 (another path), 405 (another method), 414 (no request
 * line within max), 431 (headers past max), 505 (another HTTP version). A request line decides
 * at once, without waiting for the headers, unless it asks for the path. *scanned (start it at
 * 0; NULL: none) keeps how far the search for the headers' end went, for the next call with
 * more bytes. Never 0 when n == max. */
int http_request_judge(const char *req, size_t n, size_t max, const char *path, size_t *scanned);

/* The reason phrase of a status judge returns ("Not Found"), and what the answer's body says. */
const char *http_status_reason(int status);
const char *http_status_text(int status);

#endif
