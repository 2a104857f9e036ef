/* padroned's control socket, served for real in a child process: the
 * greeting, commands, and everything a hostile or broken client may do
 * (another protocol version, garbage, another uid) -- answered with an
 * error or dropped, never a crash, never the end of the service. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/client.h"
#include "src/protocol.h"
#include "src/server.h"

#define FAKE_PID 424242	/* the server need not be attached to serve help */

static char rundir[64];
static char sockpath[104];
static pid_t server = -1;
static double idle_s;	/* the server's idle timeout, if set */

/* A fresh private run directory (mkdtemp's template), padroned's socket
 * for FAKE_PID in it. */
static void new_rundir(void)
{
	snprintf(rundir, sizeof(rundir), "/tmp/padrone-srv-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(rundir));
	chmod(rundir, 0700);
	setenv("PADRONE_RUNDIR", rundir, 1);
	snprintf(sockpath, sizeof(sockpath), "%s/padroned-%d.sock", rundir, FAKE_PID);
}

/* Start a padroned-like server for FAKE_PID in a child; wait until it listens. */
static void start_server(void)
{
	int ready[2];
	char c;

	new_rundir();
	ck_assert_int_eq(pipe(ready), 0);
	server = fork();
	ck_assert_int_ge(server, 0);
	if (server == 0) {
		struct padrone_ctl ctl;
		struct padrone_server *srv;
		char err[256];
		close(ready[0]);
		if (padrone_ctl_init(&ctl, "padroned", true) < 0 ||
		    padrone_server_open(FAKE_PID, &srv, err, sizeof(err)) < 0)
			_exit(3);
		if (idle_s)
			padrone_server_set_idle_timeout(srv, idle_s);
		ck_assert_int_eq(write(ready[1], "r", 1), 1);
		int r = padrone_server_run(srv, &ctl, NULL, 0);
		padrone_server_close(srv);
		padrone_ctl_fini(&ctl);
		_exit(r == 0 ? 0 : 4);
	}
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
}

/* Stop it with 'quit' over the socket; it must exit 0 (so it never crashed). */
static void stop_server(void)
{
	struct padrone_ctl ctl;
	char *words[] = { "quit", NULL };
	int status;

	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_connect(&ctl, FAKE_PID, stderr), 0);
	bool ambiguous;
	/* Forwarded on purpose: padroned itself runs 'quit' and stops. */
	ck_assert_int_eq(padrone_client_forward(&ctl, padrone_cmd_find("quit", &ambiguous), 1, words,
						stdout, stderr), 0);
	padrone_ctl_fini(&ctl);
	ck_assert_int_eq(waitpid(server, &status, 0), server);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "server ended with status 0x%x",
		      status);
	ck_assert_int_eq(access(sockpath, F_OK), -1);	/* socket removed */
	rmdir(rundir);
	server = -1;
}

static void kill_server(void)
{
	if (server > 0) {
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		server = -1;
	}
	unlink(sockpath);
	rmdir(rundir);
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Read the server's reply until EXIT: its STDERR text and the status. -1
 * if the connection ended without one. */
static int read_exit(int fd, char *text, size_t size)
{
	/* One buffer per connection (a socket's inode), kept between calls: a
	 * read may bring the next replies too, as it does on a loaded machine. */
	static struct padrone_msgbuf b;
	static ino_t b_ino;
	struct padrone_msg m;
	struct stat sb;
	char err[128];
	int status = -1;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	if (sb.st_ino != b_ino) {
		padrone_msgbuf_free(&b);
		b_ino = sb.st_ino;
	}
	text[0] = '\0';
	while (padrone_msg_recv(fd, &b, &m, 10000, err, sizeof(err)) == 1) {
		if (m.type == PADRONE_MSG_STDERR || m.type == PADRONE_MSG_STDOUT)
			snprintf(text + strlen(text), size - strlen(text), "%.*s", (int)m.len, m.payload);
		if (m.type == PADRONE_MSG_EXIT) {
			int32_t st;
			memcpy(&st, m.payload, sizeof(st));
			status = st;
			break;
		}
	}
	return status;
}

/* After a refusal the server hangs up. */
static void assert_closed(int fd)
{
	char c;
	ck_assert_int_eq(read(fd, &c, 1), 0);
	close(fd);
}

static void send_raw(int fd, uint32_t magic, uint16_t version, uint16_t type, const void *p,
		     uint32_t len)
{
	struct padrone_msg_header h = { magic, version, type, len };
	char buf[sizeof(h) + 64];

	/* One write: the server may hang up as soon as it has seen the header. */
	ck_assert_uint_le(len, 64);
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	ck_assert_int_eq(write(fd, buf, sizeof(h) + len), (ssize_t)(sizeof(h) + len));
}

/* A proper client still gets served: the server survived whatever came before. */
static void assert_serving(void)
{
	struct padrone_ctl ctl;
	char *words[] = { "help", NULL };
	char *out = NULL;
	size_t len;
	FILE *f = open_memstream(&out, &len);

	ck_assert_int_eq(kill(server, 0), 0);
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_connect(&ctl, FAKE_PID, stderr), 0);
	ck_assert_int_eq(padrone_ctl_run(&ctl, 1, words, f, stderr), 0);
	padrone_ctl_fini(&ctl);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(out, "profile"));
	free(out);
}

