/* Unit tests for the remote command that probes for and starts the agent: run here through
 * sh exactly as a node's sshd would run it, with a hostile --agent-dir, to show that nothing
 * from the user reaches the shell unquoted and that it execs the agent only when it fits. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ssh/ssh_conn.h"
#include "wire/protocol.h"
#include "tap.h"
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
    char *cmd = ssh_conn_probe_command(dir, "ddptop-agent-0.1.0-p1-x86_64", "no-such-arch");
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
    free(dir);
}

static void test_absent_creates_dir_and_reports_it(void)
{
    char *dir = xasprintf("%s/agent dir", tmp);
    char *arch = xstrdup(run("uname -m"));
    char *cmd = ssh_conn_probe_command(dir, "the-agent", arch);
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
    char *cmd = ssh_conn_probe_command(dir, "the-agent", arch);
    FILE *f;
    mkdir(dir, 0700);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("#!/bin/sh\necho '{\"ev\":\"hello\"}'\n", f);
        fclose(f);
    }
    chmod(path, 0700);
    /* without the bundled library beside it the agent could not start: upload again */
    CHECK(strncmp(run(cmd), "ddptop-probe ", 13) == 0);
    char *lib = xasprintf("%s/%s", dir, AGENT_BUNDLED_LIB);
    f = fopen(lib, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK_STR(run(cmd), "{\"ev\":\"hello\"}");
    unlink(lib);
    free(lib);
    free(cmd);
    /* another architecture: never run, reported instead */
    cmd = ssh_conn_probe_command(dir, "the-agent", "other-arch");
    CHECK(strncmp(run(cmd), "ddptop-probe ", 13) == 0);
    unlink(path);
    free(cmd);
    free(arch);
    free(path);
    free(dir);
}

static void test_home_dir_expands_remotely(void)
{
    char *cmd = ssh_conn_probe_command("~/.cache/ddptop", "n", "no-such-arch");
    /* "~/" becomes "$HOME"/ for the remote shell; the rest stays quoted */
    CHECK(strstr(cmd, "\"$HOME\"/") != NULL);
    setenv("HOME", tmp, 1);
    char *want = xasprintf("absent %s/.cache/ddptop", tmp);
    CHECK(strstr(run(cmd), want) != NULL);
    free(want);
    free(cmd);
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
    char *rm = xasprintf("rm -rf '%s'", tmp);
    if (system(rm) != 0) printf("# could not remove %s\n", tmp);
    free(rm);
    return tap_done();
}
