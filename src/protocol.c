/* protocol.c: message framing and socket paths of padroned's control socket. */
#include "src/protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "src/args.h"

long padrone_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static struct padrone_msg_header header(uint16_t type, size_t len)
{
	return (struct padrone_msg_header){
		.magic = PADRONE_PROTO_MAGIC,
		.version = PADRONE_PROTO_VERSION,
		.type = type,
		.len = (uint32_t)len,
	};
}

int padrone_msg_send(int fd, uint16_t type, const void *payload, size_t len)
{
	struct padrone_msg_header h = header(type, len);

	if (len > PADRONE_MSG_MAX)
		return -EMSGSIZE;
	int r = send_all(fd, &h, sizeof(h));
	return r < 0 || !len ? r : send_all(fd, payload, len);
}

int padrone_msg_send_exit(int fd, int status)
{
	int32_t st = status;
	return padrone_msg_send(fd, PADRONE_MSG_EXIT, &st, sizeof(st));
}

/* ------------------------------------------------------- output buffers */

/* Room for more bytes, dropping what was sent first. */
static int outbuf_reserve(struct padrone_outbuf *o, size_t more)
{
	if (o->sent == o->len)
		o->sent = o->len = 0;
	if (o->sent && o->sent >= o->len / 2) {
		memmove(o->data, o->data + o->sent, o->len - o->sent);
		o->len -= o->sent;
		o->sent = 0;
	}
	if (o->len + more <= o->cap)
		return 0;
	size_t cap = o->cap * 2 > o->len + more ? o->cap * 2 : o->len + more;
	char *d = realloc(o->data, cap);
	if (!d)
		return -ENOMEM;
	o->data = d;
	o->cap = cap;
	return 0;
}

int padrone_outbuf_add(struct padrone_outbuf *o, uint16_t type, const void *payload, size_t len)
{
	const char *p = payload;

	do {	/* an empty payload is still one message */
		size_t n = len < PADRONE_MSG_MAX ? len : PADRONE_MSG_MAX;
		struct padrone_msg_header h = header(type, n);
		if (outbuf_reserve(o, sizeof(h) + n) < 0)
			return -ENOMEM;
		memcpy(o->data + o->len, &h, sizeof(h));
		if (n)
			memcpy(o->data + o->len + sizeof(h), p, n);
		o->len += sizeof(h) + n;
		p += n;
		len -= n;
	} while (len);
	return 0;
}

size_t padrone_outbuf_pending(const struct padrone_outbuf *o)
{
	return o->len - o->sent;
}

