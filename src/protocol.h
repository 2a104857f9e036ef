/* protocol.h: padroned's control socket protocol (private to src/).
 *
 * The socket. padroned serving PID listens on a unix stream socket named
 * padroned-PID.sock in the first usable run directory of:
 *   $PADRONE_RUNDIR (if set, the only one tried),
 *   /run/padrone (root),
 *   $XDG_RUNTIME_DIR/padrone,
 *   /tmp/padrone-UID.
 * The directory is created mode 0700 and must be a real directory owned by
 * the user and closed to group and others; the socket is created under
 * umask 0177 (mode 0600). On every connection padroned reads the peer's
 * credentials (SO_PEERCRED) and serves only its own uid and root; anyone
 * else gets an error reply and the connection is closed.
 *
 * Messages. Every message, both ways, is a 12-byte header in host byte order
 * (client and server share the host) followed by len payload bytes:
 *   uint32 magic (PADRONE_PROTO_MAGIC), uint16 version
 *   (PADRONE_PROTO_VERSION), uint16 type, uint32 len (<= PADRONE_MSG_MAX).
 * Magic and version are checked on every message. A message that is not
 * padrone's, of another version, too large, of an unknown type or out of
 * order gets a STDERR + EXIT(PADRONE_EXIT_PROTOCOL) reply and the connection
 * is closed; padroned and its target carry on.
 *
 * A conversation:
 *   client: HELLO (empty)     server: HELLO (struct padrone_msg_hello)
 *   client: COMMAND (words)   server: STDOUT / STDERR text ..., then EXIT (int32)
 *   ... more COMMANDs ...
 * COMMAND's payload is the command's words, each terminated by a NUL byte
 * (at most PADRONE_MSG_MAX_WORDS), the first being the full command name.
 * EXIT's status is what the command's exit status would be in padrone.
 * A client may send several COMMANDs without waiting (at most
 * PADRONE_SERVER_MAX_QUEUED, server.h): they run in order, each answered
 * by its EXIT.
 * While its command waits for another client's, the server may send STDERR
 * lines ("padroned: busy: waiting for profile of client 3 (pid 4242)").
 * CANCEL (empty), from the client at any time, cancels its commands: one
 * still waiting is answered at once (STDERR, EXIT 1); a running one ends as
 * ^C ends it in padrone (a profile with what it sampled, a measure with the
 * calls timed so far), others finish; each is answered as usual. A client
 * that hangs up cancels its commands the same way.
 * BYE (text: why), from the server, ends a connection it closes on its own:
 * idle too long, to make room for another client, or because padroned is
 * leaving. A client that gets BYE instead of an answer reconnects and sends
 * its command again (it was not run).
 *
 * Version 2 added CANCEL and BYE.
 */
#ifndef PADRONE_SRC_PROTOCOL_H
#define PADRONE_SRC_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PADRONE_PROTO_MAGIC 0x504e4450u	/* "PDNP" in memory */
#define PADRONE_PROTO_VERSION 2
#define PADRONE_MSG_MAX 65536u
#define PADRONE_MSG_MAX_WORDS 256
#define PADRONE_SOCKET_NAME "padroned-%d.sock"

enum padrone_msg_type {
	PADRONE_MSG_HELLO = 1,
	PADRONE_MSG_COMMAND = 2,
	PADRONE_MSG_STDOUT = 3,
	PADRONE_MSG_STDERR = 4,
	PADRONE_MSG_EXIT = 5,
	PADRONE_MSG_CANCEL = 6,
	PADRONE_MSG_BYE = 7,
};

struct padrone_msg_header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
};

/* The server's HELLO: whom it serves. */
struct padrone_msg_hello {
	int32_t target_pid;
	int32_t server_pid;
	char version[32];	/* padroned's package version, NUL-terminated */
};

struct padrone_msg {
	uint16_t type;
	uint32_t len;
	const char *payload;	/* inside the receive buffer; valid until the next call */
};

