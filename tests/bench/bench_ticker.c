/* A rank for the dashboard benchmark (tests/bench/dashboard.sh): prints one ddptop-train
 * style metrics line every 100 ms, forever, with a slowly falling loss. A shell loop with
 * `sleep 0.1` would fork 10,000 sleeps a second for 1,024 ranks, more than two cores can
 * run; this costs a wake-up and a write per line. Usage: bench_ticker [PERIOD_MS]. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    long period_ms = argc > 1 ? atol(argv[1]) : 100;
    if (period_ms < 1) period_ms = 100;
    const char *r = getenv("RANK");
    int rank = r ? atoi(r) : 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long step = 1;; step++) {
        double loss = 5.0 / (1.0 + step / 200.0) + (rank % 7) * 0.01;
        printf("{\"event\":\"step\",\"v\":1,\"rank\":%d,\"step\":%ld,\"loss\":%.5f,\"step_ms\":%ld}\n",
               rank, step, loss, period_ms);
        if (fflush(stdout) != 0) return 1;
        next.tv_nsec += period_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
