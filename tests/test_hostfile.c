/* Unit tests for launcher/hosts/ (hostfile.c, hostfile_build.c, hostfile_sched.c, hostlist.c):
 * the hostfile format of docs/hostfile.md (hostlists, IPv6, keys, DeepSpeed files), every
 * error message with its FILE:LINE prefix, and the --slurm / --pbs sources driven through
 * setenv() and temporary files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts/hostfile.h"
#include "hosts/hostlist.h"
#include "tap.h"

static char err[1024];
static char tmpdir[64];

static int parse(const char *text, struct hostlist *hl)
{
    err[0] = '\0';
    return hostfile_parse_text("hosts.txt", text, hl, err, sizeof err);
}

/* Parses text and expects exactly this error message. */
#define EXPECT_ERR(text, msg) do { struct hostlist hl_; int rc_ = parse(text, &hl_); \
    CHECK_INT(rc_, -1); CHECK_STR(err, msg); CHECK_INT(hl_.n, 0); \
    if (rc_ == 0) hostlist_free(&hl_); } while (0)

static const char UNKNOWN_HINT[] = "(known: slots, port, user, identity, or an upper-case "
    "environment variable such as NCCL_SOCKET_IFNAME)";

static char *write_tmp(const char *name, const char *data, size_t len)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fwrite(data, 1, len, f);
    fclose(f);
    return path;
}

static void test_basic_line(void)
{
    struct hostlist hl;
    CHECK_INT(parse("gpu01\nalice@gpu02:2222 slots=4\n", &hl), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n != 2) return;
    CHECK_STR(hl.hosts[0].name, "gpu01");
    CHECK(hl.hosts[0].user == NULL);
    CHECK_INT(hl.hosts[0].port, 0);
    CHECK_INT(hl.hosts[0].slots, 0);
    CHECK_INT(hl.hosts[0].line, 1);
    CHECK_STR(hl.hosts[0].source, "hosts.txt");
    CHECK_STR(hl.hosts[1].name, "gpu02");
    CHECK_STR(hl.hosts[1].user, "alice");
    CHECK_INT(hl.hosts[1].port, 2222);
    CHECK_INT(hl.hosts[1].slots, 4);
    CHECK_INT(hl.hosts[1].line, 2);
    CHECK(hl.hosts[1].identity == NULL);
    CHECK_INT(hl.hosts[1].n_env, 0);
    hostlist_free(&hl);
    CHECK(hl.hosts == NULL && hl.n == 0);
    hostlist_free(&hl);                          /* twice is harmless */
}

static void test_comments_blank_whitespace(void)
{
    struct hostlist hl;
    const char *text = "# cluster A\n\n   gpu1   slots=2   # the first node\n\t gpu2\t\n"
                       "gpu3 slots=1\r\n   # indented comment\n#gpu4\ngpu5#no space\n  \n";
    CHECK_INT(parse(text, &hl), 0);
    CHECK_INT(hl.n, 4);
    if (hl.n != 4) return;
    CHECK_STR(hl.hosts[0].name, "gpu1");
    CHECK_INT(hl.hosts[0].slots, 2);
    CHECK_INT(hl.hosts[0].line, 3);
    CHECK_STR(hl.hosts[1].name, "gpu2");
    CHECK_INT(hl.hosts[1].line, 4);
    CHECK_STR(hl.hosts[2].name, "gpu3");     /* CRLF line ending */
    CHECK_INT(hl.hosts[2].slots, 1);
    CHECK_STR(hl.hosts[3].name, "gpu5");
    CHECK_INT(hl.hosts[3].line, 8);
    hostlist_free(&hl);
    /* A file without a final newline, and one starting with a UTF-8 BOM. */
    CHECK_INT(parse("\xEF\xBB\xBFgpu1\ngpu2", &hl), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n == 2) CHECK_STR(hl.hosts[0].name, "gpu1");
    hostlist_free(&hl);
}

