/* Unit tests for launcher/metrics_parse.c: the runtime's JSON step lines, the default
 * --loss-regex on lines as PyTorch examples, Lightning, HF Trainer, Megatron/DeepSpeed,
 * nanoGPT, torchtitan, fairseq and Keras print them, lines that must not count as a loss
 * ("lossy", "loss scale", ...), a user regex with and without a group, the startup error for
 * a bad regex, and step inference when lines carry no step. */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/job.h"
#include "job/metrics_parse.h"
#include "job_files.h"
#include "tap.h"
#include "tmptree.h"

static char err[512];

static bool parse(const struct metrics_parser *p, const char *s, struct metrics_sample *m)
{
    return metrics_parse_line(p, s, strlen(s), m);
}

static void test_runtime_json(void)
{
    struct metrics_parser *p = metrics_parser_new(NULL, err, sizeof err);
    struct metrics_sample m;
    CHECK(parse(p, "{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":10,\"loss\":2.31,"
                "\"step_ms\":12.5,\"comm_ms\":1.0,\"tokens_per_s\":5000}", &m));
    CHECK(m.has_step && m.has_loss && m.has_step_ms && m.has_tokens);
    CHECK_INT(m.step, 10);
    CHECK_NEAR(m.loss, 2.31, 1e-12);
    CHECK_NEAR(m.step_ms, 12.5, 1e-12);
    CHECK_NEAR(m.tokens_per_s, 5000, 1e-9);
    /* A diverged loss is written null: kept apart from "no loss" as +inf. */
    CHECK(parse(p, "{\"event\":\"step\",\"v\":1,\"rank\":1,\"step\":20,\"loss\":null,"
                "\"step_ms\":14.2,\"comm_ms\":3.1,\"wait_ms\":3.4,\"tokens_per_s\":9014.1}", &m));
    CHECK(m.has_loss && isinf(m.loss) && m.loss > 0);
    CHECK_INT(m.step, 20);
    /* Spaces, unknown fields and field order do not matter. */
    CHECK(parse(p, "  { \"step\": 5, \"event\": \"step\", \"new_field\": [1,2], \"loss\": 1.5 }", &m));
    CHECK_INT(m.step, 5);
    CHECK_NEAR(m.loss, 1.5, 1e-12);
    CHECK(!m.has_step_ms && !m.has_tokens);
    /* Other runtime events are not metrics. */
    CHECK(!parse(p, "{\"event\":\"start\",\"v\":1,\"rank\":0,\"world_size\":2,\"params\":1050368,"
                 "\"resumed_from\":null,\"device\":\"cpu\"}", &m));
    CHECK(!parse(p, "{\"event\":\"done\",\"v\":1,\"rank\":0,\"step\":400,"
                 "\"param_checksum\":\"d07f5ac568e359f4\"}", &m));
    CHECK(!parse(p, "{\"event\":\"snapshot\",\"v\":1,\"rank\":0,\"step\":50,\"path\":\"/x\"}", &m));
    CHECK(!parse(p, "{\"event\":\"step\",\"v\":1", &m));        /* cut short */
    /* A user's JSON log with a "loss" key still reaches the regex. */
    CHECK(parse(p, "{\"loss\": 1.25, \"step\": 7}", &m));
    CHECK_NEAR(m.loss, 1.25, 1e-12);
    CHECK(m.has_step);
    CHECK_INT(m.step, 7);
    /* metrics_parse_runtime: the runtime's line alone, never the regex (the dashboard shows
     * only that line in words) */
    const char *rt = "{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":12,\"loss\":4.87}";
    CHECK(metrics_parse_runtime(rt, strlen(rt), &m));
    CHECK(m.has_step && m.step == 12 && m.has_loss && !m.has_step_ms && isnan(m.step_ms));
    const char *user = "{\"loss\": 1.25, \"step\": 7}", *text = "step 3 loss: 2.5";
    CHECK(!metrics_parse_runtime(user, strlen(user), &m));
    CHECK(!metrics_parse_runtime(text, strlen(text), &m));
    CHECK(isnan(m.loss));
    metrics_parser_free(p);
}

struct case_ {
    const char *line;
    long step;          /* -1: no step on the line */
    double loss;
};

