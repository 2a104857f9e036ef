/* server.c: padroned's control socket: accept, check the peer, read
 * messages, hand commands to the jobs (jobs.h), and write replies as fast
 * as each client takes them -- all on one thread that never blocks. */
#include "src/server.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "src/jobs.h"
#include "src/protocol.h"

#define BACKLOG 128
#define MAX_WAKE 8
#define OUT_HIGH_WATER (1u << 20)	/* unread replies: stop reading the client */
#define LEAVE_FLUSH_MS 1000		/* leaving: how long replies may still go out */
#define LEAVE_POLL_MS 50
#define ACCEPT_PAUSE_MS 100		/* out of file descriptors: accept again after */

struct conn {
	int fd;
	unsigned id;		/* its number: the order connections came in */
	char name[48];		/* "client 3 (pid 4242)" */
	bool greeted;
	bool closing;		/* close once its output is out (refused, BYE) */
	bool dead;		/* gone: dropped at the end of the round */
	long active_ms;		/* last byte in or out, or last reply */
	struct padrone_msgbuf in;
	struct padrone_outbuf out;
};

struct padrone_server {
	int fd;
	pid_t pid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct conn *conns[PADRONE_SERVER_MAX_CLIENTS];
	int nconns;
	unsigned clients;	/* connections accepted so far: numbers them */
	long idle_ms;
	long accept_paused_until;
	bool leaving;		/* no more commands: finish, flush, go */
	bool handing_over;	/* the caller waits for the session to be free */
	long now;		/* of this round */
	struct padrone_jobs *jobs;
	struct pollfd pfd[2 + MAX_WAKE + PADRONE_SERVER_MAX_CLIENTS];
};

/* ------------------------------------------------------------ the socket */

/* A socket of the run directory left by a padroned that was killed:
 * padroned-PID.sock nobody listens on, or the temporary name of one that
 * died before it published its socket. */
static bool is_stale(const char *path, const char *name)
{
	struct stat before, after;
	int pid, server;
	char c;

	if (lstat(path, &before) < 0 || !S_ISSOCK(before.st_mode) || before.st_uid != geteuid())
		return false;
	if (sscanf(name, ".padroned-%d.sock.%d%c", &pid, &server, &c) == 2)
		return kill(server, 0) < 0 && errno == ESRCH;
	if (sscanf(name, "padroned-%d.sock%c", &pid, &c) != 1 || padrone_socket_alive(path) != 0)
		return false;
	/* Still the same file: not one a new padroned just put there. */
	return lstat(path, &after) == 0 && after.st_ino == before.st_ino;
}

static void sweep_stale_sockets(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < sizeof(path) &&
		    is_stale(path, de->d_name))
			unlink(path);
	}
	closedir(d);
}

/* Give the listening socket at tmp its public name. link() never replaces
 * a name: of two padroneds for one process, one gets it. */
static int publish(struct padrone_server *srv, const char *tmp, char *err, size_t errlen)
{
	struct stat st;

	for (int tries = 0; tries < 3; tries++) {
		if (link(tmp, srv->path) == 0)
			return 0;
		if (errno != EEXIST)
			return padrone_errf(err, errlen, -errno, "cannot create %s: %s", srv->path,
					    strerror(errno));
		if (lstat(srv->path, &st) == 0 && !S_ISSOCK(st.st_mode))
			return padrone_errf(err, errlen, -EEXIST, "%s exists and is not a socket",
					    srv->path);
		if (padrone_socket_alive(srv->path) > 0)
			return padrone_errf(err, errlen, -EADDRINUSE,
					    "another padroned already serves process %d (%s)",
					    (int)srv->pid, srv->path);
		unlink(srv->path);	/* left behind by a padroned that died */
	}
	return padrone_errf(err, errlen, -EADDRINUSE, "cannot create %s: it keeps reappearing",
			    srv->path);
}

/* Bind and listen under a temporary name, then publish: clients never
 * find a socket that does not listen yet. */