static void test_deepspeed_hostfile(void)
{
    struct hostlist hl;
    CHECK_INT(parse("worker-1 slots=4\nworker-2 slots=4\n", &hl), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n != 2) return;
    CHECK_STR(hl.hosts[0].name, "worker-1");
    CHECK_STR(hl.hosts[1].name, "worker-2");
    CHECK_INT(hl.hosts[0].slots, 4);
    CHECK_INT(hl.hosts[1].slots, 4);
    hostlist_free(&hl);
}

static void test_hostlist_lines(void)
{
    struct hostlist hl;
    CHECK_INT(parse("gpu[01-04,07] slots=8\nbob@rack[1-2]-n[09-10]:2200 NCCL_SOCKET_IFNAME=ib0\n",
                    &hl), 0);
    const char *want[] = { "gpu01", "gpu02", "gpu03", "gpu04", "gpu07",
                           "rack1-n09", "rack1-n10", "rack2-n09", "rack2-n10" };
    CHECK_INT(hl.n, 9);
    for (size_t i = 0; i < hl.n && i < 9; i++) {
        CHECK_STR(hl.hosts[i].name, want[i]);
        CHECK_INT(hl.hosts[i].line, i < 5 ? 1 : 2);
        CHECK_INT(hl.hosts[i].slots, i < 5 ? 8 : 0);
        if (i >= 5) {
            CHECK_STR(hl.hosts[i].user, "bob");           /* user@ applies to every host */
            CHECK_INT(hl.hosts[i].port, 2200);
            CHECK_STR(host_env_get(&hl.hosts[i], "NCCL_SOCKET_IFNAME"), "ib0");
        }
    }
    hostlist_free(&hl);
}

/* Expands expr into n names, the first ones being want[] (NULL-terminated). */
static void expect_names(const char *expr, int n, const char *const *want)
{
    char **names = NULL;
    int got = hostlist_expand(expr, &names, err, sizeof err);
    CHECK_INT(got, n);
    for (int i = 0; i < got && want[i]; i++) CHECK_STR(names[i], want[i]);
    for (int i = 0; i < got; i++) free(names[i]);
    free(names);
}

static void expect_expand_err(const char *expr, const char *msg)
{
    char **names = (char **)&names;
    CHECK_INT(hostlist_expand(expr, &names, err, sizeof err), -1);
    CHECK(names == NULL);
    CHECK_STR(err, msg);
}

