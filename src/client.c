/* client.c: talking to padroned over its control socket (see protocol.h). */
#include "src/client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "src/protocol.h"

#define HELLO_TIMEOUT_MS 10000

static int client_error(struct padrone_ctl *ctl, FILE *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int client_error(struct padrone_ctl *ctl, FILE *err, int status, const char *fmt, ...)
{
	va_list ap;

	fprintf(err, "%s: ", ctl->prog);
	va_start(ap, fmt);
	vfprintf(err, fmt, ap);
	va_end(ap);
	fputc('\n', err);
	return status;
}

/* Copy a server's STDOUT/STDERR messages to out/err until its EXIT (0,
 * *status set) or, when hello is given, its HELLO (1, *hello set). A
 * protocol failure is printed and gives -1 with *status
 * PADRONE_EXIT_PROTOCOL. */
static int read_reply(struct padrone_ctl *ctl, int fd, struct padrone_msgbuf *b, FILE *out,
		      FILE *err, int timeout_ms, int *status, struct padrone_msg *hello)
{
	char why[256];

	*status = PADRONE_EXIT_PROTOCOL;
	for (;;) {
		struct padrone_msg m;
		int32_t st;
		int r = padrone_msg_recv(fd, b, &m, timeout_ms, why, sizeof(why));

		if (r < 0)
			return client_error(ctl, err, -1, "%s", why);
		switch (m.type) {
		case PADRONE_MSG_STDOUT:
			fwrite(m.payload, 1, m.len, out);
			fflush(out);
			break;
		case PADRONE_MSG_STDERR:
			fwrite(m.payload, 1, m.len, err);
			fflush(err);
			break;
		case PADRONE_MSG_EXIT:
			if (m.len != sizeof(st))
				return client_error(ctl, err, -1, "malformed exit message from padroned");
			memcpy(&st, m.payload, sizeof(st));
			*status = st;
			return 0;
		case PADRONE_MSG_HELLO:
			if (hello) {
				*hello = m;
				return 1;
			}
			/* fall through */
		default:
			return client_error(ctl, err, -1, "unexpected message type %u from padroned",
					    m.type);
		}
	}
}

static int open_socket(const char *path, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	if (connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(*fd);
		*fd = -1;
		return e;
	}
	return 0;
}

/* HELLO both ways; checks that the server serves pid. */
static int greet(struct padrone_ctl *ctl, int fd, pid_t pid, struct padrone_msgbuf *b, FILE *err)
{
	struct padrone_msg m;
	struct padrone_msg_hello h;

	if (padrone_msg_send(fd, PADRONE_MSG_HELLO, NULL, 0) < 0)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "cannot talk to padroned at %s: %s", ctl->remote_path,
				    strerror(errno));
	int st;
	int r = read_reply(ctl, fd, b, stdout, err, HELLO_TIMEOUT_MS, &st, &m);
	if (r <= 0)	/* refused (it said why, with a status), or broken */
		return st ? st : PADRONE_EXIT_PROTOCOL;
	if (m.len != sizeof(h))
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL, "malformed greeting from padroned");
	memcpy(&h, m.payload, sizeof(h));
	if (h.target_pid != pid)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "padroned at %s serves process %d, not %d", ctl->remote_path,
				    (int)h.target_pid, (int)pid);
	return 0;
}

int padrone_client_connect(struct padrone_ctl *ctl, pid_t pid, FILE *err)
{
	struct padrone_msgbuf b = { 0 };
	int fd, r;

	if (padrone_socket_find(pid, ctl->remote_path, sizeof(ctl->remote_path)) < 0)
		return -ENOENT;
	r = open_socket(ctl->remote_path, &fd);
	if (r == -ECONNREFUSED || r == -ENOENT)
		return -ENOENT;	/* a stale socket: nobody serves it any more */
	if (r < 0)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "cannot connect to padroned at %s: %s", ctl->remote_path,
				    strerror(-r));
	r = greet(ctl, fd, pid, &b, err);
	padrone_msgbuf_free(&b);
	if (r) {
		close(fd);
		return r;
	}
	ctl->remote_fd = fd;
	ctl->remote_pid = pid;
	return 0;
}

void padrone_client_disconnect(struct padrone_ctl *ctl)
{
	if (ctl->remote_fd >= 0)
		close(ctl->remote_fd);
	ctl->remote_fd = -1;
	ctl->remote_pid = 0;
}

int padrone_client_forward(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e,
			   int count, char *const words[], FILE *out, FILE *err)
{
	struct padrone_msgbuf b = { 0 };
	char **w = malloc((size_t)(count + 1) * sizeof(*w));
	char *payload;
	size_t len;
	int r;

	if (!w)
		return client_error(ctl, err, PADRONE_EXIT_FAILURE, "out of memory");
	/* padroned gets the full name, whatever prefix was typed. */
	memcpy(w, words, (size_t)count * sizeof(*w));
	w[0] = (char *)e->name;
	w[count] = NULL;
	r = padrone_msg_pack_words(count, w, &payload, &len);
	free(w);
	if (r < 0)
		return client_error(ctl, err, PADRONE_EXIT_USAGE, "command too long for padroned");
	r = padrone_msg_send(ctl->remote_fd, PADRONE_MSG_COMMAND, payload, len);
	free(payload);
	if (r < 0) {
		padrone_client_disconnect(ctl);
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "lost the connection to padroned: %s", strerror(-r));
	}
	int status;
	r = read_reply(ctl, ctl->remote_fd, &b, out, err, -1, &status, NULL);
	padrone_msgbuf_free(&b);
	if (r < 0)
		padrone_client_disconnect(ctl);
	return status;
}