static int bind_socket(struct padrone_server *srv, const char *dir, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.padroned-%d.sock.%d", dir,
			     (int)srv->pid, (int)getpid()) >= sizeof(sa.sun_path))
		return padrone_errf(err, errlen, -ENAMETOOLONG, "socket path in %s is too long", dir);
	unlink(sa.sun_path);
	srv->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->fd < 0)
		return padrone_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	/* The socket is born 0600: no window in which others could connect. */
	mode_t old = umask(0177);
	int r = bind(srv->fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (r < 0)
		return padrone_errf(err, errlen, -e, "cannot create %s: %s", sa.sun_path, strerror(e));
	if (listen(srv->fd, BACKLOG) < 0)
		r = padrone_errf(err, errlen, -errno, "listen on %s: %s", sa.sun_path,
				 strerror(errno));
	else
		r = publish(srv, sa.sun_path, err, errlen);
	unlink(sa.sun_path);
	return r;
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
	srv->idle_ms = PADRONE_SERVER_IDLE_TIMEOUT_S * 1000L;
	r = padrone_rundir_open(dir, sizeof(dir), err, errlen);
	if (r == 0 && (size_t)snprintf(srv->path, sizeof(srv->path), "%s/" PADRONE_SOCKET_NAME,
				       dir, (int)pid) >= sizeof(srv->path))
		r = padrone_errf(err, errlen, -ENAMETOOLONG, "socket path in %s is too long", dir);
	if (r == 0) {
		sweep_stale_sockets(dir);
		r = bind_socket(srv, dir, err, errlen);
	}
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

void padrone_server_set_idle_timeout(struct padrone_server *srv, double seconds)
{
	srv->idle_ms = (long)(seconds * 1000);
}

/* ------------------------------------------------------------- messages */

/* Queue a message; a client nothing more can be queued for is dropped. */
static void put(struct conn *c, uint16_t type, const void *payload, size_t len)
{
	if (padrone_outbuf_add(&c->out, type, payload, len) < 0)
		c->dead = true;
}

static void put_exit(struct conn *c, int status)
{
	int32_t st = status;
	put(c, PADRONE_MSG_EXIT, &st, sizeof(st));
}

/* Queue "padroned: <fmt>\n" as one message of type. 0 or -ENOMEM. */
static int vput_line(struct padrone_outbuf *o, uint16_t type, const char *fmt, va_list ap)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "padroned: ");

	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	return padrone_outbuf_add(o, type, msg, (size_t)n);
}

/* Tell a client why it is being dropped; it is closed once that is out. */
static void refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vput_line(&c->out, PADRONE_MSG_STDERR, fmt, ap) < 0)
		c->dead = true;
	va_end(ap);
	put_exit(c, PADRONE_EXIT_PROTOCOL);
	c->closing = true;
}

