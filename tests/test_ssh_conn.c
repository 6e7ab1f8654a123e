/* Unit tests for the remote commands that probe for and start the agent, and that install it
 * over an exec channel when the node has no sftp subsystem: run here through sh exactly as a
 * node's sshd would run them, with a hostile --agent-dir, to show that nothing from the user
 * reaches the shell unquoted, that the agent is exec'd only when it fits, and that an upload is
 * installed only when its SHA-256 matches, never leaving a partial file behind. */
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ssh/agent_deploy.h"
#include "wire/protocol.h"
#include "tap.h"
#include "util/sha256.h"
#include "util/util.h"

static char tmp[] = "/tmp/ddptop-test-sshconn-XXXXXX";

/* Runs cmd with sh -c in tmp; returns its first output line (static). */
static const char *run(const char *cmd)
{
    static char line[4096];
    struct strbuf sb;
    FILE *p;
    strbuf_init(&sb);
    strbuf_addf(&sb, "cd %s && sh -c ", tmp);
    strbuf_add_shell_quoted(&sb, cmd);
    line[0] = '\0';
    p = popen(sb.buf, "r");
    if (p) {
        if (!fgets(line, sizeof line, p)) line[0] = '\0';
        pclose(p);
    }
    strbuf_done(&sb);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static void test_hostile_dir_is_quoted(void)
{
    char *dir = xasprintf("%s/a b'$(touch pwned)`touch pwned2`;x", tmp);
    char *arch = xstrdup(run("uname -m"));
    char *cmd = agent_probe_command(dir, "ddptop-agent-0.1.0-p1-x86_64", arch);
    char *want = xasprintf("ddptop-probe ");
    const char *out = run(cmd);
    CHECK(strncmp(out, want, strlen(want)) == 0);
    CHECK(strstr(out, " absent ") != NULL);
    char *p1 = xasprintf("%s/pwned", tmp), *p2 = xasprintf("%s/pwned2", tmp);
    CHECK(access(p1, F_OK) != 0);
    CHECK(access(p2, F_OK) != 0);
    free(p1);
    free(p2);
    free(want);
    free(cmd);
    free(arch);
    free(dir);
}

static void test_absent_creates_dir_and_reports_it(void)
{
    char *dir = xasprintf("%s/agent dir", tmp);
    char *arch = xstrdup(run("uname -m"));
    char *cmd = agent_probe_command(dir, "the-agent", arch);
    char *want = xasprintf("ddptop-probe %s absent %s", arch, dir);
    struct stat st;
    CHECK_STR(run(cmd), want);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    free(want);
    free(cmd);
    free(arch);
    free(dir);
}

static void test_present_agent_is_executed(void)
{
    char *dir = xasprintf("%s/agent dir", tmp), *path = xasprintf("%s/the-agent", dir);
    char *arch = xstrdup(run("uname -m"));
    char *cmd = agent_probe_command(dir, "the-agent", arch);
    FILE *f;
    mkdir(dir, 0700);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("#!/bin/sh\necho '{\"ev\":\"hello\"}'\n", f);
        fclose(f);
    }
    chmod(path, 0700);
    CHECK_STR(run(cmd), "{\"ev\":\"hello\"}");
    free(cmd);
    /* another architecture: never run, reported instead */
    cmd = agent_probe_command(dir, "the-agent", "other-arch");
    char *want = xasprintf("ddptop-probe %s noagent", arch);
    CHECK_STR(run(cmd), want);
    free(want);
    unlink(path);
    free(cmd);
    free(arch);
    free(path);
    free(dir);
}

static void test_home_dir_expands_remotely(void)
{
    char *arch = xstrdup(run("uname -m"));
    char *cmd = agent_probe_command("~/.cache/ddptop", "n", arch);
    /* "~/" becomes "$HOME"/ for the remote shell; the rest stays quoted */
    CHECK(strstr(cmd, "\"$HOME\"/") != NULL);
    setenv("HOME", tmp, 1);
    char *want = xasprintf("absent %s/.cache/ddptop", tmp);
    CHECK(strstr(run(cmd), want) != NULL);
    free(want);
    free(cmd);
    free(arch);
}

/* Runs cmd with /bin/sh -c in tmp, its stdin the n bytes of data, under env prefix pre (e.g.
 * "PATH=/x"); returns its last output line (static). */