static void test_hostlist_expand(void)
{
    expect_names("node1", 1, (const char *[]){ "node1", NULL });
    expect_names("gpu[8-11]", 4, (const char *[]){ "gpu8", "gpu9", "gpu10", "gpu11", NULL });
    expect_names("gpu[098-101]", 4, (const char *[]){ "gpu098", "gpu099", "gpu100", "gpu101", NULL });
    expect_names("gpu[07,01-02]", 3, (const char *[]){ "gpu07", "gpu01", "gpu02", NULL });
    expect_names("a[1-2]b[3-4]", 4, (const char *[]){ "a1b3", "a1b4", "a2b3", "a2b4", NULL });
    expect_names("[1-2]x", 2, (const char *[]){ "1x", "2x", NULL });
    expect_names("n[0-0]", 1, (const char *[]){ "n0", NULL });
    expect_names("n[00-10]", 11, (const char *[]){ "n00", "n01", NULL });
    expect_names("n[0-10]", 11, (const char *[]){ "n0", "n1", NULL });

    expect_expand_err("", "empty host name");
    expect_expand_err("gpu[04-01]", "bad range [04-01] in gpu[04-01] (ranges go low-high)");
    expect_expand_err("gpu[01-02,9-3]", "bad range [9-3] in gpu[01-02,9-3] (ranges go low-high)");
    expect_expand_err("gpu[01-100]", "bad range [01-100] in gpu[01-100] (zero-padded bounds "
                      "need the same width, e.g. [001-100])");
    expect_expand_err("gpu[1-010]", "bad range [1-010] in gpu[1-010] (zero-padded bounds "
                      "need the same width, e.g. [001-100])");
    expect_expand_err("gpu[a-c]", "bad range [a-c] in gpu[a-c] (ranges are decimal numbers, "
                      "e.g. [1-4] or [01-04,07])");
    expect_expand_err("gpu[1-]", "bad range [1-] in gpu[1-] (ranges are decimal numbers, "
                      "e.g. [1-4] or [01-04,07])");
    expect_expand_err("gpu[1,,2]", "bad range [] in gpu[1,,2] (ranges are decimal numbers, "
                      "e.g. [1-4] or [01-04,07])");
    expect_expand_err("gpu[1,]", "bad range [] in gpu[1,] (ranges are decimal numbers, "
                      "e.g. [1-4] or [01-04,07])");
    expect_expand_err("gpu[,1]", "bad range [] in gpu[,1] (ranges are decimal numbers, "
                      "e.g. [1-4] or [01-04,07])");
    expect_expand_err("gpu[]", "bad range [] in gpu[] (an empty bracket; e.g. [1-4])");
    expect_expand_err("gpu[1-1234567890]", "bad range [1-1234567890] in gpu[1-1234567890] "
                      "(numbers have at most 9 digits)");
    expect_expand_err("gpu[01-04", "unterminated bracket in gpu[01-04 (close it with ']'; "
                      "no spaces inside [...])");
    expect_expand_err("gpu[[1]]", "nested '[' in gpu[[1]] (one level of brackets only)");
    expect_expand_err("gpu1]", "unmatched ']' in gpu1] (hostlists look like gpu[01-04,07])");
    expect_expand_err("n[1-200000]", "n[1-200000] expands to more than 100000 hosts "
                      "(is a range mistyped?)");
    expect_expand_err("a[1-1000]b[1-1000]", "a[1-1000]b[1-1000] expands to more than 100000 "
                      "hosts (is a range mistyped?)");
}

static void test_ipv6(void)
{
    struct hostlist hl;
    CHECK_INT(parse("[::1]:2222\n::2\nalice@[fe80::1%eth0]:22 slots=2\n[2001:db8::1]\n"
                    "127.0.0.1:2201\nfe80::2%eth1 slots=3\n", &hl), 0);
    CHECK_INT(hl.n, 6);
    if (hl.n != 6) return;
    CHECK_STR(hl.hosts[5].name, "fe80::2%eth1");
    CHECK_INT(hl.hosts[5].slots, 3);
    CHECK_STR(hl.hosts[0].name, "::1");
    CHECK_INT(hl.hosts[0].port, 2222);
    CHECK_STR(hl.hosts[1].name, "::2");
    CHECK_INT(hl.hosts[1].port, 0);
    CHECK_STR(hl.hosts[2].name, "fe80::1%eth0");
    CHECK_STR(hl.hosts[2].user, "alice");
    CHECK_INT(hl.hosts[2].port, 22);
    CHECK_INT(hl.hosts[2].slots, 2);
    CHECK_STR(hl.hosts[3].name, "2001:db8::1");
    CHECK_INT(hl.hosts[3].port, 0);
    CHECK_STR(hl.hosts[4].name, "127.0.0.1");
    CHECK_INT(hl.hosts[4].port, 2201);
    hostlist_free(&hl);
    EXPECT_ERR("[::1", "hosts.txt:1: unterminated bracket in [::1 (write [addr]:port)");
    EXPECT_ERR("fe80::1%", "hosts.txt:1: bad IPv6 address 'fe80::1%' (e.g. ::1 or "
               "[fe80::1%eth0]:2222)");
    EXPECT_ERR("[::1]x", "hosts.txt:1: unexpected 'x' after the address in [::1]x "
               "(write [addr]:port)");
    EXPECT_ERR("::g1", "hosts.txt:1: bad IPv6 address '::g1' (e.g. ::1 or [fe80::1%eth0]:2222)");
    EXPECT_ERR("[1::2::3]:22", "hosts.txt:1: bad IPv6 address '1::2::3' (e.g. ::1 or "
               "[fe80::1%eth0]:2222)");
    EXPECT_ERR("gpu1\n[::1]:0", "hosts.txt:2: bad port '0' in [::1]:0 (a number 1-65535)");
    EXPECT_ERR("[::1]:22\n::1", "hosts.txt:2: duplicate host ::1 (first on line 1)");
}

