/* server.c: padroned's control socket: accept, check the peer, run commands. */
#include "src/server.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "src/protocol.h"

#define SEND_TIMEOUT_S 5

struct conn {
	int fd;
	bool greeted;
	struct padrone_msgbuf in;
};

struct padrone_server {
	int fd;
	pid_t pid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct conn conns[PADRONE_SERVER_MAX_CLIENTS];
	int nconns;
};


/* Is somebody listening on path? */
static bool socket_alive(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	alive = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(fd);
	return alive;
}

static int bind_socket(struct padrone_server *srv, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	strcpy(sa.sun_path, srv->path);
	if (lstat(srv->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return padrone_errf(err, errlen, -EEXIST, "%s exists and is not a socket", srv->path);
		if (socket_alive(&sa))
			return padrone_errf(err, errlen, -EADDRINUSE,
				    "another padroned already serves process %d (%s)", (int)srv->pid,
				    srv->path);
		unlink(srv->path);	/* left behind by a padroned that died */
	}
	srv->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv->fd < 0)
		return padrone_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	/* The socket is born 0600: no window in which others could connect. */
	mode_t old = umask(0177);
	int r = bind(srv->fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (r < 0)
		return padrone_errf(err, errlen, -e, "cannot create %s: %s", srv->path, strerror(e));
	if (listen(srv->fd, 8) < 0) {
		e = errno;
		unlink(srv->path);
		return padrone_errf(err, errlen, -e, "listen on %s: %s", srv->path, strerror(e));
	}
	return 0;
}

int padrone_server_open(pid_t pid, struct padrone_server **out, char *err, size_t errlen)
{
	struct padrone_server *srv = calloc(1, sizeof(*srv));
	char dir[sizeof(srv->path)];
	int r;

	*out = NULL;
	if (!srv)
		return padrone_errf(err, errlen, -ENOMEM, "out of memory");
	srv->fd = -1;
	srv->pid = pid;
	r = padrone_rundir_open(dir, sizeof(dir), err, errlen);
	if (r == 0 && (size_t)snprintf(srv->path, sizeof(srv->path), "%s/" PADRONE_SOCKET_NAME,
				       dir, (int)pid) >= sizeof(srv->path))
		r = padrone_errf(err, errlen, -ENAMETOOLONG, "socket path in %s is too long", dir);
	if (r == 0)
		r = bind_socket(srv, err, errlen);
	if (r < 0) {
		if (srv->fd >= 0)
			close(srv->fd);
		free(srv);
		return r;
	}
	*out = srv;
	return 0;
}

const char *padrone_server_path(const struct padrone_server *srv)
{
	return srv->path;
}

/* ------------------------------------------------------------ connections */

static void send_text(int fd, uint16_t type, const char *text, size_t len)
{
	while (len) {
		size_t n = len < PADRONE_MSG_MAX ? len : PADRONE_MSG_MAX;
		if (padrone_msg_send(fd, type, text, n) < 0)
			return;
		text += n;
		len -= n;
	}
}

/* Tell a client why it is being dropped (best effort), then drop it. */
static void refuse(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(int fd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n = snprintf(msg, sizeof(msg), "padroned: ");

	va_start(ap, fmt);
	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	send_text(fd, PADRONE_MSG_STDERR, msg, (size_t)n);
	padrone_msg_send_exit(fd, PADRONE_EXIT_PROTOCOL);
}

static void drop(struct padrone_server *srv, int i)
{
	close(srv->conns[i].fd);
	padrone_msgbuf_free(&srv->conns[i].in);
	srv->conns[i] = srv->conns[--srv->nconns];
}

static void accept_one(struct padrone_server *srv)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	int fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	/* Replies are written blocking; a client that stops reading is
	 * dropped after SEND_TIMEOUT_S instead of stalling padroned. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		refuse(fd, "cannot read the peer's credentials: %s", strerror(errno));
	} else if (cred.uid != geteuid() && cred.uid != 0) {
		char who[48] = "only root may";
		if (geteuid() != 0)
			snprintf(who, sizeof(who), "only uid %u and root may", (unsigned)geteuid());
		refuse(fd, "refused: uid %u may not control this padroned (%s)", (unsigned)cred.uid,
		       who);
	} else if (srv->nconns == PADRONE_SERVER_MAX_CLIENTS) {
		refuse(fd, "too many clients (%d)", PADRONE_SERVER_MAX_CLIENTS);
	} else {
		srv->conns[srv->nconns++] = (struct conn){ .fd = fd };
		return;
	}
	close(fd);
}

static int hello(struct padrone_server *srv, struct conn *c)
{
	struct padrone_msg_hello h = {
		.target_pid = srv->pid,
		.server_pid = getpid(),
	};

	snprintf(h.version, sizeof(h.version), "%s", PACKAGE_VERSION);
	c->greeted = true;
	return padrone_msg_send(c->fd, PADRONE_MSG_HELLO, &h, sizeof(h));
}

/* Run one COMMAND and send its output and status. */
static int command(struct padrone_ctl *ctl, struct conn *c, const struct padrone_msg *m)
{
	char why[256];
	char **words;
	int count;
	char *obuf = NULL, *ebuf = NULL;
	size_t olen = 0, elen = 0;

	if (padrone_msg_unpack_words(m->payload, m->len, &count, &words, why, sizeof(why)) < 0) {
		refuse(c->fd, "bad command message: %s", why);
		return -EPROTO;
	}
	FILE *out = open_memstream(&obuf, &olen);
	FILE *err = open_memstream(&ebuf, &elen);
	int status = PADRONE_EXIT_FAILURE;
	if (out && err)
		status = padrone_ctl_run(ctl, count, words, out, err);
	if (out)
		fclose(out);
	if (err)
		fclose(err);
	free(words);
	send_text(c->fd, PADRONE_MSG_STDOUT, obuf, olen);
	send_text(c->fd, PADRONE_MSG_STDERR, ebuf, elen);
	free(obuf);
	free(ebuf);
	return padrone_msg_send_exit(c->fd, status);
}

/* Handle what connection i sent. <0: drop it. */
static int serve(struct padrone_server *srv, struct padrone_ctl *ctl, struct conn *c)
{
	char why[256];
	struct padrone_msg m;
	ssize_t n = padrone_msgbuf_fill(&c->in, c->fd);
	int r;

	if (n <= 0)
		return n == -EAGAIN || n == -EINTR ? 0 : -EPIPE;
	while (!ctl->quit && (r = padrone_msgbuf_next(&c->in, &m, why, sizeof(why))) != 0) {
		if (r < 0) {
			refuse(c->fd, "%s", why);
			return r;
		}
		if (m.type == PADRONE_MSG_HELLO && !c->greeted && m.len == 0)
			r = hello(srv, c);
		else if (m.type == PADRONE_MSG_COMMAND && c->greeted)
			r = command(ctl, c, &m);
		else {
			refuse(c->fd, "unexpected message (type %u, %u bytes)%s", m.type, m.len,
			       c->greeted ? "" : " before HELLO");
			return -EPROTO;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int padrone_server_run(struct padrone_server *srv, struct padrone_ctl *ctl,
		       const int *wake_fds, int nwake)
{
	struct pollfd pfd[1 + 8 + PADRONE_SERVER_MAX_CLIENTS];

	if (nwake > 8)
		return -EINVAL;
	while (!ctl->quit) {
		int n = 0;
		pfd[n++] = (struct pollfd){ .fd = srv->fd, .events = POLLIN };
		for (int i = 0; i < nwake; i++)
			pfd[n++] = (struct pollfd){ .fd = wake_fds[i], .events = POLLIN };
		for (int i = 0; i < srv->nconns; i++)
			pfd[n++] = (struct pollfd){ .fd = srv->conns[i].fd, .events = POLLIN };
		int nconns = srv->nconns;
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < nwake; i++)
			if (pfd[1 + i].revents)
				return i + 1;
		/* Backwards: drop() moves the last connection into slot i. */
		for (int i = nconns - 1; i >= 0 && !ctl->quit; i--)
			if (pfd[1 + nwake + i].revents && serve(srv, ctl, &srv->conns[i]) < 0)
				drop(srv, i);
		if (pfd[0].revents & POLLIN)
			accept_one(srv);
	}
	return 0;
}

void padrone_server_close(struct padrone_server *srv)
{
	if (!srv)
		return;
	while (srv->nconns)
		drop(srv, srv->nconns - 1);
	if (srv->fd >= 0) {
		close(srv->fd);
		unlink(srv->path);
	}
	free(srv);
}