/* Close a connection on padroned's own account, saying why (BYE). */
static void bye(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bye(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int r = vput_line(&c->out, PADRONE_MSG_BYE, fmt, ap);
	va_end(ap);
	c->closing = true;
	if (r < 0 || padrone_outbuf_flush(&c->out, c->fd) < 0 || !padrone_outbuf_pending(&c->out))
		c->dead = true;
}

/* A refusal before there is a connection object: one try, then close. */
static void refuse_at_once(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse_at_once(int fd, const char *fmt, ...)
{
	struct padrone_outbuf o = { 0 };
	int32_t st = PADRONE_EXIT_PROTOCOL;
	va_list ap;

	va_start(ap, fmt);
	int r = vput_line(&o, PADRONE_MSG_STDERR, fmt, ap);
	va_end(ap);
	if (r == 0 && padrone_outbuf_add(&o, PADRONE_MSG_EXIT, &st, sizeof(st)) == 0)
		padrone_outbuf_flush(&o, fd);	/* a fresh socket takes this much */
	padrone_outbuf_free(&o);
	close(fd);
}

/* ---------------------------------------------------------- connections */

static void conn_free(struct conn *c)
{
	close(c->fd);
	padrone_msgbuf_free(&c->in);
	padrone_outbuf_free(&c->out);
	free(c);
}

static void drop(struct padrone_server *srv, int i)
{
	struct conn *c = srv->conns[i];

	padrone_jobs_cancel(srv->jobs, c, true);
	conn_free(c);
	srv->conns[i] = srv->conns[--srv->nconns];
}

static void drop_dead(struct padrone_server *srv)
{
	for (int i = srv->nconns - 1; i >= 0; i--)
		if (srv->conns[i]->dead)
			drop(srv, i);
}

static bool is_idle(const struct padrone_server *srv, const struct conn *c)
{
	return !c->dead && !c->closing && !padrone_outbuf_pending(&c->out) &&
	       !padrone_jobs_count(srv->jobs, c);
}

/* Make room: close the connection idle the longest (of those idle as
 * long, the oldest). false if none is idle. */
static bool evict_idlest(struct padrone_server *srv, const char *why)
{
	int best = -1;

	for (int i = 0; i < srv->nconns; i++) {
		const struct conn *c = srv->conns[i], *b = best < 0 ? NULL : srv->conns[best];
		if (is_idle(srv, c) && (!b || c->active_ms < b->active_ms ||
					(c->active_ms == b->active_ms && c->id < b->id)))
			best = i;
	}
	if (best < 0)
		return false;
	bye(srv->conns[best], "closing this idle connection: %s", why);
	drop(srv, best);
	return true;
}

/* Only our own uid and root may talk to us. */
static int check_peer(int fd, struct ucred *cred, char *why, size_t size)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
		return padrone_errf(why, size, -errno, "cannot read the peer's credentials: %s",
				    strerror(errno));
	if (cred->uid == geteuid() || cred->uid == 0)
		return 0;
	char who[48] = "only root may";
	if (geteuid() != 0)
		snprintf(who, sizeof(who), "only uid %u and root may", (unsigned)geteuid());
	return padrone_errf(why, size, -EPERM, "refused: uid %u may not control this padroned (%s)",
			    (unsigned)cred->uid, who);
}

static void accept_one(struct padrone_server *srv)
{
	struct ucred cred;
	char why[160];
	int fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		/* The connection waits in the backlog: make room, or wait a
		 * little rather than spin on a listener that stays ready. */
		if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
		    !evict_idlest(srv, "padroned is out of file descriptors"))
			srv->accept_paused_until = srv->now + ACCEPT_PAUSE_MS;
		return;
	}
	if (check_peer(fd, &cred, why, sizeof(why)) < 0) {
		refuse_at_once(fd, "%s", why);
		return;
	}
	if (srv->nconns == PADRONE_SERVER_MAX_CLIENTS &&
	    !evict_idlest(srv, "to make room for another client")) {
		refuse_at_once(fd, "too many clients (%d), none of them idle",
			       PADRONE_SERVER_MAX_CLIENTS);
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		refuse_at_once(fd, "out of memory");
		return;
	}
	c->fd = fd;
	c->id = ++srv->clients;
	c->active_ms = srv->now;
	snprintf(c->name, sizeof(c->name), "client %u (pid %d)", c->id, (int)cred.pid);
	srv->conns[srv->nconns++] = c;
}

static void hello(struct padrone_server *srv, struct conn *c)
{
	struct padrone_msg_hello h = {
		.target_pid = srv->pid,
		.server_pid = getpid(),
	};

	snprintf(h.version, sizeof(h.version), "%s", PACKAGE_VERSION);
	c->greeted = true;
	put(c, PADRONE_MSG_HELLO, &h, sizeof(h));
}

static void command(struct padrone_server *srv, struct conn *c, const struct padrone_msg *m)
{
	char why[256];
	char **words;
	int count;

	if (padrone_jobs_count(srv->jobs, c) >= PADRONE_SERVER_MAX_QUEUED)
		refuse(c, "more than %d commands at once", PADRONE_SERVER_MAX_QUEUED);
	else if (padrone_msg_unpack_words(m->payload, m->len, &count, &words, why, sizeof(why)) < 0)
		refuse(c, "bad command message: %s", why);
	else if (padrone_jobs_submit(srv->jobs, c, c->name, count, words, srv->now) < 0)
		refuse(c, "out of memory");
}

/* Does c get to send more? Not once it is closing, nor while it leaves
 * 1 MiB of replies unread (its commands wait in its socket meanwhile). */
static bool wants_input(const struct padrone_server *srv, const struct conn *c)
{
	return !srv->leaving && !c->closing && !c->dead &&
	       padrone_outbuf_pending(&c->out) < OUT_HIGH_WATER;
}