static void test_keys(void)
{
    struct hostlist hl;
    CHECK_INT(parse("gpu1 port=2201 user=carol identity=~/.ssh/id_ed25519 "
                    "NCCL_SOCKET_IFNAME=eth1 NCCL_IB_HCA=mlx5_0:1 _X=a=b Q='$(reboot)';`x`|\"y E=\n"
                    "dave@gpu2:2202 port=2202 user=dave\n", &hl), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n != 2) return;
    struct host *h = &hl.hosts[0];
    CHECK_INT(h->port, 2201);
    CHECK_STR(h->user, "carol");
    CHECK_STR(h->identity, "~/.ssh/id_ed25519");
    CHECK_INT(h->n_env, 5);
    CHECK_STR(host_env_get(h, "NCCL_SOCKET_IFNAME"), "eth1");
    CHECK_STR(host_env_get(h, "NCCL_IB_HCA"), "mlx5_0:1");
    CHECK_STR(host_env_get(h, "_X"), "a=b");
    CHECK_STR(host_env_get(h, "Q"), "'$(reboot)';`x`|\"y");   /* verbatim, never interpreted */
    CHECK_STR(host_env_get(h, "E"), "");
    CHECK(host_env_get(h, "NCCL_DEBUG") == NULL);
    CHECK(host_env_get(&hl.hosts[1], "NCCL_SOCKET_IFNAME") == NULL);
    CHECK_STR(hl.hosts[0].env[0].key, "NCCL_SOCKET_IFNAME");   /* in the order written */
    CHECK_INT(hl.hosts[1].port, 2202);                  /* the same port twice is fine */
    CHECK_STR(hl.hosts[1].user, "dave");
    hostlist_free(&hl);
}

static void test_errors_from_the_issue(void)
{
    EXPECT_ERR("gpu01\ngpu02\ngpu02\n", "hosts.txt:3: duplicate host gpu02 (first on line 2)");
    EXPECT_ERR("gpu02\n# x\ngpu02", "hosts.txt:3: duplicate host gpu02 (first on line 1)");
    EXPECT_ERR("gpu[01-03]\n\ngpu02", "hosts.txt:3: duplicate host gpu02 (first on line 1)");
    EXPECT_ERR("a\nb\nc\nd\ngpu[04-01]\n", "hosts.txt:5: bad range [04-01] in gpu[04-01] "
               "(ranges go low-high)");
    EXPECT_ERR("gpu1\ngpu2 slots=0\n", "hosts.txt:2: slots=0: a host needs at least one slot");
    EXPECT_ERR("a\nb\nc\nd\ne\nf\ngpu7 slot=4\n",
               "hosts.txt:7: unknown key 'slot' (known: slots, port, user, identity, or an "
               "upper-case environment variable such as NCCL_SOCKET_IFNAME)");
}

static void test_duplicate_rules(void)
{
    struct hostlist hl;
    /* Same name and port: the user does not make another machine; case does not either. */
    EXPECT_ERR("alice@gpu1\nbob@gpu1\n", "hosts.txt:2: duplicate host gpu1 (first on line 1)");
    EXPECT_ERR("GPU1\ngpu1\n", "hosts.txt:2: duplicate host gpu1 (first on line 1)");
    EXPECT_ERR("gpu1\ngpu1:22\n", "hosts.txt:2: duplicate host gpu1 (first on line 1)");
    EXPECT_ERR("gpu1 port=22\ngpu1\n", "hosts.txt:2: duplicate host gpu1 (first on line 1)");
    EXPECT_ERR("gpu[1,1]\n", "hosts.txt:1: duplicate host gpu1 (first on line 1)");
    /* Several sshd on one address (the loopback test set-up) are distinct hosts. */
    CHECK_INT(parse("127.0.0.1:2201\n127.0.0.1:2202\n127.0.0.1\n", &hl), 0);
    CHECK_INT(hl.n, 3);
    hostlist_free(&hl);
}

