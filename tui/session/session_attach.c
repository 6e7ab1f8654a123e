/* `ddptop attach [RUN | SOCKET]` (session.h): finds the run's socket in the per-user
 * directory (or takes a path), tells a missing, stale or foreign one apart with a message
 * saying what to do, and attaches this terminal as one more client. */
#include "session.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/plan.h"
#include "session_client.h"
#include "session_proto.h"
#include "util/util.h"

void session_attach_usage(FILE *f)
{
    fputs("usage: ddptop attach [RUN | SOCKET] [--log-dir DIR] [--headless] [--force]\n"
          "Attaches this terminal to the dashboard of run RUN, started by ddptop run on a terminal\n"
          "or with ddptop run --detach. RUN may be left out when exactly one run of yours has a\n"
          "session; SOCKET is the path of a session's socket.\n"
          "\n"
          "When RUN has no session: a run that ended is shown (ddptop view); a run whose controller\n"
          "is gone (killed, crashed, its machine rebooted) while its agents wait for one\n"
          "(--agent-grace) is taken over: ddptop starts again with the run's command line, directory\n"
          "and environment, reconnects to every node's agent, catches up the logs and carries on\n"
          "(docs/run.md \"Taking a run over\").\n"
          "  --log-dir DIR   where the run is, when it was not started from this machine's account\n"
          "  --headless      take it over printing lines (also without a terminal); the exit status is\n"
          "                  the job's\n"
          "  --force         take it over although its controller ran on another host that cannot be\n"
          "                  checked from here (that host is down)\n"
          "\n"
          "In the dashboard d detaches (the job goes on), q asks whether to stop the job or detach,\n"
          "Ctrl-\\ detaches even when the dashboard does not answer. Several terminals may be\n"
          "attached at once: they see the same screen and any of them may type.\n"
          "Sockets: $XDG_RUNTIME_DIR/ddptop/RUN.sock, else /tmp/ddptop-UID/RUN.sock (yours only;\n"
          "when another user holds that name, $HOME/.cache/ddptop/run-HOST/RUN.sock).\n"
          "\n"
          "Exit status: the job's when it ends while attached, 0 after a detach, 1 no such session,\n"
          "2 usage error.\n",
          f);
}

/* The runs with a live session in dir, into names (at most max); stale sockets (nothing
 * listens: the server was killed) are removed on the way, with a note. Returns the count. */
static size_t sessions_list(const char *dir, char names[][72], size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0 || len - 5 >= 72) continue;
        char path[512], run[72];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        session_run_of_path(path, run, sizeof run);
        int fd = session_connect(path);
        if (fd >= 0) {
            close(fd);
            if (n < max) snprintf(names[n], 72, "%s", run);
            n++;
        } else if (errno == ECONNREFUSED && session_remove_stale(path)) {
            fprintf(stderr, "ddptop attach: removed the stale socket of run %s (its session is gone)\n",
                    run);
        }
    }
    closedir(d);
    return n;
}

static void list_print(char names[][72], size_t n)
{
    for (size_t i = 0; i < n; i++) fprintf(stderr, "  %s\n", names[i]);
}

/* A connect that failed, said in words. Returns the exit status. */
static int connect_failed(const char *path, const char *run, const char *dir, int e)
{
    if (e == ENOENT) {
        fprintf(stderr, "ddptop attach: no session of run %s (no %s)\n", run, path);
        char names[16][72];
        size_t n = dir ? sessions_list(dir, names, 16) : 0;
        if (n) {
            fprintf(stderr, "sessions of yours that are running:\n");
            list_print(names, n < 16 ? n : 16);
        }
        return 1;
    }
    if (e == ECONNREFUSED) {
        if (session_remove_stale(path))
            fprintf(stderr, "ddptop attach: the session of run %s is gone: nothing listens on %s "
                    "(its server was killed); removed that stale socket\n", run, path);
        else
            fprintf(stderr, "ddptop attach: the session of run %s is gone: nothing listens on %s\n",
                    run, path);
        return 1;
    }
    if (e == EACCES || e == EPERM)
        fprintf(stderr, "ddptop attach: cannot reach %s: permission denied (it is not a session of "
                "yours)\n", path);
    else
        fprintf(stderr, "ddptop attach: cannot connect to %s: %s\n", path, strerror(e));
    return 1;
}