/* Handle the complete messages c sent. */
static void take_messages(struct padrone_server *srv, struct conn *c)
{
	struct padrone_msg m;
	char why[256];
	int r;

	while (wants_input(srv, c) && (r = padrone_msgbuf_next(&c->in, &m, why, sizeof(why))) != 0) {
		if (r < 0)
			refuse(c, "%s", why);
		else if (m.type == PADRONE_MSG_HELLO && !c->greeted && m.len == 0)
			hello(srv, c);
		else if (m.type == PADRONE_MSG_COMMAND && c->greeted)
			command(srv, c, &m);
		else if (m.type == PADRONE_MSG_CANCEL && c->greeted && m.len == 0)
			padrone_jobs_cancel(srv->jobs, c, false);
		else
			refuse(c, "unexpected message (type %u, %u bytes)%s", m.type, m.len,
			       c->greeted ? "" : " before HELLO");
	}
}

static void read_conn(struct padrone_server *srv, struct conn *c)
{
	ssize_t n = padrone_msgbuf_fill(&c->in, c->fd);

	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0) {	/* hung up: its commands are cancelled */
		c->dead = true;
		return;
	}
	c->active_ms = srv->now;
}

static void write_conn(struct padrone_server *srv, struct conn *c)
{
	ssize_t n = padrone_outbuf_flush(&c->out, c->fd);

	if (n < 0) {
		c->dead = true;
		return;
	}
	if (n > 0)
		c->active_ms = srv->now;
	if (c->closing && !padrone_outbuf_pending(&c->out))
		c->dead = true;
}

/* Close connections idle too long (nothing of theirs running): with a BYE,
 * or silently if they do not even read. Returns ms until the next is due,
 * or -1. */
static long expire_idle(struct padrone_server *srv)
{
	long next = -1;

	for (int i = 0; i < srv->nconns; i++) {
		struct conn *c = srv->conns[i];
		if (c->dead || padrone_jobs_count(srv->jobs, c))
			continue;
		long left = c->active_ms + srv->idle_ms - srv->now;
		if (left > 0) {
			next = next < 0 || left < next ? left : next;
			continue;
		}
		if (c->closing || padrone_outbuf_pending(&c->out))
			c->dead = true;	/* reads nothing: no use saying more */
		else
			bye(c, "closing this connection: idle for %g s", (double)srv->idle_ms / 1000);
	}
	return next;
}

/* ------------------------------------------------------------- the loop */

static void on_reply(void *owner, const char *out, size_t out_len, const char *err,
		     size_t err_len, int status)
{
	struct conn *c = owner;

	if (out_len)
		put(c, PADRONE_MSG_STDOUT, out, out_len);
	if (err_len)
		put(c, PADRONE_MSG_STDERR, err, err_len);
	put_exit(c, status);
	c->active_ms = padrone_now_ms();
}

static void on_notice(void *owner, const char *line)
{
	put(owner, PADRONE_MSG_STDERR, line, strlen(line));
}

static int earliest(long a, long b)
{
	if (a < 0)
		return (int)b;
	return (int)(b < 0 || a < b ? a : b);
}

/* Wait for something to do, then do it. 0, a wake fd's index + 1 (not
 * while leaving), or -errno. */
