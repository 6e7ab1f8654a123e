/* The agent's reading of a rank's OOM kills (agent_oom.h): which file counts them for the
 * cgroup /proc/PID/cgroup names (v1 memory controller first, else v2), paths that would leave
 * the cgroup tree refused, and the "oom_kill N" of memory.events / memory.oom_control. */
#include <string.h>

#include "agent/agent_oom.h"
#include "tap.h"

static const char *file_of(const char *text, int *v1)
{
    static char out[600];
    if (oom_counter_file(text, strlen(text), out, sizeof out, v1) != 0) return NULL;
    return out;
}

static void test_counter_file(void)
{
    int v1 = -1;
    CHECK_STR(file_of("0::/user.slice/session-2.scope\n", &v1),
              "/sys/fs/cgroup/user.slice/session-2.scope/memory.events");
    CHECK_INT(v1, 0);
    CHECK_STR(file_of("0::/\n", &v1), "/sys/fs/cgroup/memory.events");
    /* hybrid (this kind of machine: v1 controllers, an empty v2): the v1 memory line counts */
    CHECK_STR(file_of("9:name=systemd:/\n4:memory:/process_api/7154\n3:cpuset:/\n0::/\n", &v1),
              "/sys/fs/cgroup/memory/process_api/7154/memory.oom_control");
    CHECK_INT(v1, 1);
    CHECK_STR(file_of("5:cpu,memory:/slurm/uid_0/job_7/step_0\n", &v1),
              "/sys/fs/cgroup/memory/slurm/uid_0/job_7/step_0/memory.oom_control");
    CHECK(file_of("4:memory_x:/a\n", &v1) == NULL);
    CHECK(file_of("0::/../../etc\n", &v1) == NULL);
    CHECK(file_of("0::/a/./b\n", &v1) == NULL);
    CHECK(file_of("0::/a/..\n", &v1) == NULL);
    CHECK(file_of("0::relative\n", &v1) == NULL);
    CHECK(file_of("0::/gone (deleted)\n", &v1) == NULL);
    CHECK_STR(file_of("0::/a/.hidden/..b\n", &v1), "/sys/fs/cgroup/a/.hidden/..b/memory.events");
    CHECK(file_of("", &v1) == NULL);
    char small[16];
    CHECK_INT(oom_counter_file("0::/a\n", 6, small, sizeof small, &v1), -1);   /* too long */
}

static void test_parse_events(void)
{
    const char *v2 = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
    CHECK(oom_parse_events(v2, strlen(v2)) == 2);
    const char *v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 1";
    CHECK(oom_parse_events(v1, strlen(v1)) == 1);
    CHECK(oom_parse_events("oom 3\n", 6) == -1);
    CHECK(oom_parse_events("oom_kill \n", 10) == -1);
    CHECK(oom_parse_events("oom_kill -1\n", 12) == -1);
    CHECK(oom_parse_events("oom_kill 99999999999999999999\n", 30) == -1);
}

int main(void)
{
    RUN(test_counter_file);
    RUN(test_parse_events);
    return tap_done();
}
