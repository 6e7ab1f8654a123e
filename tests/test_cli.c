/* Unit tests for launcher/util/cli.c (the option forms every subcommand accepts, numbers in a
 * range) and launcher/ssh/ssh_cli.c (the SSH options `ddptop check` and `ddptop run` share):
 * what a user types is taken in each of its spellings, and a mistake is a message, not a
 * crash or a silent default. */
#include <stdio.h>
#include <string.h>

#include "ssh/ssh_cli.h"
#include "tap.h"
#include "util/cli.h"

static char err[256];

static void test_opt_value_forms(void)
{
    char *argv[] = { "--log-dir", "/tmp/a", "--log-dir=/tmp/b", "-i", "k1", "-ik2", "--log-dirx", "-i" };
    int argc = 8, i;
    const char *val = NULL;
    i = 0;
    CHECK_INT(cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val), 1);
    CHECK_STR(val, "/tmp/a");
    CHECK_INT(i, 1);
    i = 2;
    CHECK_INT(cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val), 1);
    CHECK_STR(val, "/tmp/b");
    CHECK_INT(i, 2);
    i = 3;
    CHECK_INT(cli_opt_value(argc, argv, &i, "--identity", "-i", &val), 1);
    CHECK_STR(val, "k1");
    CHECK_INT(i, 4);
    i = 5;
    CHECK_INT(cli_opt_value(argc, argv, &i, "--identity", "-i", &val), 1);
    CHECK_STR(val, "k2");
    i = 6;   /* a longer option is another option, not --log-dir's value */
    CHECK_INT(cli_opt_value(argc, argv, &i, "--log-dir", NULL, &val), 0);
    i = 7;   /* the last word, its value missing */
    CHECK_INT(cli_opt_value(argc, argv, &i, "--identity", "-i", &val), -1);
}

static void test_parse_int_range(void)
{
    int v = 0;
    CHECK_INT(cli_parse_int("--fanout", "64", 1, 4096, &v, err, sizeof err), 0);
    CHECK_INT(v, 64);
    CHECK_INT(cli_parse_int("--fanout", "0", 1, 4096, &v, err, sizeof err), -1);
    CHECK_STR(err, "--fanout wants a whole number from 1 to 4096, not '0'");
    CHECK_INT(cli_parse_int("--fanout", "12x", 1, 4096, &v, err, sizeof err), -1);
    CHECK_INT(cli_parse_int("--fanout", "", 1, 4096, &v, err, sizeof err), -1);
    CHECK_INT(cli_parse_int("--fanout", "99999999999999999999", 1, 4096, &v, err, sizeof err), -1);
    CHECK_INT(v, 64);   /* untouched by the failures */
}

static void test_ssh_options(void)
{
    char *argv[] = { "--accept-new-hosts", "--timeout", "30", "--login-timeout=90", "--known-hosts",
                     "/tmp/kh", "--agent-dir", "", "--timeout", "0", "-F", "/nonexistent/ddptop-cfg",
                     "--fanout", "--timeout" };
    int argc = 14, i;
    struct ssh_conn_opts o;
    memset(&o, 0, sizeof o);
    i = 0;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), 1);
    CHECK(o.accept_new_hosts);
    i = 1;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), 1);
    CHECK_INT(o.timeout_s, 30);
    CHECK_INT(i, 2);
    i = 3;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), 1);
    CHECK_INT(o.login_timeout_s, 90);
    i = 4;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), 1);
    CHECK_STR(o.known_hosts, "/tmp/kh");
    i = 6;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), -1);
    CHECK_STR(err, "--agent-dir wants a directory");
    i = 8;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), -1);
    CHECK_STR(err, "--timeout wants a whole number from 1 to 3600, not '0'");
    i = 10;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), -1);
    CHECK_STR(err, "-F /nonexistent/ddptop-cfg: No such file or directory");
    i = 12;   /* not an SSH option: left to the subcommand */
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), 0);
    CHECK_INT(i, 12);
    i = 13;
    CHECK_INT(ssh_cli_option("check", argc, argv, &i, &o, err, sizeof err), -1);
    CHECK_STR(err, "--timeout needs a value (see ddptop check --help)");
    i = 13;   /* the hint names the subcommand being parsed */
    CHECK_INT(ssh_cli_option("run", argc, argv, &i, &o, err, sizeof err), -1);
    CHECK_STR(err, "--timeout needs a value (see ddptop run --help)");
}

int main(void)
{
    RUN(test_opt_value_forms);
    RUN(test_parse_int_range);
    RUN(test_ssh_options);
    return tap_done();
}
