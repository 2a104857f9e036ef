/* client.h: padrone's side of the control socket (private to src/). */
#ifndef PADRONE_SRC_CLIENT_H
#define PADRONE_SRC_CLIENT_H

#include <stdio.h>
#include <sys/types.h>

#include "src/cmd.h"

/* Connect ctl to the padroned serving pid and greet it. Returns 0 when
 * connected, -ENOENT when no padroned serves pid (no socket, or a stale one
 * nobody listens on), or else an exit status after printing why on err. */
int padrone_client_connect(struct padrone_ctl *ctl, pid_t pid, FILE *err);
/* Is a padroned serving pid? 0 and its pid in *server (its socket in
 * ctl->remote_path; ctl is not connected), -ENOENT when none does, or else
 * an exit status after printing why on err. */
int padrone_client_probe(struct padrone_ctl *ctl, pid_t pid, pid_t *server, FILE *err);
/* pid is traced by a padroned whose socket padrone_client_connect did not
 * find (padroned uses another run directory): 0 with that padroned's pid
 * and the run directory it listens in (read from /proc), or -ENOENT. */
int padrone_client_unfound_server(pid_t pid, pid_t *server, char *dir, size_t size);
/* Close the connection, if any. */
void padrone_client_disconnect(struct padrone_ctl *ctl);
/* Send command e with its words to padroned, copy its output to out and
 * err, and return its exit status. ctl->cancel_fd becoming readable
 * meanwhile (^C) cancels the command in padroned. A connection padroned
 * closed since the last command (idle) is made again first. */
int padrone_client_forward(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e,
			   int count, char *const words[], FILE *out, FILE *err);

#endif