static const char *run_input(const char *pre, const char *cmd, const char *data, size_t n)
{
    static char line[4096];
    char buf[4096];
    char *in = xasprintf("%s/.stdin", tmp);
    struct strbuf sb;
    FILE *f = fopen(in, "w"), *p;
    line[0] = '\0';
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    strbuf_init(&sb);
    strbuf_addf(&sb, "cd %s && %s /bin/sh -c ", tmp, pre);
    strbuf_add_shell_quoted(&sb, cmd);
    strbuf_addf(&sb, " <%s 2>&1", in);
    p = popen(sb.buf, "r");
    if (p) {
        while (fgets(buf, sizeof buf, p))
            if (buf[0] != '\n') snprintf(line, sizeof line, "%s", buf);
        pclose(p);
    }
    unlink(in);
    free(in);
    strbuf_done(&sb);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static void hex_of(const char *data, size_t n, char hex[65])
{
    struct sha256 h;
    unsigned char d[32];
    sha256_init(&h);
    sha256_update(&h, data, n);
    sha256_final(&h, d);
    sha256_hex(d, hex);
}

/* Entries of dir other than . and .., e.g. temporary files left behind. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void test_upload_installs_verified_file(void)
{
    static const char data[] = "\x7f" "ELF pretend agent\0with a NUL and 'quotes' $(touch pwned)\n";
    char *dir = xasprintf("%s/up a'$(touch pwned)`touch pwned2`;x/sub", tmp);
    char *path = xasprintf("%s/the-agent", dir), *p1 = xasprintf("%s/pwned", tmp);
    char hex[65], got[sizeof data];
    struct stat st;
    FILE *f;
    hex_of(data, sizeof data - 1, hex);
    char *cmd = agent_upload_command(dir, "the-agent", hex, 0700);
    CHECK_STR(run_input("", cmd, data, sizeof data - 1), "ddptop-upload ok");
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0700);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fread(got, 1, sizeof got, f) == sizeof data - 1 && memcmp(got, data, sizeof data - 1) == 0);
        fclose(f);
    }
    CHECK(count_entries(dir) == 1); /* no temporary file left */
    CHECK(access(p1, F_OK) != 0);
    /* again over the existing copy (another node sharing the directory): replaced in place */
    free(cmd);
    cmd = agent_upload_command(dir, "the-agent", hex, 0600);
    CHECK_STR(run_input("", cmd, data, sizeof data - 1), "ddptop-upload ok");
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
    CHECK(count_entries(dir) == 1);
    free(cmd);
    free(p1);
    free(path);
    free(dir);
}

static void test_upload_mismatch_leaves_nothing(void)
{
    static const char data[] = "the bytes that arrived";
    char *dir = xasprintf("%s/mismatch", tmp), *path = xasprintf("%s/the-agent", dir);
    char hex[65];
    char *want;
    hex_of(data, sizeof data - 1, hex);
    want = xasprintf("ddptop-upload mismatch %s", hex);
    /* we claim another hash than the bytes have: refused, the node's hash reported */
    char *cmd = agent_upload_command(dir, "the-agent", "0123456789abcdef0123456789abcdef"
                                        "0123456789abcdef0123456789abcdef", 0700);
    CHECK_STR(run_input("", cmd, data, sizeof data - 1), want);
    CHECK(access(path, F_OK) != 0);
    CHECK(count_entries(dir) == 0);
    free(cmd);
    free(want);
    free(path);
    free(dir);
}

static void test_upload_without_sha256sum(void)
{
    char *dir = xasprintf("%s/nosum", tmp), *bin = xasprintf("%s/onlysh", tmp);
    char *sh = xasprintf("%s/sh", bin), *pre = xasprintf("PATH=%s", bin);
    char *cmd = agent_upload_command(dir, "the-agent", "00", 0700);
    mkdir(bin, 0700);
    CHECK(symlink("/bin/sh", sh) == 0);
    /* only sh on PATH: the check comes first, before anything is written */
    CHECK_STR(run_input(pre, cmd, "x", 1), "ddptop-upload no-sha256sum");
    CHECK(access(dir, F_OK) != 0);
    unlink(sh);
    rmdir(bin);
    free(cmd);
    free(pre);
    free(sh);
    free(bin);
    free(dir);
}

static void test_upload_unwritable_dir_fails(void)
{
    char *file = xasprintf("%s/plainfile", tmp), *dir = xasprintf("%s/plainfile/agent", tmp);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    char *cmd = agent_upload_command(dir, "the-agent", "00", 0700);
    CHECK_STR(run_input("", cmd, "x", 1), "ddptop-upload failed");
    free(cmd);
    unlink(file);
    free(file);
    free(dir);
}

/* Writes a script at path (mode) that touches marker and prints a line. */
static void write_script(const char *path, const char *marker, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "#!/bin/sh\ntouch '%s'\necho planted-ran\n", marker);
        fclose(f);
    }
    chmod(path, mode);
}

