/* One Slurm job step that runs ddptop-agent on a set of nodes (docs/slurm.md): srun as a child
 * process in its own process group, its standard input carrying the requests of every node
 * (addressed), its standard output the agents' lines (labelled by srun, cut into pieces by each
 * agent's relay: wire/relay.h), its standard error srun's and slurmstepd's messages. The
 * transports of the step's nodes (transport.h) share it; nothing here blocks.
 *
 * Members are the step's nodes in the order given; Slurm numbers the tasks in its own node
 * order, so a member is matched to its task by the node name the relay announces. */
#ifndef DDPTOP_SRUN_STEP_H
#define DDPTOP_SRUN_STEP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srun_step_opts {
    const char *agent_path;  /* ddptop-agent, at a path every node sees */
    const char *jobid;       /* --jobid; NULL: the allocation's own (SLURM_JOB_ID) */
    const char *stderr_path; /* srun's messages are appended here too (NULL: not kept) */
    bool bcast;              /* srun --bcast copies the agent to every node's /tmp first */
    bool attach;             /* the tasks are bridges to waiting agents (--attach) */
};

/* Whether the agent at path needs srun --bcast (auto): true unless path is on a network file
 * system (NFS, Lustre, GPFS, BeeGFS, CephFS, CIFS, AFS, PanFS, FUSE) that the nodes share. */
bool srun_step_needs_bcast(const char *path);

enum srun_member_state {
    SRUN_MEMBER_WAITING,     /* srun not started yet */
    SRUN_MEMBER_RUNNING,     /* the step runs; lines flow once the agent is up */
    SRUN_MEMBER_CLOSED,      /* its agent ended after it had started */
    SRUN_MEMBER_FAILED,      /* its agent never started (srun or the node refused) */
};

struct srun_step;

/* names: the nodes, as Slurm names them (SLURM_JOB_NODELIST). One reference per member: the
 * step is freed when the last member let go (srun_step_release). */
struct srun_step *srun_step_new(const struct srun_step_opts *o, const char *const *names, size_t n);
void srun_step_release(struct srun_step *s, size_t m);
/* The member's agent is to be left waiting: once every member let go, srun is not ended (it
 * lives on with the agents, dropping their output, until they exit). */
void srun_step_detach(struct srun_step *s, size_t m);
/* A step of bridges that got nowhere: once every member let go, srun is killed at once (the
 * step ends; the agents, in their own step, are not touched), not waited for. */
void srun_step_abandon(struct srun_step *s);

/* Starts srun (once; later calls do nothing). */
void srun_step_start(struct srun_step *s);
/* srun's descriptors to poll; only member 0's transport offers them, so they appear once. */
int srun_step_pollfds(struct srun_step *s, size_t m, struct pollfd *p, int max);
/* Reads and writes what it can, sorting the agents' lines into their members. */
void srun_step_pump(struct srun_step *s);
/* Member m's own direct connection (wire/direct.h): what is queued goes, what came is read
 * when revents (its poll's, 0 on a timer tick) says so or the last read left some. */
void srun_step_member_pump(struct srun_step *s, size_t m, short revents);
/* Whether member m offers (and pumps) what the step's members share: the first not released. */
bool srun_step_owner(const struct srun_step *s, size_t m);

/* What the step does with the bytes it reads from srun's stdout (the relays' lines, labelled
 * "K: ") or stderr (srun's and slurmstepd's messages, the tasks' stderr labelled): lines are
 * cut at '\n' and sorted into the members; any bytes are fine (a cut line, an empty field, a
 * huge number), and what is kept is bounded. A line longer than PROTOCOL_MAX_LINE is not
 * srun's: on stdout the member it is labelled with fails (PROTOCOL_LONG_LINE_FMT), as it would
 * over SSH; on stderr its start is read, the rest dropped with a note in the step's log.
 * srun_step_pump feeds what it reads; a test or a fuzz target can feed a step that was never
 * started (nothing then runs or is written). */
enum srun_stream { SRUN_STDOUT, SRUN_STDERR };
void srun_step_feed(struct srun_step *s, enum srun_stream from, const char *buf, size_t len);
/* Whether a member holds PROTOCOL_BACKLOG_MAX bytes of lines its transport has not taken yet:
 * srun's stdout is then not read (back-pressure, as over SSH), for every member since they
 * share it; the transport takes its lines, and reading resumes. */
bool srun_step_backlogged(const struct srun_step *s);

enum srun_member_state srun_step_state(const struct srun_step *s, size_t m);
/* Why it failed or closed (one line), and what to do (NULL: nothing to add). */
const char *srun_step_error(const struct srun_step *s, size_t m);
const char *srun_step_hint(const struct srun_step *s, size_t m);
/* The address the node's agent reported (what MASTER_ADDR uses), else its name. */
const char *srun_step_address(const struct srun_step *s, size_t m);

void srun_step_send(struct srun_step *s, size_t m, const char *line);
char *srun_step_next_line(struct srun_step *s, size_t m);
uint64_t srun_step_bytes_in(const struct srun_step *s, size_t m);
/* Ends the member's agent (its stdin ends; it stops its ranks and exits). */
void srun_step_close(struct srun_step *s, size_t m);

/* The srun command line (for -v and the docs' "what runs where"); malloc'd. */
char *srun_step_command(const struct srun_step *s);

#endif
