/* Unit tests for launcher/openmetrics/http_serve.c, the --metrics endpoint's server, on a real
 * loopback socket and a real event loop in this process: the address forms; GET of the path is
 * a 200 with the body, its length and type, and a closed connection; a request in pieces is
 * read whole; every other request gets its own status (400 garbage or a header line without a
 * colon, 404 another path, 405 another method, 414 a request line of 8 KiB, 431 headers over
 * 8 KiB, 505 another HTTP version); the 65th connection at once is answered 503 and a slot
 * freed is used again; scrapes within a second share one rendering. The timeouts (5 s for a
 * request) are tests/it_metrics.sh's, against a slowloris. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "openmetrics/http_serve.h"
#include "tap.h"
#include "util/evloop.h"
#include "util/util.h"

static char err[512];
static int renders;

static void render(void *ctx, struct strbuf *body)
{
    (void)ctx;
    renders++;
    strbuf_adds(body, "# TYPE a gauge\na{x=\"1\"} 1\n# EOF\n");
}

static struct evloop *el;
static struct http_serve *srv;
static int port;

static void serve_start(void)
{
    struct http_serve_opts o = {.path = "/metrics", .content_type = "text/x-test", .render = render};
    el = evloop_new();
    srv = http_serve_open(el, "127.0.0.1:0", &o, err, sizeof err);
    if (!srv) {
        printf("# %s\n", err);
        exit(1);
    }
    port = atoi(strrchr(http_serve_url(srv) + 7, ':') + 1);
}

static int client(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) printf("# connect: %s\n", strerror(errno));
    return fd;
}

/* Turns the loop while reading fd's answer, until it closes (or 3 s): the answer, NUL-ended. */
static char *answer_of(int fd)
{
    static char buf[65536];
    size_t n = 0;
    int64_t until = mono_ms() + 3000;
    while (mono_ms() < until) {
        evloop_run_once(el, 5);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) continue;
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, MSG_DONTWAIT);
        if (k < 0 && errno == EAGAIN) continue;
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

static char *ask(const char *req, size_t len)
{
    int fd = client();
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) printf("# send: %s\n", strerror(errno));
    return answer_of(fd);
}

static const char *status_of(const char *req)
{
    static char line[64];
    const char *a = ask(req, strlen(req));
    size_t n = strcspn(a, "\r\n");
    snprintf(line, sizeof line, "%.*s", (int)n, a);
    return line;
}

