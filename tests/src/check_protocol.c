/* padroned's control protocol: framing, checks on every message, words,
 * and where sockets live. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "src/protocol.h"

static void pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

START_TEST(messages_round_trip_whole_or_in_pieces)
{
	int sv[2];
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	char err[128];

	pair(sv);
	ck_assert_int_eq(padrone_msg_send(sv[0], PADRONE_MSG_STDOUT, "hello\n", 6), 0);
	ck_assert_int_eq(padrone_msg_send_exit(sv[0], 7), 0);
	ck_assert_int_eq(padrone_msg_recv(sv[1], &b, &m, 5000, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_STDOUT);
	ck_assert_uint_eq(m.len, 6);
	ck_assert_int_eq(memcmp(m.payload, "hello\n", 6), 0);
	ck_assert_int_eq(padrone_msg_recv(sv[1], &b, &m, 5000, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_EXIT);
	int32_t st;
	memcpy(&st, m.payload, sizeof(st));	/* payloads are not aligned */
	ck_assert_int_eq(st, 7);

	/* One message dribbled in byte by byte. */
	struct padrone_msg_header h = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION,
					PADRONE_MSG_STDERR, 3 };
	char raw[sizeof(h) + 3];
	memcpy(raw, &h, sizeof(h));
	memcpy(raw + sizeof(h), "abc", 3);
	for (size_t i = 0; i < sizeof(raw); i++) {
		ck_assert_int_eq(padrone_msgbuf_next(&b, &m, err, sizeof(err)), 0);
		ck_assert_int_eq(write(sv[0], raw + i, 1), 1);
		ck_assert_int_eq(padrone_msgbuf_fill(&b, sv[1]), 1);
	}
	ck_assert_int_eq(padrone_msgbuf_next(&b, &m, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_STDERR);
	ck_assert_int_eq(memcmp(m.payload, "abc", 3), 0);

	close(sv[0]);
	ck_assert_int_eq(padrone_msg_recv(sv[1], &b, &m, 5000, err, sizeof(err)), -EPIPE);
	ck_assert_str_eq(err, "padroned closed the connection");
	close(sv[1]);
	padrone_msgbuf_free(&b);
}
END_TEST

/* The server's side: messages queue up while the peer reads nothing, never
 * blocking; big text is cut into messages of at most PADRONE_MSG_MAX; what
 * the peer reads later is every message whole, in order. */
START_TEST(an_output_buffer_never_blocks_and_loses_nothing)
{
	enum { BIG = 3 * PADRONE_MSG_MAX + 17, ROUNDS = 12 };
	struct padrone_outbuf o = { 0 };
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	char *text = malloc(BIG), err[128];
	int sv[2];

	pair(sv);
	for (size_t i = 0; i < BIG; i++)
		text[i] = (char)('a' + i % 26);
	/* ~2.4 MB for a socket that takes a few hundred KB: flush returns. */
	for (int r = 0; r < ROUNDS; r++) {
		ck_assert_int_eq(padrone_outbuf_add(&o, PADRONE_MSG_STDOUT, text, BIG), 0);
		ck_assert_int_eq(padrone_outbuf_add(&o, PADRONE_MSG_EXIT, &r, sizeof(r)), 0);
		ck_assert_int_ge(padrone_outbuf_flush(&o, sv[0]), 0);
	}
	ck_assert_uint_gt(padrone_outbuf_pending(&o), 0);
	for (int r = 0; r < ROUNDS; r++) {
		size_t got = 0;
		for (;;) {
			while (padrone_msgbuf_next(&b, &m, err, sizeof(err)) == 0) {
				ck_assert_int_ge(padrone_outbuf_flush(&o, sv[0]), 0);
				ck_assert_int_gt(padrone_msgbuf_fill(&b, sv[1]), 0);
			}
			if (m.type == PADRONE_MSG_EXIT)
				break;
			ck_assert_uint_eq(m.type, PADRONE_MSG_STDOUT);
			ck_assert_uint_le(m.len, PADRONE_MSG_MAX);
			ck_assert_int_eq(memcmp(m.payload, text + got, m.len), 0);
			got += m.len;
		}
		ck_assert_uint_eq(got, BIG);
		int st;
		memcpy(&st, m.payload, sizeof(st));
		ck_assert_int_eq(st, r);
	}
	ck_assert_uint_eq(padrone_outbuf_pending(&o), 0);
	/* An empty payload is one message too; a peer that left: an error. */
	ck_assert_int_eq(padrone_outbuf_add(&o, PADRONE_MSG_CANCEL, NULL, 0), 0);
	ck_assert_int_eq(padrone_outbuf_pending(&o), sizeof(struct padrone_msg_header));
	close(sv[1]);
	ck_assert_int_eq(padrone_outbuf_flush(&o, sv[0]), -EPIPE);
	close(sv[0]);
	padrone_outbuf_free(&o);
	padrone_msgbuf_free(&b);
	free(text);
}
END_TEST

