/* Benchmark of the --metrics endpoint (tests/bench/openmetrics.sh, docs/performance.md
 * "OpenMetrics endpoint"): what a scrape of a job of NODES x 8 ranks (one GPU each, every
 * rank with a step, a loss and a step time) costs the controller's thread. Two figures:
 *   render  openmetrics_render alone, ROUNDS times: the thread's CPU time (min and median ms;
 *           wall time too, which a loaded machine inflates), bytes, lines;
 *   scrape  a whole GET through http_serve on an event loop, as the controller runs it, with
 *           a client thread reading the answer: the loop thread's CPU time per scrape
 *           (render, accept, writes), each scrape over a second after the last so that none
 *           is answered from the body a previous one made.
 * Usage: bench_openmetrics [NODES [ROUNDS [SCRAPES]]] (defaults 1024 20 5). */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "job/gpu.h"
#include "job/job.h"
#include "job/job_state.h"
#include "job/rank_report.h"
#include "openmetrics/http_serve.h"
#include "openmetrics/om_text.h"
#include "openmetrics/openmetrics.h"
#include "util/evloop.h"
#include "util/util.h"

#define PER 8

static struct job *make_job(int nodes)
{
    char err[256];
    char **names = xcalloc((size_t)nodes, sizeof *names);
    int *per = xcalloc((size_t)nodes, sizeof *per);
    for (int n = 0; n < nodes; n++) {
        names[n] = xasprintf("gpu-node-%04d", n);
        per[n] = PER;
    }
    struct job *j = job_new("20261128-120000-bench", NULL, 3, (const char *const *)names, NULL, per, (size_t)nodes,
                            err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) {
        fprintf(stderr, "bench_openmetrics: %s\n", err);
        exit(1);
    }
    job_launching(j);
    job_running(j);
    for (int r = 0; r < nodes * PER; r++) {
        job_rank_started(j, r, 10000 + r);
        job_metric_add(j, r, 123456, 2.0 + r * 1.37e-4, 350.25 + r % 17, 9014.1);
        job_log_append(j, r, LOG_STDOUT, 0, "x", 1);
    }
    for (int n = 0; n < nodes; n++) {
        struct gpu_info g[PER];
        for (int k = 0; k < PER; k++)
            g[k] = (struct gpu_info){.index = k, .util = 90 + k, .mem_util = NAN, .mem_used_mib = 61440 + k,
                                     .mem_total_mib = 81920, .power_w = 612.5, .power_limit_w = 700, .temp_c = 71,
                                     .sm_mhz = 1980, .has_throttle = true, .throttle = k == 3 ? 0x40 : 0, .rank = -1,
                                     .n_pids = 1, .pids = {{10000 + n * PER + k, 10000 + n * PER + k}}};
        job_gpu_sample(j, n, g, PER, NULL, 0);
    }
    for (int n = 0; n < nodes; n++) free(names[n]);
    free(names);
    free(per);
    return j;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the scrape: a client thread, the server on this thread's loop ----------------------- */

struct client {
    int port;
    volatile int done;
    size_t got;
    int status;
    char tail[8];               /* the answer's last bytes: "# EOF\n" when it came whole */
};

static void *client_run(void *arg)
{
    struct client *cl = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cl->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static char buf[1 << 16];
    cl->got = 0;
    cl->status = 0;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        const char req[] = "GET /metrics HTTP/1.1\r\nHost: bench\r\nAccept: application/openmetrics-text\r\n\r\n";
        if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
            ssize_t k;
            while ((k = read(fd, buf, sizeof buf)) > 0) {
                if (cl->got == 0 && k > 12) cl->status = atoi(buf + 9);
                cl->got += (size_t)k;
                if (k >= 6) memcpy(cl->tail, buf + k - 6, 6);
            }
        }
    }
    if (fd >= 0) close(fd);
    cl->done = 1;
    return NULL;
}

