/* top [-d SECONDS] [-n COUNT] [N]: the hottest functions, refreshed in
 * place while sampling goes on, as perf top -p does.
 *
 * Each refresh is the profile and hot commands run through the ctl, so top
 * works the same at the prompt, one-shot and through padroned (which keeps
 * the report). It runs in the client: only the client has the keyboard. q
 * stops it after the refresh under way; ^C ends the profile under way,
 * which ends top (a refresh cut short, as when the process goes away).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "src/cmd.h"

#define TOP_DEFAULT_N 20

static const struct padrone_opt top_opts[] = {
	{ 'd', "delay", "SECONDS" },
	{ 'n', "iterations", "COUNT" },
	{ 0 },
};

/* The keyboard, when stdin is a terminal: keys without Enter, no echo. */
struct keys {
	bool tty;
	struct termios saved;
};

static void keys_open(struct keys *k)
{
	struct termios raw;

	k->tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &k->saved) == 0;
	if (!k->tty)
		return;
	raw = k->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	tcsetattr(STDIN_FILENO, TCSANOW, &raw);
}

/* Was q typed since the last look? */
static bool keys_quit(struct keys *k)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char c;

	while (k->tty && poll(&pfd, 1, 0) > 0 && read(STDIN_FILENO, &c, 1) == 1)
		if (c == 'q' || c == 'Q')
			return true;
	return false;
}

static void keys_close(struct keys *k)
{
	if (k->tty)
		tcsetattr(STDIN_FILENO, TCSANOW, &k->saved);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One refresh: sample for delay, then the n hottest on ctx->out. Returns
 * the status of the commands; *cut when the profile ended early. */
static int refresh(struct padrone_cmd_ctx *ctx, const char *delay, double seconds,
		   const char *n, unsigned round, bool *cut)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char *profile[] = { "profile", "--", (char *)delay, NULL };
	char *hot[] = { "hot", "--", (char *)n, NULL };

	FILE *discard = fopen("/dev/null", "we");	/* the profile's own table */

	if (!mem || !discard) {
		if (mem)
			fclose(mem);
		free(buf);
		if (discard)
			fclose(discard);
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "%s", strerror(errno));
	}
	double t0 = now_s();
	int st = padrone_ctl_run(ctx->ctl, 3, profile, discard, ctx->err);
	fclose(discard);
	*cut = now_s() - t0 < seconds * 0.9;
	if (st == PADRONE_EXIT_OK)
		st = padrone_ctl_run(ctx->ctl, 3, hot, mem, ctx->err);
	fclose(mem);
	if (st == PADRONE_EXIT_OK) {
		bool tty = isatty(fileno(ctx->out));
		fprintf(ctx->out, "%spadrone top: process %d, every %s s, refresh %u%s\n",
			tty ? "\033[H\033[2J" : round > 1 ? "\n" : "", (int)padrone_ctl_pid(ctx->ctl),
			delay, round, tty ? " (q to quit)" : "");
		fwrite(buf, 1, len, ctx->out);
		fflush(ctx->out);
	}
	free(buf);
	return st;
}

static int top_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *delay = padrone_args_get(args, 'd'), *iter = padrone_args_get(args, 'n');
	const char *count = padrone_args_value(args, 0);
	unsigned long n = TOP_DEFAULT_N, rounds = 0;
	double seconds = 2;
	char why[160], nbuf[24];

	if (!padrone_ctl_pid(ctx->ctl))
		return padrone_cmd_error(ctx, padrone_why_exit_status(PADRONE_NOT_ATTACHED),
					 "not attached to a process: use 'attach PID' first");
	if (delay && padrone_parse_double("SECONDS", delay, PADRONE_PROFILE_MIN_SECONDS,
					  PADRONE_PROFILE_MAX_SECONDS, &seconds, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (iter && padrone_parse_ulong("COUNT", iter, 1, 1000000, &rounds, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (count && padrone_parse_ulong("N", count, 1, 1000000, &n, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	snprintf(nbuf, sizeof(nbuf), "%lu", n);
	struct keys k;
	keys_open(&k);
	int st = PADRONE_EXIT_OK;
	bool cut = false;
	for (unsigned r = 1; st == PADRONE_EXIT_OK && !cut && (!rounds || r <= rounds); r++) {
		st = refresh(ctx, delay ? delay : "2", seconds, nbuf, r, &cut);
		if (keys_quit(&k))
			break;
	}
	keys_close(&k);
	return st;
}

const struct padrone_cmd_entry padrone_cmd_top_entry = {
	.name = "top",
	.usage = "[-d SECONDS] [-n COUNT] [N]",
	.summary = "show the hottest functions, refreshed while sampling goes on",
	.help = "Samples for SECONDS (default 2), shows the N hottest functions (default\n"
		"20), and again, in place on a terminal, until q is typed or ^C, or for\n"
		"COUNT refreshes with -n (--iterations). -d (--delay) sets SECONDS.",
	.opts = top_opts,
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_CLIENT,
	.exec = top_exec,
};