START_TEST(commands_run_in_the_server)
{
	struct stat st;

	start_server();
	ck_assert_int_eq(stat(sockpath, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	assert_serving();

	/* A prefix typed at the client runs the full command in padroned, and
	 * errors come back with padroned's status. */
	struct padrone_ctl ctl;
	char *words[] = { "pro", "-z", NULL };
	char *err = NULL;
	size_t len;
	FILE *f = open_memstream(&err, &len);
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_connect(&ctl, FAKE_PID, stderr), 0);
	ck_assert_int_eq(padrone_ctl_run(&ctl, 2, words, stdout, f), PADRONE_EXIT_USAGE);
	fclose(f);
	ck_assert_str_eq(err, "padroned: profile: unknown option: -z\n"
			      "usage: profile [-fju] [-b ring|bpf] [-o FILE] [-F pprof|folded|json] [SECONDS [HZ]]\n");
	free(err);
	padrone_ctl_fini(&ctl);
	stop_server();
}
END_TEST

START_TEST(another_protocol_version_is_refused)
{
	char text[512];

	start_server();
	int fd = raw_connect();
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION + 1, PADRONE_MSG_HELLO, NULL, 0);
	ck_assert_int_eq(read_exit(fd, text, sizeof(text)), PADRONE_EXIT_PROTOCOL);
	ck_assert_str_eq(text, "padroned: protocol version 3 is not supported "
			       "(this side speaks version 2)\n");
	assert_closed(fd);

	/* Also after a good greeting: every message is checked. */
	fd = raw_connect();
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_HELLO, NULL, 0);
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	char err[128];
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 10000, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_HELLO);
	struct padrone_msg_hello h;
	memcpy(&h, m.payload, sizeof(h));
	ck_assert_int_eq(h.target_pid, FAKE_PID);
	ck_assert_int_eq(h.server_pid, server);
	padrone_msgbuf_free(&b);
	send_raw(fd, PADRONE_PROTO_MAGIC, 0, PADRONE_MSG_COMMAND, "help", 5);
	ck_assert_int_eq(read_exit(fd, text, sizeof(text)), PADRONE_EXIT_PROTOCOL);
	ck_assert_ptr_nonnull(strstr(text, "protocol version 0 is not supported"));
	assert_closed(fd);
	assert_serving();
	stop_server();
}
END_TEST

