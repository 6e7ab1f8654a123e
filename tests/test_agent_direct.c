/* Tests of the agent's side of the direct connection (agent/agent_direct.c, agent_relay.c)
 * without a Slurm cluster: the real ddptop-agent started as srun starts it (`--relay`, task 0,
 * with the step's variables, DDPTOP_SRUN_PORT and DDPTOP_SRUN_KEY among them), against a step's
 * real listener on loopback (ssh/srun_step_direct.c) standing in for ddptop. The agent runs as
 * user nobody (65534) when this runs as root, so that its rank is another process of the same
 * user, as on a node. Issue 28's attacks:
 *   - finding 3: the key stays in /proc/AGENT/environ after unsetenv (the block the kernel wrote
 *     at exec is not touched by it), also in the keeper's, and a rank read it there. Now: the key
 *     is in no environ of the agent, the keeper or the rank (read by this test), and the rank's
 *     own try at the agent's /proc/PID/environ is refused (the agent is not dumpable while it
 *     holds the lines' keys);
 *   - finding 5: a spawn request written into the TCP stream by someone without the key (here:
 *     written on ddptop's socket, unsealed) was run. Now: it is not run, the agent closes the
 *     connection and says why on its stderr. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ssh/srun_step_int.h"
#include "tap.h"
#include "util/util.h"
#include "wire/direct.h"

#define NOBODY 65534

static char dir[] = "/tmp/ddptop-test-agent-direct-XXXXXX";
static char agent_path[PATH_MAX];
static struct srun_step *step;
static pid_t agent_pid = -1;
static int agent_in = -1, agent_out = -1;
static char key_hex[65];
static unsigned char key_bin[32], lines_key[32]; /* the step's key; the agent's lines' key */

/* Whether the writable memory of pid holds the n bytes at what (root only: /proc/PID/mem of
 * another user's process): 1 yes, 0 no, -1 unreadable. */
static int mem_holds(long pid, const unsigned char *what, size_t n)
{
    char path[64], line[512];
    FILE *maps;
    int mem, found = 0;
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    maps = fopen(path, "r");
    snprintf(path, sizeof path, "/proc/%ld/mem", pid);
    mem = open(path, O_RDONLY | O_CLOEXEC);
    if (!maps || mem < 0) {
        if (maps) fclose(maps);
        if (mem >= 0) close(mem);
        return -1;
    }
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[1] != 'w' || hi - lo > (256UL << 20)) continue;
        char *buf = malloc(hi - lo);
        ssize_t got = buf ? pread(mem, buf, hi - lo, (off_t)lo) : -1;
        for (ssize_t i = 0; got > 0 && i + (ssize_t)n <= got && !found; i++)
            found = memcmp(buf + i, what, n) == 0;
        free(buf);
    }
    fclose(maps);
    close(mem);
    return found;
}

/* The rank: writes who its keeper and agent are, then for each of agent, keeper and itself
 * whether it could read that process's environ (a copy of it when it could), then waits. */
static const char rank_script[] = /* no '"' or '\\': it goes into a JSON string as it is */
    "k=$PPID; a=$(cut -d' ' -f4 /proc/$k/stat); echo $a $k $$ >pids.tmp; "
    "for p in $a $k $$; do if cat /proc/$p/environ >env.$p 2>/dev/null; then echo $p read; "
    "else echo $p denied; fi; done >report; mv pids.tmp pids; exec sleep 60";

static void pump(int ms)
{
    char buf[4096];
    for (int64_t end = mono_ms() + ms; mono_ms() < end;) {
        struct pollfd p[2];
        int n = srun_step_direct_pollfds(step, &step->m[0], p, 1);
        p[n++] = (struct pollfd){.fd = agent_out, .events = POLLIN};
        poll(p, (nfds_t)n, 5);
        srun_step_direct_accept(step);
        srun_step_member_pump(step, 0, POLLIN | POLLOUT);
        if (read(agent_out, buf, sizeof buf) < 0 && errno != EAGAIN) break; /* srun's stdout */
    }
}

