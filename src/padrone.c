/* padrone: the interactive session (libedit), one-shot commands from the
 * shell, and scripts on standard input. Talks to the padroned serving the
 * process when there is one; otherwise does the work itself. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <editline/readline.h>

#include "config.h"
#include "src/version.h"
#include "src/cmd.h"

#define HISTORY_LINES 1000

static struct padrone_ctl ctl;
static volatile sig_atomic_t got_signal;
static volatile sig_atomic_t at_prompt;	/* the interactive loop runs */
static bool line_cancelled;		/* ^C while typing: drop the line */

static const char usage_text[] =
	"usage: padrone [-p PID] [COMMAND [ARGUMENT ...] [';' COMMAND ...]]\n"
	"       padrone -h | -V\n"
	"Without a command, reads commands from the terminal (or standard input);\n"
	"type 'help' for the list.\n";

/* A running profile or measure ends early (also in padroned). At the
 * prompt ^C only does that, or clears the line being typed; anything else
 * means padrone is leaving, and a profile about to begin ends at once too. */
static void on_signal(int sig)
{
	got_signal = sig;
	padrone_ctl_interrupt(&ctl, sig != SIGINT || !at_prompt);
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	padrone_prepare_signals();
	/* ^C stops a profile, not padrone (reading a line just goes on); TERM
	 * and HUP interrupt the read so padrone detaches and leaves. */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sa.sa_flags = 0;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ------------------------------------------------------------ completion */

static const char *const *gen_words;
static const char *const info_words[] = { "threads", "modules", "stops", "replacements", NULL };
static const char *const backend_words[] = { "ring", "bpf", NULL };
static const char *const mode_words[] = { "exhaustive", "sample", NULL };
static const char *const analysis_words[] = { "blocks", "record", "refs", "cache", "edges",
					       "loops", NULL };

static char *word_generator(const char *text, int state)
{
	static size_t i, len;

	if (!state) {
		i = 0;
		len = strlen(text);
	}
	while (gen_words[i])
		if (strncmp(gen_words[i++], text, len) == 0)
			return strdup(gen_words[i - 1]);
	return NULL;
}

/* instrument -a LIST: the analysis after the last comma of the list typed,
 * the list so far kept. */
static char *analysis_generator(const char *text, int state)
{
	const char *comma = strrchr(text, ',');
	size_t done = comma ? (size_t)(comma + 1 - text) : 0;
	char *word, *out;

	gen_words = analysis_words;
	if (!(word = word_generator(text + done, state)) || !done)
		return word;
	if ((out = malloc(done + strlen(word) + 1))) {
		memcpy(out, text, done);
		strcpy(out + done, word);
	}
	free(word);
	return out;
}

static char *command_generator(const char *text, int state)
{
	static size_t i, len;

	if (!state) {
		i = 0;
		len = strlen(text);
	}
	while (padrone_cmd_table[i])
		if (strncmp(padrone_cmd_table[i++]->name, text, len) == 0)
			return strdup(padrone_cmd_table[i - 1]->name);
	return NULL;
}

/* The function names of the last profile, hottest first (the session's
 * own: a profile padroned holds stays there). */
static char *function_generator(const char *text, int state)
{
	static size_t i, len;
	const struct padrone_report *r = padrone_session__report(ctl.session);

	if (!state) {
		i = 0;
		len = strlen(text);
	}
	while (r && i < padrone_report__count(r)) {
		const struct padrone_function *f = padrone_report__function(r, i++);
		if (f && strncmp(f->name, text, len) == 0)
			return strdup(f->name);
	}
	return NULL;
}

/* Commands that take a function's name (completed for any argument that is
 * not an option). */
static bool takes_function(const char *cmd)
{
	static const char *const cmds[] = { "cfg", "disas", "loops", "replace", "restore",
					    "measure", "instrument", "uninstrument", NULL };

	for (size_t i = 0; cmds[i]; i++)
		if (strcmp(cmd, cmds[i]) == 0)
			return true;
	return false;
}

/* instrument's options whose value is not a function's name. */
static bool takes_value(const char *opt)
{
	static const char *const opts[] = { "-H", "--hot", "-t", "--for", "-o", "--output",
					    "-I", "--I1", "-D", "--D1", "-L", "--LL", "-c", "--duty",
					    "-B", "--max-overhead", NULL };

	for (size_t i = 0; opts[i]; i++)
		if (strcmp(opt, opts[i]) == 0)
			return true;
	return false;
}

static char *no_generator(const char *text, int state)
{
	return NULL;
}

/* Commands first; then what each command takes. */
static char **complete(const char *text, int start, int end)
{
	char **words = NULL;
	int n = padrone_split_line(rl_line_buffer, &words, NULL, 0);
	const struct padrone_cmd_entry *e = NULL;
	bool ambiguous;
	char **res = NULL;

	rl_attempted_completion_over = 1;	/* never complete file names */
	if (n > 0 && start > 0)
		e = padrone_cmd_find(words[0], &ambiguous);
	const char *prev = n > 1 ? words[n - 1 - (end > start)] : "";
	if (n <= 0 || start == 0 || (e && strcmp(e->name, "help") == 0))
		res = rl_completion_matches(text, command_generator);
	else if (e && strcmp(e->name, "info") == 0)
		gen_words = info_words, res = rl_completion_matches(text, word_generator);
	else if (e && strcmp(e->name, "profile") == 0 &&
		 (strcmp(prev, "-b") == 0 || strcmp(prev, "--backend") == 0))
		gen_words = backend_words, res = rl_completion_matches(text, word_generator);
	else if (e && strcmp(e->name, "instrument") == 0 &&
		 (strcmp(prev, "-m") == 0 || strcmp(prev, "--mode") == 0))
		gen_words = mode_words, res = rl_completion_matches(text, word_generator);
	else if (e && strcmp(e->name, "instrument") == 0 &&
		 (strcmp(prev, "-a") == 0 || strcmp(prev, "--analyses") == 0))
		res = rl_completion_matches(text, analysis_generator);
	else if (e && strcmp(e->name, "instrument") == 0 && takes_value(prev))
		res = NULL;	/* a number or a geometry: nothing to offer */
	else if (e && takes_function(e->name) && text[0] != '-')
		res = rl_completion_matches(text, function_generator);
	padrone_free_words(words);
	return res;
}

/* ----------------------------------------------------------------- loops */

static const char *history_path(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("PADRONE_HISTORY"), *home = getenv("HOME");

	if (env && *env)
		return env;
	if (!home || !*home)
		return NULL;
	snprintf(path, sizeof(path), "%s/.padrone_history", home);
	return path;
}

/* libedit's reading of a key. ^C (the interrupt's eventfd: no race with a
 * signal that comes just before the wait) clears the line as in bash: "^C",
 * a new line, a fresh prompt, nothing run, nothing in the history. TERM and
 * HUP end the session (as end of input). */
static int read_key(FILE *in)
{
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = fileno(in), .events = POLLIN },
			{ .fd = ctl.cancel_fd, .events = POLLIN },
		};
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return EOF;
		if (got_signal == SIGTERM || got_signal == SIGHUP)
			return EOF;
		if (padrone_ctl_take_interrupt(&ctl) && got_signal == SIGINT) {
			got_signal = 0;
			line_cancelled = true;
			fputs("^C", stdout);
			fflush(stdout);
			return '\n';	/* ends the line, which the loop drops */
		}
		if (pfd[0].revents) {
			unsigned char c;
			ssize_t n = read(fileno(in), &c, 1);
			if (n == 1)
				return c;
			if (n == 0 || errno != EINTR)
				return EOF;
		}
	}
}