static const struct case_ matches[] = {
    /* PyTorch examples (mnist, the CIFAR tutorial, a common hand-written loop) */
    { "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300526", -1, 2.300526 },
    { "[1,  2000] loss: 2.179", -1, 2.179 },
    { "Epoch [1/5], Step [100/600], Loss: 0.2345", 100, 0.2345 },
    { "loss: tensor(2.3012, device='cuda:0', grad_fn=<NllLossBackward0>)", -1, 2.3012 },
    /* PyTorch Lightning progress bars (old and new metric names) */
    { "Epoch 0:  45%|████▌     | 450/1000 [00:10<00:12, 44.5it/s, loss=0.234, v_num=0]", -1,
      0.234 },
    { "Epoch 1: 100%|██████████| 10/10 [00:01<00:00,  9.50it/s, v_num=1, train_loss=0.512, "
      "val_loss=0.61]", -1, 0.512 },
    /* A \r progress bar flushed as one piece: its newest state counts */
    { "\rEpoch 0: 10%| loss=0.9\rEpoch 0: 11%| loss=0.8\r", -1, 0.8 },
    /* Hugging Face Trainer */
    { "{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}", -1, 2.3456 },
    { "{'train_runtime': 10.1, 'train_samples_per_second': 5.0, 'train_loss': 2.1, "
      "'epoch': 3.0}", -1, 2.1 },
    /* Megatron-LM / Megatron-DeepSpeed */
    { " iteration       10/  100000 | consumed samples:          320 | elapsed time per "
      "iteration (ms): 1234.5 | learning rate: 1.000E-04 | global batch size:    32 | lm loss: "
      "1.034567E+01 | loss scale: 4096.0 | grad norm: 5.123 |", 10, 10.34567 },
    /* nanoGPT */
    { "iter 100: loss 2.3456, time 123.45ms, mfu 45.67%", 100, 2.3456 },
    { "step 500: train loss 1.2345, val loss 1.3456", 500, 1.2345 },
    /* torchtitan, coloured */
    { "\x1b[31mstep:  10  \x1b[32mloss:  8.1234  \x1b[33mmemory: 12.34GiB(15.67%)  "
      "\x1b[34mtps: 1,234\x1b[39m", 10, 8.1234 },
    /* fairseq */
    { "| epoch 001 | loss 9.876 | ppl 123 | wps 1234 | ups 1.2 | num_updates 100", -1, 9.876 },
    /* Keras */
    { "938/938 [==============================] - 3s 3ms/step - loss: 0.2957 - accuracy: 0.9145",
      -1, 0.2957 },
    /* The forms of docs/logs.md */
    { "loss: 2.31", -1, 2.31 },
    { "loss=2.3e-1", -1, 0.23 },
    { "Loss 0.5", -1, 0.5 },
    { "LOSS:4", -1, 4 },
    { "loss = -1.5", -1, -1.5 },
    { "Loss:.5", -1, 0.5 },
    { "step 10 loss 2.3", 10, 2.3 },
    { "iter: 5, loss=1.0", 5, 1.0 },
    { "it 7 loss 3", 7, 3 },
    { "global_step=1200 loss=0.75", 1200, 0.75 },
    { "steps: 100 loss: 1.0", -1, 1.0 },        /* "steps" is not a step label */
    { "epoch 3 loss 1.5 (44.5it/s)", -1, 1.5 },
};

static const char *const no_match[] = {
    "lossy compression enabled",
    "lossless=1",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "loss_scale: 65536",
    "closs: 1.0",
    "glossary: 5",
    "no loss reported",
    "loss: unknown",
    "loss:",
    "loss",
    "loss: nanoseconds",
    "loss: information",
    "Loss of signal at 10",
    "The loss went down 5 times",
    "step 10",
    "[2023-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, "
    "lr=[0.0001], mom=[(0.9, 0.999)]",
    "",
    "hello world",
};

static void test_default_regex_table(void)
{
    struct metrics_parser *p = metrics_parser_new(NULL, err, sizeof err);
    struct metrics_sample m;
    for (size_t i = 0; i < sizeof matches / sizeof *matches; i++) {
        const struct case_ *c = &matches[i];
        bool ok = parse(p, c->line, &m);
        if (!ok || !m.has_loss || fabs(m.loss - c->loss) > 1e-9 * fabs(c->loss) + 1e-12 ||
            m.has_step != (c->step >= 0) || (c->step >= 0 && m.step != c->step)) {
            printf("#   line %zu \"%s\": ok=%d loss=%g step=%s%ld\n", i, c->line, ok, m.loss,
                   m.has_step ? "" : "none ", m.step);
            CHECK(0);
        }
    }
    for (size_t i = 0; i < sizeof no_match / sizeof *no_match; i++) {
        if (parse(p, no_match[i], &m)) {
            printf("#   \"%s\" matched: loss=%g\n", no_match[i], m.loss);
            CHECK(0);
        }
    }
    /* nan and inf are losses (a diverged run), recorded as +inf */
    CHECK(parse(p, "step 3 loss: nan", &m) && isinf(m.loss) && m.step == 3);
    CHECK(parse(p, "loss=inf,", &m) && isinf(m.loss));
    CHECK(parse(p, "loss: -Infinity", &m) && isinf(m.loss));
    /* Binary bytes and NULs around the loss do not stop it. */
    const char bin[] = "\xff\xfe\0 loss: 1.5 \0";
    CHECK(metrics_parse_line(p, bin, sizeof bin - 1, &m) && fabs(m.loss - 1.5) < 1e-12);
    metrics_parser_free(p);
}

