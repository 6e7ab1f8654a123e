/* Starting a session (session.h): everything that can fail with a message to the user is
 * done before the fork, on this terminal (the socket directory's checks, the socket, the
 * pty); then the server forks off into its own session and forks the dashboard onto the pty,
 * and this process attaches as the first client (or, with --detach, says how to attach).
 * Also the dashboard's side: the markers it finds in its environment and its one request. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "job/plan.h"
#include "session_client.h"
#include "session_proto.h"
#include "session_server.h"
#include "util/util.h"

#define ENV_INSIDE "DDPTOP_IN_SESSION"
#define ENV_FD     "DDPTOP_SESSION_FD"

/* ---- inside: the dashboard's side ------------------------------------------------------- */

static bool inside;
static int request_fd = -1;

void session_inner_init(void)
{
    const char *m = getenv(ENV_INSIDE);
    const char *f = getenv(ENV_FD);
    if (m && strcmp(m, "1") == 0) {
        inside = true;
        char *end;
        long fd = f ? strtol(f, &end, 10) : -1;
        if (f && *f && !*end && fd > 2 && fd < INT_MAX && fcntl((int)fd, F_GETFD) >= 0) {
            request_fd = (int)fd;
            fd_set_cloexec(request_fd);
        }
    }
    unsetenv(ENV_INSIDE);
    unsetenv(ENV_FD);
}

bool session_inside(void)
{
    return inside;
}

int session_request_detach(void)
{
    if (request_fd < 0) return -1;
    return send(request_fd, "detach", 6, MSG_DONTWAIT | MSG_NOSIGNAL) == 6 ? 0 : -1;
}

/* ---- the dashboard's command line ------------------------------------------------------------ */

char **session_inner_argv(int argc, char **argv, int at, const char *run_id)
{
    char **v = xcalloc((size_t)argc + 3, sizeof *v);
    int o = 0;
    if (at > argc) at = argc;
    for (int i = 0; i < at; i++) v[o++] = argv[i];
    if (run_id) {
        v[o++] = (char *)"--run-id";
        v[o++] = (char *)run_id;
    }
    for (int i = at; i < argc; i++) v[o++] = argv[i];
    v[o] = NULL;
    return v;
}

/* Our executable by its real path, so that the dashboard's process is named ddptop (a
 * process exec'd as /proc/self/exe would be named "exe"). */
static char *self_exe(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return xstrdup("/proc/self/exe");
    buf[n] = '\0';
    if (n > 10 && strcmp(buf + n - 10, " (deleted)") == 0) return xstrdup("/proc/self/exe");
    return xstrdup(buf);
}

static char *new_run_id(void)
{
    char tok[33];
    unsigned rnd = (unsigned)getpid();
    if (plan_token(tok) == 0) sscanf(tok, "%4x", &rnd);
    return plan_run_id(wall_ns(), rnd);
}

/* ---- the pty and the two forks --------------------------------------------------------------- */

struct setup {
    const char *run_id;
    char sock_path[256];
    char slave[128];
    int master, listen_fd, req[2];    /* req[0] the server's end, req[1] the dashboard's */
    struct termios tio;               /* the starting terminal's modes, for the pty */
    bool have_tio;
    char **argv;
    char *exe;
};

static int pty_open(struct setup *st, char *err, size_t errlen)
{
    st->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (st->master < 0 || grantpt(st->master) != 0 || unlockpt(st->master) != 0 ||
        ptsname_r(st->master, st->slave, sizeof st->slave) != 0) {
        snprintf(err, errlen, "cannot make a pseudo-terminal for the session: %s", strerror(errno));
        return -1;
    }
    struct winsize ws = { .ws_row = 24, .ws_col = 80 };
    struct winsize cur;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &cur) == 0 && cur.ws_row && cur.ws_col) ws = cur;
    ioctl(st->master, TIOCSWINSZ, &ws);
    st->have_tio = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &st->tio) == 0;
    return 0;
}

/* The dashboard's process: session leader on the pty's slave side (fd, opened by the server
 * before the fork, so that the slave is never closed by everyone before the dashboard ends:
 * the master would read EIO), the same program again. We are the child of a single-threaded
 * process: no lock can be held; any failure ends in _exit. */
static void dashboard_exec(const struct setup *st, int fd)
{
    char num[16];
    setsid();
    if (ioctl(fd, TIOCSCTTY, 0) != 0) _exit(127);     /* the session's controlling terminal */
    if (st->have_tio) tcsetattr(fd, TCSANOW, &st->tio);
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO) close(fd);
    fcntl(st->req[1], F_SETFD, 0);             /* the request socket stays across exec */
    snprintf(num, sizeof num, "%d", st->req[1]);
    setenv(ENV_INSIDE, "1", 1);
    setenv(ENV_FD, num, 1);
    const char *term = getenv("TERM");
    if (!term || !*term) setenv("TERM", "xterm-256color", 1);   /* --detach from a script */
    static const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGCHLD, SIGQUIT, SIGWINCH };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(st->exe, st->argv);
    dprintf(STDERR_FILENO, "ddptop: cannot start the dashboard %s: %s\n", st->exe, strerror(errno));
    _exit(127);
}

