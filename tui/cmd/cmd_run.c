/* Command line of `ddptop run` (cmd_run.h). Every value is checked here so that a typo is a
 * usage error (exit 2) before anything connects. */
#include "cmd_run.h"

#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/node_opts.h"
#include "cmd.h"
#include "dashboard.h"
#include "headless.h"
#include "hosts/hosts_source.h"
#include "job/hang.h"
#include "job/health.h"
#include "record/logw.h"
#include "job/metrics_parse.h"
#include "job/plan.h"
#include "openmetrics/http_serve.h"
#include "session/session.h"
#include "session/session_proto.h"
#include "ssh/ssh_cli.h"
#include "ssh/transport_kind.h"
#include "util/cli.h"
#include "util/util.h"

static int add_export(struct run_opts *o, const char *re, char *err, size_t errlen)
{
    regex_t r;
    char *pat = xasprintf("^(%s)$", re);
    int e = regcomp(&r, pat, REG_EXTENDED | REG_NOSUB);
    free(pat);
    if (e) return cli_fail(err, errlen, "--export '%s' is not a valid extended regular expression", re);
    regfree(&r);
    o->export_regex = xrealloc(o->export_regex, (o->n_export + 1) * sizeof *o->export_regex);
    o->export_regex[o->n_export++] = re;
    return 0;
}