/* The dashboard runs in the user's UTF-8 locale (ncursesw): same results there, also for
 * lines with invalid UTF-8. */
static void test_default_regex_table_utf8(void)
{
    CHECK(setlocale(LC_ALL, "C.UTF-8") != NULL);
    test_default_regex_table();
    struct metrics_parser *p = metrics_parser_new(NULL, err, sizeof err);
    struct metrics_sample m;
    CHECK(parse(p, "\xc3\x28 \xff loss: 0.25 \xe2\x82", &m) && fabs(m.loss - 0.25) < 1e-12);
    CHECK(parse(p, "état 5 — step 9 — perte/loss: 0.5", &m) && m.step == 9);
    metrics_parser_free(p);
    setlocale(LC_ALL, "C");
}

static void test_long_lines(void)
{
    struct metrics_parser *p = metrics_parser_new(NULL, err, sizeof err);
    struct metrics_sample m;
    size_t n = 200000;
    char *s = malloc(n);
    memset(s, 'x', n);
    memcpy(s + 100, " loss: 4.5 ", 11);
    CHECK(metrics_parse_line(p, s, n, &m) && fabs(m.loss - 4.5) < 1e-12);
    /* Only the first 64 KiB are looked at. */
    memset(s, 'x', n);
    memcpy(s + 100000, " loss: 4.5 ", 11);
    CHECK(!metrics_parse_line(p, s, n, &m));
    free(s);
    metrics_parser_free(p);
}

static void test_user_regex(void)
{
    struct metrics_sample m;
    /* With a group: the group is the number. */
    struct metrics_parser *p = metrics_parser_new("train/ce=([0-9.]+)", err, sizeof err);
    CHECK(p != NULL);
    if (p) {
        CHECK(parse(p, "train/ce=1.25 step=3", &m));
        CHECK_NEAR(m.loss, 1.25, 1e-12);
        CHECK_INT(m.step, 3);
        CHECK(!parse(p, "loss: 2.0", &m));        /* the default is replaced */
        metrics_parser_free(p);
    }
    /* Without a group: the number right after the match (after ':', '=', spaces). */
    p = metrics_parser_new("perplexity", err, sizeof err);
    CHECK(p != NULL);
    if (p) {
        CHECK(parse(p, "Perplexity: 12.5", &m));    /* case-insensitive, like the default */
        CHECK_NEAR(m.loss, 12.5, 1e-12);
        CHECK(!m.has_step);
        CHECK(!parse(p, "perplexity: high", &m));
        metrics_parser_free(p);
    }
}

static void test_bad_regex(void)
{
    err[0] = '\0';
    CHECK(metrics_parser_new("loss(", err, sizeof err) == NULL);
    CHECK(strstr(err, "--loss-regex 'loss(': ") == err);
    CHECK(strstr(err, "Unmatched ( or \\(") != NULL);   /* regerror's words */
    CHECK(strstr(err, "docs/logs.md") != NULL);
    CHECK(metrics_parser_new("[a-", err, sizeof err) == NULL);
    CHECK(strstr(err, "--loss-regex '[a-'") != NULL);
}

/* Lines with no step: the model counts loss lines; a line with a step wins from then on. */
/* The block pre-check turns away only blocks in which no line can carry a metric: "loss" in any
 * case at any offset (8-byte steps must not skip one), or the runtime's "step" key, keeps it. */
static void test_block_may_hold(void)
{
    char msg[256], buf[200];
    struct metrics_parser *p = metrics_parser_new(NULL, msg, sizeof msg);
    struct metrics_parser *u = metrics_parser_new("perplexity", msg, sizeof msg);
    static const char *const words[] = { "loss", "LOSS", "LoSs", "lOsS" };
    CHECK(p && u);
    if (!p || !u) return;
    memset(buf, 'x', sizeof buf);
    CHECK(!metrics_block_may_hold(p, buf, sizeof buf));
    CHECK(!metrics_block_may_hold(p, "los\nss los lo\n", 15));
    CHECK(metrics_block_may_hold(u, buf, sizeof buf));      /* a user regex: every line is tried */
    for (size_t off = 0; off + 4 <= 40; off++) {
        memset(buf, 'l', sizeof buf);                        /* 'l' everywhere: the slow path too */
        memcpy(buf + off, words[off % 4], 4);
        CHECK(metrics_block_may_hold(p, buf, 40));
        memset(buf, 'x', sizeof buf);
        memcpy(buf + off, words[off % 4], 4);
        CHECK(metrics_block_may_hold(p, buf, 40));
        CHECK(!metrics_block_may_hold(p, buf, off + 3));     /* cut before its last letter */
    }
    CHECK(metrics_block_may_hold(p, "a\n{\"event\":\"step\",\"step\":3}\n", 28));
    metrics_parser_free(p);
    metrics_parser_free(u);
}

