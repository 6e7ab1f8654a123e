/* Tests for the rendezvous store (runtime/store.c, store_server.c): real TCP on loopback, real
 * forked client processes, one server thread in the test process. */
#include "tap.h"
#include "store.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char err[512];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* A loopback port nobody listens on (bound then released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static struct store_server *serve(const char *token, int *port)
{
    struct store_server *s = store_server_start("127.0.0.1", 0, token, err, sizeof err);
    if (!s) printf("# server: %s\n", err);
    *port = s ? store_server_port(s) : 0;
    return s;
}

static pid_t spawn(int (*fn)(int, int), int port, int arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);   /* a child never outlives a broken test */
        int rc = fn(port, arg);
        fflush(stdout);
        _exit(rc);
    }
    return pid;
}

/* Waits for a child: its exit status, or -1 when it did not exit normally. */
static int reap(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

#define NCLIENTS 4

static int client_exchange(int port, int me)
{
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    if (!st) {
        printf("# client %d: %s\n", me, err);
        return 1;
    }
    char key[32], val[32];
    snprintf(key, sizeof key, "key/%d", me);
    snprintf(val, sizeof val, "value of %d", me);
    int64_t cnt;
    if (store_set(st, key, val, strlen(val)) < 0 || store_add(st, "counter", 1, &cnt) < 0) {
        printf("# client %d: %s\n", me, store_error(st));
        return 2;
    }
    const char *keys[NCLIENTS] = { "key/0", "key/1", "key/2", "key/3" };
    if (store_wait(st, keys, NCLIENTS, 5) < 0) return 3;
    for (int i = 0; i < NCLIENTS; i++) {
        void *v;
        size_t n;
        snprintf(val, sizeof val, "value of %d", i);
        if (store_get(st, keys[i], &v, &n, 5) < 0) return 4;
        int ok = n == strlen(val) && memcmp(v, val, n) == 0;
        free(v);
        if (!ok) return 5;
    }
    if (store_barrier(st, "b1", NCLIENTS, 5) < 0) return 6;
    store_close(st);
    return 0;
}

static void test_set_get_add_wait_across_clients(void)
{
    int port;
    struct store_server *s = serve("", &port);
    CHECK(s != NULL);
    if (!s) return;
    pid_t pids[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) pids[i] = spawn(client_exchange, port, i);
    for (int i = 0; i < NCLIENTS; i++) CHECK_INT(reap(pids[i]), 0);
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    CHECK(st != NULL);
    void *v = NULL;
    size_t n = 0;
    CHECK_INT(store_get(st, "counter", &v, &n, 1), 0);
    CHECK_STR((char *)v, "4");
    free(v);
    store_close(st);
    store_server_stop(s);
}

static int client_late_set(int port, int delay_ms)
{
    sleep_s(delay_ms / 1000.0);
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    if (!st) return 1;
    int rc = store_set(st, "late", "here", 4) < 0 || store_set(st, "late2", "", 0) < 0;
    store_close(st);
    return rc;
}

static void test_get_waits_for_a_later_set(void)
{
    int port;
    struct store_server *s = serve("", &port);
    if (!s) { CHECK(s != NULL); return; }
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    pid_t pid = spawn(client_late_set, port, 300);
    double t0 = now_s();
    void *v = NULL;
    size_t n = 0;
    CHECK_INT(store_get(st, "late", &v, &n, 5), 0);
    CHECK(now_s() - t0 >= 0.25);
    CHECK_INT(n, 4);
    CHECK(v && memcmp(v, "here", 4) == 0);
    free(v);
    const char *keys[] = { "late", "late2" };
    CHECK_INT(store_wait(st, keys, 2, 5), 0);
    CHECK_INT(reap(pid), 0);
    store_close(st);
    store_server_stop(s);
}

static void test_get_timeout_names_the_key(void)
{
    int port;
    struct store_server *s = serve("", &port);
    if (!s) { CHECK(s != NULL); return; }
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    double t0 = now_s();
    void *v = NULL;
    size_t n;
    CHECK_INT(store_get(st, "never/set", &v, &n, 0.3), -1);
    double dt = now_s() - t0;
    CHECK(dt >= 0.25 && dt < 2.0);
    CHECK(v == NULL);
    CHECK(strstr(store_error(st), "timed out after 0.3 s waiting for key 'never/set'") != NULL);
    printf("# %s\n", store_error(st));
    /* The connection is still good after a timeout. */
    CHECK_INT(store_set(st, "k", "v", 1), 0);
    const char *keys[] = { "k", "missing" };
    CHECK_INT(store_wait(st, keys, 2, 0.2), -1);
    CHECK(strstr(store_error(st), "'missing'") != NULL);
    store_close(st);
    store_server_stop(s);
}

static int client_adds(int port, int times)
{
    struct store *st = store_connect("127.0.0.1", port, "tok", 5, err, sizeof err);
    if (!st) return 1;
    for (int i = 0; i < times; i++)
        if (store_add(st, "n", 1, NULL) < 0) return 2;
    store_close(st);
    return 0;
}

static void test_add_is_atomic(void)
{
    int port;
    struct store_server *s = serve("tok", &port);
    if (!s) { CHECK(s != NULL); return; }
    pid_t pids[4];
    for (int i = 0; i < 4; i++) pids[i] = spawn(client_adds, port, 200);
    for (int i = 0; i < 4; i++) CHECK_INT(reap(pids[i]), 0);
    struct store *st = store_connect("127.0.0.1", port, "tok", 5, err, sizeof err);
    int64_t v = 0;
    CHECK_INT(store_add(st, "n", -800, &v), 0);
    CHECK_INT(v, 0);
    CHECK_INT(store_set(st, "text", "abc", 3), 0);
    CHECK_INT(store_add(st, "text", 1, &v), -1);   /* not an integer: an error, not a crash */
    CHECK(strstr(store_error(st), "not an integer") != NULL);
    store_close(st);
    store_server_stop(s);
}

static void test_binary_and_large_values(void)
{
    int port;
    struct store_server *s = serve("", &port);
    if (!s) { CHECK(s != NULL); return; }
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    size_t big = 1u << 20;
    unsigned char *b = malloc(big);
    for (size_t i = 0; i < big; i++) b[i] = (unsigned char)(i * 7);
    CHECK_INT(store_set(st, "big", b, big), 0);
    void *v = NULL;
    size_t n = 0;
    CHECK_INT(store_get(st, "big", &v, &n, 1), 0);
    CHECK_INT(n, big);
    CHECK(v && memcmp(v, b, big) == 0);
    free(v);
    free(b);
    store_close(st);
    store_server_stop(s);
}

static void test_wrong_token_is_refused(void)
{
    int port;
    struct store_server *s = serve("s3cret", &port);
    if (!s) { CHECK(s != NULL); return; }
    char want[256];
    snprintf(want, sizeof want, "rendezvous store at 127.0.0.1:%d refused our job token (is "
             "DDPTOP_JOB_TOKEN the same on every rank?)", port);
    double t0 = now_s();
    struct store *st = store_connect("127.0.0.1", port, "s3cres", 10, err, sizeof err);
    CHECK(st == NULL);
    CHECK_STR(err, want);
    CHECK(now_s() - t0 < 1.0);   /* refused at once, no retrying until the timeout */
    st = store_connect("127.0.0.1", port, "", 10, err, sizeof err);
    CHECK(st == NULL);
    CHECK_STR(err, want);
    st = store_connect("127.0.0.1", port, "s3cret", 10, err, sizeof err);
    CHECK(st != NULL);
    CHECK_INT(store_set(st, "a", "b", 1), 0);
    store_close(st);
    store_server_stop(s);
}

static void test_no_token_needed_when_none_set(void)
{
    int port;
    struct store_server *s = serve(NULL, &port);
    if (!s) { CHECK(s != NULL); return; }
    struct store *st = store_connect("127.0.0.1", port, NULL, 5, err, sizeof err);
    CHECK(st != NULL);
    if (st) CHECK_INT(store_set(st, "a", "b", 1), 0);
    store_close(st);
    st = store_connect("127.0.0.1", port, "whatever", 5, err, sizeof err);
    CHECK(st != NULL);
    store_close(st);
    store_server_stop(s);
}

static void test_port_in_use(void)
{
    int port;
    struct store_server *s = serve("", &port);
    if (!s) { CHECK(s != NULL); return; }
    struct store_server *s2 = store_server_start("127.0.0.1", port, "", err, sizeof err);
    CHECK(s2 == NULL);
    char want[256];
    snprintf(want, sizeof want, "cannot serve the rendezvous store on 127.0.0.1:%d: port is "
             "in use (another job? pick another MASTER_PORT)", port);
    CHECK_STR(err, want);
    store_server_stop(s2);
    store_server_stop(s);
    /* Stopped means released: the port can be served again at once (SO_REUSEADDR). */
    s = store_server_start("127.0.0.1", port, "", err, sizeof err);
    CHECK(s != NULL);
    store_server_stop(s);
}

static void test_unreachable_endpoint_fails_in_time(void)
{
    int port = free_port();
    double t0 = now_s();
    struct store *st = store_connect("127.0.0.1", port, "", 1.0, err, sizeof err);
    double dt = now_s() - t0;
    CHECK(st == NULL);
    char want[256];
    snprintf(want, sizeof want, "could not reach the rendezvous store at 127.0.0.1:%d after "
             "1 s: connection refused", port);
    CHECK_STR(err, want);
    CHECK(dt >= 0.9 && dt < 2.5);
}

static int late_server(int port, int delay_ms)
{
    sleep_s(delay_ms / 1000.0);
    struct store_server *s = store_server_start("127.0.0.1", port, "", err, sizeof err);
    if (!s) return 1;
    sleep_s(1.5);
    store_server_stop(s);
    return 0;
}

static void test_client_retries_until_the_server_is_up(void)
{
    int port = free_port();
    pid_t pid = spawn(late_server, port, 400);
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    CHECK(st != NULL);
    if (!st) printf("# %s\n", err);
    if (st) CHECK_INT(store_set(st, "x", "1", 1), 0);
    store_close(st);
    CHECK_INT(reap(pid), 0);
}

static void test_bind_to_a_foreign_address_fails_clearly(void)
{
    /* 192.0.2.1 is TEST-NET-1: never this machine's; bind() fails without sending anything. */
    struct store_server *s = store_server_start("192.0.2.1", 29500, "", err, sizeof err);
    CHECK(s == NULL);
    CHECK_STR(err, "cannot serve the rendezvous store on 192.0.2.1:29500: 192.0.2.1 is not an "
              "address of this machine (MASTER_ADDR must be rank 0's own address)");
    store_server_stop(s);
}

static int client_parked_get(int port, int unused)
{
    (void)unused;
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    if (!st) return 1;
    void *v;
    size_t n;
    double t0 = now_s();
    int rc = store_get(st, "never", &v, &n, 30);
    /* The server went away: an error naming it, well before the 30 s timeout. */
    if (rc != -1 || now_s() - t0 > 5) return 2;
    if (!strstr(store_error(st), "lost the connection to the rendezvous store")) return 3;
    if (store_set(st, "a", "b", 1) != -1) return 4;
    store_close(st);
    return 0;
}

static void test_server_stop_releases_waiting_clients(void)
{
    int port;
    struct store_server *s = serve("", &port);
    if (!s) { CHECK(s != NULL); return; }
    pid_t pid = spawn(client_parked_get, port, 0);
    sleep_s(0.3);
    double t0 = now_s();
    store_server_stop(s);
    CHECK(now_s() - t0 < 1.0);
    CHECK_INT(reap(pid), 0);
}

/* Something else on the port: an HTTP-ish service that answers with its own bytes. */
static int fake_service(int lfd, int unused)
{
    (void)unused;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) return 1;
    char buf[64];
    if (read(fd, buf, sizeof buf) <= 0) return 2;
    if (write(fd, "HTTP/1.0 400 Bad Request\r\n\r\n", 28) != 28) return 3;
    close(fd);
    return 0;
}

