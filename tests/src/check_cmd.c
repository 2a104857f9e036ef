/* The command table: lookup by prefix, usage on bad arguments, the error
 * path, help, and every usage line documented in padrone(1). */
#include "tests/lib/tu.h"

#include <ctype.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/cmd.h"

struct run {
	int status;
	char *out, *err;
};

/* Run a line in a fresh, unattached padrone ctl; capture its output. */
static struct run run_line(const char *line)
{
	struct padrone_ctl ctl;
	struct run r = { 0 };
	size_t olen, elen;
	FILE *out = open_memstream(&r.out, &olen), *err = open_memstream(&r.err, &elen);

	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	r.status = padrone_ctl_run_line(&ctl, line, out, err);
	padrone_ctl_fini(&ctl);
	fclose(out);
	fclose(err);
	return r;
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

START_TEST(every_entry_is_complete_and_names_are_unique)
{
	int n = 0;

	for (const struct padrone_cmd_entry *const *e = padrone_cmd_table; *e; e++, n++) {
		ck_assert_ptr_nonnull((*e)->name);
		ck_assert_ptr_nonnull((*e)->usage);
		ck_assert_ptr_nonnull((*e)->summary);
		ck_assert_ptr_nonnull((*e)->exec);
		ck_assert((*e)->upper < 0 || (*e)->upper >= (*e)->lower);
		for (const struct padrone_cmd_entry *const *f = e + 1; *f; f++) {
			ck_assert_str_ne((*e)->name, (*f)->name);
			if ((*e)->alias)
				ck_assert_str_ne((*e)->alias, (*f)->name);
			if ((*f)->alias)
				ck_assert_str_ne((*f)->alias, (*e)->name);
		}
		/* Every option a command declares shows in its usage (its letter,
		 * or its long name: instrument's --hot N). */
		for (const struct padrone_opt *o = (*e)->opts; o && o->name; o++) {
			char dashed[64] = "";
			if (o->long_name)
				snprintf(dashed, sizeof dashed, "--%s ", o->long_name);
			ck_assert_msg(strchr((*e)->usage, o->name) ||
				      (*dashed && strstr((*e)->usage, dashed)),
				      "%s: -%c not in usage '%s'", (*e)->name, o->name, (*e)->usage);
		}
	}
	ck_assert_int_ge(n, 8);
}
END_TEST

START_TEST(names_aliases_and_unique_prefixes_find_commands)
{
	static const struct { const char *typed, *found; } cases[] = {
		{ "profile", "profile" }, { "pro", "profile" }, { "p", "profile" },
		{ "a", "attach" }, { "i", "info" }, { "q", "quit" },
		{ "hel", "help" }, { "ho", "hot" }, { "b", "bt" }, { "backtrace", "bt" },
		{ "exit", "quit" }, { "det", "detach" }, { "dis", "disas" },
		{ "disassemble", "disas" }, { "c", "cfg" }, { "l", "loops" },
	};
	bool ambiguous;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct padrone_cmd_entry *e = padrone_cmd_find(cases[i].typed, &ambiguous);
		ck_assert_msg(e != NULL, "%s not found", cases[i].typed);
		ck_assert_str_eq(e->name, cases[i].found);
		ck_assert(!ambiguous);
	}
	ck_assert_ptr_null(padrone_cmd_find("h", &ambiguous));
	ck_assert(ambiguous);
	ck_assert_ptr_null(padrone_cmd_find("d", &ambiguous));	/* detach, disas */
	ck_assert(ambiguous);
	ck_assert_ptr_null(padrone_cmd_find("frob", &ambiguous));
	ck_assert(!ambiguous);
	ck_assert_ptr_null(padrone_cmd_find("", &ambiguous));
	ck_assert_ptr_null(padrone_cmd_find("profiles", &ambiguous));
}
END_TEST

START_TEST(an_ambiguous_prefix_lists_the_matches)
{
	struct run r = run_line("h");

	ck_assert_int_eq(r.status, PADRONE_EXIT_USAGE);
	ck_assert_str_eq(r.err, "padrone: ambiguous command: h, could be:\n  hot\n  help\n");
	ck_assert_str_eq(r.out, "");
	run_free(&r);
	r = run_line("frob 1 2");
	ck_assert_int_eq(r.status, PADRONE_EXIT_USAGE);
	ck_assert_str_eq(r.err, "padrone: unknown command: frob (try 'help')\n");
	run_free(&r);
}
END_TEST

