/* client.c: talking to padroned over its control socket (see protocol.h). */
#include "src/client.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/protocol.h"

#define HELLO_TIMEOUT_MS 10000
/* padroned gone: how long the process may take to end once padroned let
 * go of it, and how long padroned may hold it before (see unserved) */
#define UNSERVED_GRACE_MS 2000
#define UNSERVED_HELD_MS 60000

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

/* How a wait for padroned's reply ended. */
enum reply {
	REPLY_EXIT,	/* EXIT came: *status set */
	REPLY_HELLO,	/* HELLO came (when asked for) */
	REPLY_BYE,	/* padroned said BYE before saying anything */
	REPLY_GONE,	/* the connection ended before a word of the reply */
	REPLY_BROKEN,	/* printed why; *status PADRONE_EXIT_PROTOCOL */
};

/* Wait for more of the reply into b, forwarding ^C (padrone_ctl_interrupt,
 * when cancel) as CANCEL. 2 when woken (look at b again), -EPIPE when
 * padroned closed the connection, or -errno with why. */
static int wait_more(struct padrone_ctl *ctl, int fd, struct padrone_msgbuf *b, bool cancel,
		     int timeout_ms, char *why, size_t size)
{
	struct pollfd pfd[2] = {
		{ .fd = fd, .events = POLLIN },
		{ .fd = ctl->cancel_fd, .events = POLLIN },
	};
	int r = poll(pfd, cancel ? 2 : 1, timeout_ms);

	if (r < 0 && errno == EINTR)
		return 2;
	if (r < 0)
		return padrone_errf(why, size, -errno, "poll: %s", strerror(errno));
	if (r == 0)
		return padrone_errf(why, size, -ETIMEDOUT, "no reply from padroned in %d ms",
				    timeout_ms);
	if (cancel && padrone_ctl_take_interrupt(ctl)) {
		/* It ends the command as ^C would here; the reply comes as usual. */
		padrone_msg_send(fd, PADRONE_MSG_CANCEL, NULL, 0);
	}
	if (!pfd[0].revents)
		return 2;
	ssize_t n = padrone_msgbuf_fill(b, fd);
	if (n == 0 || n == -ECONNRESET)
		return padrone_errf(why, size, -EPIPE, "padroned closed the connection");
	if (n < 0 && n != -EAGAIN && n != -EINTR)
		return padrone_errf(why, size, (int)n, "read: %s", strerror((int)-n));
	return 2;
}

/* Copy a server's STDOUT/STDERR messages to out/err until its EXIT, its
 * HELLO (when hello is given) or a BYE; with cancel, ^C sends CANCEL. A
 * failure is printed. */
static enum reply read_reply(struct padrone_ctl *ctl, int fd, struct padrone_msgbuf *b,
			     FILE *out, FILE *err, bool cancel, int timeout_ms, int *status,
			     struct padrone_msg *hello)
{
	bool said = false;	/* something of this reply came */
	char why[256];

	*status = PADRONE_EXIT_PROTOCOL;
	for (;;) {
		struct padrone_msg m;
		int32_t st;
		int r = padrone_msgbuf_next(b, &m, why, sizeof(why));

		if (r == 0)
			r = wait_more(ctl, fd, b, cancel, timeout_ms, why, sizeof(why));
		if (r == -EPIPE && !said)
			return REPLY_GONE;
		if (r < 0) {
			client_error(ctl, err, 0, "%s", why);
			return REPLY_BROKEN;
		}
		if (r == 2)
			continue;
		switch (m.type) {
		case PADRONE_MSG_STDOUT:
		case PADRONE_MSG_STDERR: {
			FILE *f = m.type == PADRONE_MSG_STDOUT ? out : err;
			fwrite(m.payload, 1, m.len, f);
			fflush(f);
			said = true;
			break;
		}
		case PADRONE_MSG_EXIT:
			if (m.len != sizeof(st)) {
				client_error(ctl, err, 0, "malformed exit message from padroned");
				return REPLY_BROKEN;
			}
			memcpy(&st, m.payload, sizeof(st));
			*status = st;
			return REPLY_EXIT;
		case PADRONE_MSG_HELLO:
			if (!hello)
				goto unexpected;
			*hello = m;
			return REPLY_HELLO;
		case PADRONE_MSG_BYE:
			if (!said)
				return REPLY_BYE;
			fwrite(m.payload, 1, m.len, err);	/* it says why */
			return REPLY_BROKEN;
		default:
		unexpected:
			client_error(ctl, err, 0, "unexpected message type %u from padroned", m.type);
			return REPLY_BROKEN;
		}
	}
}