static void render(void *ctx, struct strbuf *body)
{
    openmetrics_render(ctx, mono_ms(), body);
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 1024, rounds = argc > 2 ? atoi(argv[2]) : 20,
        scrapes = argc > 3 ? atoi(argv[3]) : 5;
    if (nodes < 1 || rounds < 1 || scrapes < 0) {
        fprintf(stderr, "usage: bench_openmetrics [NODES [ROUNDS [SCRAPES]]]\n");
        return 2;
    }
    struct job *j = make_job(nodes);
    double *ms = xcalloc((size_t)rounds, sizeof *ms), *cpu_ms = xcalloc((size_t)rounds, sizeof *cpu_ms);
    struct strbuf sb;
    size_t lines = 0, bytes = 0;
    strbuf_init(&sb);
    for (int i = 0; i < rounds; i++) {
        strbuf_reset(&sb);
        int64_t t0 = mono_ns();
        double c0 = thread_cpu_ms();
        openmetrics_render(j, mono_ms(), &sb);
        ms[i] = (double)(mono_ns() - t0) / 1e6;
        cpu_ms[i] = thread_cpu_ms() - c0;
        bytes = sb.len;
    }
    for (size_t i = 0; i < sb.len; i++) lines += sb.buf[i] == '\n';
    qsort(ms, (size_t)rounds, sizeof *ms, cmp_double);
    qsort(cpu_ms, (size_t)rounds, sizeof *cpu_ms, cmp_double);
    printf("render  %d ranks (%d nodes x %d GPUs): CPU min %.1f ms, median %.1f ms (wall median %.1f ms) over %d; "
           "%zu bytes, %zu lines\n", nodes * PER, nodes, PER, cpu_ms[0], cpu_ms[rounds / 2], ms[rounds / 2], rounds,
           bytes, lines);

    if (scrapes > 0) {
        char err[256];
        struct evloop *el = evloop_new();
        struct http_serve_opts o = {.path = "/metrics", .content_type = OM_CONTENT_TYPE, .render = render, .ctx = j};
        struct http_serve *s = http_serve_open(el, "127.0.0.1:0", &o, err, sizeof err);
        if (!s) {
            fprintf(stderr, "bench_openmetrics: %s\n", err);
            return 1;
        }
        const char *colon = strrchr(http_serve_url(s) + 7, ':');
        struct client cl = {.port = atoi(colon + 1)};
        double *cpu = xcalloc((size_t)scrapes, sizeof *cpu), *wall = xcalloc((size_t)scrapes, sizeof *wall);
        for (int i = 0; i < scrapes; i++) {
            pthread_t th;
            cl.done = 0;
            if (i) usleep((HTTP_SERVE_FRESH_MS + 50) * 1000);
            double c0 = thread_cpu_ms();
            int64_t w0 = mono_ns();
            pthread_create(&th, NULL, client_run, &cl);
            while (!cl.done || http_serve_conns(s) > 0) evloop_run_once(el, 5);
            pthread_join(th, NULL);
            cpu[i] = thread_cpu_ms() - c0;
            wall[i] = (double)(mono_ns() - w0) / 1e6;
            if (cl.status != 200 || memcmp(cl.tail, "# EOF\n", 6) != 0) {
                fprintf(stderr, "bench_openmetrics: scrape %d: status %d, %zu bytes\n", i, cl.status, cl.got);
                return 1;
            }
        }
        qsort(cpu, (size_t)scrapes, sizeof *cpu, cmp_double);
        qsort(wall, (size_t)scrapes, sizeof *wall, cmp_double);
        printf("scrape  the loop thread's CPU per GET: min %.1f ms, median %.1f ms (wall %.1f ms) over %d; "
               "%llu renders\n", cpu[0], cpu[scrapes / 2], wall[scrapes / 2], scrapes,
               (unsigned long long)http_serve_stats(s)->renders);
        http_serve_free(s);
        evloop_free(el);
        free(cpu);
        free(wall);
    }
    strbuf_done(&sb);
    free(ms);
    free(cpu_ms);
    job_free(j);
    return 0;
}