START_TEST(bad_arguments_print_the_usage)
{
	static const struct { const char *line, *err; } cases[] = {
		{ "hot 1 2", "padrone: hot: too many arguments\nusage: hot [-jln] [N]\n" },
		{ "attach", "padrone: attach: too few arguments\nusage: attach PID\n" },
		{ "pro -z", "padrone: profile: unknown option: -z\n"
			    "usage: profile [-fju] [-b ring|bpf] [-o FILE] [-F pprof|folded|json] [SECONDS [HZ]]\n" },
		{ "profile --backend", "padrone: profile: option --backend needs a value (BACKEND)\n"
				       "usage: profile [-fju] [-b ring|bpf] [-o FILE] [-F pprof|folded|json] [SECONDS [HZ]]\n" },
		{ "detach now", "padrone: detach: too many arguments\nusage: detach\n" },
		{ "attach x", "padrone: PID must be an integer from 1 to 2147483647, not 'x'\n" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r = run_line(cases[i].line);
		ck_assert_msg(r.status == PADRONE_EXIT_USAGE, "%s: status %d", cases[i].line, r.status);
		ck_assert_str_eq(r.err, cases[i].err);
		run_free(&r);
	}
}
END_TEST

START_TEST(commands_on_a_process_need_one)
{
	const char *lines[] = { "profile 1", "hot", "bt", "info threads", "detach" };

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct run r = run_line(lines[i]);
		ck_assert_msg(r.status == PADRONE_EXIT_FAILURE, "%s: status %d", lines[i], r.status);
		const char *want = "padrone: not attached to a process";
		ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s: %s", lines[i], r.err);
		run_free(&r);
	}
}
END_TEST

START_TEST(help_lists_and_describes)
{
	struct run r = run_line("help");

	ck_assert_int_eq(r.status, 0);
	for (const struct padrone_cmd_entry *const *e = padrone_cmd_table; *e; e++) {
		char want[128];
		snprintf(want, sizeof(want), "  %-10s %s\n", (*e)->name, (*e)->summary);
		ck_assert_msg(strstr(r.out, want), "help lacks '%s'", want);
	}
	run_free(&r);
	r = run_line("help pro");
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_eq(strstr(r.out, "usage: profile [-fju] [-b ring|bpf] [-o FILE] [-F pprof|folded|json] [SECONDS [HZ]]\n"), r.out);
	run_free(&r);
	r = run_line("help exit");
	ck_assert_ptr_nonnull(strstr(r.out, "leave padrone (also: exit)\n"));
	run_free(&r);
	r = run_line("help nothing");
	ck_assert_int_eq(r.status, PADRONE_EXIT_USAGE);
	ck_assert_str_eq(r.err, "padrone: unknown command: nothing\n");
	run_free(&r);
}
END_TEST

START_TEST(a_line_stops_at_its_first_failure)
{
	struct run r = run_line("help hot; frob; help bt");

	ck_assert_int_eq(r.status, PADRONE_EXIT_USAGE);
	ck_assert_ptr_nonnull(strstr(r.out, "usage: hot"));
	ck_assert_ptr_null(strstr(r.out, "usage: bt"));
	run_free(&r);
	r = run_line("help hot; help bt # help info");
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "usage: bt"));
	ck_assert_ptr_null(strstr(r.out, "usage: info"));
	run_free(&r);
	r = run_line("quit; help");	/* nothing after quit */
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "");
	run_free(&r);
}
END_TEST

/* --------------------------------------------- usage lines in the man page */

/* Append one word, mdoc-spaced: no space after "[" or before "]", none
 * after Ns. */
static void emit(char *out, size_t size, const char *w, bool *nospace)
{
	size_t len = strlen(out);
	bool space = len && !*nospace && out[len - 1] != '[' && strcmp(w, "]") != 0;

	snprintf(out + len, size - len, "%s%s", space ? " " : "", w);
	*nospace = false;
}

/* Render one mdoc macro line as text, for the few macros usage lines use:
 * Ic Cm Ar Li (words), Fl (dash), Op (brackets to the end of the line),
 * Oo/Oc, Ns. */
static void render_line(const char *line, char *out, size_t size, bool *nospace)
{
	char buf[512], *save, *tok;
	int open_ops = 0;
	bool flag = false;

	snprintf(buf, sizeof(buf), "%s", line + 1);
	for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (!strcmp(tok, "It") || !strcmp(tok, "Xo") || !strcmp(tok, "Xc") ||
		    !strcmp(tok, "Ic") || !strcmp(tok, "Cm") || !strcmp(tok, "Ar") || !strcmp(tok, "Li"))
			continue;
		if (!strcmp(tok, "Ns")) {
			*nospace = true;
		} else if (!strcmp(tok, "Fl")) {
			flag = true;
		} else if (!strcmp(tok, "Op") || !strcmp(tok, "Oo")) {
			open_ops += tok[1] == 'p';
			emit(out, size, "[", nospace);
		} else if (!strcmp(tok, "Oc")) {
			emit(out, size, "]", nospace);
		} else {
			/* roff's escapes: \& is nothing, \- a minus (--LONG flags) */
			char word[256];
			bool minus = tok[0] == '\\' && tok[1] == '-';
			snprintf(word, sizeof(word), "%s%s%s", flag ? "-" : "", minus ? "-" : "",
				 tok[0] == '\\' && (tok[1] == '&' || minus) ? tok + 2 : tok);
			emit(out, size, word, nospace);
			flag = false;
		}
	}
	while (open_ops--)
		emit(out, size, "]", nospace);
}