/* HELLO both ways; checks that the server serves pid; *server its pid.
 * 0, -ENOENT when padroned went away instead of greeting, or an exit
 * status after printing why. */
static int greet(struct padrone_ctl *ctl, int fd, pid_t pid, pid_t *server, FILE *err)
{
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	struct padrone_msg_hello h;
	int st, r = 0;

	int sent = padrone_msg_send(fd, PADRONE_MSG_HELLO, NULL, 0);
	if (sent == -EPIPE || sent == -ECONNRESET)
		return -ENOENT;	/* gone before greeting, as below */
	if (sent < 0)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "cannot talk to padroned at %s: %s", ctl->remote_path,
				    strerror(-sent));
	switch (read_reply(ctl, fd, &b, stdout, err, false, HELLO_TIMEOUT_MS, &st, &m)) {
	case REPLY_HELLO:
		break;
	case REPLY_EXIT:	/* refused: it said why, with a status */
		r = st ? st : PADRONE_EXIT_PROTOCOL;
		goto out;
	case REPLY_BYE:
	case REPLY_GONE:
		/* A padroned on its way out (it no longer reads, and closes
		 * what it did not greet): it serves the process no more. */
		r = -ENOENT;
		goto out;
	case REPLY_BROKEN:
		r = PADRONE_EXIT_PROTOCOL;
		goto out;
	}
	if (m.len != sizeof(h)) {
		r = client_error(ctl, err, PADRONE_EXIT_PROTOCOL, "malformed greeting from padroned");
		goto out;
	}
	memcpy(&h, m.payload, sizeof(h));
	if (h.target_pid != pid)
		r = client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				 "padroned at %s serves process %d, not %d", ctl->remote_path,
				 (int)h.target_pid, (int)pid);
	*server = h.server_pid;
out:
	padrone_msgbuf_free(&b);
	return r;
}

/* Connect to the padroned serving pid and greet it: 0 and *fd, -ENOENT
 * when none does, or an exit status after printing why. */
static int open_greeted(struct padrone_ctl *ctl, pid_t pid, int *fd, pid_t *server, FILE *err)
{
	int r = padrone_socket_connect(pid, ctl->remote_path, sizeof(ctl->remote_path), fd);

	if (r == -ENOENT)
		return -ENOENT;	/* none, or a stale socket: nobody serves it any more */
	if (r < 0)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
				    "cannot connect to padroned at %s: %s", ctl->remote_path,
				    strerror(-r));
	r = greet(ctl, *fd, pid, server, err);
	if (r) {
		close(*fd);
		*fd = -1;
	}
	return r;
}

/* A number after "Key:" in /proc/PID/status, or 0. */
static long status_field(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	long v = 0;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static bool is_padroned(pid_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(comm, sizeof comm, f) && !strcmp(comm, "padroned\n");
	fclose(f);
	return ok;
}

/* Does process pid hold the socket of inode ino? */
static bool holds_socket(pid_t pid, unsigned long ino)
{
	char dir[64], want[64], path[320], link[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof want, "socket:[%lu]", ino);
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ssize_t n = readlink(path, link, sizeof link - 1);
		found = n > 0 && (link[n] = '\0', !strcmp(link, want));
	}
	if (d)
		closedir(d);
	return found;
}

