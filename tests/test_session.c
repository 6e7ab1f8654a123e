/* Sessions without a terminal: the frames both ends speak (split, partial, foreign bytes),
 * the output queue against a full pipe, the socket directory's refusals (not ours, open to
 * others, a link), the socket (0600, the peer's uid, a live name refused, a stale one
 * replaced and removed), the dashboard's command line with --run-id put in. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "session/session.h"
#include "session/session_proto.h"
#include "tap.h"

static char tmp[64];

static void test_frames_round_trip(void)
{
    struct session_queue q = { 0 };
    session_queue_frame(&q, SM_INPUT, "abc", 3);
    session_queue_frame(&q, SM_REDRAW, NULL, 0);
    CHECK_INT(q.len, 3 + 3 + 3);
    struct session_frame f;
    size_t used;
    /* every prefix of the first frame is "not yet" */
    for (size_t n = 0; n < 6; n++) CHECK_INT(session_frame_parse(q.buf, n, &f, &used), 0);
    CHECK_INT(session_frame_parse(q.buf, q.len, &f, &used), 1);
    CHECK_INT(f.type, SM_INPUT);
    CHECK_INT(f.len, 3);
    CHECK(memcmp(f.payload, "abc", 3) == 0);
    CHECK_INT(used, 6);
    CHECK_INT(session_frame_parse(q.buf + used, q.len - used, &f, &used), 1);
    CHECK_INT(f.type, SM_REDRAW);
    CHECK_INT(f.len, 0);
    session_queue_done(&q);
}

static void test_frames_split_and_foreign(void)
{
    size_t big = 2 * SESSION_FRAME_MAX + 10;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (char)i;
    struct session_queue q = { 0 };
    session_queue_frame(&q, SM_OUTPUT, data, big);
    CHECK_INT(q.len, big + 3 * SESSION_HDR);
    size_t off = 0, got = 0, used;
    struct session_frame f;
    int frames = 0;
    while (session_frame_parse(q.buf + off, q.len - off, &f, &used) == 1) {
        CHECK_INT(f.type, SM_OUTPUT);
        CHECK(f.len <= SESSION_FRAME_MAX);
        CHECK(memcmp(f.payload, data + got, f.len) == 0);
        got += f.len;
        off += used;
        frames++;
    }
    CHECK_INT(frames, 3);
    CHECK_INT(got, big);
    /* a byte that starts no frame of ours: not a session peer (an old or foreign program) */
    const uint8_t junk[] = { 'G', 'E', 'T', ' ' };
    CHECK_INT(session_frame_parse(junk, sizeof junk, &f, &used), -1);
    const uint8_t zero[] = { 0, 0, 0 };
    CHECK_INT(session_frame_parse(zero, sizeof zero, &f, &used), -1);
    uint8_t p[2];
    session_put_u16(p, 0xbeef);
    CHECK_INT(session_get_u16(p), 0xbeef);
    session_queue_done(&q);
    free(data);
}

/* A full pipe takes part of the queue; the rest stays, in order, for the next flush. */
static void test_queue_against_full_pipe(void)
{
    int pfd[2];
    CHECK(pipe2(pfd, O_NONBLOCK) == 0);
    size_t n = 1 << 20;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (char)(i * 7);
    struct session_queue q = { 0 };
    session_queue_put(&q, data, n);
    CHECK_INT(session_queue_flush(&q, pfd[1]), 0);
    CHECK(q.len > 0 && q.len < n);           /* a pipe holds 64 KiB by default */
    char *back = malloc(n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(pfd[0], back + got, n - got);
        if (r > 0) got += (size_t)r;
        CHECK_INT(session_queue_flush(&q, pfd[1]), 0);
        if (r <= 0 && q.len == 0) break;
    }
    CHECK_INT(got, n);
    CHECK(memcmp(back, data, n) == 0);
    close(pfd[0]);
    CHECK_INT(session_queue_flush(&q, pfd[1]), 0);           /* nothing queued: no write */
    session_queue_put(&q, "x", 1);
    CHECK_INT(session_queue_flush(&q, pfd[1]), -1);          /* no reader: an error, not EAGAIN */
    close(pfd[1]);
    session_queue_done(&q);
    free(data);
    free(back);
}

static void test_dir_refusals(void)
{
    char d[128], err[512];
    snprintf(d, sizeof d, "%s/made", tmp);
    CHECK_INT(session_dir_check(d, false, err, sizeof err), -1);     /* missing, not asked to make */
    CHECK_INT(errno, ENOENT);
    CHECK_INT(session_dir_check(d, true, err, sizeof err), 0);
    struct stat st;
    CHECK(stat(d, &st) == 0 && (st.st_mode & 0777) == 0700);

    snprintf(d, sizeof d, "%s/open", tmp);
    CHECK(mkdir(d, 0700) == 0 && chmod(d, 0755) == 0);
    CHECK_INT(session_dir_check(d, true, err, sizeof err), -1);
    CHECK(strstr(err, "open to group or others") && strstr(err, "chmod 700"));
    CHECK(stat(d, &st) == 0 && (st.st_mode & 0777) == 0755);    /* refused, not repaired */

    char link[160];
    snprintf(link, sizeof link, "%s/link", tmp);
    snprintf(d, sizeof d, "%s/made", tmp);
    CHECK(symlink(d, link) == 0);
    CHECK_INT(session_dir_check(link, true, err, sizeof err), -1);
    CHECK(strstr(err, "not a directory") != NULL);

    if (getuid() == 0) {
        snprintf(d, sizeof d, "%s/theirs", tmp);
        CHECK(mkdir(d, 0700) == 0 && chown(d, 65534, 65534) == 0);
        CHECK_INT(session_dir_check(d, true, err, sizeof err), -1);
        CHECK(strstr(err, "belongs to uid 65534") != NULL);
    }
}