/* Every ".It Xo ... .Xc" item of the page, rendered. */
static int man_items(const char *path, char items[][256], int max)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int n = 0;
	bool in = false, nospace = false;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	while (n < max && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, ".It Xo", 6)) {
			in = true;
			items[n][0] = '\0';
		}
		if (in)
			render_line(line, items[n], sizeof(items[n]), &nospace);
		if (in && !strcmp(line, ".Xc")) {
			in = false;
			n++;
		}
	}
	fclose(f);
	return n;
}

START_TEST(every_usage_is_in_the_man_page)
{
	static char items[64][256];
	int n = man_items(tu_srcpath("man/padrone.1"), items, 64);
	int commands = 0;

	for (const struct padrone_cmd_entry *const *e = padrone_cmd_table; *e; e++, commands++) {
		char want[256];
		bool found = false;
		snprintf(want, sizeof(want), "%s%s%s", (*e)->name, *(*e)->usage ? " " : "", (*e)->usage);
		for (int i = 0; i < n && !found; i++)
			found = strcmp(items[i], want) == 0;
		ck_assert_msg(found, "'%s' is not an item of man/padrone.1", want);
	}
	ck_assert_int_eq(n, commands);	/* and nothing documented that does not exist */
}
END_TEST

/* ------------------------------------------- signals and the session's life */

static struct padrone_ctl sig_ctl;	/* static: zeroed, as padrone's and padroned's */
static atomic_int handled;

static void on_usr1(int sig)
{
	(void)sig;
	padrone_ctl_interrupt(&sig_ctl, atomic_fetch_add(&handled, 1) & 1);
}

static atomic_bool stop_kill;

/* Process-directed signals: any thread may take them, this one too. */
static void *send_signals(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_kill)) {
		kill(getpid(), SIGUSR1);
		usleep(50);
	}
	return NULL;
}

START_TEST(a_signal_never_finds_a_missing_or_freed_session)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART }, old;
	pthread_t th;

	ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
	/* before any init: nothing to interrupt, nothing touched */
	padrone_ctl_interrupt(&sig_ctl, false);
	padrone_ctl_interrupt(&sig_ctl, true);
	padrone_session__interrupt(NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, send_signals, NULL), 0);
	while (atomic_load(&handled) < 20)
		usleep(100);
	/* Signals land before, during and after each session's life (ASan
	 * reports any use of a freed one): 300 lives at least, and until 100
	 * signals came during them (a loaded machine sends fewer a second). */
	int first = atomic_load(&handled), i;
	for (i = 0; i < 300 || (atomic_load(&handled) - first < 100 && i < 1000000); i++) {
		ck_assert_int_eq(padrone_ctl_init(&sig_ctl, "padrone", false), 0);
		if (i % 10 == 0)
			usleep(200);
		padrone_ctl_fini(&sig_ctl);
	}
	int seen = atomic_load(&handled) - first;
	atomic_store(&stop_kill, true);
	pthread_join(th, NULL);
	ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
	ck_assert_msg(seen >= 100, "only %d signals handled in %d lives", seen, i);
	ck_assert_ptr_null(sig_ctl.session);
	padrone_ctl_interrupt(&sig_ctl, true);	/* after fini: still nothing */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cmd");
	TCase *tc = tcase_create("cmd");
	tcase_add_test(tc, every_entry_is_complete_and_names_are_unique);
	tcase_add_test(tc, names_aliases_and_unique_prefixes_find_commands);
	tcase_add_test(tc, an_ambiguous_prefix_lists_the_matches);
	tcase_add_test(tc, bad_arguments_print_the_usage);
	tcase_add_test(tc, commands_on_a_process_need_one);
	tcase_add_test(tc, help_lists_and_describes);
	tcase_add_test(tc, a_line_stops_at_its_first_failure);
	tcase_add_test(tc, every_usage_is_in_the_man_page);
	tcase_add_test(tc, a_signal_never_finds_a_missing_or_freed_session);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