static int serve_round(struct padrone_server *srv, const int *wake_fds, int nwake)
{
	struct pollfd *pfd = srv->pfd;
	int n = 0;

	srv->now = padrone_now_ms();
	long timeout = padrone_jobs_run(srv->jobs, srv->now);
	if (padrone_jobs_quit(srv->jobs) && !srv->leaving)
		return 0;	/* detached: the wake fds may be closed already */
	timeout = earliest(timeout, expire_idle(srv));
	drop_dead(srv);
	bool accepting = !srv->leaving && srv->now >= srv->accept_paused_until;
	if (!accepting && !srv->leaving)
		timeout = earliest(timeout, srv->accept_paused_until - srv->now);
	if (srv->leaving)
		timeout = earliest(timeout, LEAVE_POLL_MS);
	/* The last command may have ended in this round's run: the caller
	 * must see it now, not at the next event (a client that reads no more
	 * makes none) */
	if (srv->handing_over && padrone_jobs_session_free(srv->jobs))
		timeout = 0;
	pfd[n++] = (struct pollfd){ .fd = padrone_jobs_fd(srv->jobs), .events = POLLIN };
	pfd[n++] = (struct pollfd){ .fd = accepting ? srv->fd : -1, .events = POLLIN };
	for (int i = 0; i < nwake; i++)
		pfd[n++] = (struct pollfd){ .fd = srv->leaving ? -1 : wake_fds[i], .events = POLLIN };
	int first = n, nconns = srv->nconns;
	for (int i = 0; i < nconns; i++) {
		struct conn *c = srv->conns[i];
		short ev = (wants_input(srv, c) ? POLLIN : 0) |
			   (padrone_outbuf_pending(&c->out) ? POLLOUT : 0);
		pfd[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	if (poll(pfd, (nfds_t)n, (int)timeout) < 0)
		return errno == EINTR ? 0 : -errno;
	srv->now = padrone_now_ms();
	for (int i = 0; i < nwake; i++)
		if (pfd[2 + i].revents)
			return i + 1;
	/* No connection comes or goes in this loop: drops wait for its end. */
	for (int i = 0; i < nconns; i++) {
		struct conn *c = srv->conns[i];
		short re = pfd[first + i].revents;
		if (re & POLLIN)
			read_conn(srv, c);
		else if (re & (POLLHUP | POLLERR))
			c->dead = true;	/* hung up while we were not reading */
		if (!c->dead && (re & POLLOUT))
			write_conn(srv, c);
		if (!c->dead)
			take_messages(srv, c);
	}
	drop_dead(srv);
	if (pfd[1].revents & POLLIN)
		accept_one(srv);
	return 0;
}

/* Answer what waits, let running commands end, give replies a moment. */
/* No more clients: a client connecting now finds nobody (and goes on
 * without padroned) rather than waiting in the backlog of a listener that
 * will never accept it, to be cut off when padroned ends. */
static void stop_listening(struct padrone_server *srv)
{
	if (srv->fd < 0)
		return;
	unlink(srv->path);
	close(srv->fd);
	srv->fd = -1;
}

static void leave(struct padrone_server *srv, const char *why)
{
	long until = -1;

	srv->leaving = true;
	stop_listening(srv);
	padrone_jobs_stop(srv->jobs, why);
	for (;;) {
		/* Running commands use the session: wait for them whatever. */
		if (serve_round(srv, NULL, 0) < 0 && padrone_jobs_count(srv->jobs, NULL))
			usleep(LEAVE_POLL_MS * 1000);
		if (padrone_jobs_count(srv->jobs, NULL))
			continue;
		if (until < 0)
			until = srv->now + LEAVE_FLUSH_MS;
		bool pending = false;
		for (int i = 0; i < srv->nconns; i++)
			pending |= padrone_outbuf_pending(&srv->conns[i]->out) > 0;
		if (!pending || srv->now >= until)
			break;
	}
}

int padrone_server_run(struct padrone_server *srv, struct padrone_ctl *ctl,
		       const int *wake_fds, int nwake)
{
	struct padrone_jobs_ops ops = { .reply = on_reply, .notice = on_notice };
	int r = 0;

	if (nwake > MAX_WAKE)
		return -EINVAL;
	if (!srv->jobs && (r = padrone_jobs_new(ctl, &ops, &srv->jobs)) < 0)
		return r;
	padrone_jobs_pause(srv->jobs, false);
	while (!padrone_jobs_quit(srv->jobs) && (r = serve_round(srv, wake_fds, nwake)) == 0)
		;
	/* Hand the session to the caller: what waits stays queued, what runs
	 * (a measure, a cfg) ends first; clients are served meanwhile. */
	padrone_jobs_pause(srv->jobs, true);
	srv->handing_over = true;
	while (!padrone_jobs_session_free(srv->jobs))
		if (serve_round(srv, NULL, 0) < 0)
			usleep(LEAVE_POLL_MS * 1000);
	srv->handing_over = false;
	/* A detach under way when a wake fd fired (detaching closes the
	 * session's event fd, and may signal it) is what ended the service. */
	return padrone_jobs_quit(srv->jobs) ? 0 : r;
}

void padrone_server_close(struct padrone_server *srv)
{
	if (!srv)
		return;
	if (srv->jobs) {
		leave(srv, padrone_jobs_quit(srv->jobs) ? "padroned has detached" :
							  "padroned is leaving");
		padrone_jobs_free(srv->jobs);
		srv->jobs = NULL;
	}
	for (int i = 0; i < srv->nconns; i++) {
		struct conn *c = srv->conns[i];
		if (!c->dead && !c->closing && !padrone_outbuf_pending(&c->out))
			bye(c, "padroned has stopped serving process %d", (int)srv->pid);
		conn_free(c);
	}
	srv->nconns = 0;
	stop_listening(srv);
	free(srv);
}