ssize_t padrone_outbuf_flush(struct padrone_outbuf *o, int fd)
{
	size_t before = o->sent;

	while (o->sent < o->len) {
		ssize_t n = send(fd, o->data + o->sent, o->len - o->sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			return -errno;
		o->sent += (size_t)n;
	}
	return (ssize_t)(o->sent - before);
}

void padrone_outbuf_free(struct padrone_outbuf *o)
{
	free(o->data);
	memset(o, 0, sizeof(*o));
}

/* -------------------------------------------------------- input buffers */

ssize_t padrone_msgbuf_fill(struct padrone_msgbuf *b, int fd)
{
	if (b->consumed) {	/* drop what was taken before reading more */
		memmove(b->data, b->data + b->consumed, b->len - b->consumed);
		b->len -= b->consumed;
		b->consumed = 0;
	}
	if (b->cap - b->len < 4096) {
		size_t cap = b->cap ? b->cap * 2 : 8192;
		if (cap > 2 * (PADRONE_MSG_MAX + sizeof(struct padrone_msg_header)))
			return -EMSGSIZE;	/* cannot happen: next() rejects long messages first */
		char *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	for (;;) {
		ssize_t n = read(fd, b->data + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		b->len += (size_t)n;
		return n;
	}
}

int padrone_msgbuf_next(struct padrone_msgbuf *b, struct padrone_msg *m, char *err, size_t errlen)
{
	struct padrone_msg_header h;
	size_t avail = b->len - b->consumed;

	if (avail < sizeof(h))
		return 0;
	memcpy(&h, b->data + b->consumed, sizeof(h));
	if (h.magic != PADRONE_PROTO_MAGIC)
		return padrone_errf(err, errlen, -EPROTO, "not a padrone protocol message");
	if (h.version != PADRONE_PROTO_VERSION)
		return padrone_errf(err, errlen, -EPROTONOSUPPORT,
			    "protocol version %u is not supported (this side speaks version %u)",
			    h.version, PADRONE_PROTO_VERSION);
	if (h.len > PADRONE_MSG_MAX)
		return padrone_errf(err, errlen, -EMSGSIZE, "message of %u bytes exceeds the limit of %u",
			    h.len, PADRONE_MSG_MAX);
	if (avail < sizeof(h) + h.len)
		return 0;
	m->type = h.type;
	m->len = h.len;
	m->payload = b->data + b->consumed + sizeof(h);
	b->consumed += sizeof(h) + h.len;
	return 1;
}

void padrone_msgbuf_free(struct padrone_msgbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

int padrone_msg_recv(int fd, struct padrone_msgbuf *b, struct padrone_msg *m, int timeout_ms,
		     char *err, size_t errlen)
{
	long deadline = padrone_now_ms() + timeout_ms;

	for (;;) {
		int r = padrone_msgbuf_next(b, m, err, errlen);
		if (r != 0)
			return r;
		int wait = -1;
		if (timeout_ms >= 0) {
			long left = deadline - padrone_now_ms();
			if (left <= 0)
				return padrone_errf(err, errlen, -ETIMEDOUT, "no reply from padroned in %d ms",
					    timeout_ms);
			wait = (int)left;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		r = poll(&pfd, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return padrone_errf(err, errlen, -errno, "poll: %s", strerror(errno));
		if (r == 0)
			continue;
		ssize_t n = padrone_msgbuf_fill(b, fd);
		if (n == 0 || n == -ECONNRESET)
			return padrone_errf(err, errlen, -EPIPE, "padroned closed the connection");
		if (n < 0 && n != -EAGAIN)
			return padrone_errf(err, errlen, (int)n, "read: %s", strerror((int)-n));
	}
}

int padrone_msg_pack_words(int count, char *const words[], char **out, size_t *len)
{
	size_t total = 0;

	if (count < 1 || count > PADRONE_MSG_MAX_WORDS)
		return -EMSGSIZE;
	for (int i = 0; i < count; i++)
		total += strlen(words[i]) + 1;
	if (total > PADRONE_MSG_MAX)
		return -EMSGSIZE;
	char *p = malloc(total);
	if (!p)
		return -ENOMEM;
	*out = p;
	*len = total;
	for (int i = 0; i < count; i++) {
		size_t n = strlen(words[i]) + 1;
		memcpy(p, words[i], n);
		p += n;
	}
	return 0;
}

int padrone_msg_unpack_words(const char *payload, size_t len, int *count, char ***words,
			     char *err, size_t errlen)
{
	int n = 0;

	if (len == 0 || payload[len - 1] != '\0')
		return padrone_errf(err, errlen, -EPROTO,
				    "command message is not a list of NUL-terminated words");
	for (size_t i = 0; i < len; i++)
		n += payload[i] == '\0';
	if (n > PADRONE_MSG_MAX_WORDS)
		return padrone_errf(err, errlen, -EPROTO, "command has more than %d words",
				    PADRONE_MSG_MAX_WORDS);
	/* One block: the vector, then a copy of the strings. */
	char **v = malloc((size_t)(n + 1) * sizeof(*v) + len);
	if (!v)
		return padrone_errf(err, errlen, -ENOMEM, "out of memory");
	char *s = (char *)(v + n + 1);
	memcpy(s, payload, len);
	for (int i = 0; i < n; i++) {
		v[i] = s;
		s += strlen(s) + 1;
	}
	v[n] = NULL;
	*count = n;
	*words = v;
	return 0;
}

/* ---------------------------------------------------------- socket paths */

enum { MAX_CANDIDATES = 4 };

/* Candidate run directories, best first ($PADRONE_RUNDIR alone if set). */
static int rundir_candidates(char dirs[MAX_CANDIDATES][256])
{
	const char *env = getenv("PADRONE_RUNDIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n = 0;

	if (env && *env) {
		snprintf(dirs[n++], 256, "%s", env);
		return n;
	}
	snprintf(dirs[n++], 256, "/run/padrone");
	if (xdg && *xdg && xdg[0] == '/')
		snprintf(dirs[n++], 256, "%s/padrone", xdg);
	snprintf(dirs[n++], 256, "/tmp/padrone-%u", (unsigned)geteuid());
	return n;
}

const char *padrone_rundir_looked(char *buf, size_t size)
{
	char dirs[MAX_CANDIDATES][256];
	int n = rundir_candidates(dirs);
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", dirs[i]);
	return buf;
}

/* Create dir if absent, then insist it is ours and private. */
static int rundir_check(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return padrone_errf(err, errlen, -errno, "cannot create %s: %s", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return padrone_errf(err, errlen, -errno, "cannot stat %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return padrone_errf(err, errlen, -ENOTDIR, "%s is not a directory", dir);
	if (st.st_uid != geteuid())
		return padrone_errf(err, errlen, -EPERM, "%s belongs to uid %u, not to us (uid %u)",
			    dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return padrone_errf(err, errlen, -EPERM, "%s is open to other users (mode %04o; must be 0700)",
			    dir, (unsigned)(st.st_mode & 07777));
	if (access(dir, W_OK | X_OK) < 0)
		return padrone_errf(err, errlen, -errno, "cannot write to %s: %s", dir, strerror(errno));
	return 0;
}

int padrone_rundir_open(char *dir, size_t size, char *err, size_t errlen)
{
	char dirs[MAX_CANDIDATES][256];
	int n = rundir_candidates(dirs);
	int r = -ENOENT;

	for (int i = 0; i < n; i++) {
		/* Only the last failure's reason is kept: that is the one the
		 * user can act on when nothing worked. */
		r = rundir_check(dirs[i], err, errlen);
		if (r == 0) {
			if ((size_t)snprintf(dir, size, "%s", dirs[i]) >= size)
				return padrone_errf(err, errlen, -ENAMETOOLONG, "run directory name too long");
			return 0;
		}
	}
	return r;
}

int padrone_socket_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	/* Non-blocking: a listener whose backlog is full (EAGAIN) lives. */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 1 : -errno;
	close(fd);
	if (r == -EAGAIN)
		return 1;
	if (r == -ECONNREFUSED || r == -ENOENT)
		return 0;
	return r;
}

static int connect_path(const char *path, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	if (connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	int e = -errno;
	close(*fd);
	*fd = -1;
	return e;
}

int padrone_socket_connect(pid_t pid, char *path, size_t size, int *fd)
{
	char dirs[MAX_CANDIDATES][256];
	int n = rundir_candidates(dirs);
	struct stat st;

	*fd = -1;
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(path, size, "%s/" PADRONE_SOCKET_NAME, dirs[i], (int)pid) >= size)
			continue;
		if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		int r = connect_path(path, fd);
		if (r == 0)
			return 0;
		/* Nobody listens (a padroned that was killed): absent. */
		if (r != -ECONNREFUSED && r != -ENOENT)
			return r;
	}
	return -ENOENT;
}
