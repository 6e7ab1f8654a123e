/* A small HTTP/1.1 server on the event loop (util/evloop.h) that answers GET of one path with
 * one body, for `--metrics` (docs/integrations.md, "Prometheus"). It never blocks the loop
 * it runs on and stays bounded whatever its clients do:
 *
 *   - at most HTTP_SERVE_CONNS connections; one more is answered 503 at once and closed;
 *   - a request (line and headers) of at most HTTP_SERVE_REQUEST_MAX bytes (else 431, or 414
 *     for a request line alone that long), whole within HTTP_SERVE_REQUEST_MS of the accept
 *     (else 408: a client sending a byte a second holds a slot 5 s, not forever);
 *   - a bad request line is answered at once (400, 404 for another path, 405 for another
 *     method, 505 for another HTTP version); every answer closes the connection;
 *   - the body is made by the caller's render() at most once per HTTP_SERVE_FRESH_MS and
 *     shared by every connection that sends it, so many scrapers cost one rendering and one
 *     body's memory; a response is written as the socket takes it (the rest kept), and a
 *     client that does not read it within HTTP_SERVE_SEND_MS is dropped.
 *
 * Every socket is non-blocking and close-on-exec. */
#ifndef DDPTOP_HTTP_SERVE_H
#define DDPTOP_HTTP_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct evloop;
struct http_serve;

#define HTTP_SERVE_CONNS       64
#define HTTP_SERVE_REQUEST_MAX 8192
#define HTTP_SERVE_REQUEST_MS  5000
#define HTTP_SERVE_SEND_MS     30000
#define HTTP_SERVE_LINGER_MS   1000   /* reading what a client still sends after the answer */
#define HTTP_SERVE_FRESH_MS    1000

struct http_serve_opts {
    const char *path;          /* the one path served ("/metrics"; a query after it is ignored) */
    const char *content_type;
    /* Appends the body to body; called from the loop, at most once per HTTP_SERVE_FRESH_MS. */
    void (*render)(void *ctx, struct strbuf *body);
    void *ctx;
};

/* What the server answered so far. */
struct http_serve_stats {
    uint64_t ok;               /* 200 */
    uint64_t bad;              /* 400, 404, 405, 414, 431, 505 */
    uint64_t timed_out;        /* 408, and clients dropped while not reading their answer */
    uint64_t refused;          /* 503: every connection in use */
    uint64_t renders;
};

/* "[ADDR:]PORT": a port alone is 127.0.0.1's; ADDR is an IPv4 address, a name, or an IPv6
 * address in brackets ("[::1]:9400"); PORT 0 asks the system for a free one. Into host (the
 * address part) and *port; -1 with err filled when spec is none of these. */
int http_serve_parse_addr(const char *spec, char *host, size_t hostlen, int *port, char *err, size_t errlen);

/* Listens on spec (http_serve_parse_addr) and serves from el's turns. NULL with err filled
 * when spec is bad or the address cannot be listened on. */
struct http_serve *http_serve_open(struct evloop *el, const char *spec, const struct http_serve_opts *o,
                                   char *err, size_t errlen);
/* Closes every connection and the listening socket (before el is freed). */
void http_serve_free(struct http_serve *s);

/* "http://127.0.0.1:9400/metrics": where it listens (the port the system chose for 0). */
const char *http_serve_url(const struct http_serve *s);
/* It listens on a loopback address only (127.0.0.0/8, ::1). */
bool http_serve_loopback(const struct http_serve *s);
const struct http_serve_stats *http_serve_stats(const struct http_serve *s);
/* Connections open now. */
int http_serve_conns(const struct http_serve *s);

#endif