START_TEST(garbage_is_answered_or_dropped_never_fatal)
{
	char text[512];
	int fd;

	start_server();
	/* Not padrone's protocol at all. */
	fd = raw_connect();
	ck_assert_int_eq(write(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
	ck_assert_int_eq(read_exit(fd, text, sizeof(text)), PADRONE_EXIT_PROTOCOL);
	ck_assert_str_eq(text, "padroned: not a padrone protocol message\n");
	assert_closed(fd);

	/* A command before the greeting; an unknown type; a huge length; a
	 * command that is not NUL-terminated words. */
	struct { uint16_t type; const char *payload; uint32_t len; bool hello; const char *expect; } cases[] = {
		{ PADRONE_MSG_COMMAND, "help", 5, false, "unexpected message (type 2, 5 bytes) before HELLO" },
		{ 99, "", 0, true, "unexpected message (type 99, 0 bytes)" },
		{ PADRONE_MSG_EXIT, "\0\0\0\0", 4, true, "unexpected message (type 5, 4 bytes)" },
		{ PADRONE_MSG_COMMAND, "help", 4, true, "bad command message: command message is not a list of NUL-terminated words" },
		{ PADRONE_MSG_COMMAND, "", 0, true, "bad command message" },
		{ PADRONE_MSG_HELLO, "x", 1, false, "unexpected message (type 1, 1 bytes) before HELLO" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fd = raw_connect();
		if (cases[i].hello) {
			send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_HELLO, NULL, 0);
			struct padrone_msgbuf b = { 0 };
			struct padrone_msg m;
			ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 10000, text, sizeof(text)), 1);
			padrone_msgbuf_free(&b);
		}
		send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, cases[i].type,
			 cases[i].payload, cases[i].len);
		ck_assert_int_eq(read_exit(fd, text, sizeof(text)), PADRONE_EXIT_PROTOCOL);
		ck_assert_msg(strstr(text, cases[i].expect), "case %zu: '%s'", i, text);
		assert_closed(fd);
	}

	fd = raw_connect();	/* more than the protocol allows */
	struct padrone_msg_header big = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION,
					  PADRONE_MSG_COMMAND, 0xffffffffu };
	ck_assert_int_eq(write(fd, &big, sizeof(big)), (ssize_t)sizeof(big));
	ck_assert_int_eq(read_exit(fd, text, sizeof(text)), PADRONE_EXIT_PROTOCOL);
	ck_assert_str_eq(text, "padroned: message of 4294967295 bytes exceeds the limit of 65536\n");
	assert_closed(fd);

	/* Random bytes, many times; and a client that sends half a message and
	 * then hangs must not block the others. */
	srand(2);
	for (int i = 0; i < 50; i++) {
		char junk[300];
		for (size_t j = 0; j < sizeof(junk); j++)
			junk[j] = (char)rand();
		fd = raw_connect();
		if (write(fd, junk, (size_t)(rand() % (int)sizeof(junk)) + 1) < 0)
			ck_assert_int_eq(errno, EPIPE);	/* it already hung up: fine */
		close(fd);
	}
	int stuck = raw_connect();
	struct padrone_msg_header h = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION,
					PADRONE_MSG_HELLO, 0 };
	ck_assert_int_eq(write(stuck, &h, 5), 5);
	assert_serving();
	close(stuck);
	assert_serving();
	stop_server();
}
END_TEST

START_TEST(another_uid_is_refused)
{
	char text[512];

	if (geteuid() != 0) {
		/* Needs root to become another uid; as a user the socket's mode
		 * alone keeps others out. */
		return;
	}
	start_server();
	/* The directory (0700) and the socket (0600) keep uid 65534 out... */
	pid_t child = fork();
	if (child == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(90);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EACCES ? 0 : 91);
	}
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_int_eq(WEXITSTATUS(status), 0);

	/* ...and were they opened, SO_PEERCRED still would. */
	chmod(rundir, 0711);
	chmod(sockpath, 0666);
	int out[2];
	ck_assert_int_eq(pipe(out), 0);
	child = fork();
	if (child == 0) {
		close(out[0]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(90);
		int fd = raw_connect();
		struct padrone_msg_header h = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION,
						PADRONE_MSG_HELLO, 0 };
		/* padroned refuses at accept: it may have hung up already. */
		if (write(fd, &h, sizeof(h)) < 0 && errno != EPIPE)
			_exit(92);
		int st = read_exit(fd, text, sizeof(text));
		dprintf(out[1], "%d %s", st, text);
		_exit(0);
	}
	close(out[1]);
	ssize_t n = read(out[0], text, sizeof(text) - 1);
	ck_assert_int_gt(n, 0);
	text[n] = '\0';
	close(out[0]);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_str_eq(text, "20 padroned: refused: uid 65534 may not control this padroned "
			       "(only root may)\n");
	assert_serving();
	chmod(rundir, 0700);
	stop_server();
}
END_TEST