/* Closes every fd from 3 up but the n in keep: what the starting process inherited (a
 * caller's pipe, say) must not be held open for the life of the job. */
static void close_others(int *keep, size_t n)
{
    for (size_t i = 1; i < n; i++)             /* a few: insertion sort */
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned lo = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 3) continue;
        if ((unsigned)keep[i] > lo) util_close_range(lo, (unsigned)keep[i] - 1);
        lo = (unsigned)keep[i] + 1;
    }
    util_close_range(lo, ~0U);
}

/* The server's process: its own session (closing the starting terminal does not reach it),
 * no terminal at all, the dashboard as its child. Returns the dashboard's exit status. */
static int server_process(struct setup *st)
{
    setsid();
    prctl(PR_SET_NAME, "ddptop-session", 0, 0, 0);
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, STDIN_FILENO);
        dup2(nul, STDOUT_FILENO);
        dup2(nul, STDERR_FILENO);
        if (nul > STDERR_FILENO) close(nul);
    }
    int keep[] = { st->master, st->listen_fd, st->req[0], st->req[1] };
    close_others(keep, sizeof keep / sizeof *keep);
    int slave = open(st->slave, O_RDWR | O_NOCTTY | O_CLOEXEC);
    pid_t child = slave < 0 ? -1 : fork();
    if (child == 0) dashboard_exec(st, slave);
    if (slave >= 0) close(slave);
    close(st->req[1]);
    if (child < 0) {
        unlink(st->sock_path);
        return 1;
    }
    struct session_server_args a = {
        .listen_fd = st->listen_fd, .master = st->master, .ctl_fd = st->req[0],
        .child = child, .sock_path = st->sock_path,
    };
    return session_server_run(&a);
}

static void setup_done(struct setup *st)
{
    if (st->master >= 0) close(st->master);
    if (st->listen_fd >= 0) close(st->listen_fd);
    for (int i = 0; i < 2; i++)
        if (st->req[i] >= 0) close(st->req[i]);
    free(st->argv);
    free(st->exe);
}

int session_start(const struct session_start *s)
{
    struct setup st = { .master = -1, .listen_fd = -1, .req = { -1, -1 } };
    char dir[200], err[768];
    char *made_id = s->run_id ? NULL : new_run_id();
    int rc = 2;
    st.run_id = s->run_id ? s->run_id : made_id;
    if (session_dir(dir, sizeof dir, true, err, sizeof err) < 0 ||
        session_sock_path(st.sock_path, sizeof st.sock_path, dir, st.run_id, err, sizeof err) < 0 ||
        pty_open(&st, err, sizeof err) < 0 ||
        (st.listen_fd = session_listen(st.sock_path, st.run_id, err, sizeof err)) < 0)
        goto fail;
    char note[1024];
    if (session_dir_fallback_note(dir, note, sizeof note)) fprintf(stderr, "ddptop: %s\n", note);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st.req) != 0) {
        snprintf(err, sizeof err, "cannot make a socket pair: %s", strerror(errno));
        goto fail_unlink;
    }
    st.argv = session_inner_argv(s->argc, s->argv, s->run_id ? s->argc : s->run_id_at, made_id);
    st.exe = self_exe();
    fflush(stdout);
    fflush(stderr);
    pid_t server = fork();
    if (server < 0) {
        snprintf(err, sizeof err, "cannot fork the session server: %s", strerror(errno));
        goto fail_unlink;
    }
    if (server == 0) {
        rc = server_process(&st);
        st.master = st.listen_fd = st.req[0] = st.req[1] = -1;   /* the server closed them */
        setup_done(&st);
        free(made_id);
        return rc;
    }
    setup_done(&st);                 /* the server's now */
    if (s->detach) {
        printf("ddptop: run %s goes on in a session of its own (socket %s/%s.sock)\n"
               "  ddptop attach %s    to watch it; in the dashboard d detaches, q stops the job\n",
               st.run_id, dir, st.run_id, st.run_id);
        free(made_id);
        return 0;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/%s.sock", dir, st.run_id);
    int fd = session_connect(path);
    if (fd < 0) {
        fprintf(stderr, "ddptop: cannot attach to the session just started (%s): %s; "
                "try ddptop attach %s\n", path, strerror(errno), st.run_id);
        free(made_id);
        return 1;
    }
    rc = session_client_run(fd, st.run_id, SESSION_HELLO_STARTED);
    waitpid(server, NULL, WNOHANG);
    free(made_id);
    return rc;

fail_unlink:
    unlink(st.sock_path);
fail:
    fprintf(stderr, "ddptop: %s\n", err);
    fprintf(stderr, "ddptop: (DDPTOP_NO_SESSION=1 shows the dashboard without a session: the job "
            "then ends with this terminal)\n");
    setup_done(&st);
    free(made_id);
    return rc;
}
