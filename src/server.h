/* server.h: padroned's side of the control socket (private to src/).
 *
 * One thread serves every connection and never blocks on any: sockets are
 * non-blocking, each client's replies wait in its own buffer until it reads
 * them, and commands run as jobs on worker threads (jobs.h), so a client
 * that stops reading, sends half a message or runs a long command holds
 * up nobody else, and a signal is seen at once.
 *
 * Bounds. A client with more than 1 MiB of replies unread is not read
 * from (its next commands wait in the socket); one that moves no byte
 * either way for the idle timeout while no command of it runs is closed (a
 * BYE saying so when it can still take one). At most
 * PADRONE_SERVER_MAX_CLIENTS connections: one more closes the connection
 * idle the longest (BYE), or is refused when every one is busy. At most
 * PADRONE_SERVER_MAX_QUEUED commands of one client wait or run at once.
 */
#ifndef PADRONE_SRC_SERVER_H
#define PADRONE_SRC_SERVER_H

#include <stddef.h>
#include <sys/types.h>

#include "src/cmd.h"

#define PADRONE_SERVER_MAX_CLIENTS 256
#define PADRONE_SERVER_MAX_QUEUED 8
#define PADRONE_SERVER_IDLE_TIMEOUT_S 600

struct padrone_server;

/* Create padroned-PID.sock in the run directory (protocol.h), mode 0600,
 * listening. Sockets of the directory nobody listens on any more (left by
 * a padroned that was killed) are removed first; one for pid that answers
 * means another padroned serves pid: -EADDRINUSE. The socket appears under
 * its name only once it listens. 0 or -errno with the reason in err. */
int padrone_server_open(pid_t pid, struct padrone_server **out, char *err, size_t errlen);
const char *padrone_server_path(const struct padrone_server *srv);
/* How long a connection may sit idle (default PADRONE_SERVER_IDLE_TIMEOUT_S). */
void padrone_server_set_idle_timeout(struct padrone_server *srv, double seconds);

/* Serve clients, running their commands through ctl, until a command sets
 * ctl->quit (returns 0) or one of wake_fds (at most 8) becomes readable
 * (returns its index + 1). Before it returns, no command uses the session
 * any more (one running finishes first; a profile may go on sampling), and
 * none starts until the next padrone_server_run: the caller may use the
 * session meanwhile (padroned's continuous profiling does). Misbehaving
 * clients are answered with an error and dropped; nothing they send ends
 * the loop. -errno if it cannot run. */
int padrone_server_run(struct padrone_server *srv, struct padrone_ctl *ctl,
		       const int *wake_fds, int nwake);

/* Answer every command still waiting "not run", cancel the running ones
 * (as ^C does) and wait for them, give replies a moment to go out, then
 * close every connection (BYE), remove the socket, free srv. */
void padrone_server_close(struct padrone_server *srv);

#endif