START_TEST(one_server_per_pid_and_stale_sockets_replaced)
{
	struct padrone_server *srv;
	char err[256], want[256];

	start_server();
	ck_assert_int_eq(padrone_server_open(FAKE_PID, &srv, err, sizeof(err)), -EADDRINUSE);
	snprintf(want, sizeof(want), "another padroned already serves process %d (%s)", FAKE_PID,
		 sockpath);
	ck_assert_str_eq(err, want);
	kill_server();	/* SIGKILL: the socket file stays behind */

	/* A leftover socket nobody listens on: padrone attaches itself... */
	new_rundir();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	struct padrone_ctl ctl;
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_connect(&ctl, FAKE_PID, stderr), -ENOENT);
	padrone_ctl_fini(&ctl);
	/* ...and a new padroned replaces it. */
	ck_assert_int_eq(padrone_server_open(FAKE_PID, &srv, err, sizeof(err)), 0);
	padrone_server_close(srv);
	ck_assert_int_eq(access(sockpath, F_OK), -1);
	rmdir(rundir);
}
END_TEST

/* Several commands sent at once are answered one by one, in order. */
START_TEST(commands_sent_together_are_answered_in_order)
{
	struct padrone_msg_header h = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION,
					PADRONE_MSG_COMMAND, 0 };
	const char *cmds[] = { "help", "pro\0-z", "help\0info", "frob" };
	const size_t lens[] = { 5, 7, 10, 5 };
	const int status[] = { 0, PADRONE_EXIT_USAGE, 0, PADRONE_EXIT_USAGE };
	const char *says[] = { "profile", "unknown option: -z", "info threads", "unknown command" };
	char buf[256], text[4096];
	size_t n = 0;

	start_server();
	int fd = raw_connect();
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_HELLO, NULL, 0);
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 10000, text, sizeof(text)), 1);
	padrone_msgbuf_free(&b);
	for (size_t i = 0; i < 4; i++) {	/* one write */
		h.len = (uint32_t)lens[i];
		memcpy(buf + n, &h, sizeof(h));
		memcpy(buf + n + sizeof(h), cmds[i], lens[i]);
		n += sizeof(h) + lens[i];
	}
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(read_exit(fd, text, sizeof(text)), status[i]);
		ck_assert_msg(strstr(text, says[i]), "reply %zu: %s", i, text);
	}
	/* A CANCEL with nothing to cancel changes nothing. */
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_CANCEL, NULL, 0);
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_COMMAND, "help", 5);
	ck_assert_int_eq(read_exit(fd, text, sizeof(text)), 0);
	/* More than PADRONE_SERVER_MAX_QUEUED at once is refused. */
	n = 0;
	h.len = 5;
	for (int i = 0; i <= PADRONE_SERVER_MAX_QUEUED; i++) {
		memcpy(buf + n, &h, sizeof(h));
		memcpy(buf + n + sizeof(h), "help", 5);
		n += sizeof(h) + 5;
	}
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	int st;
	for (int i = 0; i <= PADRONE_SERVER_MAX_QUEUED; i++)
		if ((st = read_exit(fd, text, sizeof(text))) != 0)
			break;
	ck_assert_int_eq(st, PADRONE_EXIT_PROTOCOL);
	ck_assert_str_eq(text, "padroned: more than 8 commands at once\n");
	close(fd);
	assert_serving();
	stop_server();
}
END_TEST

/* An idle connection is closed (BYE says why); a client that still holds
 * it connects again by itself for its next command. */
START_TEST(an_idle_connection_is_closed_and_its_client_comes_back)
{
	struct padrone_ctl ctl;
	char *words[] = { "help", NULL };
	char text[512];

	idle_s = 0.5;
	start_server();
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_connect(&ctl, FAKE_PID, stderr), 0);
	int fd = raw_connect();
	send_raw(fd, PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION, PADRONE_MSG_HELLO, NULL, 0);
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 10000, text, sizeof(text)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_HELLO);
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 10000, text, sizeof(text)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_BYE);
	snprintf(text, sizeof(text), "%.*s", (int)m.len, m.payload);
	ck_assert_str_eq(text, "padroned: closing this connection: idle for 0.5 s\n");
	assert_closed(fd);
	padrone_msgbuf_free(&b);

	char *out = NULL;
	size_t len;
	FILE *f = open_memstream(&out, &len);
	ck_assert_int_eq(padrone_ctl_run(&ctl, 1, words, f, stderr), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(out, "profile"));
	free(out);
	padrone_ctl_fini(&ctl);
	stop_server();
	idle_s = 0;
}
END_TEST

