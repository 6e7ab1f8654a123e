/* The keeper: one small process per rank between the agent and the rank, so that no rank can
 * outlive its agent. The keeper leads a session of its own (setsid) and has PR_SET_PDEATHSIG
 * set; the rank it forks leads its own process group inside that session, so the agent's
 * signals to the rank's group (kill(-pid, sig)) never hit the keeper, and the keeper always
 * lives to reap the rank and report its real wait status. When the agent dies (PDEATHSIG, or
 * getppid() changed), the keeper SIGKILLs the rank's whole group and exits. When the rank exits,
 * the keeper kills whatever it left running in its group, then reports and exits.
 *
 * Keeper -> agent: fixed-size messages on a status pipe (atomic writes):
 *   STARTED  a = the rank's pid (sent once execvp succeeded)
 *   FAILED   a = stage (KEEPER_STAGE_*), b = errno; the keeper then exits
 *   EXITED   a = the rank's wait status, b = its CPU time in microseconds (rusage, children
 *            included), c = mono_ns() when the keeper saw the rank dead (at or after its real
 *            death: the agent compares it with when it signalled the rank); the keeper then exits
 * The agent reaps the keeper with waitpid(keeper_pid) and never waits for any other pid. */
#ifndef DDPTOP_AGENT_KEEPER_H
#define DDPTOP_AGENT_KEEPER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum keeper_msg_kind { KEEPER_STARTED = 1, KEEPER_FAILED = 2, KEEPER_EXITED = 3 };
enum keeper_stage { KEEPER_STAGE_SETUP = 0, KEEPER_STAGE_FORK, KEEPER_STAGE_CHDIR, KEEPER_STAGE_EXEC };

struct keeper_msg {
    int32_t kind;
    int32_t a;
    int64_t b;
    int64_t c;
};

struct keeper_spec {
    char *const *argv;      /* argv[0] searched on the rank's PATH like execvp */
    char *const *envp;      /* the rank's whole environment */
    const char *workdir;    /* NULL: the agent's working directory */
    int start_timeout_ms;   /* how long the caller waits for the exec to succeed or fail */
};

struct keeper {
    pid_t keeper_pid;
    pid_t rank_pid;         /* also the rank's process group id */
    int out_fd, err_fd;     /* the rank's stdout and stderr: read ends, nonblocking */
    int status_fd;          /* keeper messages: read end, nonblocking */
};

/* Forks a keeper that starts the rank, without waiting for it (many ranks start at once); 0
 * with k filled but rank_pid -1; the caller watches k->status_fd for the first message (STARTED,
 * or FAILED: see keeper_failed_text). To give up on a start it SIGKILLs keeper_pid (the rank
 * follows by PDEATHSIG) and reaps it when status_fd reaches its end, without blocking the
 * loop. -1 with err: nothing started. spec is only read during the call (the keeper has its
 * own copy). */
int keeper_fork(const struct keeper_spec *spec, struct keeper *k, char *err, size_t errlen);
/* The message for a person for a FAILED message m of a keeper started with argv0 and workdir. */
void keeper_failed_text(const char *argv0, const char *workdir, const struct keeper_msg *m,
                        char *err, size_t errlen);
/* Reads one message from a nonblocking status fd: 1 got one, 0 none yet, -1 end of file (the
 * keeper exited) or error. */
int keeper_read_msg(int fd, struct keeper_msg *m);

#endif