/* Receive buffer of one connection: bytes read but not yet consumed. */
struct padrone_msgbuf {
	char *data;
	size_t len, cap, consumed;
};

/* Milliseconds of CLOCK_MONOTONIC: the clock of every timeout here. */
long padrone_now_ms(void);

/* Send one whole message (blocking, MSG_NOSIGNAL). 0 or -errno. */
int padrone_msg_send(int fd, uint16_t type, const void *payload, size_t len);
/* Send an EXIT message carrying status. */
int padrone_msg_send_exit(int fd, int status);

/* Read what fd has (one read). Returns bytes read, 0 at end of file, -errno
 * (-EAGAIN when a non-blocking fd has nothing). */
ssize_t padrone_msgbuf_fill(struct padrone_msgbuf *b, int fd);
/* Take the next complete message out of b: 1 and *m, 0 if incomplete, or
 * -EPROTO (not padrone's), -EPROTONOSUPPORT (other version), -EMSGSIZE
 * with the reason in err. */
int padrone_msgbuf_next(struct padrone_msgbuf *b, struct padrone_msg *m, char *err, size_t errlen);
void padrone_msgbuf_free(struct padrone_msgbuf *b);
/* Wait up to timeout_ms (< 0: forever) for the next complete message. 1 and
 * *m, -EPIPE if the peer closed, -ETIMEDOUT, or an error of
 * padrone_msgbuf_next, with the reason in err. */
int padrone_msg_recv(int fd, struct padrone_msgbuf *b, struct padrone_msg *m, int timeout_ms,
		     char *err, size_t errlen);

/* Messages waiting for a non-blocking socket (the server's side): whole
 * messages are appended, bytes leave as the peer reads them. */
struct padrone_outbuf {
	char *data;
	size_t len, sent, cap;
};

/* Append one message; text longer than PADRONE_MSG_MAX becomes several
 * messages of the type. 0 or -ENOMEM. */
int padrone_outbuf_add(struct padrone_outbuf *o, uint16_t type, const void *payload, size_t len);
/* Bytes not sent yet. */
size_t padrone_outbuf_pending(const struct padrone_outbuf *o);
/* Send what the socket takes now (never blocks): bytes sent, or -errno
 * (-EPIPE / -ECONNRESET when the peer has gone); 0 when it takes nothing. */
ssize_t padrone_outbuf_flush(struct padrone_outbuf *o, int fd);
void padrone_outbuf_free(struct padrone_outbuf *o);

/* COMMAND payloads: words <-> NUL-terminated strings. pack: 0 or -EMSGSIZE
 * / -ENOMEM, *out malloc'd. unpack: 0 and a malloc'd NULL-terminated vector
 * (one allocation: free(*words) frees all), or -EPROTO with err. */
int padrone_msg_pack_words(int count, char *const words[], char **out, size_t *len);
int padrone_msg_unpack_words(const char *payload, size_t len, int *count, char ***words,
			     char *err, size_t errlen);

/* ---------------------------------------------------------- socket paths */

/* The run directory padroned uses: create it if needed (mode 0700) and
 * check it is safe. 0 and the path in dir, or -errno with err. */
int padrone_rundir_open(char *dir, size_t size, char *err, size_t errlen);
/* Connect to the padroned serving pid: 0 with *fd connected (blocking,
 * close-on-exec) and its socket's path, from the first candidate directory
 * whose padroned-PID.sock answers; a socket nobody listens on (left by a
 * padroned that was killed) counts as absent: -ENOENT. A socket that cannot
 * be reached for another reason: -errno, its path in path. */
int padrone_socket_connect(pid_t pid, char *path, size_t size, int *fd);
/* The run directories padrone_socket_connect looks in, for a message:
 * "DIR, DIR" in buf. */
const char *padrone_rundir_looked(char *buf, size_t size);
/* Does somebody listen on the unix socket at path? 1 yes, 0 no (nothing
 * there, or a socket nobody listens on), -errno if that cannot be told. */
int padrone_socket_alive(const char *path);

#endif