/* Sockets padroneds that were killed left in the run directory go when the
 * next padroned (for any process) starts; one that answers stays. */
START_TEST(sockets_left_by_killed_padroneds_are_swept)
{
	struct padrone_server *srv;
	char err[256], stale[2][100], live[100];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(rundir, sizeof(rundir), "/tmp/padrone-srv-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(rundir));
	setenv("PADRONE_RUNDIR", rundir, 1);
	pid_t dead = fork();	/* a pid nobody has once it is reaped */
	if (dead == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
	snprintf(stale[0], sizeof(stale[0]), "%s/padroned-999999.sock", rundir);
	snprintf(stale[1], sizeof(stale[1]), "%s/.padroned-999997.sock.%d", rundir, (int)dead);
	snprintf(live, sizeof(live), "%s/padroned-999998.sock", rundir);
	for (int i = 0; i < 2; i++) {	/* bound, nobody listening */
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%.99s", stale[i]);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.99s", live);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);

	ck_assert_int_eq(padrone_server_open(FAKE_PID, &srv, err, sizeof(err)), 0);
	ck_assert_int_eq(access(stale[0], F_OK), -1);
	ck_assert_int_eq(access(stale[1], F_OK), -1);
	ck_assert_int_eq(access(live, F_OK), 0);
	padrone_server_close(srv);
	close(lfd);
	unlink(live);
	ck_assert_int_eq(rmdir(rundir), 0);	/* nothing else was left */
}
END_TEST

/* A padroned on its way out stops listening; a client that connected just
 * before (its connection waiting in the listener's backlog, never accepted)
 * is cut off when the listener closes: for the client nobody serves the
 * process (-ENOENT, nothing said), not "padroned closed the connection"
 * (status 20, which a process exiting during a command once gave). */
START_TEST(a_padroned_gone_before_greeting_serves_nobody)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ready[2];
	char c;

	new_rundir();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
	ck_assert_int_eq(pipe(ready), 0);
	server = fork();
	ck_assert_int_ge(server, 0);
	if (server == 0) {	/* listens, accepts nobody, closes once one waits */
		int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4) < 0)
			_exit(3);
		if (write(ready[1], "r", 1) != 1)
			_exit(3);
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		if (poll(&pfd, 1, 30000) != 1)
			_exit(4);
		usleep(100000);	/* its HELLO sent or not: either way */
		close(lfd);
		_exit(0);
	}
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);

	struct padrone_ctl ctl;
	pid_t served_by = 0;
	char *said = NULL;
	size_t len;
	FILE *err = open_memstream(&said, &len);
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	ck_assert_int_eq(padrone_client_probe(&ctl, FAKE_PID, &served_by, err), -ENOENT);
	padrone_ctl_fini(&ctl);
	fclose(err);
	ck_assert_str_eq(said, "");
	free(said);
	int status;
	ck_assert_int_eq(waitpid(server, &status, 0), server);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "listener ended 0x%x", status);
	server = -1;
}
END_TEST

static void teardown(void)
{
	kill_server();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);	/* writes to a server that hung up fail with EPIPE */
	Suite *s = suite_create("server");
	TCase *tc = tcase_create("server");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, commands_run_in_the_server);
	tcase_add_test(tc, another_protocol_version_is_refused);
	tcase_add_test(tc, garbage_is_answered_or_dropped_never_fatal);
	tcase_add_test(tc, another_uid_is_refused);
	tcase_add_test(tc, one_server_per_pid_and_stale_sockets_replaced);
	tcase_add_test(tc, commands_sent_together_are_answered_in_order);
	tcase_add_test(tc, an_idle_connection_is_closed_and_its_client_comes_back);
	tcase_add_test(tc, sockets_left_by_killed_padroneds_are_swept);
	tcase_add_test(tc, a_padroned_gone_before_greeting_serves_nobody);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