void cmd_run_usage(FILE *f)
{
    fputs("usage: ddptop run [HOSTFILE] [options] [-- CMD ARGS...]\n"
          "       ddptop run --slurm|--pbs [options] [-- CMD ARGS...]\n"
          "Launches CMD (default: ddptop-train, resuming from a snapshot in the log directory) on\n"
          "every node of HOSTFILE, or on this machine without one, with torchrun's environment;\n"
          "streams every rank's output, stops everything when a rank fails, restarts if asked.\n"
          "\n"
          "  --nproc-per-node N|gpu  ranks per node (default: the hostfile's slots, else 1;\n"
          "                       gpu: the node's GPU count as the preflight found it)\n"
          "  --master-port P      rendezvous port on the first node (default 29500)\n"
          "  --max-restarts N     restart the whole job up to N times after a failure (default 0)\n"
          "  --nnodes N|MIN:MAX   run on N (MAX) nodes of the hosts and keep the rest as spares: a node\n"
          "                       that fails through its own fault (lost, XID/ECC, preflight) is excluded\n"
          "                       and a spare takes its place; with none left, down to MIN nodes\n"
          "  --log-dir DIR        logs go to DIR/RUN_ID/ (default ./ddptop-logs)\n"
          "  --log-mode MODE      who may read the run's logs: private (the default: files 0600,\n"
          "                       directories 0700), group (0640, 0750), or an octal file mode\n"
          "                       such as 0644 (directories get x where r is; never writable by others)\n"
          "  --run-id ID          name of the run (default: date-time-random)\n"
          "  --env K=V            set K for every rank (repeatable; hostfile keys win)\n"
          "  --export REGEX       forward the controller's variables whose name matches (repeatable)\n"
          "  --workdir DIR        directory the ranks start in (default: the current one's path)\n"
          "  --hang-timeout SEC   a rank whose step stands still this long is stalled (default 300, 0 off)\n"
          "  --on-hang ACTION     at an attempt's first stall: none (an event only), stacks (save every\n"
          "                       rank's stacks in the attempt's log directory; the default), restart\n"
          "                       (stacks, then restart, counting against --max-restarts), stop\n"
          "                       (stacks, then stop the job as failed with the hang as root cause)\n"
          "  --on-nan ACTION      when a rank's loss becomes NaN or inf: none (an event only), stop (the\n"
          "                       default: stop the job as failed with it as root cause), restart\n"
          "                       (restart from the snapshot, counting against --max-restarts)\n"
          "  --loss-spike X[:N]   a rank's loss above X times the median of its last N losses (default\n"
          "                       N 20) is a spike: an event (default: off)\n"
          "  --on-spike ACTION    what a spike does: none (the default), stop or restart, as --on-nan\n"
          "  --gpu-interval MS    sample every node's GPUs (NVML) this often (default 1000, 0 off)\n"
          "  --term-timeout SEC   SIGTERM to SIGKILL grace when stopping ranks (default 10)\n"
          "  --agent-grace SEC    how long each node's agent keeps its ranks running, and their output,\n"
          "                       while no controller talks to it (a stall, a network cut, ddptop killed:\n"
          "                       ddptop attach RUN takes the run back); then it stops them (default 600;\n"
          "                       0: at once, as torchrun does)\n"
          "  --node-timeout SEC   a node silent this long is unreachable and reconnected (default 30)\n"
          "  --agent-spool MB     output each agent keeps for an absent controller (default 256)\n"
          "  --straggler-steps N  a rank trailing the median step by more is a straggler (default 3)\n"
          "  --metrics [ADDR:]PORT  serve the run's metrics to Prometheus (OpenMetrics) on\n"
          "                       http://ADDR:PORT/metrics; ADDR defaults to 127.0.0.1 (0.0.0.0: every\n"
          "                       interface); docs/integrations.md\n"
          "  --loss-regex RE      how to find the loss in plain output lines (default: loss[:= ]NUMBER)\n"
          "  --notify CMD         run sh -c CMD on this host for each event of the kinds --notify-on\n"
          "                       chose: the event as one JSON line on its stdin, its main fields as\n"
          "                       DDPTOP_EVENT_* variables (repeatable; docs/integrations.md)\n"
          "  --notify-on KINDS    which kinds, comma-separated (repeatable): events.jsonl's (end,\n"
          "                       root_cause, stall, node_lost, straggler, restart, ...), nan, spike,\n"
          "                       all, default (end,root_cause,stall,node_lost,nan,spike: the default)\n"
          "  --notify-timeout SEC kill a notify command still running after SEC (default 30)\n"
          "  --headless           print lines instead of the dashboard (also when stdout is no terminal);\n"
          "                       no session: the job ends with this process\n"
          "  --no-fold            print every rank's line as it comes: no \"[r0-63 n[01-08]] text\" for a\n"
          "                       line several ranks print (headless; the dashboard's all-ranks log starts\n"
          "                       unfolded, u folds it)\n"
          "  --detach             start the dashboard in a session without a terminal, print the run id\n"
          "                       and exit; ddptop attach RUN shows it (docs/dashboard.md)\n"
          "  --adopt              take over the run --run-id names, whose controller is gone: reconnect to\n"
          "                       its agents instead of launching (ddptop attach RUN does this for you)\n"
          "  --no-check           skip the preflight checks (ssh, env, tcp)\n"
          "  --fanout N           hosts connecting at once (default 64)\n"
          "  --mesh MODE          the preflight's TCP probes: full, sample or auto (full up to 64 nodes)\n"
          "  --mesh-seed N        the sampled mesh's seed (from ddptop check --json: the same pairs)\n"
          "  --bench              the preflight measures too (ddptop check --bench): a node named\n"
          "                       slow fails it, and with spares (--nnodes) one takes its place\n"
          "  --bench-seconds S, --bench-min-ratio R, --bench-nccl-mib M, --bench-dcgmi  as ddptop check's\n"
          "  -v, --verbose        more messages on stderr\n"
          "  -h, --help           this text\n",
          f);
    fputs(hosts_source_usage(), f);
    transport_kinds_usage(f);
    ssh_cli_usage(f);
    fputs("\nExit status: 0 every rank succeeded, 1 the job failed (or was interrupted), 2 usage or\n"
          "configuration error, 3 the preflight refused the launch. See docs/run.md.\n",
          f);
}

#define VALUE(name)                                                                          \
    ((rc = cli_opt_value(argc, argv, &i, name, NULL, &val)) < 0                                        \
         ? cli_fail(err, errlen, "%s needs a value (see ddptop run --help)", name) : rc)