/* ^D at an empty prompt: leave as quit does, saying what that did. */
static void end_of_input(void)
{
	char *words[] = { "quit", NULL };

	fputc('\n', stdout);
	padrone_ctl_run(&ctl, 1, words, stdout, stderr);
}

static int interactive(void)
{
	const char *hist = history_path();
	char prompt[64];
	struct termios cooked, typing;
	bool have_cooked;

	rl_readline_name = "padrone";
	rl_catch_signals = 0;	/* libedit would re-raise them to our whole process group */
	rl_attempted_completion_function = complete;
	rl_completion_entry_function = no_generator;
	rl_getc_function = read_key;
	rl_initialize();	/* first: it would drop a history read before it */
	using_history();
	if (hist)
		read_history(hist);
	/* libedit prints the prompt before it puts the terminal in raw mode:
	 * a ^D typed on seeing it could reach the tty while it was still in
	 * canonical mode, which keeps an end of file as a NUL byte for a
	 * later raw read, and the ^D was lost (1 in 4 after a ^C'd profile).
	 * So canonical mode (and the tty's echo) stay off for the session,
	 * commands included (^C and ^Z still signal): with the terminal's own
	 * settings back for each command, 6 of 12 ^Ds were still lost, 0 of 24
	 * like this. The settings the session found are put back at its end. */
	have_cooked = tcgetattr(STDIN_FILENO, &cooked) == 0;
	typing = cooked;
	typing.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	typing.c_cc[VMIN] = 1;
	typing.c_cc[VTIME] = 0;
	at_prompt = 1;
	while (!ctl.quit && got_signal != SIGTERM && got_signal != SIGHUP) {
		pid_t pid = padrone_ctl_pid(&ctl);
		if (pid)
			snprintf(prompt, sizeof(prompt), "(padrone %d) ", (int)pid);
		else
			snprintf(prompt, sizeof(prompt), "(padrone) ");
		got_signal = 0;
		line_cancelled = false;
		if (have_cooked)
			tcsetattr(STDIN_FILENO, TCSANOW, &typing);
		char *line = readline(prompt);
		if (!line) {
			if (got_signal != SIGTERM && got_signal != SIGHUP)
				end_of_input();
			break;
		}
		if (line_cancelled) {
			free(line);
			continue;
		}
		/* Saved at once: a padrone that is killed loses no line. */
		if (line[strspn(line, " \t")]) {
			add_history(line);
			if (hist)
				write_history(hist);
		}
		padrone_ctl_run_line(&ctl, line, stdout, stderr);
		free(line);
		fflush(stdout);
	}
	if (have_cooked)
		tcsetattr(STDIN_FILENO, TCSANOW, &cooked);
	if (hist) {
		write_history(hist);
		history_truncate_file(hist, HISTORY_LINES);
	}
	return PADRONE_EXIT_OK;
}

