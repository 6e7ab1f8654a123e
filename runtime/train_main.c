/* ddptop-train: the command line. Parses and checks every option (a bad one is a message and
 * the usage on stderr, exit 2), then hands over to train_run. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"
#include "train_cuda.h"

static const char usage_text[] =
    "usage: ddptop-train [--data FILE] [--steps N] [--batch-size B] [--lr LR] [--seed S]\n"
    "                    [--hidden H] [--layers L] [--context C] [--snapshot PATH]\n"
    "                    [--snapshot-every K] [--log-every K] [--device cpu|cuda]\n"
    "                    [--bucket-mb M] [--fault KIND@STEP[:RANK]] [--rdzv-timeout SEC]\n"
    "                    [--no-overlap] [--precision fp32|tf32|bf16] [--help]\n"
    "\n"
    "Trains a byte-level language model with data parallelism across the ranks that the\n"
    "torchrun environment describes (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR, MASTER_PORT, DDPTOP_JOB_TOKEN; none set: a world of one).\n"
    "stdout: one JSON object per line (docs/metrics.md); stderr: messages.\n"
    "\n"
    "  --data FILE          train on FILE's bytes (default: a built-in generated corpus)\n"
    "  --steps N            optimizer steps in all (default 400)\n"
    "  --batch-size B       samples per rank per step (default 64)\n"
    "  --lr LR              AdamW learning rate (default 0.002)\n"
    "  --seed S             parameter init and data order (default 1337)\n"
    "  --hidden H           hidden layer width (default 512)\n"
    "  --layers L           hidden layers (default 3)\n"
    "  --context C          bytes of context per prediction (default 16)\n"
    "  --snapshot PATH      resume from PATH when it exists; write it (PATH.prev keeps the\n"
    "                       previous one) every K steps and at the end, on local rank 0\n"
    "  --snapshot-every K   steps between snapshots, 0: at the end only (default 50)\n"
    "  --log-every K        steps between metrics lines (default 10; the last step always)\n"
    "  --device cpu|cuda    compute device (default: cuda when this build has CUDA and every\n"
    "                       rank on the node can have a GPU of its own, else cpu)\n"
    "  --bucket-mb M        gradient all-reduce bucket size in MiB (default 25)\n"
    "  --fault KIND@STEP[:RANK]  inject a fault before STEP: crash (SIGSEGV), hang, exit\n"
    "                       (status 3); without RANK on every rank\n"
    "  --rdzv-timeout SEC   how long to retry the rendezvous store (default 300)\n"
    "  --no-overlap         start gradient all-reduces only after the whole backward pass\n"
    "  --precision P        GPU matrix products: fp32, tf32 (default) or bf16 (fp32 master\n"
    "                       weights); the CPU always computes in fp32\n"
    "  --help               this text\n";

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddptop-train: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_text);
    exit(2);
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: '%%s' is not an integer in %ld..%ld", opt, min, max);
        usage_error(msg, s);
    }
    return v;
}

static double parse_double(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || !(v > min) || v > max) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: '%%s' is not a number above %g (and at most %g)", opt,
                 min, max);
        usage_error(msg, s);
    }
    return v;
}

int main(int argc, char **argv)
{
    enum { O_DATA = 256, O_STEPS, O_BATCH, O_LR, O_SEED, O_HIDDEN, O_LAYERS, O_CONTEXT,
           O_SNAPSHOT, O_SNAP_EVERY, O_LOG_EVERY, O_DEVICE, O_BUCKET, O_FAULT, O_RDZV,
           O_NO_OVERLAP, O_PRECISION, O_HELP };
    static const struct option longopts[] = {
        { "data", required_argument, NULL, O_DATA },
        { "steps", required_argument, NULL, O_STEPS },
        { "batch-size", required_argument, NULL, O_BATCH },
        { "lr", required_argument, NULL, O_LR },
        { "seed", required_argument, NULL, O_SEED },
        { "hidden", required_argument, NULL, O_HIDDEN },
        { "layers", required_argument, NULL, O_LAYERS },
        { "context", required_argument, NULL, O_CONTEXT },
        { "snapshot", required_argument, NULL, O_SNAPSHOT },
        { "snapshot-every", required_argument, NULL, O_SNAP_EVERY },
        { "log-every", required_argument, NULL, O_LOG_EVERY },
        { "device", required_argument, NULL, O_DEVICE },
        { "bucket-mb", required_argument, NULL, O_BUCKET },
        { "fault", required_argument, NULL, O_FAULT },
        { "rdzv-timeout", required_argument, NULL, O_RDZV },
        { "no-overlap", no_argument, NULL, O_NO_OVERLAP },
        { "precision", required_argument, NULL, O_PRECISION },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct train_opts o;
    train_opts_default(&o);
    opterr = 0;   /* our own messages */
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case O_DATA: o.data = optarg; break;
        case O_STEPS: o.steps = parse_long("--steps", optarg, 0, 1000000000L); break;
        case O_BATCH: o.batch = (int)parse_long("--batch-size", optarg, 1, 1 << 20); break;
        case O_LR: o.lr = (float)parse_double("--lr", optarg, 0, 10); break;
        case O_SEED: o.seed = (uint64_t)parse_long("--seed", optarg, 0, 0x7fffffffffffffffL); break;
        case O_HIDDEN: o.cfg.hidden = (int)parse_long("--hidden", optarg, 1, 65536); break;
        case O_LAYERS:
            o.cfg.layers = (int)parse_long("--layers", optarg, 1, MODEL_MAX_LAYERS);
            break;
        case O_CONTEXT: o.cfg.context = (int)parse_long("--context", optarg, 1, 1024); break;
        case O_SNAPSHOT:
            if (!*optarg) usage_error("--snapshot: empty path%s", "");
            o.snapshot = optarg;
            break;
        case O_SNAP_EVERY:
            o.snapshot_every = parse_long("--snapshot-every", optarg, 0, 1000000000L);
            break;
        case O_LOG_EVERY: o.log_every = parse_long("--log-every", optarg, 1, 1000000000L); break;
        case O_DEVICE:
            if (!strcmp(optarg, "cpu")) o.device_cuda = TRAIN_DEVICE_CPU;
            else if (!strcmp(optarg, "cuda")) o.device_cuda = TRAIN_DEVICE_CUDA;
            else usage_error("--device: '%s' is neither cpu nor cuda", optarg);
            break;
        case O_BUCKET: o.bucket_mb = parse_double("--bucket-mb", optarg, 0, 1 << 20); break;
        case O_FAULT:
            if (train_parse_fault(optarg, &o.fault))
                usage_error("--fault: '%s' is not KIND@STEP[:RANK] with KIND crash, hang or "
                            "exit and STEP >= 1", optarg);
            break;
        case O_RDZV: o.rdzv_timeout = parse_double("--rdzv-timeout", optarg, 0, 1e7); break;
        case O_NO_OVERLAP: o.no_overlap = 1; break;
        case O_PRECISION:
            o.precision = train_cuda_precision_parse(optarg);
            if (o.precision < 0)
                usage_error("--precision: '%s' is not fp32, tf32 or bf16", optarg);
            break;
        case O_HELP: fputs(usage_text, stdout); return 0;
        case ':': usage_error("%s needs a value", argv[optind - 1]); break;
        default: usage_error("unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
    /* --device cuda without a usable GPU is refused in train_run, which knows the rank */
    return train_run(&o);
}
