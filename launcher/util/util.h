/* Small shared helpers for the launcher and the TUI: allocation that never returns NULL,
 * clocks, a growable string buffer, fd flags, POSIX shell quoting and our executable's
 * directory. */
#ifndef DDPTOP_UTIL_H
#define DDPTOP_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Out of memory is fatal: the hook (set by the TUI) restores the terminal, then we abort. */
void util_set_fatal_hook(void (*hook)(void));
void util_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Monotonic clock for every timeout and age; wall clock only for what a person reads. */
int64_t mono_ns(void);
int64_t mono_ms(void);
int64_t wall_ns(void);

struct strbuf {
    char *buf;      /* always NUL-terminated once anything was added */
    size_t len;
    size_t cap;
};
void strbuf_init(struct strbuf *sb);
void strbuf_done(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_add(struct strbuf *sb, const void *data, size_t n);
void strbuf_adds(struct strbuf *sb, const char *s);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* Room for extra more bytes and the NUL, so that a hot loop can write into buf + len itself
 * (and set len and the NUL after) without a call per piece. */
void strbuf_reserve(struct strbuf *sb, size_t extra);
/* Back to the first n bytes (n <= len): what was appended after a mark, taken back. */
void strbuf_truncate(struct strbuf *sb, size_t n);
/* Appends s as one POSIX shell word in single quotes ('it'\''s'), safe for any bytes. */
void strbuf_add_shell_quoted(struct strbuf *sb, const char *s);
/* Removes the first n bytes. */
void strbuf_consume(struct strbuf *sb, size_t n);
/* Line reassembly for a buffer that input is appended to: returns the next complete line
 * after *off (malloc'd, without its '\n') and moves *off past it, or NULL when no complete
 * line is there. The consumed front is dropped only once it is at least half the buffer, so
 * taking lines costs amortised O(1) per byte however large the backlog. */
char *strbuf_take_line(struct strbuf *sb, size_t *off);
/* The same into out (reset first; NUL-terminated, without the '\n'): no allocation once out
 * is large enough, for a loop that takes thousands of lines a second. false: no whole line. */
bool strbuf_next_line(struct strbuf *sb, size_t *off, struct strbuf *out);

/* The file `name` in the directory of our own executable (/proc/self/exe), e.g. build/ddptop
 * -> build/ddptop-agent; name may climb ("../themes"). malloc'd; NULL when the executable's
 * path cannot be read. How ddptop finds the agent and the trainer it ships with, and themes. */
/* memmem for a needle whose first byte is rare in the haystack ('"' in rank output): a memchr
 * to each such byte, then a compare. glibc's memmem sets up a shift table on every call, which
 * on each 64 KiB block of a flood cost more than the scan. Same answer as memmem. */
const char *util_memmem_rare(const char *hay, size_t n, const char *needle, size_t m);

char *util_exe_sibling(const char *name);
/* A program ddptop ships with (ddptop-agent, ddptop-train): beside our own executable (the
 * build tree), else where `make install` puts it, ../libexec/ddptop/ from our directory
 * (PREFIX/bin/ddptop -> PREFIX/libexec/ddptop/ddptop-agent). Neither existing: the path
 * beside us, for the message that names it. malloc'd; NULL as util_exe_sibling. */
char *util_exe_program(const char *name);
/* p made absolute against the current directory ("./x" and "." tidied), without resolving
 * links or requiring that it exist: how --log-dir and --workdir are read. malloc'd. */
char *util_abs_path(const char *p);

/* Whether an executable `name` is in one of PATH's directories (how --pbs finds pbs_tmrsh). */
bool util_in_path(const char *name);

/* Writes all n bytes to a blocking fd, through EINTR and short writes: for threads and
 * children that may wait (never the poll loops). 0, or -1 with errno set. */
int util_write_all(int fd, const void *p, size_t n);
/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void util_hex(const void *b, size_t n, char *out);
/* n bytes from getrandom (the kernel's CSPRNG); a failure other than EINTR is fatal. */
void util_random(void *b, size_t n);
/* mkdir -p: every missing component of path (0755 before the umask); 0, or -1 with errno
 * (ENOTDIR when path exists and is not a directory). */
int util_mkdir_p(const char *path);
/* path becomes data, whole: written to path.tmp (mode, not followed if a link), then renamed
 * over path, so a reader sees the old file or the new one. sync: the data reaches the disk
 * first (fdatasync) and the rename after (the directory synced). 0, or -1 with errno (the
 * temporary file removed). */
int util_replace_file(const char *path, const void *data, size_t len, mode_t mode, bool sync);
/* The one way ddptop opens a file it writes where another user might have put something
 * first: path opened with flags (O_WRONLY or O_RDWR, O_APPEND, O_TRUNC) plus O_CREAT, never
 * through a link and without blocking on a FIFO (O_NOFOLLOW | O_NONBLOCK, left set: harmless
 * on a regular file); it must be a regular file of our user, and gets exactly mode. O_TRUNC
 * empties it only after those checks. The fd, or -1 with errno (EINVAL: not a regular file;
 * EPERM: another user's; ELOOP: a link). */
int util_open_private(const char *path, int flags, mode_t mode);
/* A file to read that someone else may have put there (a run in a shared --log-dir, another
 * user's shared run): opened without blocking on a FIFO, and only when it is a regular file
 * (not a FIFO, a device, a directory). The fd, or -1 with errno (EINVAL: not a regular file). */
int util_open_read(const char *path);
FILE *util_fopen_read(const char *path);
/* Why util_open_read failed, for a message: "not a regular file" for its EINVAL. */
const char *util_open_read_error(int err);
/* util_open_private(path, O_WRONLY | O_TRUNC, mode) as a stdio stream. NULL with errno. */
FILE *util_fopen_write(const char *path, mode_t mode);
/* Reads fd to its end or to cap bytes, whichever comes first, appending to out (a bound on
 * what a file or another process can make us hold). 0, or -1 with errno (what was read stays). */
int util_read_fd(int fd, struct strbuf *out, size_t cap);

int fd_set_nonblock(int fd);
int fd_set_cloexec(int fd);
/* Closes every descriptor from lo to hi (~0U: all above lo), as close_range(2) does, also where
 * the C library (before 2.34) or the kernel (before 5.9) lacks it. Safe between fork and exec. */
void util_close_range(unsigned lo, unsigned hi);

/* wall (wall_ns()) as UTC with milliseconds, "2026-11-24T12:00:00.123Z": the time stamps of
 * events.jsonl and gpu.jsonl. */
void util_iso_time(int64_t wall, char *buf, size_t n);
/* wall (wall_ns()) as local "HH:MM:SS", when something happened, for people; 0 or unreadable:
 * "?". Returns buf. */
char *util_clock_text(int64_t wall, char *buf, size_t n);
/* Whether s can be a run id (--run-id): a directory's name, and part of an agent's socket name
 * on the nodes: 1 to 64 of [A-Za-z0-9._-], not "." or "..". */
bool util_run_id_ok(const char *s);

#endif
