/* libFuzzer harness for the events.jsonl reader behind `ddptop ls` (launcher/record/
 * run_summary.c): the input is a file's worth of lines, fed one at a time as
 * run_summary_read does, then finished with each controller status. Built and run by `make fuzz-programs`, `make fuzz` and
 * `make test` (docs/testing.md, "Fuzzing"). With -DFUZZ_SMOKE_MAIN, a main() without libFuzzer
 * feeds mutations of the seeds below instead (any C compiler).
 *
 * Besides "no crash, no leak, no read past a line" (lines are not NUL-terminated), it checks
 * what `ddptop ls` relies on: a state that has a name, attempts never negative, a bad line
 * among the lines fed and then the state unknown, an end's state when nothing was bad, and
 * a host (or none) for every rank of the rank map. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/run_summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_run_summary: invariant failed: %s\n", #cond); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum run_owner_status owners[] = { OWNER_NONE, OWNER_ALIVE, OWNER_GONE,
                                                    OWNER_ELSEWHERE };
    for (size_t k = 0; k < sizeof owners / sizeof *owners; k++) {
        struct run_summary s;
        run_summary_init(&s);
        size_t at = 0;
        while (at < size) {
            const uint8_t *nl = memchr(data + at, '\n', size - at);
            size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
            char *line = malloc(n ? n : 1);   /* exact size: ASan sees a read past it */
            if (!line) return 0;
            memcpy(line, data + at, n);
            run_summary_feed(&s, line, n);
            free(line);
            at += n + 1;
        }
        run_summary_finish(&s, owners[k]);
        EXPECT(strcmp(run_state_name(s.state), "unknown") != 0 || s.state == RUN_UNKNOWN);
        EXPECT(s.attempts >= 0);
        EXPECT(s.bad_line >= 0 && s.bad_line <= s.lines);
        if (s.bad_line) EXPECT(s.state == RUN_UNKNOWN && s.bad_why);
        else if (s.ended) EXPECT(s.state == s.end_state);
        for (int r = -1; r <= (s.ranks > 64 ? 64 : s.ranks); r++) (void)run_summary_rank_host(&s, r);
        run_summary_done(&s);
    }
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "{\"time\":\"2026-11-24T12:00:00.000Z\",\"kind\":\"launch\",\"attempt\":0,\"rank\":null,"
    "\"host\":null,\"text\":\"attempt 0: launching 3 ranks on 2 nodes\",\"ranks\":3,"
    "\"hosts\":[\"gpu1\",\"gpu2\"],\"ranks_per_node\":[2,1]}\n"
    "{\"time\":\"2026-11-24T12:00:01.000Z\",\"kind\":\"root_cause\",\"attempt\":0,\"rank\":1,"
    "\"text\":\"root cause: rank 1 on gpu1 exited with code 3\",\"exit_code\":3}\n"
    "{\"time\":\"2026-11-24T12:00:02.000Z\",\"kind\":\"end\",\"attempt\":0,\"text\":\"x\","
    "\"state\":\"failed\",\"exit_code\":1}\n",
    "{\"time\":\"2026-11-24T12:00:00Z\",\"kind\":\"launch\",\"attempt\":1,\"text\":"
    "\"attempt 1: launching 4 ranks on 2 nodes\"}\n{\"kind\":\"restart\",\"attempt\":1}\n"
    "{\"kind\":\"done\"}\n{\"kind\":\"stop\",\"text\":\"Interrupt received: x\"}\n",
    "{\"kind\":\"launch\",\"attempt\":0,\"hosts\":[\"a\",1,null],\"ranks_per_node\":[-5,2147483647,0]}\n"
    "{\"kind\":\"launch\",\"attempt\":-3,\"ranks\":1e300}\n[1]\n{\"kind\":\"end\",\"state\":\"nope\"}\n",
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = "{}[]\":,.eE+-0123456789 \t\r\n\\kindlaunchendtimeZT\0\xff";
    return fuzz_smoke_run(argc, argv, "fuzz_run_summary", seeds, sizeof seeds / sizeof seeds[0],
                          alphabet, sizeof alphabet - 1);
}
#endif