/* Feed raw bytes; return what padrone_msgbuf_next says. */
static int feed(const void *raw, size_t len, char *err, size_t errlen)
{
	int sv[2];
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;

	pair(sv);
	ck_assert_int_eq(write(sv[0], raw, len), (ssize_t)len);
	close(sv[0]);
	int r = padrone_msg_recv(sv[1], &b, &m, 5000, err, errlen);
	close(sv[1]);
	padrone_msgbuf_free(&b);
	return r;
}

START_TEST(every_message_is_checked)
{
	char err[128];
	struct padrone_msg_header h = { PADRONE_PROTO_MAGIC, PADRONE_PROTO_VERSION + 1,
					PADRONE_MSG_HELLO, 0 };

	ck_assert_int_eq(feed(&h, sizeof(h), err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_str_eq(err, "protocol version 3 is not supported (this side speaks version 2)");
	h.version = PADRONE_PROTO_VERSION;
	h.magic = 0x41414141;
	ck_assert_int_eq(feed(&h, sizeof(h), err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(err, "not a padrone protocol message");
	h.magic = PADRONE_PROTO_MAGIC;
	h.len = PADRONE_MSG_MAX + 1;
	ck_assert_int_eq(feed(&h, sizeof(h), err, sizeof(err)), -EMSGSIZE);
	ck_assert_str_eq(err, "message of 65537 bytes exceeds the limit of 65536");
	ck_assert_int_eq(feed("GET / HTTP/1.0\r\n\r\n", 18, err, sizeof(err)), -EPROTO);
	/* A truncated message is a closed connection, not a crash. */
	h.len = 100;
	ck_assert_int_eq(feed(&h, sizeof(h), err, sizeof(err)), -EPIPE);
	ck_assert_int_eq(padrone_msg_send(-1, PADRONE_MSG_STDOUT, "x", PADRONE_MSG_MAX + 1),
			 -EMSGSIZE);
}
END_TEST

START_TEST(command_words_pack_and_unpack)
{
	char *in[] = { "replace", "f", "", "/tmp/x y.so:fast" };
	char *payload, err[128];
	char **out;
	size_t len;
	int n;

	ck_assert_int_eq(padrone_msg_pack_words(4, in, &payload, &len), 0);
	ck_assert_int_eq(padrone_msg_unpack_words(payload, len, &n, &out, err, sizeof(err)), 0);
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_str_eq(out[i], in[i]);
	ck_assert_ptr_null(out[4]);
	free(out);
	ck_assert_int_eq(padrone_msg_unpack_words(payload, len - 1, &n, &out, err, sizeof(err)),
			 -EPROTO);
	ck_assert_str_eq(err, "command message is not a list of NUL-terminated words");
	ck_assert_int_eq(padrone_msg_unpack_words(payload, 0, &n, &out, err, sizeof(err)), -EPROTO);
	free(payload);

	char many[PADRONE_MSG_MAX_WORDS + 1];
	memset(many, 0, sizeof(many));
	ck_assert_int_eq(padrone_msg_unpack_words(many, sizeof(many), &n, &out, err, sizeof(err)),
			 -EPROTO);
	ck_assert_int_eq(padrone_msg_pack_words(0, in, &payload, &len), -EMSGSIZE);
}
END_TEST

static char tmpdir[64];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/padrone-check-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	free(tu_run(cmd, NULL));
}

START_TEST(run_dir_is_created_private_and_checked)
{
	char dir[256], want[128], err[256];

	make_tmpdir();
	snprintf(want, sizeof(want), "%s/run", tmpdir);
	setenv("PADRONE_RUNDIR", want, 1);
	ck_assert_int_eq(padrone_rundir_open(dir, sizeof(dir), err, sizeof(err)), 0);
	ck_assert_str_eq(dir, want);
	struct stat st;
	ck_assert_int_eq(stat(want, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);

	chmod(want, 0755);	/* open to others: refused */
	ck_assert_int_eq(padrone_rundir_open(dir, sizeof(dir), err, sizeof(err)), -EPERM);
	char expect[256];
	snprintf(expect, sizeof(expect), "%s is open to other users (mode 0755; must be 0700)", want);
	ck_assert_str_eq(err, expect);
	chmod(want, 0700);

	if (geteuid() == 0) {	/* someone else's directory: refused */
		ck_assert_int_eq(chown(want, 65534, 65534), 0);
		ck_assert_int_eq(padrone_rundir_open(dir, sizeof(dir), err, sizeof(err)), -EPERM);
		ck_assert_ptr_nonnull(strstr(err, "belongs to uid 65534"));
	}

	snprintf(want, sizeof(want), "%s/link", tmpdir);	/* a symlink: refused */
	ck_assert_int_eq(symlink("/tmp", want), 0);
	setenv("PADRONE_RUNDIR", want, 1);
	ck_assert_int_eq(padrone_rundir_open(dir, sizeof(dir), err, sizeof(err)), -ENOTDIR);
	remove_tmpdir();
}
END_TEST

/* A socket is found only when somebody listens on it: one left by a
 * padroned that was killed (bound, nobody listening) counts as absent. */
START_TEST(sockets_are_found_by_pid)
{
	char path[256], err[256], dir[256];
	int cfd;

	make_tmpdir();
	setenv("PADRONE_RUNDIR", tmpdir, 1);
	chmod(tmpdir, 0700);
	ck_assert_int_eq(padrone_rundir_open(dir, sizeof(dir), err, sizeof(err)), 0);
	ck_assert_int_eq(padrone_socket_connect(4242, path, sizeof(path), &cfd), -ENOENT);

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/padroned-4242.sock", tmpdir);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(padrone_socket_alive(sa.sun_path), 0);
	ck_assert_int_eq(padrone_socket_connect(4242, path, sizeof(path), &cfd), -ENOENT);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(padrone_socket_alive(sa.sun_path), 1);
	ck_assert_int_eq(padrone_socket_connect(4242, path, sizeof(path), &cfd), 0);
	ck_assert_int_ge(cfd, 0);
	ck_assert_str_eq(path, sa.sun_path);
	close(cfd);
	ck_assert_int_eq(padrone_socket_connect(4243, path, sizeof(path), &cfd), -ENOENT);
	close(fd);
	ck_assert_int_eq(padrone_socket_alive(sa.sun_path), 0);	/* closed: stale */
	unlink(sa.sun_path);
	ck_assert_int_eq(padrone_socket_alive(sa.sun_path), 0);
	remove_tmpdir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("protocol");
	TCase *tc = tcase_create("protocol");
	tcase_add_test(tc, messages_round_trip_whole_or_in_pieces);
	tcase_add_test(tc, every_message_is_checked);
	tcase_add_test(tc, an_output_buffer_never_blocks_and_loses_nothing);
	tcase_add_test(tc, command_words_pack_and_unpack);
	tcase_add_test(tc, run_dir_is_created_private_and_checked);
	tcase_add_test(tc, sockets_are_found_by_pid);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