/* Two agents: the one the node's uname -m names runs, and only it. */
static void test_probe_picks_agent_by_arch(void)
{
    char *arch = xstrdup(run("uname -m"));
    char *dir = xasprintf("%s/kit", tmp), *mine = xasprintf("%s/agent-mine", dir);
    char *other = xasprintf("%s/agent-other", dir), *marker = xasprintf("%s/other-ran", tmp);
    mkdir(dir, 0700);
    write_script(other, marker, 0700);
    FILE *f = fopen(mine, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("#!/bin/sh\necho mine \"$1\"\n", f);
        fclose(f);
    }
    chmod(mine, 0700);
    struct agent_probe_agent g[2] = {{.arch = "zz_other", .name = "agent-other"}, {.arch = arch, .name = "agent-mine"}};
    struct agent_probe p = {.dir = dir, .agents = g, .n_agents = 2, .arg = "--attach"};
    char *cmd = agent_probe_script(&p);
    CHECK_STR(run(cmd), "mine --attach");
    CHECK(access(marker, F_OK) != 0);
    free(cmd);
    /* no agent for this architecture among several */
    g[1].arch = "zz_third";
    cmd = agent_probe_script(&p);
    char *want = xasprintf("ddptop-probe %s noagent", arch);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    free(cmd);
    unlink(mine);
    unlink(other);
    rmdir(dir);
    free(marker);
    free(other);
    free(mine);
    free(dir);
    free(arch);
}

/* An agent that asks for a newer glibc than the node's is refused before it runs, naming both
 * versions; an older or equal need runs it; without an answer from getconf it is tried. */
static void test_probe_checks_glibc(void)
{
    char *arch = xstrdup(run("uname -m")), *have = xstrdup(run("getconf GNU_LIBC_VERSION"));
    const char *v = strncmp(have, "glibc ", 6) == 0 ? have + 6 : have;
    char *dir = xasprintf("%s/glibc", tmp), *agent = xasprintf("%s/the-agent", dir);
    char *marker = xasprintf("%s/glibc-ran", tmp), *want;
    mkdir(dir, 0700);
    write_script(agent, marker, 0700);
    struct agent_probe_agent g = {.arch = arch, .name = "the-agent", .glibc = "99.1"};
    struct agent_probe p = {.dir = dir, .agents = &g, .n_agents = 1};
    char *cmd = agent_probe_script(&p);
    want = xasprintf("ddptop-probe %s oldlibc %s 99.1", arch, v);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    free(cmd);
    /* the same major, a newer minor: refused too (2.36 < 2.100 as numbers, not as text) */
    char major[16];
    snprintf(major, sizeof major, "%.*s.100", (int)strcspn(v, "."), v);
    g.glibc = major;
    cmd = agent_probe_script(&p);
    want = xasprintf("ddptop-probe %s oldlibc %s %s", arch, v, major);
    CHECK_STR(run(cmd), want);
    free(want);
    free(cmd);
    /* equal and older needs run it */
    g.glibc = v;
    cmd = agent_probe_script(&p);
    CHECK_STR(run(cmd), "planted-ran");
    free(cmd);
    g.glibc = "2.17";
    cmd = agent_probe_script(&p);
    CHECK_STR(run(cmd), "planted-ran");
    free(cmd);
    unlink(marker);
    unlink(agent);
    rmdir(dir);
    free(marker);
    free(agent);
    free(dir);
    free(have);
    free(arch);
}

/* Another user's world-writable directory with a program under the agent's name: refused before
 * anything runs (the probe names the owner), the program never runs. So for a directory of
 * ours made writable by others, a parent others can write without the sticky bit, a link. */
