/* Unit tests for agent_nodedir_ours (launcher/agent/agent_nodedir.c): the one check of a
 * directory of ours on a node, with the --agent-dir probe's rule for a group-writable one
 * (ssh/agent_probe.c): accepted when the group is the user's private one, refused otherwise. The tests
 * run as root, whose primary group "root" is named as the user. */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_nodedir.h"
#include "tap.h"
#include "util/util.h"

static void test_dir_rules(void)
{
    char dir[] = "/tmp/ddptop-test-nodedir.XXXXXX", why[200] = "";
    CHECK(mkdtemp(dir) != NULL);
    struct passwd *pw = getpwuid(geteuid());
    struct group *gr = pw ? getgrgid(pw->pw_gid) : NULL;
    CHECK(gr && strcmp(gr->gr_name, pw->pw_name) == 0); /* a private group, as on the test machine */

    CHECK(chmod(dir, 0700) == 0);
    CHECK(agent_nodedir_ours(dir, 022, false, why, sizeof why));
    /* group-writable, the user's private group: fine for a dump directory (umask 002) */
    CHECK(chmod(dir, 0775) == 0);
    CHECK(agent_nodedir_ours(dir, 022, false, why, sizeof why));
    /* ... not with a shared group */
    CHECK(chown(dir, (uid_t)-1, 65534) == 0);
    CHECK(!agent_nodedir_ours(dir, 022, false, why, sizeof why));
    CHECK_STR(why, "is writable by group or others (mode 0775)");
    /* writable by others: refused whatever the group */
    CHECK(chown(dir, (uid_t)-1, pw->pw_gid) == 0 && chmod(dir, 0777) == 0);
    CHECK(!agent_nodedir_ours(dir, 022, false, why, sizeof why));
    /* our private directories tighten instead (077) */
    CHECK(agent_nodedir_ours(dir, 077, true, why, sizeof why));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
    /* another user's, and a link */
    CHECK(chown(dir, 65534, (gid_t)-1) == 0);
    CHECK(!agent_nodedir_ours(dir, 077, true, why, sizeof why));
    char want[100];
    snprintf(want, sizeof want, "belongs to uid 65534, not to us (uid %u)", (unsigned)geteuid());
    CHECK_STR(why, want);
    char *link = xasprintf("%s.link", dir);
    CHECK(symlink(dir, link) == 0);
    CHECK(!agent_nodedir_ours(link, 077, true, why, sizeof why));
    CHECK_STR(why, "is a symbolic link");
    unlink(link);
    free(link);
    rmdir(dir);
}

int main(void)
{
    RUN(test_dir_rules);
    return tap_done();
}