static void test_addresses(void)
{
    char host[256];
    int p = -1;
    CHECK_INT(http_serve_parse_addr("9400", host, sizeof host, &p, err, sizeof err), 0);
    CHECK_STR(host, "127.0.0.1");   /* loopback unless asked */
    CHECK_INT(p, 9400);
    CHECK_INT(http_serve_parse_addr("0.0.0.0:80", host, sizeof host, &p, err, sizeof err), 0);
    CHECK_STR(host, "0.0.0.0");
    CHECK_INT(p, 80);
    CHECK_INT(http_serve_parse_addr("[::1]:9400", host, sizeof host, &p, err, sizeof err), 0);
    CHECK_STR(host, "::1");
    CHECK_INT(http_serve_parse_addr("localhost:0", host, sizeof host, &p, err, sizeof err), 0);
    CHECK_STR(host, "localhost");
    CHECK_INT(p, 0);
    const char *bad[] = {"", "x", "::1:9400", "70000", "1.2.3.4:", ":9400", "[::1]9400", "[]:1", "9400x", "-1",
                         "123456"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CHECK_INT(http_serve_parse_addr(bad[i], host, sizeof host, &p, err, sizeof err), -1);
        CHECK(strstr(err, "--metrics wants [ADDR:]PORT") != NULL);
    }
    struct http_serve_opts o = {.path = "/metrics", .content_type = "text/x-test", .render = render};
    char spec[32];
    snprintf(spec, sizeof spec, "127.0.0.1:%d", port);   /* taken by the test's own server */
    CHECK(http_serve_open(el, spec, &o, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot listen there") != NULL);
    CHECK(http_serve_loopback(srv));
}

static void test_get(void)
{
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n";
    renders = 0;
    const char *a = ask(req, strlen(req));
    CHECK(strncmp(a, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(strstr(a, "\r\nContent-Type: text/x-test\r\n") != NULL);
    CHECK(strstr(a, "\r\nContent-Length: 32\r\n") != NULL);
    CHECK(strstr(a, "\r\nConnection: close\r\n") != NULL);
    const char *body = strstr(a, "\r\n\r\n");
    CHECK(body && strcmp(body + 4, "# TYPE a gauge\na{x=\"1\"} 1\n# EOF\n") == 0);
    /* a second scrape within the second shares the body */
    CHECK(strncmp(status_of("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), "HTTP/1.1 200", 12) == 0);
    CHECK(strncmp(status_of("GET /metrics HTTP/1.1\n\n"), "HTTP/1.1 200", 12) == 0);   /* bare LFs */
    CHECK_INT(renders, 1);
    CHECK_INT(http_serve_stats(srv)->renders, 1);
}

static void test_request_in_pieces(void)
{
    int fd = client();
    const char *parts[] = {"GE", "T /met", "rics HTTP/1.1\r", "\nHost: x\r\n", "\r\n"};
    for (size_t i = 0; i < 5; i++) {
        send(fd, parts[i], strlen(parts[i]), MSG_NOSIGNAL);
        for (int k = 0; k < 3; k++) evloop_run_once(el, 5);
    }
    CHECK(strncmp(answer_of(fd), "HTTP/1.1 200 OK\r\n", 17) == 0);
}

static void test_bad_requests(void)
{
    CHECK_STR(status_of("POST /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
    CHECK(strstr(ask("HEAD /metrics HTTP/1.1\r\n\r\n", 26), "\r\nAllow: GET\r\n") != NULL);
    CHECK_STR(status_of("GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
    CHECK_STR(status_of("GET /metricsx HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
    CHECK_STR(status_of("\x01\x02garbage\xff\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    CHECK_STR(status_of("GET  /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    CHECK_STR(status_of("GET /metrics HTTP/1.1 extra\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    CHECK_STR(status_of("GET /metrics HTTP/2.0\r\n\r\n"), "HTTP/1.1 505 HTTP Version Not Supported");
    CHECK_STR(status_of("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    CHECK_STR(status_of("GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    /* the garbage is answered without waiting for more: no empty line needed */
    CHECK_STR(status_of("BREW /pot HTCPCP/1.0\r\n"), "HTTP/1.1 400 Bad Request");
    struct strbuf big;
    strbuf_init(&big);
    strbuf_adds(&big, "GET /metrics HTTP/1.1\r\nX-Big: ");
    for (int i = 0; i < 20000; i++) strbuf_add(&big, "a", 1);
    strbuf_adds(&big, "\r\n\r\n");
    const char *a = ask(big.buf, big.len);
    CHECK(strncmp(a, "HTTP/1.1 431 Request Header Fields Too Large\r\n", 46) == 0);
    strbuf_reset(&big);
    strbuf_adds(&big, "GET /");
    for (int i = 0; i < 9000; i++) strbuf_add(&big, "m", 1);
    a = ask(big.buf, big.len);
    CHECK(strncmp(a, "HTTP/1.1 414 URI Too Long\r\n", 27) == 0);
    strbuf_done(&big);
    CHECK(http_serve_stats(srv)->bad >= 12);
}

static void test_too_many_connections(void)
{
    int fds[HTTP_SERVE_CONNS];
    /* the earlier tests' connections linger until they see their client's close */
    for (int k = 0; k < 200 && http_serve_conns(srv) > 0; k++) evloop_run_once(el, 5);
    CHECK_INT(http_serve_conns(srv), 0);
    for (int i = 0; i < HTTP_SERVE_CONNS; i++) fds[i] = client();
    for (int k = 0; k < 10; k++) evloop_run_once(el, 5);
    CHECK_INT(http_serve_conns(srv), HTTP_SERVE_CONNS);
    uint64_t refused = http_serve_stats(srv)->refused;
    CHECK(strncmp(status_of("GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 503 Service Unavailable", 32) == 0);
    CHECK_INT(http_serve_stats(srv)->refused, refused + 1);
    for (int i = 0; i < HTTP_SERVE_CONNS; i++) close(fds[i]);
    for (int k = 0; k < 10 && http_serve_conns(srv) > 0; k++) evloop_run_once(el, 5);
    CHECK_INT(http_serve_conns(srv), 0);
    CHECK(strncmp(status_of("GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK", 15) == 0);
}

int main(void)
{
    serve_start();
    RUN(test_addresses);
    RUN(test_get);
    RUN(test_request_in_pieces);
    RUN(test_bad_requests);
    RUN(test_too_many_connections);
    http_serve_free(srv);
    evloop_free(el);
    return tap_done();
}
