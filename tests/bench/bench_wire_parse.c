/* Benchmark of the controller's parse of what the agents send (tests/bench/wire_parse.sh,
 * docs/performance.md "The out messages' text in one pass"): an out message carrying a block
 * of 18 of the runtime's JSON step lines (an escaped quote every few bytes, a "\n" every line:
 * the replay after a partition is made of them) and one step line alone (the metrics parse of
 * every line), read the way the controller reads them (json_flat_scan_decoded, json_flat_scan)
 * and through cJSON, the library a reader of these lines would use otherwise: ns per message,
 * MB/s and the ratio. Usage: bench_wire_parse [ROUNDS] (default 200000). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "wire/json_flat.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The best of five timings of `rounds` parses, ns per parse; *sink keeps the work. */
static double time_flat(const char *s, size_t n, char *buf, long rounds, size_t *sink)
{
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (long r = 0; r < rounds; r++) {
            struct json_flat o;
            const struct json_flat_field *t;
            if (buf ? !json_flat_scan_decoded(s, n, &o, buf) : !json_flat_scan(s, n, &o)) return -1;
            t = json_flat_get(&o, buf ? "t" : "loss");
            *sink += t ? t->str_len + (size_t)t->num : 0;
        }
        double ns = (now_s() - t0) / (double)rounds * 1e9;
        if (ns < best) best = ns;
    }
    return best;
}

static double time_cjson(const char *s, size_t n, const char *key, long rounds, size_t *sink)
{
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (long r = 0; r < rounds; r++) {
            cJSON *o = cJSON_ParseWithLength(s, n);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
            if (!v) return -1;
            *sink += cJSON_IsString(v) ? strlen(v->valuestring) : (size_t)v->valuedouble;
            cJSON_Delete(o);
        }
        double ns = (now_s() - t0) / (double)rounds * 1e9;
        if (ns < best) best = ns;
    }
    return best;
}

static void report(const char *what, size_t n, double flat, double cj)
{
    printf("%s (%zu bytes): ddptop %.0f ns (%.0f MB/s), cJSON %.0f ns (%.0f MB/s): %.1fx\n", what, n, flat,
           (double)n / flat * 1e3, cj, (double)n / cj * 1e3, cj / flat);
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    char msg[4096], line[256];
    size_t n = 0, sink = 0;
    if (rounds < 1) rounds = 200000;
    n += (size_t)snprintf(msg + n, sizeof msg - n, "{\"ev\":\"out\",\"rank\":3,\"q\":12345,\"a\":0,\"s\":\"o\",\"t\":\"");
    for (int i = 0; i < 18; i++)
        n += (size_t)snprintf(msg + n, sizeof msg - n,
                              "{\\\"event\\\":\\\"step\\\",\\\"v\\\":1,\\\"rank\\\":3,\\\"step\\\":%d,\\\"loss\\\":%.5f,"
                              "\\\"step_ms\\\":1}\\n", 1000 + i, 5.0 / (1.0 + (1000 + i) / 200.0));
    n += (size_t)snprintf(msg + n, sizeof msg - n, "\",\"f\":\"\",\"mono_ns\":123456789012}");
    size_t ln = (size_t)snprintf(line, sizeof line,
                                 "{\"event\":\"step\",\"v\":1,\"rank\":3,\"step\":1000,\"loss\":4.16667,\"step_ms\":1}");
    char *buf = malloc(n);
    if (!buf) return 1;
    double f1 = time_flat(msg, n, buf, rounds, &sink), c1 = time_cjson(msg, n, "t", rounds, &sink);
    double f2 = time_flat(line, ln, NULL, rounds * 10, &sink), c2 = time_cjson(line, ln, "loss", rounds * 10, &sink);
    free(buf);
    if (f1 < 0 || c1 < 0 || f2 < 0 || c2 < 0) {
        fprintf(stderr, "bench_wire_parse: a message did not parse\n");
        return 1;
    }
    report("an out message of 18 JSON step lines", n, f1, c1);
    report("one JSON step line (the metrics parse)", ln, f2, c2);
    printf("(best of 5 x %ld parses; sink %zu)\n", rounds, sink % 10);
    return 0;
}