/* The block pre-check's "loss" scan against the word-at-a-time scan it replaced (kept here as
 * the reference), on random text rich in l, L, o, O, s, S at every length. */
static bool ref_has_loss_word(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint32_t want;
    size_t i = 0;
    memcpy(&want, "loss", 4);
    while (i + 4 <= n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            w = (w | 0x2020202020202020u) ^ (ones * 'l');
            if (!((w - ones) & ~w & highs)) {
                i += 8;
                continue;
            }
        }
        uint32_t w4;
        memcpy(&w4, s + i, 4);
        if ((w4 | 0x20202020u) == want) return true;
        i++;
    }
    return false;
}

static void test_block_may_hold_as_before(void)
{
    static const char alpha[] = "lLoOsSxl\x0c\xcc\xef\x4c\n";
    char msg[256], buf[300];
    struct metrics_parser *p = metrics_parser_new(NULL, msg, sizeof msg);
    unsigned seed = 99;
    size_t diff = 0, yes = 0, no = 0;
    CHECK(p != NULL);
    if (!p) return;
    for (int round = 0; round < 200000; round++) {
        size_t n;
        seed = seed * 1103515245u + 12345u;
        n = (seed >> 8) % (round % 5 ? 24 : sizeof buf);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (seed >> 8) % 4 ? alpha[(seed >> 12) % (sizeof alpha - 1)] : (char)(seed >> 16);
        }
        if (round % 3 == 0 && n >= 4) {     /* a word planted, sometimes a letter off */
            size_t at = (seed >> 4) % (n - 3);
            for (int k = 0; k < 4; k++) buf[at + (size_t)k] = (char)("loss"[k] ^ ((seed >> (10 + k)) & 1 ? 0x20 : 0));
            if ((seed >> 20) % 3 == 0) buf[at + (seed >> 22) % 4] ^= 0x01;
        }
        /* no '"': the "step" half of the check stays out of it */
        for (size_t i = 0; i < n; i++)
            if (buf[i] == '"') buf[i] = 'x';
        bool want = ref_has_loss_word(buf, n), got = metrics_block_may_hold(p, buf, n);
        if (want != got && !diff++) printf("#   round %d (%zu bytes): want %d got %d\n", round, n, want, got);
        want ? yes++ : no++;
    }
    CHECK_INT(diff, 0);
    CHECK(yes > 10000 && no > 10000);
    metrics_parser_free(p);
}

static void test_feed_infers_steps(void)
{
    char dir[] = "/tmp/ddptop-test-metrics-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    int per_node[] = { 2 };
    struct job *j = tjob_new("feed", dir, 0, NULL, NULL, per_node, 1, err, sizeof err);
    struct metrics_parser *p = metrics_parser_new(NULL, err, sizeof err);
    if (!j || !p) { CHECK(0); return; }
    const char *lines[] = { "Loss: 3.0", "warming up", "Loss: 2.0", "Loss: 1.0" };
    int fed = 0;
    for (size_t i = 0; i < 4; i++) fed += metrics_feed_line(p, j, 1, lines[i], strlen(lines[i]));
    CHECK_INT(fed, 3);
    CHECK_INT(j->ranks[1].step, 3);
    CHECK_NEAR(j->ranks[1].loss, 1.0, 1e-12);
    CHECK_INT(j->ranks[1].series.count, 3);
    CHECK_INT(metric_series_at(&j->ranks[1].series, 0)->step, 1);
    const char *js = "{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":10,\"loss\":2.31,"
                     "\"step_ms\":12.5,\"comm_ms\":1.0,\"tokens_per_s\":5000}";
    CHECK(metrics_feed_line(p, j, 0, js, strlen(js)));
    CHECK_INT(j->ranks[0].step, 10);
    CHECK_NEAR(j->ranks[0].step_ms, 12.5, 1e-12);
    CHECK_NEAR(j->ranks[0].tokens_per_s, 5000, 1e-9);
    CHECK_INT(j->ranks[1].step, 3);
    metrics_parser_free(p);
    tjob_free(j);
    tmptree_remove(dir); /* the run's files: events, index, lock, controller.json */
}

int main(void)
{
    RUN(test_runtime_json);
    RUN(test_default_regex_table);
    RUN(test_default_regex_table_utf8);
    RUN(test_long_lines);
    RUN(test_user_regex);
    RUN(test_bad_regex);
    RUN(test_feed_infers_steps);
    RUN(test_block_may_hold);
    RUN(test_block_may_hold_as_before);
    return tap_done();
}