/* The directory of a socket bound at path for pid's padroned: bound under a
 * temporary name (".NAME.SERVER") and renamed into place, which
 * /proc/net/unix does not see. */
static bool socket_dir(const char *path, pid_t pid, char *dir, size_t size)
{
	char name[64];
	const char *base = strrchr(path, '/');

	snprintf(name, sizeof name, PADRONE_SOCKET_NAME, (int)pid);
	if (!base || base == path)
		return false;
	base++;
	size_t nl = strlen(name);
	if (strcmp(base, name) && (base[0] != '.' || strncmp(base + 1, name, nl) ||
				   base[1 + nl] != '.'))
		return false;
	snprintf(dir, size, "%.*s", (int)(base - 1 - path), path);
	return true;
}

int padrone_client_unfound_server(pid_t pid, pid_t *server, char *dir, size_t size)
{
	/* the thread that traces pid, then its process */
	pid_t tracer = (pid_t)status_field(pid, "TracerPid");
	char line[512];
	int r = -ENOENT;

	if (tracer > 0)
		tracer = (pid_t)status_field(tracer, "Tgid");
	if (tracer <= 0 || !is_padroned(tracer))
		return -ENOENT;
	FILE *f = fopen("/proc/net/unix", "re");
	/* Num RefCount Protocol Flags Type St Inode Path: the sockets bound
	 * for pid, and of them the one the tracer holds. */
	while (f && r && fgets(line, sizeof line, f)) {
		unsigned long ino;
		char sock[400];
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %399s", &ino, sock) == 2 &&
		    socket_dir(sock, pid, dir, size) && holds_socket(tracer, ino)) {
			*server = tracer;
			r = 0;
		}
	}
	if (f)
		fclose(f);
	return r;
}

int padrone_client_probe(struct padrone_ctl *ctl, pid_t pid, pid_t *server, FILE *err)
{
	int fd, r = open_greeted(ctl, pid, &fd, server, err);

	if (r == 0)
		close(fd);
	return r;
}

int padrone_client_connect(struct padrone_ctl *ctl, pid_t pid, FILE *err)
{
	pid_t server;
	int fd, r = open_greeted(ctl, pid, &fd, &server, err);

	if (r == 0) {
		char exe[64];
		struct stat st = { 0 };
		snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
		stat(exe, &st);
		ctl->remote_fd = fd;
		ctl->remote_pid = pid;
		ctl->remote_server = server;
		ctl->remote_exe_dev = st.st_dev;
		ctl->remote_exe_ino = st.st_ino;
	}
	return r;
}

void padrone_client_disconnect(struct padrone_ctl *ctl)
{
	if (ctl->remote_fd >= 0)
		close(ctl->remote_fd);
	ctl->remote_fd = -1;
	ctl->remote_pid = 0;
	ctl->remote_server = 0;
}

/* padroned said something while no command was under way: a BYE (idle
 * too long, or it made room for another client) or its end. */