int session_attach_main(int argc, char **argv, int (*run_again)(int argc, char **argv),
                        int (*view)(int argc, char **argv))
{
    const char *arg = NULL, *log_dir = NULL;
    bool headless = false, force = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            session_attach_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--headless") == 0) {
            headless = true;
            continue;
        }
        if (strcmp(argv[i], "--force") == 0) {
            force = true;
            continue;
        }
        if (strcmp(argv[i], "--log-dir") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "ddptop attach: --log-dir needs a directory\n");
                return 2;
            }
            log_dir = argv[++i];
            continue;
        }
        if (argv[i][0] == '-' || arg) {
            fprintf(stderr, "ddptop attach: unexpected '%s' (see ddptop attach --help)\n", argv[i]);
            return 2;
        }
        arg = argv[i];
    }
    char dir[200], path[512], run[72], err[768];
    bool have_dir = false;
    if (arg && strchr(arg, '/')) {
        snprintf(path, sizeof path, "%s", arg);
        session_run_of_path(arg, run, sizeof run);
    } else {
        if (arg && !util_run_id_ok(arg)) {
            fprintf(stderr, "ddptop attach: '%s' is not a run id (1 to 64 letters, digits, '.', '_' "
                    "or '-') nor a socket's path\n", arg);
            return 2;
        }
        if (session_dir(dir, sizeof dir, false, err, sizeof err) < 0) {
            if (errno == ENOENT && arg) {
                int rc = session_takeover(arg, log_dir, headless, force, run_again, view);
                if (rc >= 0) return rc;
            }
            if (errno == ENOENT || arg) fprintf(stderr, "ddptop attach: no session of yours is running (no %s)\n", dir);
            else fprintf(stderr, "ddptop attach: %s\n", err);
            return 1;
        }
        have_dir = true;
        char note[1024];
        if (session_dir_fallback_note(dir, note, sizeof note)) fprintf(stderr, "ddptop attach: %s\n", note);
        if (!arg) {
            char names[16][72];
            size_t n = sessions_list(dir, names, 16);
            if (n == 0) {
                fprintf(stderr, "ddptop attach: no session of yours is running (in %s)\n", dir);
                return 1;
            }
            if (n > 1) {
                fprintf(stderr, "ddptop attach: %zu sessions of yours are running; say which: "
                        "ddptop attach RUN\n", n);
                list_print(names, n < 16 ? n : 16);
                return 2;
            }
            snprintf(run, sizeof run, "%s", names[0]);
        } else {
            snprintf(run, sizeof run, "%s", arg);
        }
        if (session_sock_path(path, sizeof path, dir, run, err, sizeof err) < 0) {
            fprintf(stderr, "ddptop attach: %s\n", err);
            return 1;
        }
    }
    int fd = session_connect(path);
    if (fd < 0 && arg && have_dir && (errno == ENOENT || errno == ECONNREFUSED)) {
        /* no session (any more): the run ended, or its controller is gone */
        int e = errno;
        if (e == ECONNREFUSED && session_remove_stale(path))
            fprintf(stderr, "ddptop attach: the session of run %s is gone: nothing listens on %s (its server "
                    "was killed); removed that stale socket\n", run, path);
        int rc = session_takeover(run, log_dir, headless, force, run_again, view);
        if (rc >= 0) return rc;
        if (e == ECONNREFUSED) return 1;
        return connect_failed(path, run, dir, e);
    }
    if (fd < 0) return connect_failed(path, run, have_dir ? dir : NULL, errno);
    if (headless) {
        fprintf(stderr, "ddptop attach: run %s runs in a session: attach from a terminal, or follow it with "
                "ddptop logs -f %s\n", run, run);
        close(fd);
        return 1;
    }
    uid_t uid = (uid_t)-1;
    if (session_peer_uid(fd, &uid) != 0 || uid != getuid()) {
        fprintf(stderr, "ddptop attach: %s is served by uid %u, not by you (uid %u): not attaching\n",
                path, (unsigned)uid, (unsigned)getuid());
        close(fd);
        return 1;
    }
    return session_client_run(fd, run, 0);
}
