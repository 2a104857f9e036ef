/* fuzz-protocol: padroned's control socket as a hostile client speaks it.
 * The bytes arrive on a socket and go through what padroned does with
 * them: framing (padrone_msgbuf_next), COMMAND payloads
 * (padrone_msg_unpack_words), the command lookup and the argument parser
 * against each command's options; and the same bytes as a line typed at
 * the prompt (padrone_split_line). */
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/args.h"
#include "src/cmd.h"
#include "src/protocol.h"

static void command(const struct padrone_msg *m)
{
	char why[256], **words;
	int count;

	if (padrone_msg_unpack_words(m->payload, m->len, &count, &words, why, sizeof(why)) < 0)
		return;
	bool ambiguous;
	const struct padrone_cmd_entry *e = count ? padrone_cmd_find(words[0], &ambiguous) : NULL;
	struct padrone_args *args;
	if (e && padrone_args_parse(e->opts, e->lower, e->upper, count - 1, words + 1, &args, why,
				    sizeof(why)) == 0) {
		for (int i = 0; i < padrone_args_count(args); i++)
			(void)strlen(padrone_args_value(args, i));
		for (const struct padrone_opt *o = e->opts; o && o->name; o++)
			if (padrone_args_get(args, o->name))
				(void)strlen(padrone_args_get(args, o->name));
		padrone_args_free(args);
	}
	free(words);
}

static void line(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), **words, why[128];

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	if (padrone_split_line(text, &words, why, sizeof(why)) >= 0)
		padrone_free_words(words);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];

	line(data, size);
	if (size > 100000 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	int buf = 1 << 20;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	struct padrone_msgbuf b = { 0 };
	char why[256];
	size_t sent = 0;
	for (;;) {
		if (sent < size) {
			ssize_t n = write(sv[0], data + sent, size - sent);
			if (n > 0)
				sent += (size_t)n;
			if (sent == size)
				shutdown(sv[0], SHUT_WR);
		} else if (!size) {
			shutdown(sv[0], SHUT_WR);
		}
		ssize_t got = padrone_msgbuf_fill(&b, sv[1]);
		struct padrone_msg m;
		int r;
		while ((r = padrone_msgbuf_next(&b, &m, why, sizeof(why))) == 1)
			if (m.type == PADRONE_MSG_COMMAND)
				command(&m);
		if (r < 0 || got == 0 || (got < 0 && got != -EAGAIN))
			break;
	}
	padrone_msgbuf_free(&b);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