static void test_dir_choice(void)
{
    char out[256], err[512], want[256], xdg[128];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
    CHECK(mkdir(xdg, 0700) == 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    CHECK_INT(session_dir(out, sizeof out, true, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/ddptop", xdg);
    CHECK_STR(out, want);
    /* not a directory of ours: the fallback in /tmp (only named here, not made) */
    setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
    session_dir(out, sizeof out, false, err, sizeof err);
    snprintf(want, sizeof want, "/tmp/ddptop-%u", (unsigned)getuid());
    CHECK_STR(out, want);
    unsetenv("XDG_RUNTIME_DIR");
    session_dir(out, sizeof out, false, err, sizeof err);
    CHECK_STR(out, want);

    char path[256];
    CHECK_INT(session_sock_path(path, sizeof path, "/run/user/1000/ddptop", "run-1", err, sizeof err), 0);
    CHECK_STR(path, "/run/user/1000/ddptop/run-1.sock");
    char longdir[120];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = '\0';
    CHECK_INT(session_sock_path(path, sizeof path, longdir, "r", err, sizeof err), -1);
    CHECK(strstr(err, "too long") != NULL);
    char run[72];
    session_run_of_path("/tmp/ddptop-0/20261124-1200-ab12.sock", run, sizeof run);
    CHECK_STR(run, "20261124-1200-ab12");
}

/* A run's note goes once its directory is gone and it is over an hour old; the others stay. */
static void test_notes_pruned(void)
{
    char xdg[128], dir[200], err[256], path[300], runs[160];
    struct timespec old[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
    snprintf(xdg, sizeof xdg, "%s/xdg-notes", tmp);
    CHECK(mkdir(xdg, 0700) == 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    CHECK_INT(session_dir(dir, sizeof dir, true, err, sizeof err), 0);
    snprintf(runs, sizeof runs, "%s/runs-kept", tmp);
    CHECK(mkdir(runs, 0700) == 0);
    session_note_run("gone-old", "/nonexistent/ddptop-test/gone-old");
    session_note_run("gone-new", "/nonexistent/ddptop-test/gone-new");
    session_note_run("kept-old", runs);
    snprintf(path, sizeof path, "%s/gone-old.dir", dir);
    CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    snprintf(path, sizeof path, "%s/kept-old.dir", dir);
    CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    session_note_run("another", runs); /* a new run: the others are looked at */
    char *r = session_find_run("gone-old");
    CHECK(r == NULL);
    free(r);
    r = session_find_run("gone-new"); /* not an hour old: its run may not have made it yet */
    CHECK_STR(r, "/nonexistent/ddptop-test/gone-new");
    free(r);
    r = session_find_run("kept-old");
    CHECK_STR(r, runs);
    free(r);
    unsetenv("XDG_RUNTIME_DIR");
}

static void test_socket_live_stale(void)
{
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/made/r1.sock", tmp);
    int l = session_listen(path, "r1", err, sizeof err);
    CHECK(l >= 0);
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
    int c = session_connect(path);
    CHECK(c >= 0);
    uid_t uid = (uid_t)-1;
    CHECK(session_peer_uid(c, &uid) == 0 && uid == getuid());
    /* the same name while it lives: refused, and the live socket stays */
    CHECK_INT(session_listen(path, "r1", err, sizeof err), -1);
    CHECK(strstr(err, "already running") != NULL);
    CHECK_INT(session_remove_stale(path), 0);
    CHECK(lstat(path, &st) == 0);
    close(c);
    close(l);                        /* the server is gone; its file stays behind */
    CHECK_INT(session_connect(path), -1);
    CHECK_INT(errno, ECONNREFUSED);
    /* a new session of the same name replaces the stale file */
    l = session_listen(path, "r1", err, sizeof err);
    CHECK(l >= 0);
    close(l);
    CHECK_INT(session_remove_stale(path), 1);
    CHECK(lstat(path, &st) != 0 && errno == ENOENT);
    CHECK_INT(session_connect(path), -1);
    CHECK_INT(errno, ENOENT);
}

static void test_inner_argv(void)
{
    char *argv[] = { "ddptop", "run", "hosts.txt", "--", "train", "--run-id", "x", NULL };
    char **v = session_inner_argv(7, argv, 2, "20261124-1200-ab12");
    const char *want[] = { "ddptop", "run", "--run-id", "20261124-1200-ab12", "hosts.txt", "--",
                           "train", "--run-id", "x", NULL };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (!want[i]) CHECK(v[i] == NULL);
        else CHECK_STR(v[i], want[i]);
    }
    free(v);
    v = session_inner_argv(7, argv, 7, NULL);    /* --run-id given: the line as it was */
    for (int i = 0; i < 7; i++) CHECK_STR(v[i], argv[i]);
    CHECK(v[7] == NULL);
    free(v);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);        /* as ddptop: a reader gone is an error, not our end */
    snprintf(tmp, sizeof tmp, "/tmp/ddptop-test-session.XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    RUN(test_frames_round_trip);
    RUN(test_frames_split_and_foreign);
    RUN(test_queue_against_full_pipe);
    RUN(test_dir_refusals);
    RUN(test_dir_choice);
    RUN(test_notes_pruned);
    RUN(test_socket_live_stale);
    RUN(test_inner_argv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmp);
    return tap_done();
}