static void test_error_messages(void)
{
    char big[512];
    EXPECT_ERR("gpu1:70000", "hosts.txt:1: bad port '70000' in gpu1:70000 (a number 1-65535)");
    EXPECT_ERR("gpu1:", "hosts.txt:1: bad port '' in gpu1: (a number 1-65535)");
    EXPECT_ERR("gpu1:22x", "hosts.txt:1: bad port '22x' in gpu1:22x (a number 1-65535)");
    EXPECT_ERR("gpu1 port=0", "hosts.txt:1: bad port '0' in port=0 (a number 1-65535)");
    EXPECT_ERR("gpu1:22 port=23", "hosts.txt:1: port=23 conflicts with port 22 (give the port once)");
    EXPECT_ERR("a@gpu1 user=b", "hosts.txt:1: user=b conflicts with user a (give the user once)");
    EXPECT_ERR("alice@", "hosts.txt:1: empty host in 'alice@'");
    EXPECT_ERR(":22", "hosts.txt:1: empty host in ':22'");
    EXPECT_ERR("@gpu1", "hosts.txt:1: empty user before '@' in @gpu1");
    EXPECT_ERR("a@b@gpu1", "hosts.txt:1: more than one '@' in a@b@gpu1");
    EXPECT_ERR("gpu[01-04", "hosts.txt:1: unterminated bracket in gpu[01-04 (close it with ']'; "
               "no spaces inside [...])");
    EXPECT_ERR("gpu[01, 02]", "hosts.txt:1: unterminated bracket in gpu[01, (close it with ']'; "
               "no spaces inside [...])");
    EXPECT_ERR("ok\nn[1-200000]", "hosts.txt:2: n[1-200000] expands to more than 100000 hosts "
               "(is a range mistyped?)");
    EXPECT_ERR("a[1-60000]\nb[1-60000]\n", "hosts.txt:2: too many hosts (at most 100000)");
    EXPECT_ERR("gpu1 slots=abc", "hosts.txt:1: slots=abc: not a number (slots=N with N >= 1)");
    EXPECT_ERR("gpu1 slots=-1", "hosts.txt:1: slots=-1: not a number (slots=N with N >= 1)");
    EXPECT_ERR("gpu1 slots=", "hosts.txt:1: slots=: not a number (slots=N with N >= 1)");
    EXPECT_ERR("gpu1 slots=99999999", "hosts.txt:1: slots=99999999: at most 65535 slots per host");
    EXPECT_ERR("gpu1 slots=2 slots=2", "hosts.txt:1: slots given twice");
    EXPECT_ERR("gpu1 identity=a identity=b", "hosts.txt:1: identity given twice");
    EXPECT_ERR("gpu1 identity=", "hosts.txt:1: identity= needs a file name");
    EXPECT_ERR("gpu1 FOO=1 FOO=2", "hosts.txt:1: FOO given twice");
    EXPECT_ERR("gpu1 4", "hosts.txt:1: '4' is not key=value (options look like slots=4)");
    EXPECT_ERR("gpu1 =4", "hosts.txt:1: empty key in '=4'");
    snprintf(big, sizeof big, "hosts.txt:1: unknown key 'nccl_socket_ifname' %s", UNKNOWN_HINT);
    EXPECT_ERR("gpu1 nccl_socket_ifname=eth0", big);
    snprintf(big, sizeof big, "hosts.txt:1: unknown key '1X' %s", UNKNOWN_HINT);
    EXPECT_ERR("gpu1 1X=eth0", big);
    EXPECT_ERR("slots=4 gpu1", "hosts.txt:1: 'slots=4' where a host should come first "
               "(e.g. gpu01 slots=4)");
    EXPECT_ERR("-oProxyCommand", "hosts.txt:1: bad host name '-oProxyCommand' (may not start "
               "with '-')");
    EXPECT_ERR("gpu$(id)", "hosts.txt:1: bad host name 'gpu$(id)' (letters, digits, '.', '-' "
               "and '_' only)");
    EXPECT_ERR("gpu[1-2];x", "hosts.txt:1: bad host name 'gpu1;x' (letters, digits, '.', '-' "
               "and '_' only)");
    EXPECT_ERR("-l@gpu1", "hosts.txt:1: bad user '-l' (may not start with '-')");
    EXPECT_ERR("gpu1 user=a;b", "hosts.txt:1: bad user 'a;b' (letters, digits, '.', '-' and '_' "
               "only)");
    EXPECT_ERR("gpu1 FOO=a\x01" "b", "hosts.txt:1: control character 0x01 (only printable text "
               "is allowed)");
    EXPECT_ERR("gpu1 FOO=a\x1b[2J", "hosts.txt:1: control character 0x1b (only printable text "
               "is allowed)");
    EXPECT_ERR("gpu1\ngpu2 FOO=\x7f", "hosts.txt:2: control character 0x7f (only printable text "
               "is allowed)");
    EXPECT_ERR("", "hosts.txt: no hosts (write one per line, e.g. gpu01 slots=8)");
    EXPECT_ERR("# only comments\n\n   \n", "hosts.txt: no hosts (write one per line, e.g. "
               "gpu01 slots=8)");
}