/* One option at argv[i]: 1 consumed, 0 unknown, -1 error. */
static int run_option(int argc, char **argv, int *ip, struct run_opts *o, char *err, size_t errlen)
{
    const char *a = argv[*ip], *val = NULL;
    int i = *ip, rc;
    if (strcmp(a, "--headless") == 0) o->headless = true;
    else if (strcmp(a, "--adopt") == 0) o->adopt = true;
    else if (strcmp(a, "--detach") == 0) o->detach = true;
    else if (strcmp(a, "--no-fold") == 0) o->no_fold = true;
    else if (strcmp(a, "--no-check") == 0) o->no_check = true;
    else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) o->verbose++;
    else if (strcmp(a, "-vv") == 0) o->verbose += 2;
    else if ((rc = VALUE("--nproc-per-node")) != 0) {
        if (rc < 0) return -1;
        if (strcmp(val, "gpu") == 0) o->nproc_per_node = -1;
        else if (cli_parse_int("--nproc-per-node", val, 1, 4096, &o->nproc_per_node, err, errlen) < 0) {
            snprintf(err, errlen, "--nproc-per-node wants a number from 1 to 4096 or 'gpu', not '%s'", val);
            return -1;
        }
    } else if ((rc = VALUE("--master-port")) != 0) {
        if (rc < 0 || cli_parse_int("--master-port", val, 1, 65535, &o->nodes.master_port, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--nnodes")) != 0) {
        /* checked against the hosts' count when they are known (controller_new) */
        if (rc < 0 || plan_parse_nnodes(val, 100000, &o->nnodes_min, &o->nnodes_max, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--max-restarts")) != 0) {
        if (rc < 0 || cli_parse_int("--max-restarts", val, 0, 10000, &o->max_restarts, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--gpu-interval")) != 0) {
        if (rc < 0 || cli_parse_int("--gpu-interval", val, 0, 3600000, &o->gpu_interval_ms, err, errlen) < 0) return -1;
        if (o->gpu_interval_ms > 0 && o->gpu_interval_ms < 100)
            return cli_fail(err, errlen, "--gpu-interval wants 0 (off) or 100 ms or more, not '%s'", val);
    } else if ((rc = VALUE("--hang-timeout")) != 0) {
        if (rc < 0 || cli_parse_int("--hang-timeout", val, 0, 7 * 86400, &o->hang_timeout_s, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--on-hang")) != 0) {
        if (rc < 0) return -1;
        if (hang_action_parse(val, &o->on_hang) < 0)
            return cli_fail(err, errlen, "--on-hang wants none, stacks, restart or stop, not '%s'", val);
    } else if ((rc = VALUE("--on-nan")) != 0) {
        if (rc < 0) return -1;
        if (health_action_parse(val, &o->on_nan) < 0)
            return cli_fail(err, errlen, "--on-nan wants none, stop or restart, not '%s'", val);
    } else if ((rc = VALUE("--on-spike")) != 0) {
        if (rc < 0) return -1;
        if (health_action_parse(val, &o->on_spike) < 0)
            return cli_fail(err, errlen, "--on-spike wants none, stop or restart, not '%s'", val);
    } else if ((rc = VALUE("--loss-spike")) != 0) {
        if (rc < 0 || health_spike_parse(val, &o->loss_spike, &o->loss_spike_window, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--term-timeout")) != 0) {
        if (rc < 0 || cli_parse_int("--term-timeout", val, 0, 3600, &o->term_timeout_s, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--agent-grace")) != 0) {
        if (rc < 0 || cli_parse_int("--agent-grace", val, 0, 7 * 86400, &o->agent_grace_s, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--node-timeout")) != 0) {
        if (rc < 0 || cli_parse_int("--node-timeout", val, 1, 86400, &o->node_timeout_s, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--agent-spool")) != 0) {
        if (rc < 0 || cli_parse_int("--agent-spool", val, 1, 65536, &o->agent_spool_mb, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--straggler-steps")) != 0) {
        if (rc < 0 || cli_parse_int("--straggler-steps", val, 0, 1000000, &o->straggler_steps, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--metrics")) != 0) {
        char host[256];
        int port;
        /* checked here for a usage error; the controller listens (a port in use is its error) */
        if (rc < 0 || http_serve_parse_addr(val, host, sizeof host, &port, err, errlen) < 0) return -1;
        o->metrics_addr = val;
    } else if ((rc = VALUE("--fanout")) != 0) {
        if (rc < 0 || cli_parse_int("--fanout", val, 1, 4096, &o->nodes.fanout, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--log-dir")) != 0) {
        if (rc < 0) return -1;
        if (!*val) return cli_fail(err, errlen, "--log-dir wants a directory");
        o->log_dir = val;
    } else if ((rc = VALUE("--log-mode")) != 0) {
        if (rc < 0) return -1;
        if (log_mode_parse(val, &o->log_mode) < 0)
            return cli_fail(err, errlen, "--log-mode wants private, group or an octal file mode from 0600 to 0644 "
                            "such as 0640 (read for the group or others, never write), not '%s'", val);
    } else if ((rc = VALUE("--workdir")) != 0) {
        if (rc < 0) return -1;
        if (!*val) return cli_fail(err, errlen, "--workdir wants a directory");
        o->workdir = val;
    } else if ((rc = VALUE("--run-id")) != 0) {
        if (rc < 0) return -1;
        if (!util_run_id_ok(val))
            return cli_fail(err, errlen, "--run-id '%s': use 1 to 64 letters, digits, '.', '_' or '-'", val);
        o->run_id = val;
    } else if ((rc = VALUE("--env")) != 0) {
        if (rc < 0 || node_opts_add_env(&o->nodes, val, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--export")) != 0) {
        if (rc < 0 || add_export(o, val, err, errlen) < 0) return -1;
    } else if ((rc = VALUE("--loss-regex")) != 0) {
        struct metrics_parser *p;
        if (rc < 0) return -1;
        p = metrics_parser_new(val, err, errlen);
        if (!p) return -1;
        metrics_parser_free(p);
        o->loss_regex = val;
    } else if ((rc = node_opts_mesh_option(&o->nodes, argc, argv, &i, err, errlen)) != 0) {
        if (rc < 0) return -1;
    } else if ((rc = node_opts_bench_option(&o->nodes, argc, argv, &i, err, errlen)) != 0) {
        if (rc < 0) return -1;
    } else if ((rc = notify_opts_option(&o->notify, argc, argv, &i, err, errlen)) != 0) {
        if (rc < 0) return -1;
    } else {
        return 0;
    }
    *ip = i;
    return 1;
}

int cmd_run_parse(int argc, char **argv, struct run_opts *o, struct hostlist *hl, char *err, size_t errlen)
{
    struct hosts_source src = {0};
    int rc;
    run_opts_init(o);
    memset(hl, 0, sizeof *hl);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->nodes.cmd = argv + i + 1;
            o->nodes.n_cmd = (size_t)(argc - i - 1);
            if (!o->nodes.n_cmd) return cli_fail(err, errlen, "nothing after --: give the command or drop the --");
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cmd_run_usage(stdout);
            return 1;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (hosts_source_file(&src, a, err, errlen) < 0) return -1;
            continue;
        }
        if (hosts_source_option(&src, a)) continue;
        rc = hosts_source_value_option(&src, argc, argv, &i, "run", err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = transport_opts_option(&o->nodes.transport, argc, argv, &i, "run", err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = ssh_cli_option("run", argc, argv, &i, &o->nodes.ssh, err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = run_option(argc, argv, &i, o, err, errlen);
        if (rc < 0) return -1;
        if (rc == 0) return cli_fail(err, errlen, "unknown option '%s' (see ddptop run --help)", a);
    }
    if (o->on_spike != HEALTH_NONE && !(o->loss_spike > 0))
        return cli_fail(err, errlen, "--on-spike %s needs the rule: --loss-spike X[:N] (see ddptop run --help)",
                        health_action_name(o->on_spike));
    if (o->detach && o->headless)
        return cli_fail(err, errlen, "--detach keeps the dashboard running in a session; it does not go "
                        "with --headless");
    o->nodes.verbose = o->verbose;
    o->nodes.ssh.verbose = o->verbose > 1 ? o->verbose - 1 : 0;
    if (!hosts_source_given(&src)) {   /* no hosts: the ranks run here, whatever --transport said */
        o->nodes.transport.named = NULL;
        return transport_opts_choose(&o->nodes.transport, &src, err, errlen);
    }
    if (node_opts_hosts(&o->nodes, &src, hl, err, errlen) < 0) return -1;
    o->nodes.ssh.agent_local = ssh_cli_local_agent();
    return 0;
}

int cmd_run_main(int argc, char **argv, int (*runner)(const struct run_opts *o, const struct hostlist *hl))
{
    struct run_opts o;
    struct hostlist hl;
    char err[1024] = "";
    int rc = cmd_run_parse(argc, argv, &o, &hl, err, sizeof err);
    o.argv = argv;
    o.argc = argc;
    if (rc == 0) {
        rc = runner(&o, hl.n ? &hl : NULL);
    } else if (rc == 1) {
        rc = 0;
    } else {
        fprintf(stderr, "ddptop run: %s\n", err);
        rc = 2;
    }
    hostlist_free(&hl);
    run_opts_done(&o);
    return rc;
}

/* ---- the front end of a run ---------------------------------------------------------------- */

/* --theme NAME (the dashboard's only option of its own), taken out of argv before the run
 * options are parsed; only before "--", where the command's own arguments begin. */
static const char *theme_opt;

static int take_theme_option(int *argc, char **argv)
{
    int o = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc) argv[o++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--theme") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "ddptop: --theme needs a name (default, light, high-contrast, "
                        "mono) or a path to a .theme file\n");
                return -1;
            }
            theme_opt = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--theme=", 8) == 0) {
            theme_opt = argv[i] + 8;
            continue;
        }
        argv[o++] = argv[i];
    }
    *argc = o;
    argv[o] = NULL;
    return 0;
}

/* Our command line as main got it (take_theme_option reorders argv): the session's
 * dashboard runs with it, and where "--run-id RUN" goes in it (after "run"). */
static struct session_start session_args;

void cmd_run_save_argv(int argc, char **argv)
{
    session_args.argc = argc;
    session_args.argv = xcalloc((size_t)argc + 1, sizeof *argv);
    memcpy(session_args.argv, argv, (size_t)argc * sizeof *argv);
    session_args.run_id_at = 1;
}

static int start_session(const struct run_opts *o, bool detach)
{
    struct session_start s = session_args;
    s.run_id = o->run_id;
    s.detach = detach;
    return session_start(&s);
}

/* What the session does for the front ends, which do not include it (tui/frontend_session.h):
 * note where a run's files are; inside a session, detach a terminal. */
static const struct frontend_session outside = {.note_run = session_note_run};
static const struct frontend_session inside = {.note_run = session_note_run, .detach = session_request_detach};

/* `ddptop run`: the dashboard on a terminal, in a session (its own, inside one: the
 * session's dashboard; DDPTOP_NO_SESSION=1: none); the line printer with --headless or no
 * TTY; --detach: a session with no terminal yet. */
static int run_frontend(const struct run_opts *o, const struct hostlist *hl)
{
    const char *no_session = getenv("DDPTOP_NO_SESSION");
    if (session_inside()) {
        /* the session's server gone (killed, crashed) hangs us up: the run is left to its
         * agents, and ddptop attach takes it over */
        struct run_opts in = *o;
        in.hup_detaches = true;
        return dashboard_run(&in, hl, theme_opt, &inside);
    }
    if (o->detach) return start_session(o, true);
    if (o->headless || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) return headless_run(o, hl, &outside);
    if (no_session && *no_session && strcmp(no_session, "0") != 0) return dashboard_run(o, hl, theme_opt, &outside);
    return start_session(o, false);
}

/* `ddptop run ARGS` (argv[0] "run"). */
static int run_main(int argc, char **argv)
{
    session_args.run_id_at = 2;
    if (take_theme_option(&argc, argv) != 0) return 2;
    return cmd_run_main(argc - 1, argv + 1, run_frontend);
}

int cmd_run_again(int argc, char **argv)
{
    session_args.argc = argc;
    session_args.argv = argv;
    return run_main(argc - 1, argv + 1);
}

static int run_chosen_frontend(const struct run_opts *o, const struct hostlist *hl)
{
    struct run_opts local = *o;
    if (!hl && local.nproc_per_node == 0) local.nproc_per_node = 2;
    return run_frontend(&local, hl);
}

int cmd_run_default(int argc, char **argv)
{
    session_args.run_id_at = 1;
    if (take_theme_option(&argc, argv) != 0) return 2;
    return cmd_run_main(argc - 1, argv + 1, run_chosen_frontend);
}

const struct cmd_entry cmd_run_entry = {
    .name = "run",
    .args = "[HOSTFILE] [options] [-- CMD ARGS...]\n--slurm|--pbs [options] [-- CMD ARGS...]",
    .summary = "launch on every node, stream logs",
    .main = run_main,
    .usage = cmd_run_usage,
    .bare = cmd_run_default,
};