static bool hung_up(const struct padrone_ctl *ctl)
{
	struct pollfd pfd = { .fd = ctl->remote_fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

/* Whether pid has exited: no such process, or a zombie. */
static bool has_exited(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	char *got = fgets(buf, sizeof buf, f);
	fclose(f);
	const char *close_paren = got ? strrchr(buf, ')') : NULL;
	return close_paren && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

/* The program pid runs, to tell an exec by, and the padroned serving it. */
struct program {
	pid_t pid;
	dev_t dev;
	ino_t ino;
	pid_t server;
};

/* Whether a thread of padroned server still traces pid: it holds the
 * process (at its exit, say) until it has let go of it. */
static bool held_by(pid_t pid, pid_t server)
{
	char path[64];
	long tracer = status_field(pid, "TracerPid");

	if (tracer <= 0 || server <= 0)
		return false;
	/* TracerPid names the tracing thread (attach/'s tracer thread) */
	snprintf(path, sizeof path, "/proc/%d/task/%ld", (int)server, tracer);
	return access(path, F_OK) == 0;
}

/* padroned stopped serving the process: it is gone, or (closed) it
 * closed the connection. When that is because the process exited or
 * exec'd between two commands (padroned then ends with it), the words and
 * status padroned would have given. */
static int unserved(struct padrone_ctl *ctl, FILE *err, const struct program *p, bool closed)
{
	pid_t pid = p->pid;
	char path[64], comm[32] = "";
	struct stat st;
	bool execd = false;

	/* padroned may have seen the exit begin (and left) before the process
	 * has quite ended: it holds the process until it has let go of it,
	 * however long a loaded machine makes that (bounded), then a moment
	 * for the exit to end */
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	for (int waited = 0; (waited < UNSERVED_GRACE_MS ||
			      (waited < UNSERVED_HELD_MS && held_by(pid, p->server))) &&
			     !has_exited(pid) && !execd; waited += 10) {
		execd = stat(path, &st) == 0 && (st.st_dev != p->dev || st.st_ino != p->ino);
		if (!execd)
			usleep(10000);
	}
	if (has_exited(pid))
		return client_error(ctl, err, padrone_why_exit_status(PADRONE_TARGET_EXITED),
				    "process %d has exited", (int)pid);
	if (execd) {
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
		FILE *f = fopen(path, "re");
		if (f && fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = '\0';
		if (f)
			fclose(f);
		return client_error(ctl, err, padrone_why_exit_status(PADRONE_TARGET_EXECED),
				    "process %d has exec'd another program (now %s)", (int)pid,
				    comm);
	}
	if (closed)
		return client_error(ctl, err, PADRONE_EXIT_PROTOCOL, "padroned closed the connection");
	return client_error(ctl, err, PADRONE_EXIT_PROTOCOL,
			    "no padroned serves process %d any more", (int)pid);
}

/* A fresh connection to the padroned serving the same process. */
static int reconnect(struct padrone_ctl *ctl, const struct program *p, FILE *err)
{
	padrone_client_disconnect(ctl);
	int r = padrone_client_connect(ctl, p->pid, err);
	if (r == -ENOENT)
		return unserved(ctl, err, p, false);
	return r;
}

int padrone_client_forward(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e,
			   int count, char *const words[], FILE *out, FILE *err)
{
	char **w = malloc((size_t)(count + 1) * sizeof(*w));
	char *payload;
	size_t len;
	int r, status = PADRONE_EXIT_PROTOCOL;

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
	padrone_ctl_take_interrupt(ctl);	/* a ^C that came before this command is not for it */
	const struct program served = { ctl->remote_pid, ctl->remote_exe_dev, ctl->remote_exe_ino,
					ctl->remote_server };
	/* A connection padroned closed meanwhile is made again, and a command
	 * it answered with BYE (so never ran) is sent again, once. */
	for (int attempt = 0;; attempt++) {
		if ((attempt || hung_up(ctl)) && (status = reconnect(ctl, &served, err)) != 0)
			break;
		struct padrone_msgbuf b = { 0 };
		enum reply rr = REPLY_BYE;	/* not sent: not run either */
		if (padrone_msg_send(ctl->remote_fd, PADRONE_MSG_COMMAND, payload, len) == 0)
			rr = read_reply(ctl, ctl->remote_fd, &b, out, err, true, -1, &status,
					NULL);
		padrone_msgbuf_free(&b);
		if (rr == REPLY_BYE && attempt == 0)
			continue;
		if (rr == REPLY_BYE || rr == REPLY_GONE)
			status = unserved(ctl, err, &served, true);
		if (rr != REPLY_EXIT)
			padrone_client_disconnect(ctl);
		break;
	}
	free(payload);
	return status;
}
