/* libFuzzer harness for the parsers that read rank output: the metrics line parser
 * (launcher/job/metrics_parse.c, default regex and the runtime's JSON through
 * launcher/wire/step_line.c), the error-file formatter (launcher/job/root_cause.c) and what a
 * line says about a failure (launcher/job/failure_line.c).
 * Built and run by `make fuzz-programs`, `make fuzz` and
 * `make test` (docs/testing.md, "Fuzzing"). With -DFUZZ_SMOKE_MAIN, a main() without libFuzzer
 * feeds mutations of the seeds below instead (any C compiler).
 *
 * Besides "no crash, no leak, no read past the line" (the input is not NUL-terminated), it
 * checks what the model relies on: a match has a step or a loss, a loss is never NaN (NaN
 * means "no loss" in the model; non-finite losses are +inf), and the error file text is
 * never empty for a non-empty file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/failure_line.h"
#include "job/metrics_parse.h"
#include "job/root_cause.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_metrics_parse: invariant failed: %s\n", #cond); abort(); } } while (0)

static struct metrics_parser *parser;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (!parser) parser = metrics_parser_new(NULL, err, sizeof err);
    EXPECT(parser);
    /* An exact-size copy, so ASan sees any read past the end of the line. */
    char *line = malloc(size ? size : 1);
    if (!line) return 0;
    memcpy(line, data, size);
    struct metrics_sample m;
    if (metrics_parse_line(parser, line, size, &m)) {
        EXPECT(m.has_step || m.has_loss);
        if (m.has_loss) EXPECT(!isnan(m.loss));
    } else {
        EXPECT(!m.has_step && !m.has_loss);
    }
    enum failure_class fc = failure_line_class(line, size);
    EXPECT(fc >= FAILURE_NONE && fc < FAILURE_CLASSES);
    struct watchdog_seq q;
    if (!failure_line_watchdog(line, size, &q)) EXPECT(q.seq < 0 && q.enqueued < 0 && q.completed < 0);
    EXPECT(memchr(q.op, '\0', sizeof q.op) != NULL);
    char addr[64];
    if (failure_line_peer(line, size, addr, sizeof addr)) EXPECT(addr[0] != '\0');
    bool user;
    (void)failure_line_frame(line, size, &user);
    (void)failure_line_exception(line, size);
    char *ef = root_cause_format_error_file(line, size);
    EXPECT(ef != NULL);
    if (size && line[0]) EXPECT(ef[0] != '\0');
    free(ef);
    free(line);
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":10,\"loss\":2.31,\"step_ms\":12.5,"
    "\"tokens_per_s\":5000}",
    "{\"event\":\"step\",\"step\":1,\"loss\":null}",
    "Epoch [1/5], Step [100/600], Loss: 0.2345",
    "iter 100: loss 2.3456, time 123.45ms, mfu 45.67%",
    "\x1b[31mstep:  10  \x1b[32mloss:  8.1234\x1b[39m",
    "\rEpoch 0: 10%| loss=0.9\rEpoch 0: 11%| loss=nan\r",
    "loss: tensor(2.3012, grad_fn=<NllLossBackward0>)",
    "{'loss': 2.3456, 'epoch': 0.5}",
    "{\"message\": {\"message\": \"RuntimeError: x\", \"extraInfo\": {\"py_callstack\": \"T\", "
    "\"timestamp\": \"1700000000\"}}}",
    "{\"message\": \"boom\"}",
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = "{}[]\":,.eE+-0123456789 \t\r\\lossLOSSstepiternaf()=\x1b\0\xff";
    int rc = fuzz_smoke_run(argc, argv, "fuzz_metrics_parse", seeds, sizeof seeds / sizeof seeds[0], alphabet,
                            sizeof alphabet - 1);
    metrics_parser_free(parser);
    return rc;
}
#endif
