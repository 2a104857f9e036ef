/* server.h: padroned's side of the control socket (private to src/). */
#ifndef PADRONE_SRC_SERVER_H
#define PADRONE_SRC_SERVER_H

#include <stddef.h>
#include <sys/types.h>

#include "src/cmd.h"

#define PADRONE_SERVER_MAX_CLIENTS 16

struct padrone_server;

/* Create padroned-PID.sock in the run directory (protocol.h), mode 0600,
 * listening. An existing socket nobody answers on is replaced; one that
 * answers means another padroned serves pid: -EADDRINUSE. 0 or -errno with
 * the reason in err. */
int padrone_server_open(pid_t pid, struct padrone_server **out, char *err, size_t errlen);
const char *padrone_server_path(const struct padrone_server *srv);

/* Serve clients, running their commands through ctl, until a command sets
 * ctl->quit (returns 0) or one of wake_fds becomes readable (returns its
 * index + 1). Misbehaving clients are answered with an error and dropped;
 * nothing they send ends the loop. -errno if polling itself fails. */
int padrone_server_run(struct padrone_server *srv, struct padrone_ctl *ctl,
		       const int *wake_fds, int nwake);

/* Close every connection, remove the socket, free srv. */
void padrone_server_close(struct padrone_server *srv);

#endif