static bool file_exists(const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Whether a file of the test directory, or /proc/PID/environ, holds the key's hex digits: 1 yes,
 * 0 no, -1 unreadable. */
static int holds_key(const char *path)
{
    struct strbuf sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
    if (fd < 0) return -1;
    strbuf_init(&sb);
    rc = util_read_fd(fd, &sb, 1 << 20);
    close(fd);
    rc = rc < 0 ? -1 : (sb.len && util_memmem_rare(sb.buf, sb.len, key_hex, 64) != NULL);
    strbuf_done(&sb);
    return rc;
}

static void agent_start(void)
{
    int in[2], out[2];
    char port[16], errpath[PATH_MAX];
    static const char *const names[] = {"n1"};
    struct srun_step_opts o = {.agent_path = agent_path};
    step = srun_step_new(&o, names, 1);
    srun_step_direct_open(step);
    step->started = true; /* as if srun ran it: the agent is ours */
    snprintf(key_hex, sizeof key_hex, "%s", step->dkey_hex);
    memcpy(key_bin, step->dkey, sizeof key_bin);
    snprintf(port, sizeof port, "%d", step->dport);
    snprintf(errpath, sizeof errpath, "%s/agent.err", dir);
    if (pipe(in) != 0 || pipe(out) != 0) return;
    agent_pid = fork();
    if (agent_pid == 0) {
        int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (getuid() == 0 && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) _exit(126);
        if (chdir(dir) != 0) _exit(126);
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err, 2);
        util_close_range(3, ~0U);
        /* as srun passes them, with srun_step.c's own child's environment */
        srun_step_direct_env(step);
        setenv("SLURM_PROCID", "0", 1);
        setenv("SLURMD_NODENAME", "n1", 1);
        setenv("SLURM_SRUN_COMM_HOST", "127.0.0.1", 1);
        setenv("SLURM_NNODES", "1", 1);
        setenv("TMPDIR", dir, 1);
        execl(agent_path, "ddptop-agent", "--relay", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    agent_in = in[1];
    agent_out = out[0];
    fd_set_nonblock(agent_out);
}

static void agent_stop(void)
{
    if (agent_pid > 0) {
        kill(agent_pid, SIGKILL); /* its keeper then ends the rank (PDEATHSIG) */
        waitpid(agent_pid, NULL, 0);
    }
    agent_pid = -1;
    if (step) srun_step_release(step, 0);
    step = NULL;
    if (agent_in >= 0) close(agent_in);
    if (agent_out >= 0) close(agent_out);
}

static void test_key_nowhere(void)
{
    char *l, req[1024], path[PATH_MAX];
    long a = 0, k = 0, r = 0;
    FILE *f;
    for (int i = 0; i < 400 && !(step->m[0].announced); i++) pump(25);
    CHECK(step->m[0].announced && step->m[0].direct);
    if (!step->m[0].direct) return;
    memcpy(lines_key, step->m[0].drx.key, sizeof lines_key); /* the agent's tx: the same */
    for (int i = 0; i < 200 && !(l = srun_step_next_line(step, 0)); i++) pump(25);
    CHECK(l && strstr(l, "\"ev\":\"hello\""));
    free(l);
    snprintf(req, sizeof req,
             "{\"op\":\"spawn\",\"id\":1,\"attempt\":0,\"argv\":[\"/bin/sh\",\"-c\",\"%s\"],\"workdir\":\"%s\","
             "\"grace_ms\":60000,\"ranks\":[{\"rank\":0,\"local_rank\":0,\"env\":{}}]}",
             rank_script, dir);
    srun_step_send(step, 0, req);
    for (int i = 0; i < 400 && !file_exists("pids"); i++) pump(25);
    snprintf(path, sizeof path, "%s/pids", dir);
    f = fopen(path, "r");
    CHECK(f && fscanf(f, "%ld %ld %ld", &a, &k, &r) == 3);
    if (f) fclose(f);
    CHECK_INT(a, agent_pid);
    if (a != agent_pid) return;
    /* the key in no environ: the agent's, its keeper's (a fork of it), the rank's */
    snprintf(path, sizeof path, "/proc/%ld/environ", a);
    CHECK_INT(holds_key(path), getuid() == 0 ? 0 : -1);
    snprintf(path, sizeof path, "/proc/%ld/environ", k);
    CHECK_INT(holds_key(path), getuid() == 0 ? 0 : -1);
    snprintf(path, sizeof path, "/proc/%ld/environ", r);
    CHECK_INT(holds_key(path), 0);
    snprintf(path, sizeof path, "/proc/%ld/environ", r);
    {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct strbuf sb;
        strbuf_init(&sb);
        if (fd >= 0) util_read_fd(fd, &sb, 1 << 20);
        if (fd >= 0) close(fd);
        CHECK(sb.len > 0 && !util_memmem_rare(sb.buf, sb.len, DIRECT_ENV_KEY "=", strlen(DIRECT_ENV_KEY) + 1));
        strbuf_done(&sb);
    }
    /* what the rank itself saw: the agent's and the keeper's environ refused to it (not
     * dumpable), nothing of the key in what it could read */
    snprintf(path, sizeof path, "%s/report", dir);
    {
        char want[128], got[256] = "";
        f = fopen(path, "r");
        size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
        got[n] = '\0';
        if (f) fclose(f);
        snprintf(want, sizeof want, "%ld denied\n%ld denied\n%ld read\n", a, k, r);
        CHECK_STR(got, want);
    }
    snprintf(path, sizeof path, "%s/env.%ld", dir, a);
    CHECK(holds_key(path) != 1);
    snprintf(path, sizeof path, "%s/env.%ld", dir, k);
    CHECK(holds_key(path) != 1);
    /* no copy of the key in the memory of the agent or its keeper; the lines' key in the agent
     * (which must hold it: so the search can find it) and not in the keeper, which wiped its
     * copy when it was forked (only root reads their memory: the agent is not dumpable) */
    if (getuid() == 0) {
        CHECK_INT(mem_holds(a, key_bin, sizeof key_bin), 0);
        CHECK_INT(mem_holds(k, key_bin, sizeof key_bin), 0);
        CHECK_INT(mem_holds(a, lines_key, sizeof lines_key), 1);
        CHECK_INT(mem_holds(k, lines_key, sizeof lines_key), 0);
    } else {
        CHECK_INT(mem_holds(a, key_bin, sizeof key_bin), -1);
    }
}

static void test_injected_spawn(void)
{
    char req[512], path[PATH_MAX];
    int fd = step->m[0].dfd;
    CHECK(fd >= 0);
    if (fd < 0) return;
    /* written into the stream as it is, without a MAC: what an injector can do */
    snprintf(req, sizeof req,
             "{\"op\":\"spawn\",\"id\":2,\"attempt\":0,\"argv\":[\"/bin/sh\",\"-c\",\"touch injected\"],"
             "\"workdir\":\"%s\",\"ranks\":[{\"rank\":1,\"local_rank\":1,\"env\":{}}]}\n", dir);
    CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    for (int i = 0; i < 40 && !file_exists("injected"); i++) pump(25);
    CHECK(!file_exists("injected"));
    /* the agent believes nothing more of that connection: it ends it, and says why */
    for (int i = 0; i < 200 && step->m[0].dfd >= 0; i++) pump(25);
    CHECK_INT(step->m[0].dfd, -1);
    snprintf(path, sizeof path, "%s/agent.err", dir);
    {
        char got[4096] = "";
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
        got[n] = '\0';
        if (f) fclose(f);
        CHECK(strstr(got, "ddptop-agent: line 2 from ddptop on the direct connection failed its check") != NULL);
        if (!strstr(got, "failed its check")) printf("# the agent's stderr:\n%s", got);
    }
}

int main(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || !mkdtemp(dir)) {
        printf("not ok 1 - set-up\n");
        return 1;
    }
    self[n] = '\0';
    /* build/tests/test_agent_direct: the agent is build/ddptop-agent */
    snprintf(agent_path, sizeof agent_path, "%s/../ddptop-agent", dirname(self));
    if (getuid() == 0 && chown(dir, NOBODY, NOBODY) != 0) printf("# chown %s: %s\n", dir, strerror(errno));
    chmod(dir, 0755);
    signal(SIGPIPE, SIG_IGN);
    agent_start();
    RUN(test_key_nowhere);
    RUN(test_injected_spawn);
    agent_stop();
    {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("# could not remove %s\n", dir);
    }
    return tap_done();
}
