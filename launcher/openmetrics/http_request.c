/* Judging an HTTP/1.x request (http_request.h): the request line first (METHOD SP TARGET SP
 * HTTP/1.x, RFC 9112 section 3), then header lines up to the empty line (NAME ":" VALUE, no
 * folding), over bytes that may still be growing. */
#include "http_request.h"

#include <stdbool.h>
#include <string.h>

static bool tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* 0: the line asks for path; else the status that refuses it. */
static int request_line(const char *line, size_t len, const char *path)
{
    size_t i = 0, m, t0, t1, v;
    while (i < len && tchar((unsigned char)line[i])) i++;
    m = i;
    if (m == 0 || i >= len || line[i] != ' ') return 400;
    t0 = ++i;
    while (i < len && line[i] > ' ' && line[i] < 0x7f) i++;
    t1 = i;
    if (t1 == t0 || i >= len || line[i] != ' ') return 400;
    v = i + 1;
    if (len - v != 8 || memcmp(line + v, "HTTP/1.", 7) != 0 || (line[v + 7] != '0' && line[v + 7] != '1')) {
        /* a version token of another number: 505; anything else in its place: 400 */
        if (len - v > 5 && memcmp(line + v, "HTTP/", 5) == 0 && !memchr(line + v, ' ', len - v)) return 505;
        return 400;
    }
    if (m != 3 || memcmp(line, "GET", 3) != 0) return 405;
    size_t pl = strlen(path);
    if (t1 - t0 < pl || memcmp(line + t0, path, pl) != 0 || (t1 - t0 > pl && line[t0 + pl] != '?')) return 404;
    return 0;
}

/* Each header line in [p, end) is NAME: VALUE (no folded lines). */
static bool headers_ok(const char *p, const char *end)
{
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end, *colon = memchr(p, ':', (size_t)(e - p));
        size_t len = (size_t)(e - p) - (e > p && e[-1] == '\r');
        if (len > 0) {
            if (!colon || colon == p) return false;
            for (const char *q = p; q < colon; q++)
                if (!tchar((unsigned char)*q)) return false;
        }
        p = e + 1;
    }
    return true;
}

int http_request_judge(const char *req, size_t n, size_t max, const char *path, size_t *scanned)
{
    const char *eol = memchr(req, '\n', n);
    if (!eol) return n >= max ? 414 : 0;
    size_t line_len = (size_t)(eol - req);
    if (line_len && req[line_len - 1] == '\r') line_len--;
    int st = request_line(req, line_len, path);
    if (st) return st;
    /* the headers end at an empty line: CRLF CRLF, or bare LFs; the request line's own LF
     * may start it (no headers at all) */
    size_t from = scanned && *scanned > 3 ? *scanned - 3 : 0, line_end = (size_t)(eol - req);
    const char *end = NULL;
    if (from < line_end) from = line_end;
    for (size_t i = from; i + 1 < n && !end; i++) {
        if (req[i] != '\n') continue;
        if (req[i + 1] == '\n') end = req + i + 1;
        else if (req[i + 1] == '\r' && i + 2 < n && req[i + 2] == '\n') end = req + i + 2;
    }
    if (scanned) *scanned = n;
    if (!end) return n >= max ? 431 : 0;
    return headers_ok(eol + 1, end) ? 200 : 400;
}

const char *http_status_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    }
    return "Error";
}

const char *http_status_text(int status)
{
    switch (status) {
    case 400: return "bad request: want GET PATH HTTP/1.1 and NAME: VALUE header lines";
    case 404: return "not found: ddptop serves one path (docs/integrations.md)";
    case 405: return "GET only";
    case 408: return "request not complete within 5 s";
    case 414: return "request line too long (8 KiB at most)";
    case 431: return "request headers too large (8 KiB at most)";
    case 503: return "too many connections: retry";
    case 505: return "HTTP/1.0 and HTTP/1.1 only";
    }
    return "error";
}