/* A signal ended a one-shot run or a script: 1 and a message if commands
 * were left out (the process is detached next), else 0. */
static int left_early(bool skipped)
{
	pid_t pid = padrone_ctl_pid(&ctl);

	if (!skipped)
		return PADRONE_EXIT_OK;
	if (pid)
		fprintf(stderr, "padrone: %s: leaving process %d before the rest of the commands\n",
			strsignal(got_signal), (int)pid);
	else
		fprintf(stderr, "padrone: %s: leaving before the rest of the commands\n",
			strsignal(got_signal));
	return PADRONE_EXIT_FAILURE;
}

/* Lines from a pipe or file: no prompt, the first failure ends it. */
static int script(void)
{
	char *line = NULL;
	size_t cap = 0;
	int status = PADRONE_EXIT_OK;

	while (!ctl.quit && status == PADRONE_EXIT_OK && !got_signal) {
		errno = 0;
		if (getline(&line, &cap, stdin) < 0) {
			if (errno == EINTR && !got_signal)
				continue;
			break;
		}
		status = padrone_ctl_run_line(&ctl, line, stdout, stderr);
		fflush(stdout);
	}
	free(line);
	/* the input was not read to its end */
	if (status == PADRONE_EXIT_OK && !ctl.quit && got_signal && !feof(stdin))
		status = left_early(true);
	return status;
}

/* COMMAND words from our own command line, ';' separating commands. */
static int one_shot(int count, char **words)
{
	int status = PADRONE_EXIT_OK;

	int i = 0;
	while (i < count && status == PADRONE_EXIT_OK && !ctl.quit && !got_signal) {
		int j = i;
		while (j < count && strcmp(words[j], ";") != 0)
			j++;
		status = padrone_ctl_run(&ctl, j - i, words + i, stdout, stderr);
		i = j + 1;
	}
	if (status == PADRONE_EXIT_OK && !ctl.quit && got_signal)
		status = left_early(i < count);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	unsigned long pid = 0;
	char why[160];
	int c, status;

	/* "+": options end at the first command word, so its own options
	 * (profile -j ...) pass through untouched. */
	while ((c = getopt_long(argc, argv, "+p:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (padrone_parse_ulong("PID", optarg, 1, INT_MAX, &pid, why, sizeof(why)) < 0) {
				fprintf(stderr, "padrone: %s\n", why);
				return PADRONE_EXIT_USAGE;
			}
			break;
		case 'h':
			fputs(usage_text, stdout);
			return PADRONE_EXIT_OK;
		case 'V':
			printf("padrone %s\n", padrone_version_text());
			return PADRONE_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			return PADRONE_EXIT_USAGE;
		}
	}
	setup_signals();
	if (padrone_ctl_init(&ctl, "padrone", false) < 0) {
		fprintf(stderr, "padrone: %s\n", strerror(errno));
		return PADRONE_EXIT_FAILURE;
	}
	bool tty = optind == argc && isatty(STDIN_FILENO);
	if (pid && tty) {
		char arg[24], *words[] = { "attach", arg, NULL };
		snprintf(arg, sizeof(arg), "%lu", pid);
		padrone_ctl_run(&ctl, 2, words, stdout, stderr);
	} else if (pid && (status = padrone_ctl_attach(&ctl, (pid_t)pid, stdout, stderr)) != 0) {
		padrone_ctl_fini(&ctl);
		return status;
	}
	if (optind < argc)
		status = one_shot(argc - optind, argv + optind);
	else if (tty)
		status = interactive();
	else
		status = script();
	padrone_ctl_fini(&ctl);	/* detaches, if padrone itself is attached */
	return status;
}