static void test_probe_refuses_unsafe_dirs(void)
{
    char *arch = xstrdup(run("uname -m"));
    char *dir = xasprintf("%s/other", tmp), *agent = xasprintf("%s/the-agent", dir);
    char *marker = xasprintf("%s/ran", tmp);
    char *cmd = agent_probe_command(dir, "the-agent", arch), *want;
    mkdir(dir, 0777);
    chmod(dir, 0777);
    write_script(agent, marker, 0777);
    CHECK(chown(dir, 65534, 65534) == 0 && chown(agent, 65534, 65534) == 0);
    want = xasprintf("ddptop-probe %s unsafe dir owner 65534 %s", arch, dir);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    /* ours, but writable by others */
    CHECK(chown(dir, getuid(), getgid()) == 0);
    want = xasprintf("ddptop-probe %s unsafe dir mode drwxrwxrwx %s", arch, dir);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    /* group-writable: refused for a shared group, accepted for the user's private one (root's
     * group is root here: the same name as the user) */
    chmod(dir, 0770);
    CHECK(chown(dir, getuid(), 65534) == 0);
    want = xasprintf("ddptop-probe %s unsafe dir mode drwxrwx--- %s", arch, dir);
    CHECK_STR(run(cmd), want);
    free(want);
    CHECK(chown(dir, 0, 0) == 0);
    want = xasprintf("ddptop-probe %s absent %s", arch, dir);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    /* made 700: the planted agent is not ours, so it is not run (absent: uploaded over it) */
    chmod(dir, 0700);
    want = xasprintf("ddptop-probe %s absent %s", arch, dir);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(want);
    free(cmd);
    /* a parent others can write, without the sticky bit; with it, fine */
    char *open_dir = xasprintf("%s/open", tmp), *sub = xasprintf("%s/open/agents", tmp);
    mkdir(open_dir, 0777);
    chmod(open_dir, 0777);
    cmd = agent_probe_command(sub, "the-agent", arch);
    want = xasprintf("ddptop-probe %s unsafe parent mode drwxrwxrwx %s", arch, open_dir);
    CHECK_STR(run(cmd), want);
    free(want);
    chmod(open_dir, 01777);
    want = xasprintf("ddptop-probe %s absent %s", arch, sub);
    CHECK_STR(run(cmd), want);
    free(want);
    free(cmd);
    /* a link */
    char *link = xasprintf("%s/link", tmp);
    CHECK(symlink(dir, link) == 0);
    cmd = agent_probe_command(link, "the-agent", arch);
    want = xasprintf("ddptop-probe %s unsafe dir link - %s", arch, link);
    CHECK_STR(run(cmd), want);
    free(want);
    free(cmd);
    unlink(link);
    unlink(agent);
    rmdir(sub);
    rmdir(open_dir);
    rmdir(dir);
    free(link);
    free(sub);
    free(open_dir);
    free(marker);
    free(agent);
    free(dir);
    free(arch);
}

/* With a hash, the agent runs only when it hashes to it on the node. */
static void test_probe_checks_hashes(void)
{
    char *arch = xstrdup(run("uname -m"));
    char *dir = xasprintf("%s/hashed", tmp), *agent = xasprintf("%s/the-agent", dir);
    char *marker = xasprintf("%s/hashed-ran", tmp);
    static const char script[] = "#!/bin/sh\necho '{\"ev\":\"hello\"}'\n";
    char ha[65], *want;
    FILE *f;
    mkdir(dir, 0700);
    f = fopen(agent, "w");
    if (f) {
        fputs(script, f);
        fclose(f);
    }
    chmod(agent, 0700);
    hex_of(script, sizeof script - 1, ha);
    struct agent_probe_agent g = {.arch = arch, .name = "the-agent", .sha256 = ha};
    struct agent_probe p = {.dir = dir, .agents = &g, .n_agents = 1};
    char *cmd = agent_probe_script(&p);
    CHECK_STR(run(cmd), "{\"ev\":\"hello\"}");
    free(cmd);
    /* another program under the agent's name: not run */
    write_script(agent, marker, 0700);
    cmd = agent_probe_script(&p);
    want = xasprintf("ddptop-probe %s absent %s", arch, dir);
    CHECK_STR(run(cmd), want);
    CHECK(access(marker, F_OK) != 0);
    free(cmd);
    free(want);
    unlink(agent);
    rmdir(dir);
    free(marker);
    free(agent);
    free(dir);
    free(arch);
}

int main(void)
{
    if (!mkdtemp(tmp)) {
        printf("not ok 1 - mkdtemp\n1..1\n");
        return 1;
    }
    RUN(test_hostile_dir_is_quoted);
    RUN(test_absent_creates_dir_and_reports_it);
    RUN(test_present_agent_is_executed);
    RUN(test_home_dir_expands_remotely);
    RUN(test_upload_installs_verified_file);
    RUN(test_upload_mismatch_leaves_nothing);
    RUN(test_upload_without_sha256sum);
    RUN(test_upload_unwritable_dir_fails);
    RUN(test_probe_refuses_unsafe_dirs);
    RUN(test_probe_checks_hashes);
    RUN(test_probe_picks_agent_by_arch);
    RUN(test_probe_checks_glibc);
    char *rm = xasprintf("rm -rf '%s'", tmp);
    if (system(rm) != 0) printf("# could not remove %s\n", tmp);
    free(rm);
    return tap_done();
}