static void test_another_service_on_the_port_is_named(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0);
    getsockname(lfd, (struct sockaddr *)&a, &l);
    int port = ntohs(a.sin_port);
    pid_t pid = spawn(fake_service, lfd, 0);
    struct store *st = store_connect("127.0.0.1", port, "", 5, err, sizeof err);
    CHECK(st == NULL);
    char want[256];
    snprintf(want, sizeof want, "rendezvous store at 127.0.0.1:%d answered with something that "
             "is not the ddptop store protocol (another service on MASTER_PORT?)", port);
    CHECK_STR(err, want);
    CHECK_INT(reap(pid), 0);
    close(lfd);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(test_set_get_add_wait_across_clients);
    RUN(test_get_waits_for_a_later_set);
    RUN(test_get_timeout_names_the_key);
    RUN(test_add_is_atomic);
    RUN(test_binary_and_large_values);
    RUN(test_wrong_token_is_refused);
    RUN(test_no_token_needed_when_none_set);
    RUN(test_port_in_use);
    RUN(test_unreachable_endpoint_fails_in_time);
    RUN(test_client_retries_until_the_server_is_up);
    RUN(test_bind_to_a_foreign_address_fails_clearly);
    RUN(test_server_stop_releases_waiting_clients);
    RUN(test_another_service_on_the_port_is_named);
    return tap_done();
}
