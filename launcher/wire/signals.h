/* Signal names as the protocol carries them (docs/protocol.md): an exit message names the
 * signal that ended a rank ("SIGSEGV", with its number), a signal request names the one to send
 * ("TERM" or "SIGTERM"). One table for both ends: the agent names and parses, the controller
 * names what an agent reported. Numbers are Linux's, the only system either end runs on. */
#ifndef DDPTOP_WIRE_SIGNALS_H
#define DDPTOP_WIRE_SIGNALS_H

/* "SIGSEGV" for 11 and so on; NULL for a number without a name. */
const char *signals_name(int signo);
/* The same for people: the name, or "signal 77" (a thread-local buffer) without one. */
const char *signals_label(int signo);
/* The signal called name ("TERM" or "SIGTERM") among those a signal request may send (HUP,
 * INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP); 0 for any other name. Faults (SEGV, BUS...)
 * are named in exit messages but cannot be requested: a rank is never made to fake a crash. */
int signals_parse_request(const char *name);

#endif
