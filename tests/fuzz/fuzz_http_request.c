/* libFuzzer harness for the --metrics endpoint's request judge (launcher/openmetrics/
 * http_request.c), the part of ddptop that reads bytes from anyone who can reach the port.
 * Built and run by `make fuzz-programs`, `make fuzz` and `make test` (docs/testing.md,
 * "Fuzzing"); with -DFUZZ_SMOKE_MAIN, a main() without libFuzzer feeds mutations of the seeds.
 *
 * Besides "no crash, no read past the bytes": the verdict is one of the statuses the server
 * knows; a full buffer is always decided; the bytes judged as they arrive, in two pieces with
 * the search carried over, get the same verdict as all at once; and a 200 really is a GET of
 * the path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openmetrics/http_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_http_request: invariant failed: %s\n", #cond); abort(); } } while (0)

#define MAX 512   /* the server's 8 KiB, smaller: the fuzzer reaches the limits */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    size_t n = size < MAX ? size : MAX, cut = data[0] % n;
    char *req = malloc(n);   /* exactly n bytes: a read past them is ASan's to see */
    if (!req) return 0;
    memcpy(req, data, n);
    size_t scanned = 0;
    int whole = http_request_judge(req, n, MAX, "/metrics", &scanned);
    EXPECT(whole == 0 || whole == 200 || whole == 400 || whole == 404 || whole == 405 || whole == 414 ||
           whole == 431 || whole == 505);
    if (n == MAX) EXPECT(whole != 0);
    if (whole == 200) EXPECT(n >= 14 && memcmp(req, "GET /metrics", 12) == 0);
    /* as it would arrive: a first piece, then the rest (a decided first piece stays decided) */
    scanned = 0;
    int first = http_request_judge(req, cut, MAX, "/metrics", &scanned);
    int then = first ? first : http_request_judge(req, n, MAX, "/metrics", &scanned);
    EXPECT(then == whole);
    EXPECT(*http_status_reason(whole ? whole : 200) && *http_status_text(whole ? whole : 400));
    free(req);
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n",
    "GET /metrics?name[]=x HTTP/1.0\n\n",
    "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    "GET / HTTP/1.1\r\n\r\n",
    "GET /metrics HTTP/2.0\r\n\r\n",
    "GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",   /* a TLS hello */
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = "GETPOS /metrics?HTTP/1.02\r\n: \t\x00\x7f\xff";
    return fuzz_smoke_run(argc, argv, "fuzz_http_request", seeds, sizeof seeds / sizeof seeds[0], alphabet,
                          sizeof alphabet - 1);
}
#endif