static void test_long_names(void)
{
    char line[400];
    memset(line, 'a', 300);
    line[300] = '\0';
    struct hostlist hl;
    CHECK_INT(parse(line, &hl), -1);
    CHECK(strstr(err, "hosts.txt:1: host name 'aaaa") == err);
    CHECK(strstr(err, "is longer than 253 characters") != NULL);
    /* The cap itself is fine, and so is a long list. */
    memset(line, 'a', 253);
    line[253] = '\0';
    CHECK_INT(parse(line, &hl), 0);
    hostlist_free(&hl);
    CHECK_INT(parse("n[1-100000]", &hl), 0);
    CHECK_INT(hl.n, 100000);
    if (hl.n == 100000) CHECK_STR(hl.hosts[99999].name, "n100000");
    hostlist_free(&hl);
}

static void test_file_reading(void)
{
    struct hostlist hl;
    const char text[] = "gpu1 slots=2\n\ngpu2\n";
    char *path = write_tmp("hosts.txt", text, sizeof text - 1);
    CHECK(path != NULL);
    if (!path) return;
    CHECK_INT(hostfile_parse(path, &hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 2);
    if (hl.n == 2) {
        CHECK_STR(hl.hosts[1].source, path);
        CHECK_INT(hl.hosts[1].line, 3);
    }
    hostlist_free(&hl);

    char want[256];
    path = write_tmp("bad.txt", "gpu1\ngpu1\n", 10);
    CHECK_INT(hostfile_parse(path, &hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: duplicate host gpu1 (first on line 1)", path);
    CHECK_STR(err, want);

    path = write_tmp("nul.txt", "gpu1\ngpu2\0x\n", 11);
    CHECK_INT(hostfile_parse(path, &hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: contains a NUL byte (is this a text file?)", path);
    CHECK_STR(err, want);

    /* A file that cannot be a hostfile is refused before it fills memory. */
    FILE *f = fopen(path = write_tmp("big.txt", "", 0), "w");
    CHECK(f != NULL);
    if (f) {
        static char chunk[1 << 16];
        memset(chunk, '#', sizeof chunk);
        chunk[sizeof chunk - 1] = '\n';
        for (int i = 0; i < 17 * 16; i++) fwrite(chunk, 1, sizeof chunk, f);
        fclose(f);
        CHECK_INT(hostfile_parse(path, &hl, err, sizeof err), -1);
        snprintf(want, sizeof want, "%s: larger than 16 MiB (is this a hostfile?)", path);
        CHECK_STR(err, want);
        unlink(path);
    }

    /* The name exactly as the user typed it, relative to the working directory. */
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK_INT(chdir(tmpdir), 0);
    unlink("hosts.txt");
    CHECK_INT(hostfile_parse("hosts.txt", &hl, err, sizeof err), -1);
    CHECK_STR(err, "hosts.txt: cannot read: No such file or directory");
    CHECK_INT(hostfile_parse(".", &hl, err, sizeof err), -1);
    CHECK_STR(err, ".: cannot read: Is a directory");
    CHECK_INT(chdir(cwd), 0);
}

static void test_slurm(void)
{
    struct hostlist hl;
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_GPUS_ON_NODE");
    unsetenv("SLURM_NTASKS_PER_NODE");
    unsetenv("SLURM_TASKS_PER_NODE");
    unsetenv("SLURM_GPUS_PER_NODE");
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_JOB_NODELIST is not set (run inside an allocation: "
              "salloc/sbatch, or give --jobid ID)");

    setenv("SLURM_JOB_NODELIST", "gpu[01-02,05],cpu1", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    const char *want[] = { "gpu01", "gpu02", "gpu05", "cpu1" };
    CHECK_INT(hl.n, 4);
    for (size_t i = 0; i < hl.n && i < 4; i++) {
        CHECK_STR(hl.hosts[i].name, want[i]);
        CHECK_INT(hl.hosts[i].slots, 0);           /* nothing says how many */
        CHECK_STR(hl.hosts[i].source, "SLURM_JOB_NODELIST");
        CHECK_INT(hl.hosts[i].line, 0);
        CHECK_INT(hl.hosts[i].port, 0);
    }
    hostlist_free(&hl);

    setenv("SLURM_GPUS_ON_NODE", "4", 1);
    setenv("SLURM_NTASKS_PER_NODE", "2", 1);     /* GPUs win */
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    for (size_t i = 0; i < hl.n; i++) CHECK_INT(hl.hosts[i].slots, 4);
    hostlist_free(&hl);

    unsetenv("SLURM_GPUS_ON_NODE");
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    for (size_t i = 0; i < hl.n; i++) CHECK_INT(hl.hosts[i].slots, 2);
    hostlist_free(&hl);

    /* salloc --gpus-per-node=a100:3: the shell has SLURM_GPUS_PER_NODE, not SLURM_GPUS_ON_NODE */
    setenv("SLURM_GPUS_PER_NODE", "a100:3", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    for (size_t i = 0; i < hl.n; i++) CHECK_INT(hl.hosts[i].slots, 3);
    hostlist_free(&hl);
    unsetenv("SLURM_GPUS_PER_NODE");

    /* salloc -n without --ntasks-per-node: only SLURM_TASKS_PER_NODE says it */
    unsetenv("SLURM_NTASKS_PER_NODE");
    setenv("SLURM_TASKS_PER_NODE", "3(x2),1(x2)", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 4);
    for (size_t i = 0; i < hl.n && i < 4; i++) CHECK_INT(hl.hosts[i].slots, i < 2 ? 3 : 1);
    hostlist_free(&hl);
    unsetenv("SLURM_TASKS_PER_NODE");

    setenv("SLURM_NTASKS_PER_NODE", "2(x3),1", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 4);
    int slots[] = { 2, 2, 2, 1 };
    for (size_t i = 0; i < hl.n && i < 4; i++) CHECK_INT(hl.hosts[i].slots, slots[i]);
    hostlist_free(&hl);

    setenv("SLURM_NTASKS_PER_NODE", "2(x2)", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_NTASKS_PER_NODE=2(x2) gives counts for 2 nodes but "
              "SLURM_JOB_NODELIST has 4");
    setenv("SLURM_NTASKS_PER_NODE", "4(x9)", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_NTASKS_PER_NODE=4(x9) gives counts for 9 nodes but "
              "SLURM_JOB_NODELIST has 4");
    setenv("SLURM_NTASKS_PER_NODE", "two", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_NTASKS_PER_NODE=two is not a count such as 4 or 2(x3),1");
    setenv("SLURM_NTASKS_PER_NODE", "2(x3", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_NTASKS_PER_NODE=2(x3 is not a count such as 4 or 2(x3),1");
    setenv("SLURM_GPUS_ON_NODE", "-1", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_GPUS_ON_NODE=-1 is not a count such as 4 or 2(x3),1");
    unsetenv("SLURM_GPUS_ON_NODE");
    unsetenv("SLURM_NTASKS_PER_NODE");

    setenv("SLURM_JOB_NODELIST", "rack[1-2]-n[1-2]", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 4);
    if (hl.n == 4) CHECK_STR(hl.hosts[1].name, "rack1-n2");
    hostlist_free(&hl);

    setenv("SLURM_JOB_NODELIST", "gpu[04-01]", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_JOB_NODELIST=gpu[04-01]: bad range [04-01] in gpu[04-01] "
              "(ranges go low-high)");
    setenv("SLURM_JOB_NODELIST", "gpu[1-2],gpu2", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_JOB_NODELIST=gpu[1-2],gpu2: duplicate host gpu2");
    setenv("SLURM_JOB_NODELIST", "", 1);
    CHECK_INT(hostfile_from_slurm(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--slurm: SLURM_JOB_NODELIST is empty (run inside an allocation: "
              "salloc/sbatch)");
    unsetenv("SLURM_JOB_NODELIST");
}

static void test_pbs(void)
{
    struct hostlist hl;
    char want[256];
    unsetenv("PBS_NODEFILE");
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), -1);
    CHECK_STR(err, "--pbs: PBS_NODEFILE is not set (run inside a PBS job: qsub -I or a job "
              "script)");

    const char text[] = "n1.cluster\nn1.cluster\nn2.cluster\n\nn1.cluster\nn3.cluster\n";
    char *path = write_tmp("nodefile", text, sizeof text - 1);
    setenv("PBS_NODEFILE", path, 1);
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), 0);
    CHECK_INT(hl.n, 3);
    const char *names[] = { "n1.cluster", "n2.cluster", "n3.cluster" };
    int slots[] = { 3, 1, 1 }, lines[] = { 1, 3, 6 };
    for (size_t i = 0; i < hl.n && i < 3; i++) {
        CHECK_STR(hl.hosts[i].name, names[i]);
        CHECK_INT(hl.hosts[i].slots, slots[i]);
        CHECK_INT(hl.hosts[i].line, lines[i]);
        CHECK_STR(hl.hosts[i].source, path);
    }
    hostlist_free(&hl);

    path = write_tmp("nodefile", "n1\nn$x\n", 7);
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: bad host name 'n$x' (letters, digits, '.', '-' and '_' "
             "only)", path);
    CHECK_STR(err, want);

    path = write_tmp("nodefile", "n1 extra\n", 9);
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:1: one host name per line expected, got 'n1 extra'", path);
    CHECK_STR(err, want);

    path = write_tmp("nodefile", "\n", 1);
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: no hosts (PBS_NODEFILE is empty)", path);
    CHECK_STR(err, want);

    unlink(path);
    CHECK_INT(hostfile_from_pbs(&hl, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory (PBS_NODEFILE)",
             path);
    CHECK_STR(err, want);
    unsetenv("PBS_NODEFILE");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-hostfile.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_basic_line);
    RUN(test_comments_blank_whitespace);
    RUN(test_deepspeed_hostfile);
    RUN(test_hostlist_lines);
    RUN(test_hostlist_expand);
    RUN(test_ipv6);
    RUN(test_keys);
    RUN(test_errors_from_the_issue);
    RUN(test_duplicate_rules);
    RUN(test_error_messages);
    RUN(test_long_names);
    RUN(test_file_reading);
    RUN(test_slurm);
    RUN(test_pbs);
    const char *files[] = { "hosts.txt", "bad.txt", "nul.txt", "nodefile" };
    for (size_t i = 0; i < 4; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return tap_done();
}
