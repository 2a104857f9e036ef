/* padroned and padrone end to end, on real targets (tests/targets): what a
 * user sees -- the hot function ranked first, the exact error for each bad
 * PID, exit statuses -- and that every target runs on unharmed, its own
 * checksums right, after padrone let go of it. */
#include "tests/lib/tu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/protocol.h"

static char rundir[64];

/* Run a shell command built from fmt; its stdout (and stderr, if the
 * command says 2>&1) and exit status. */
static char *run(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *run(int *status, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char *out = tu_run(cmd, &st);
	ck_assert_msg(out != NULL, "cannot run %s", cmd);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return out;
}

#define PADRONED tu_path("src/padroned")
#define PADRONE tu_path("src/padrone")
#define HOTLOOP tu_path("tests/targets/hotloop")

/* Start hotloop; wait for its ready line and a first tick. */
static void start_hotloop(struct tu_proc *p, unsigned long long *hot_addr)
{
	char *argv[] = { (char *)HOTLOOP, NULL };
	char line[256];
	int pid;

	ck_assert_int_eq(tu_spawn(p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(p, "ready ", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(sscanf(line, "ready %d hot_function %llx", &pid, hot_addr), 2);
	ck_assert_int_eq(pid, p->pid);
	ck_assert_int_gt(tu_wait_for(p, "tick ", line, sizeof(line), 10000), 0);
}

/* The target's next ticks after padrone let go: each checksum exactly what
 * `hotloop -e N` computes, no error line. */
static void assert_ticks_right(struct tu_proc *p, int count)
{
	char line[256];

	for (int i = 0; i < count; i++) {
		int n = tu_read_line(p, line, sizeof(line), 10000);
		ck_assert_msg(n > 0, "target stopped ticking (%d)", n);
		long tick;
		ck_assert_msg(sscanf(line, "tick %ld checksum", &tick) == 1, "target said '%s'", line);
		int st;
		char *want = run(&st, "%s -e %ld", HOTLOOP, tick);
		want[strcspn(want, "\n")] = '\0';
		ck_assert_str_eq(line, want);
		free(want);
	}
}

/* The task tracing pid (its TracerPid), 0 for none. */
static int tracer_of(pid_t pid)
{
	char path[64], line[256];
	int tracer = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "TracerPid: %d", &tracer);
	fclose(f);
	return tracer;
}

/* No tracer left on the process. */
static void assert_untraced(pid_t pid)
{
	ck_assert_int_eq(tracer_of(pid), 0);
}

static pid_t tgid_of(pid_t tid)
{
	char path[64], line[256];
	int tgid = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "Tgid: %d", &tgid);
	fclose(f);
	return tgid;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	return strrchr(buf, ')')[2];
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in the report", key);
	return v;
}

/* The report names hot_function first, at its address, with >= 80%. */
static void assert_hot_report(const char *json, pid_t pid, unsigned long long hot_addr)
{
	struct json_object *o = json_tokener_parse(json);
	char addr[32];

	ck_assert_msg(o != NULL, "not JSON: %s", json);
	ck_assert_int_eq(json_object_get_int(get(o, "pid")), pid);
	ck_assert_int_eq(json_object_get_int(get(o, "frequency_hz")), 999);
	const char *event = json_object_get_string(get(o, "event"));
	ck_assert(!strcmp(event, "cpu-clock") || !strcmp(event, "cycles"));
	/* A busy machine (parallel tests) may give the target little CPU: the
	 * share is what counts, not the number. */
	ck_assert_int_ge(json_object_get_int64(get(o, "samples")), 10);
	struct json_object *fns = get(o, "functions");
	struct json_object *f = json_object_array_get_idx(fns, 0);
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(strcmp(json_object_get_string(get(f, "name")), "hot_function") == 0,
		      "not hot_function first: %.3000s", json);
	/* Its share as the user reads it: self_pct, of all the samples (on a
	 * crowded machine a few land in the kernel's scheduling paths: 1-3%
	 * with eight busy loops on this 2-CPU VM). */
	double pct = json_object_get_double(get(f, "self_pct"));
	uint64_t self = (uint64_t)json_object_get_int64(get(f, "self"));
	uint64_t samples = (uint64_t)json_object_get_int64(get(o, "samples"));
	ck_assert_msg(pct >= 80, "hot_function has %.2f%%: %.3000s", pct, json);
	/* and that figure is its self count over the samples */
	double diff = pct - 100.0 * (double)self / (double)samples;
	ck_assert_msg(diff > -0.01 && diff < 0.01,
		      "self_pct %.2f, self %llu of %llu samples", pct, (unsigned long long)self,
		      (unsigned long long)samples);
	snprintf(addr, sizeof(addr), "0x%llx", hot_addr);
	ck_assert_str_eq(json_object_get_string(get(f, "start")), addr);
	ck_assert_str_eq(json_object_get_string(get(f, "bounds")), "symtab");
	ck_assert_ptr_nonnull(strstr(json_object_get_string(get(f, "module")), "hotloop"));
	json_object_put(o);
}

START_TEST(profile_json_names_the_hot_function_and_the_target_runs_on)
{
	struct tu_proc p;
	unsigned long long hot;
	int st;

	start_hotloop(&p, &hot);
	char *out = run(&st, "%s --pid %d --profile 2 --json", PADRONED, p.pid);
	ck_assert_int_eq(st, 0);
	assert_hot_report(out, p.pid, hot);
	free(out);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 3);

	/* The human form: perf-like, hot_function on the first row. */
	out = run(&st, "%s --pid %d --profile 1", PADRONED, p.pid);
	ck_assert_int_eq(st, 0);
	char *row = strstr(out, "\n  ");
	ck_assert_ptr_nonnull(row);
	ck_assert_ptr_nonnull(strstr(out, "# Overhead"));
	ck_assert_msg(strstr(row, "hot_function") && strstr(row, "hot_function") < strchr(row + 1, '\n'),
		      "first row is not hot_function: %s", out);
	free(out);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

/* Start `padroned --pid PID` serving; wait for its line. */
static void start_padroned(struct tu_proc *d, pid_t pid)
{
	char arg[16], line[512], want[160];
	char *argv[] = { (char *)PADRONED, "--pid", arg, NULL };

	snprintf(arg, sizeof(arg), "%d", (int)pid);
	ck_assert_int_eq(tu_spawn(d, argv, true), 0);
	ck_assert_int_gt(tu_wait_for(d, "padroned: serving", line, sizeof(line), 15000), 0);
	snprintf(want, sizeof(want), "padroned: serving process %d (1 thread) on %s/", (int)pid, rundir);
	ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "%s", line);
}

START_TEST(sigterm_makes_padroned_detach_cleanly)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char line[256], sock[128];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	snprintf(sock, sizeof(sock), "%s/padroned-%d.sock", rundir, p.pid);
	struct stat sb;
	ck_assert_int_eq(stat(sock, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0600);

	/* Commands go to padroned, which keeps the profile between them. */
	char *out = run(&st, "%s -p %d profile -j 1", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	assert_hot_report(out, p.pid, hot);
	char *again = run(&st, "%s -p %d hot -j 1000", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(again, out);	/* the very same report, not a new profile */
	free(out);
	free(again);

	kill(d.pid, SIGTERM);
	ck_assert_int_gt(tu_wait_for(&d, "padroned: ", line, sizeof(line), 10000), 0);
	char want[128];
	snprintf(want, sizeof(want), "padroned: Terminated: detaching from process %d", p.pid);
	ck_assert_str_eq(line, want);
	st = tu_wait(&d, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padroned ended with 0x%x", st);
	tu_kill(&d);
	ck_assert_int_eq(access(sock, F_OK), -1);	/* the socket is gone */
	assert_untraced(p.pid);
	assert_ticks_right(&p, 3);
	tu_kill(&p);
}
END_TEST

/* info modules and info stops, through padroned: the program with its
 * build-id (readelf's), and the stop that info threads made. */
START_TEST(info_lists_modules_and_stops)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char want[PATH_MAX + 128], real[PATH_MAX];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	char *out = run(&st, "%s -p %d info stops", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	snprintf(want, sizeof(want), "process %d has not been stopped by padrone since it "
		 "attached\n", p.pid);
	ck_assert_str_eq(out, want);
	free(out);
	free(run(&st, "%s -p %d info threads", PADRONE, p.pid));
	out = run(&st, "%s -p %d info st", PADRONE, p.pid);	/* a prefix */
	ck_assert_int_eq(st, 0);
	snprintf(want, sizeof(want), "process %d stopped 1 time by padrone since it attached: ",
		 p.pid);
	ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
	free(out);
	ck_assert_ptr_nonnull(realpath(HOTLOOP, real));
	char *id = run(&st, "readelf -n %s | awk '/Build ID:/ { print $3 }'", real);
	id[strcspn(id, "\n")] = '\0';
	out = run(&st, "%s -p %d info modules", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_msg(strncmp(out, "BASE ", 5) == 0, "%s", out);
	snprintf(want, sizeof(want), "  %-40s  %s\n", id, real);
	ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
	ck_assert_ptr_nonnull(strstr(out, "/libc.so.6\n"));
	free(out);
	free(id);
	kill(d.pid, SIGTERM);
	tu_wait(&d, 10000);
	tu_kill(&d);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(padrone_detach_ends_padroned)
{
	struct tu_proc p, d;
	unsigned long long hot;
	int st;
	char want[64];

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	char *out = run(&st, "%s -p %d info threads 2>&1", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	snprintf(want, sizeof(want), "\n%-8d hotloop ", p.pid);
	char *row = strstr(out, want);
	ck_assert_msg(row, "%s", out);
	/* Where the thread was: named (mostly hot_function; at times the
	 * write(2) of its tick line). */
	char *fn = strstr(row, "  0x");
	ck_assert_ptr_nonnull(fn);
	fn = strchr(fn + 4, ' ');
	ck_assert_msg(fn && fn[1] == ' ' && fn[2] != '?' && fn[2] != '\n', "%s", out);
	free(out);
	out = run(&st, "%s -p %d detach 2>&1", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	snprintf(want, sizeof(want), "detached from process %d\n", p.pid);
	ck_assert_str_eq(out, want);
	free(out);
	st = tu_wait(&d, 10000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tu_kill(&d);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(padroned_ends_when_its_process_does)
{
	struct tu_proc p, d;
	char *argv[] = { (char *)HOTLOOP, "-d", "3", NULL };
	char line[256], want[96];

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
	start_padroned(&d, p.pid);
	ck_assert_int_gt(tu_wait_for(&p, "done ticks", line, sizeof(line), 15000), 0);
	ck_assert_int_gt(tu_wait_for(&d, "padroned: ", line, sizeof(line), 10000), 0);
	snprintf(want, sizeof(want), "padroned: process %d exited", p.pid);
	ck_assert_str_eq(line, want);
	int st = tu_wait(&d, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 9, "padroned ended with 0x%x", st);
	tu_kill(&d);
	st = tu_wait(&p, 10000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);	/* its own clean exit */
	tu_kill(&p);
}
END_TEST

START_TEST(padroned_ends_when_its_process_execs)
{
	struct tu_proc p, d;
	char hotloop[PATH_MAX];
	snprintf(hotloop, sizeof(hotloop), "%s", HOTLOOP);
	char *argv[] = { (char *)tu_path("tests/targets/execer"), "-d", "1000", hotloop, NULL };
	char line[256], want[96];

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
	start_padroned(&d, p.pid);
	ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 15000), 0);	/* hotloop's */
	ck_assert_int_gt(tu_wait_for(&d, "padroned: ", line, sizeof(line), 10000), 0);
	snprintf(want, sizeof(want), "padroned: process %d exec'd another program", p.pid);
	ck_assert_str_eq(line, want);
	int st = tu_wait(&d, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 10, "padroned ended with 0x%x", st);
	tu_kill(&d);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);	/* the new program runs on, unharmed */
	tu_kill(&p);
}
END_TEST

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait (bounded) until process pid samples: it holds perf_event files.
 * Returns when it saw that (mono_s). */
static double wait_sampling(pid_t pid)
{
	char dir[64], path[PATH_MAX], link[128];

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	for (int waited = 0; waited < 30000; waited += 20) {
		DIR *d = opendir(dir);
		ck_assert_ptr_nonnull(d);
		bool found = false;
		for (struct dirent *de; !found && (de = readdir(d));) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			ssize_t n = readlink(path, link, sizeof(link) - 1);
			found = n > 0 && (link[n] = '\0', strcmp(link, "anon_inode:[perf_event]") == 0);
		}
		closedir(d);
		if (found)
			return mono_s();
		usleep(20000);
	}
	ck_abort_msg("process %d never began to sample", (int)pid);
	return 0;
}

START_TEST(ctrl_c_ends_a_profile_early_and_padrone_detaches)
{
	struct tu_proc p, c;
	unsigned long long hot;
	char arg[16], line[256];

	start_hotloop(&p, &hot);
	snprintf(arg, sizeof(arg), "%d", p.pid);
	char *argv[] = { (char *)PADRONE, "-p", arg, "profile", "60", NULL };
	ck_assert_int_eq(tu_spawn(&c, argv, true), 0);
	wait_sampling(c.pid);	/* attaching takes over 1 s under ASan on a busy machine */
	usleep(500000);
	kill(c.pid, SIGINT);
	ck_assert_int_gt(tu_wait_for(&c, "# pid ", line, sizeof(line), 10000), 0);
	double secs = 0;
	ck_assert_int_eq(sscanf(strstr(line, " in "), " in %lf s", &secs), 1);
	ck_assert_msg(secs > 0.2 && secs < 30, "%s", line);
	ck_assert_int_gt(tu_wait_for(&c, "  ", line, sizeof(line), 10000), 0);
	ck_assert_msg(strstr(line, "hot_function"), "%s", line);
	int st = tu_wait(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padrone ended with 0x%x", st);
	tu_kill(&c);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

/* Does pid, running program `comm` (exec'd: before, it is a copy of the
 * test with the test's handlers), catch signal sig yet? */
static bool catches(pid_t pid, const char *comm, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	bool its = false;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Name:\t", 6) == 0)
			its = strncmp(line + 6, comm, strlen(comm)) == 0 &&
			      line[6 + strlen(comm)] == '\n';
		if (sscanf(line, "SigCgt: %llx", &mask) == 1)
			break;
	}
	fclose(f);
	return its && (mask & (1ull << (sig - 1)));
}

/* Milliseconds since t0. */
static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* argv (padroned or padrone asked for a 60 s profile of pid) gets sig the
 * moment its handler is in place: while it attaches, or just after. Either
 * way it stops at once. Before the profile began: only `before` on stderr,
 * status 1. Once it had begun: the report of what it sampled, then
 * `during` (if not NULL), status 0. Returns whether it was before.
 * delay_ms: wait that much more before the signal. */
static bool signalled_at_start(char *const argv[], int sig, const char *before,
			       const char *during, int delay_ms)
{
	struct tu_proc c;
	char line[512];
	struct timespec t0;

	const char *comm = strrchr(argv[0], '/') + 1;
	ck_assert_int_eq(tu_spawn(&c, argv, true), 0);
	for (int i = 0; i < 200000 && !catches(c.pid, comm, sig); i++)
		;
	ck_assert_msg(catches(c.pid, comm, sig), "%s never caught signal %d", comm, sig);
	usleep((useconds_t)delay_ms * 1000);
	kill(c.pid, sig);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int n;
	do	/* where BPF cannot load, a note comes first */
		n = tu_read_line(&c, line, sizeof(line), 15000);
	while (n > 0 && strstr(line, ": note: "));
	ck_assert_int_gt(n, 0);
	bool early = strcmp(line, before) == 0;
	if (!early) {
		ck_assert_msg(strncmp(line, "# pid ", 6) == 0, "%s said: %s", argv[0], line);
		while ((n = tu_read_line(&c, line, sizeof(line), 15000)) >= 0 &&
		       (line[0] == '#' || strncmp(line, "  ", 2) == 0))
			;	/* the rest of the report */
		if (during) {
			ck_assert_int_ge(n, 0);
			ck_assert_str_eq(line, during);
			n = tu_read_line(&c, line, sizeof(line), 15000);
		}
	} else {
		n = tu_read_line(&c, line, sizeof(line), 15000);
	}
	ck_assert_msg(n == -EPIPE, "%s said more: %s", argv[0], n >= 0 ? line : "");
	int st = tu_wait(&c, 15000);
	/* a few hundred ms to symbolize and detach; 60 s if the signal had
	 * been lost */
	double took = ms_since(&t0);
	ck_assert_msg(took < 10000, "%s took %.0f ms to leave", argv[0], took);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == (early ? 1 : 0),
		      "%s ended with 0x%x (%s)", argv[0], st, early ? "before" : "during");
	tu_kill(&c);
	return early;
}

START_TEST(a_signal_while_attaching_ends_a_one_shot_profile_at_once)
{
	struct tu_proc p;
	unsigned long long hot;
	char arg[16], before[160], during[160];
	int early = 0;

	char padroned[PATH_MAX], padrone[PATH_MAX];	/* tu_path's buffers rotate */

	snprintf(padroned, sizeof(padroned), "%s", PADRONED);
	snprintf(padrone, sizeof(padrone), "%s", PADRONE);
	start_hotloop(&p, &hot);
	snprintf(arg, sizeof(arg), "%d", p.pid);
	/* padroned (SIGTERM); the bpf backend has the longest set-up */
	char *d_argv[] = { padroned, "--pid", arg, "--profile", "60", "--backend", NULL, NULL };
	snprintf(before, sizeof(before), "padroned: Terminated before the profile began: "
		 "detaching from process %d", p.pid);
	snprintf(during, sizeof(during), "padroned: Terminated: detaching from process %d", p.pid);
	for (int i = 0; i < 6; i++) {
		d_argv[6] = i % 2 ? "bpf" : "ring";
		early += signalled_at_start(d_argv, SIGTERM, before, during, 0);
		assert_untraced(p.pid);
		assert_ticks_right(&p, 1);
	}
	/* A second in, the profile runs: it ends, its report is printed. */
	d_argv[6] = "ring";
	ck_assert(!signalled_at_start(d_argv, SIGTERM, before, during, 1000));
	assert_untraced(p.pid);
	assert_ticks_right(&p, 1);
	/* padrone's one-shot command (SIGINT: ^C in a shell) */
	char *c_argv[] = { padrone, "-p", arg, "profile", "60", NULL };
	snprintf(before, sizeof(before), "padrone: Interrupt: leaving process %d before the "
		 "rest of the commands", p.pid);
	for (int i = 0; i < 4 || (early == 0 && i < 60); i++) {
		early += signalled_at_start(c_argv, SIGINT, before, NULL, 0);
		assert_untraced(p.pid);
		assert_ticks_right(&p, 1);
	}
	/* The signal comes within microseconds of the handler, attaching takes
	 * milliseconds: often before (one try in 3 to 10 on a fast host, so
	 * tried until one is). */
	ck_assert_msg(early > 0, "the signal never came before the profile began");
	tu_kill(&p);
}
END_TEST

/* The report a profile cut short by its process's end printed on
 * stdout (file out), in text or JSON; then stderr (file err) holds only
 * why, and the status is `status`. */
static void assert_partial(const char *dir, const char *prog, pid_t pid, bool json,
			   const char *ended, int status, int st)
{
	char want[256];
	int cat;
	char *err = run(&cat, "cat %s/err", dir);
	snprintf(want, sizeof(want), "%s: process %d has %s", prog, (int)pid,
		 status == 9 ? "exited\n" : "exec'd another program (now hotloop)\n");
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(st, status);
	char *out = run(&cat, "cat %s/out", dir);
	snprintf(want, sizeof(want), json ? "{\"pid\":%d," : "# pid %d: ", (int)pid);
	ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
	if (json) {
		snprintf(want, sizeof(want), "\"ended\":\"%s\"", ended);
	} else {
		snprintf(want, sizeof(want), "# process %d %s during the profile: this is what was "
			 "sampled until then\n", (int)pid, status == 9 ? "exited" :
			 "exec'd another program");
	}
	ck_assert_msg(strstr(out, want), "no '%s' in %s", want, out);
	free(out);
	free(err);
}

/* `padroned --pid P --profile 8` and `padrone -p P profile 8` while P
 * exits: each stops when it does, prints the report of what it sampled
 * until then (text, JSON, or the -o file), says why, and exits 9. */
START_TEST(the_process_exiting_during_a_profile_gives_status_9)
{
	for (int i = 0; i < 4; i++) {
		struct tu_proc p;
		char *argv[] = { (char *)HOTLOOP, "-d", "2", NULL };
		char line[256];
		int st;

		ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
		ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
		char *out = i == 0 ? run(&st, "%s --pid %d --profile 8 >%s/out 2>%s/err", PADRONED,
					 p.pid, rundir, rundir) :
			    i == 1 ? run(&st, "%s -p %d profile 8 >%s/out 2>%s/err", PADRONE, p.pid,
					 rundir, rundir) :
			    i == 2 ? run(&st, "%s -p %d profile -j 8 >%s/out 2>%s/err", PADRONE,
					 p.pid, rundir, rundir) :
				     run(&st, "%s -p %d profile -o %s/out.json 8 >%s/out 2>%s/err",
					 PADRONE, p.pid, rundir, rundir, rundir);
		free(out);
		if (i == 3) {
			free(run(&st, "mv %s/out.json %s/out", rundir, rundir));
			ck_assert_int_eq(st, 0);	/* renamed into place */
			st = 9;
		}
		assert_partial(rundir, i ? "padrone" : "padroned", p.pid, i >= 2, "target-exited",
			       9, st);
		char *rep = run(&st, "cat %s/out", rundir);
		ck_assert_msg(strstr(rep, "hot_function"), "%s", rep);	/* what it ran */
		free(rep);
		/* its own end, undisturbed */
		ck_assert_int_gt(tu_wait_for(&p, "done ticks", line, sizeof(line), 10000), 0);
		st = tu_wait(&p, 10000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hotloop ended with 0x%x", st);
		tu_kill(&p);
	}
}
END_TEST

/* The same while P calls exec: status 10, and the program P now runs goes
 * its own way untraced, its checksums right. */
START_TEST(the_process_exec_ing_during_a_profile_gives_status_10)
{
	for (int i = 0; i < 2; i++) {
		struct tu_proc p;
		char hotloop[PATH_MAX];
		snprintf(hotloop, sizeof(hotloop), "%s", HOTLOOP);
		char *argv[] = { (char *)tu_path("tests/targets/execer"), "-d", "2000", hotloop,
				 "-d", "3", NULL };
		char line[256];
		int st;

		ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
		ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
		char *out = i ? run(&st, "%s -p %d profile -j 8 >%s/out 2>%s/err", PADRONE, p.pid,
				    rundir, rundir)
			      : run(&st, "%s --pid %d --profile 8 >%s/out 2>%s/err", PADRONED,
				    p.pid, rundir, rundir);
		free(out);
		assert_partial(rundir, i ? "padrone" : "padroned", p.pid, i, "target-execed", 10,
			       st);
		/* the program it exec'd spins in hot_function at once: none of
		 * its samples are counted */
		char *rep = run(&st, "cat %s/out", rundir);
		ck_assert_msg(!strstr(rep, "hot_function"), "%s", rep);
		free(rep);
		ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 10000), 0);
		int pid;
		ck_assert_int_eq(sscanf(line, "ready %d", &pid), 1);
		ck_assert_int_eq(pid, p.pid);	/* the same process, a new program */
		assert_untraced(p.pid);
		assert_ticks_right(&p, 2);
		ck_assert_int_gt(tu_wait_for(&p, "done ticks", line, sizeof(line), 10000), 0);
		st = tu_wait(&p, 10000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hotloop ended with 0x%x", st);
		tu_kill(&p);
	}
}
END_TEST

/* A measure under way when its process exits (9) or execs (10), one-shot
 * and through padroned: that status and those words, not a failure to
 * restore; padroned ends too; the program runs on unharmed. */
START_TEST(the_process_leaving_during_a_measure_gives_its_status)
{
	for (int i = 0; i < 4; i++) {
		bool execs = i & 1, served = i & 2;
		struct tu_proc p, d;
		char hotloop[PATH_MAX], line[256], want[160];
		snprintf(hotloop, sizeof(hotloop), "%s", HOTLOOP);
		char *exec_argv[] = { (char *)tu_path("tests/targets/execer"), "-d", "1500", hotloop,
				      "-d", "3", NULL };
		char *exit_argv[] = { hotloop, "-d", "2", NULL };
		int st;

		ck_assert_int_eq(tu_spawn(&p, execs ? exec_argv : exit_argv, false), 0);
		ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
		if (served)
			start_padroned(&d, p.pid);
		char *out = run(&st, "%s -p %d measure -t 30 %s 16000000 2>&1", PADRONE, p.pid,
				execs ? "clock_nanosleep" : "hot_function");
		const char *who = served ? "padroned" : "padrone";
		if (execs)
			snprintf(want, sizeof(want), "%s: process %d has exec'd another program (now "
				 "hotloop)\n", who, p.pid);
		else
			snprintf(want, sizeof(want), "%s: process %d has exited\n", who, p.pid);
		ck_assert_str_eq(out, want);
		ck_assert_int_eq(st, execs ? 10 : 9);
		free(out);
		if (served) {
			st = tu_wait(&d, 10000);
			ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == (execs ? 10 : 9),
				      "padroned ended with 0x%x", st);
			tu_kill(&d);
		}
		if (execs) {	/* hotloop's lines from here on */
			ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 10000), 0);
			assert_untraced(p.pid);
			assert_ticks_right(&p, 2);
		}
		ck_assert_int_gt(tu_wait_for(&p, "done ticks", line, sizeof(line), 10000), 0);
		st = tu_wait(&p, 10000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hotloop ended with 0x%x", st);
		tu_kill(&p);
	}
}
END_TEST

/* Above 10 kHz without a PMU: refused, the option that forces it named in
 * each program's terms (both take -f and --force); status 2. */
START_TEST(a_rate_above_10khz_names_the_option_that_forces_it)
{
	struct tu_proc p;
	unsigned long long hot;
	char want[512];
	int st;

	start_hotloop(&p, &hot);
	for (int i = 0; i < 2; i++) {
		char *out = i ? run(&st, "%s -p %d profile 0.2 20000 2>&1", PADRONE, p.pid)
			      : run(&st, "%s --pid %d --profile 0.2 --freq 20000 2>&1", PADRONED, p.pid);
		if (st == 0) {	/* a hardware PMU: allowed */
			free(out);
			continue;
		}
		snprintf(want, sizeof(want), "%s: refusing to sample at 20000 Hz without a hardware "
			 "PMU: cpu-clock costs the target ~20 us per sample and above 10000 Hz can "
			 "lock up a CPU; -f (--force) samples at that rate anyway\n",
			 i ? "padrone" : "padroned");
		ck_assert_str_eq(out, want);
		ck_assert_int_eq(st, 2);
		free(out);
	}
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(a_stopped_target_stays_stopped)
{
	struct tu_proc p;
	unsigned long long hot;
	int st;

	start_hotloop(&p, &hot);
	kill(p.pid, SIGSTOP);
	for (int i = 0; i < 1000 && proc_state(p.pid) != 'T'; i++)
		usleep(1000);
	ck_assert_int_eq(proc_state(p.pid), 'T');
	char *out = run(&st, "%s --pid %d --profile 0.5 --json", PADRONED, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_ptr_nonnull(strstr(out, "\"samples\":0,"));	/* it did not run */
	free(out);
	out = run(&st, "%s -p %d info threads \\; bt", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	free(out);
	usleep(200000);
	ck_assert_int_eq(proc_state(p.pid), 'T');	/* still stopped */
	assert_untraced(p.pid);
	kill(p.pid, SIGCONT);
	assert_ticks_right(&p, 3);
	tu_kill(&p);
}
END_TEST

START_TEST(padrone_one_shot_and_a_piped_session)
{
	struct tu_proc p;
	unsigned long long hot;
	int st;

	start_hotloop(&p, &hot);
	char *out = run(&st, "%s -p %d hot 3", PADRONE, p.pid);	/* samples first */
	ck_assert_int_eq(st, 0);
	ck_assert_msg(strstr(out, "\n  ") && strstr(strstr(out, "\n  "), "hot_function"), "%s", out);
	free(out);
	out = run(&st, "%s -p %d pro -j 1 \\; bt", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	char *nl = strchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	*nl = '\0';
	assert_hot_report(out, p.pid, hot);
	ck_assert_msg(strstr(nl + 1, "#0 ") && strstr(nl + 1, " in main"), "bt: %s", nl + 1);
	free(out);
	assert_untraced(p.pid);

	out = run(&st, "printf 'attach %d\\nprofile 1\\nhot 2\\ninfo threads\\nbt\\ndetach\\n' | %s 2>&1",
		  p.pid, PADRONE);
	ck_assert_msg(st == 0, "status %d: %s", st, out);
	char want[64];
	snprintf(want, sizeof(want), "attached to process %d, 1 thread\n", p.pid);
	ck_assert_ptr_eq(strstr(out, want), out);
	snprintf(want, sizeof(want), "detached from process %d\n", p.pid);
	ck_assert_ptr_nonnull(strstr(out, want));
	ck_assert_ptr_nonnull(strstr(out, "hot_function"));
	free(out);
	/* A script stops at its first failure, with that status. */
	out = run(&st, "printf 'attach %d\\nfrob\\nprofile 1\\n' | %s 2>&1", p.pid, PADRONE);
	ck_assert_int_eq(st, 2);
	ck_assert_ptr_nonnull(strstr(out, "padrone: unknown command: frob (try 'help')\n"));
	ck_assert_ptr_null(strstr(out, "Overhead"));
	free(out);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(the_example_client_finds_the_hot_function)
{
	struct tu_proc p;
	unsigned long long hot;
	int st;

	start_hotloop(&p, &hot);
	char *out = run(&st, "%s %d 1 3", tu_path("src/examples/hotfuncs"), p.pid);
	ck_assert_int_eq(st, 0);
	char *second = strchr(out, '\n');
	ck_assert_ptr_nonnull(second);
	ck_assert_msg(strstr(second, "hot_function") == strchr(second, '%') + 3, "%s", out);
	free(out);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(the_threads_target_keeps_its_threads_right)
{
	struct tu_proc p;
	/* 10 s: the target must outlive a 1.5 s profile that took 4 s under
	 * ASan on a loaded machine */
	char *argv[] = { (char *)tu_path("tests/targets/threads"), "-d", "10", NULL };
	char line[256];
	int st;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 10000), 0);
	char *out = run(&st, "%s --pid %d --profile 1.5 --json", PADRONED, p.pid);
	ck_assert_int_eq(st, 0);
	struct json_object *o = json_tokener_parse(out);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_ge(json_object_get_int64(get(o, "samples")), 10);
	json_object_put(o);
	free(out);
	out = run(&st, "%s -p %d info threads", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	free(out);
	ck_assert_int_gt(tu_wait_for(&p, "done ", line, sizeof(line), 15000), 0);
	ck_assert_msg(strstr(line, " errors 0"), "%s", line);
	st = tu_wait(&p, 10000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tu_kill(&p);
}
END_TEST

START_TEST(the_signals_target_loses_no_signal)
{
	struct tu_proc p;
	char *argv[] = { (char *)tu_path("tests/targets/signals"), "-d", "10", NULL };
	char line[256];
	int st;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 10000), 0);
	char *out = run(&st, "%s --pid %d --profile 1.5", PADRONED, p.pid);
	ck_assert_msg(st == 0, "%s", out);
	free(out);
	ck_assert_int_gt(tu_wait_for(&p, "done ", line, sizeof(line), 15000), 0);
	ck_assert_int_gt(tu_read_line(&p, line, sizeof(line), 5000), 0);
	ck_assert_str_eq(line, "ok");
	tu_kill(&p);
}
END_TEST

/* Read from a pty until `want` shows up in everything read so far. */
/* What pid's threads are doing (state, wchan, kernel stack), to tell why
 * a terminal session did not answer. */
static char *threads_of(pid_t pid)
{
	int st;
	return run(&st, "cd /proc/%d/task && for t in *; do echo $t $(cut -d' ' -f3 $t/stat) "
		   "$(cat $t/wchan); cat $t/stack; done 2>&1", (int)pid);
}

static bool pty_expect(int fd, char *buf, size_t size, size_t *len, const char *want)
{
	for (int waited = 0; waited < 20000;) {
		buf[*len] = '\0';
		if (strstr(buf, want))
			return true;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 100) <= 0) {
			waited += 100;
			continue;
		}
		ssize_t n = read(fd, buf + *len, size - *len - 1);
		if (n <= 0)
			return false;
		*len += (size_t)n;
	}
	return false;
}

START_TEST(the_terminal_session_edits_completes_and_keeps_history)
{
	struct tu_proc p;
	unsigned long long hot;
	char hist[128], buf[65536], line[64];
	size_t len = 0;
	int master;

	start_hotloop(&p, &hot);
	snprintf(hist, sizeof(hist), "%s/history", rundir);
	setenv("PADRONE_HISTORY", hist, 1);
	pid_t pid = forkpty(&master, NULL, NULL, NULL);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(PADRONE, "padrone", (char *)NULL);
		_exit(127);
	}
	ck_assert(pty_expect(master, buf, sizeof(buf), &len, "(padrone) "));
	snprintf(line, sizeof(line), "att %d\r", p.pid);	/* a prefix */
	ck_assert_int_eq(write(master, line, strlen(line)), (ssize_t)strlen(line));
	snprintf(line, sizeof(line), "(padrone %d) ", p.pid);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, line), "%s; padrone's threads: %s",
		      buf, threads_of(pid));
	/* "hel<TAB>" completes to "help " (libedit redraws only the tail, so
	 * the proof is what runs); then " hot". */
	ck_assert_int_eq(write(master, "hel\t", 4), 4);
	usleep(200000);
	ck_assert_int_eq(write(master, " hot\r", 5), 5);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, "usage: hot [-jln] [N]"), "%s", buf);
	ck_assert_int_eq(write(master, "profile 0.5\r", 12), 12);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, "hot_function"), "%s", buf);
	/* a function's name completes from the last profile */
	snprintf(line, sizeof(line), "\n(padrone %d) ", p.pid);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, line), "%s", buf);
	ck_assert_int_eq(write(master, "disas hot_fu\t", 13), 13);
	usleep(200000);
	ck_assert_int_eq(write(master, "\r", 1), 1);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, "function hot_function at 0x"),
		      "%s", buf);
	ck_assert_int_eq(write(master, "quit\r", 5), 5);
	snprintf(line, sizeof(line), "detached from process %d", p.pid);
	ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, line), "%s", buf);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(master);
	unsetenv("PADRONE_HISTORY");

	char *h = run(&st, "cat %s", hist);
	/* libedit's format: a header, then lines with blanks escaped as \040. */
	ck_assert_msg(strstr(h, "_HiStOrY_V2_\n") && strstr(h, "\nhelp\\040\\040hot\n") &&
		      strstr(h, "\nprofile\\0400.5\n") && strstr(h, "\ndisas\\040hot_function\\040\n") &&
		      strstr(h, "\nquit\n"), "%s", h);
	free(h);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

/* ----------------------------------------------------------------- errors */

/* padroned and padrone say exactly `want` (after "PROG: ") and exit with
 * `status` on pid. */
static void assert_refused(pid_t pid, const char *want, int status, const char *as_user)
{
	int st;
	/* another user runs copies it can reach (the checkout may be in /root) */
	const char *padroned = *as_user ? tu_public_path("src/padroned") : PADRONED;
	const char *padrone = *as_user ? tu_public_path("src/padrone") : PADRONE;
	ck_assert_ptr_nonnull(padroned);
	ck_assert_ptr_nonnull(padrone);
	char *out = run(&st, "%s%s --pid %d --profile 1 2>&1", as_user, padroned, (int)pid);
	char expect[1024];

	snprintf(expect, sizeof(expect), "padroned: %s\n", want);
	ck_assert_str_eq(out, expect);
	ck_assert_int_eq(st, status);
	free(out);
	out = run(&st, "%s%s -p %d hot 2>&1", as_user, padrone, (int)pid);
	snprintf(expect, sizeof(expect), "padrone: %s\n", want);
	ck_assert_str_eq(out, expect);
	ck_assert_int_eq(st, status);
	free(out);
}

START_TEST(no_such_process)
{
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	char want[128];
	snprintf(want, sizeof(want), "no such process: PID %d does not exist", (int)gone);
	assert_refused(gone, want, 3, "");
}
END_TEST

START_TEST(a_zombie)
{
	pid_t z = fork();
	if (z == 0)
		_exit(0);
	for (int i = 0; i < 1000 && proc_state(z) != 'Z'; i++)
		usleep(1000);
	char want[256];
	snprintf(want, sizeof(want), "process %d (check_e2e) is a zombie: it has exited and its "
		 "parent %d (check_e2e) has not reaped it yet; there is nothing left to attach to",
		 (int)z, (int)getpid());
	assert_refused(z, want, 4, "");
	waitpid(z, NULL, 0);
}
END_TEST

START_TEST(a_kernel_thread)
{
	assert_refused(2, "process 2 (kthreadd) is a kernel thread: it has no user space to "
			  "attach to", 5, "");
}
END_TEST

/* A process whose only thread is a vfork parent: uninterruptible (state D)
 * until its child, sleeping ms, exits; then back in pause(). */
static pid_t vfork_parent(int ms)
{
	pid_t kid = fork();
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* gone with a failed test */
		setpgid(0, 0);
		if (vfork() == 0) {
			struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
			_exit(0);
		}
		for (;;)
			pause();
	}
	for (int i = 0; i < 5000 && proc_state(kid) != 'D'; i++)
		usleep(1000);
	ck_assert_int_eq(proc_state(kid), 'D');
	return kid;
}

/* A thread in D state cannot stop: a command that must stop it fails with
 * the timeout's status (11, as padrone(1) says), not a system error's;
 * the process runs on as before. */
START_TEST(a_thread_in_d_state_gives_the_timeout_status)
{
	pid_t kid = vfork_parent(8000);
	int st;
	char *out = run(&st, "%s -p %d bt 2>&1", PADRONE, (int)kid);
	char want[256];

	snprintf(want, sizeof(want), "thread %d of process %d (check_e2e) did not stop within "
		 "1000 ms (state D: uninterruptible sleep", (int)kid, (int)kid);
	ck_assert_msg(strstr(out, want), "%s", out);
	ck_assert_int_eq(st, 11);
	free(out);
	assert_untraced(kid);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
}
END_TEST

/* Wake tests/targets/eintr's two waits and read what each says: how many
 * times a stop made it fail with EINTR so far. */
static void eintr_counts(struct tu_proc *p, long *epoll, long *rd)
{
	char line[256];

	kill(p->pid, SIGUSR1);
	ck_assert_int_gt(tu_wait_for(p, "epoll eintr ", line, sizeof(line), 10000), 0);
	*epoll = atol(line + 12);
	kill(p->pid, SIGUSR2);
	ck_assert_int_gt(tu_wait_for(p, "read eintr ", line, sizeof(line), 10000), 0);
	*rd = atol(line + 11);
}

/* Read-only commands stop nothing when no thread is on a CPU: the
 * target's epoll_wait and read are never interrupted (padroned holds it
 * attached: attaching and detaching each interrupt every thread once). */
START_TEST(read_only_commands_interrupt_no_system_call)
{
	struct tu_proc p, d;
	char *argv[] = { (char *)tu_path("tests/targets/eintr"), NULL };
	char line[256];
	long epoll0, read0, epoll1, read1;
	int st;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "ready ", line, sizeof(line), 10000), 0);
	char arg[16];
	char *dargv[] = { (char *)PADRONED, "--pid", arg, NULL };
	snprintf(arg, sizeof(arg), "%d", (int)p.pid);
	ck_assert_int_eq(tu_spawn(&d, dargv, true), 0);
	ck_assert_int_gt(tu_wait_for(&d, "padroned: serving", line, sizeof(line), 15000), 0);
	eintr_counts(&p, &epoll0, &read0);
	for (int i = 0; i < 5; i++) {
		char *out = run(&st, "%s -p %d info threads", PADRONE, p.pid);
		ck_assert_int_eq(st, 0);
		ck_assert_msg(strstr(out, "epoll_wait"), "%s", out);	/* its pc, from /proc */
		free(out);
	}
	free(run(&st, "%s -p %d profile 0.5 \\; hot 3 \\; info modules \\; disas epoll_wait "
		 "\\; info stops", PADRONE, p.pid));
	ck_assert_int_eq(st, 0);
	char *out = run(&st, "%s -p %d info stops", PADRONE, p.pid);
	char want[128];
	snprintf(want, sizeof(want), "process %d has not been stopped by padrone since it "
		 "attached\n", p.pid);
	ck_assert_str_eq(out, want);
	free(out);
	eintr_counts(&p, &epoll1, &read1);
	ck_assert_int_eq(epoll1, epoll0);
	ck_assert_int_eq(read1, read0);
	kill(d.pid, SIGTERM);
	tu_wait(&d, 10000);
	tu_kill(&d);
	assert_untraced(p.pid);
	tu_kill(&p);
}
END_TEST

START_TEST(an_already_traced_process)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char want[256], arg[16];

	start_hotloop(&p, &hot);
	/* A one-shot padrone holds it (a padroned would be pointed at, not
	 * named as a tracer). */
	snprintf(arg, sizeof(arg), "%d", p.pid);
	char *argv[] = { (char *)PADRONE, "-p", arg, "profile", "60", NULL };
	ck_assert_int_eq(tu_spawn(&d, argv, false), 0);
	for (int waited = 0; tracer_of(p.pid) == 0 && waited < 20000; waited += 20)
		usleep(20000);
	int st;
	char *out = run(&st, "%s --pid %d --profile 1 2>&1", PADRONED, p.pid);
	/* The tracer named is padrone's tracer thread (TracerPid is a tid). */
	int tracer = 0;
	ck_assert_int_eq(sscanf(out, "padroned: process %*d (hotloop) is already traced by process %d",
				&tracer), 1);
	ck_assert_int_eq(tgid_of(tracer), d.pid);
	snprintf(want, sizeof(want), "padroned: process %d (hotloop) is already traced by process "
		 "%d (padrone); a process can have only one tracer: detach that one first\n",
		 p.pid, tracer);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(st, 8);
	free(out);
	kill(d.pid, SIGTERM);
	tu_wait(&d, 10000);
	tu_kill(&d);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(permission_denied)
{
	struct tu_proc p;
	unsigned long long hot;
	char want[512];

	if (geteuid() != 0)
		return;	/* only root can run the client as another user */
	start_hotloop(&p, &hot);
	snprintf(want, sizeof(want), "permission denied: process %d (hotloop) runs as uid 0 (gid 0) "
		 "and padrone as uid 65534 (gid 65534), without CAP_SYS_PTRACE; run padrone as "
		 "the same user or as root", p.pid);
	assert_refused(p.pid, want, 7, "setpriv --reuid=65534 --regid=65534 --clear-groups ");
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

#define AS_NOBODY "setpriv --reuid=65534 --regid=65534 --clear-groups "

/* hotloop run as nobody, with extra setpriv options; waits for a tick. */
static void start_nobody_hotloop(struct tu_proc *p, const char *caps)
{
	char cmd[PATH_MAX + 256], line[256];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };

	const char *hotloop = tu_public_path("tests/targets/hotloop");
	ck_assert_ptr_nonnull(hotloop);
	snprintf(cmd, sizeof(cmd), "exec %s%s %s", AS_NOBODY, caps, hotloop);
	ck_assert_int_eq(tu_spawn(p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(p, "tick ", line, sizeof(line), 10000), 0);
}

/* The security modules padrone names when the kernel refuses for a reason
 * it cannot see. */
static void lsm_words(char *buf, size_t size)
{
	int st;
	char *lsm = run(&st, "cat /sys/kernel/security/lsm 2>/dev/null");
	lsm[strcspn(lsm, "\n")] = '\0';
	if (*lsm)
		snprintf(buf, size, " (active: %s)", lsm);
	else
		snprintf(buf, size, " (SELinux, AppArmor, Yama...)");
	free(lsm);
}

START_TEST(permission_denied_across_user_namespaces)
{
	struct tu_proc p;
	char want[1024], lsm[256];
	int st;

	if (geteuid() != 0)
		return;
	free(run(&st, "unshare --user --map-root-user true 2>&1"));
	if (st != 0)
		return;	/* no user namespaces here: nothing to test */
	/* Root in a user namespace of its own has CAP_SYS_PTRACE there, not
	 * over a process of the initial namespace: the kernel refuses it what
	 * uids and capabilities seem to allow. Refused on reading
	 * /proc/PID/exe, the first thing that needs that access. */
	start_nobody_hotloop(&p, "");
	lsm_words(lsm, sizeof(lsm));
	snprintf(want, sizeof(want), "permission denied: the kernel refused padrone access to "
		 "process %d (hotloop) although uids and capabilities allow it; padrone runs in a "
		 "user namespace of its own that the process is not in, where its capabilities may "
		 "not count, or a security module forbids it%s", p.pid, lsm);
	assert_refused(p.pid, want, 7, "unshare --user --map-root-user ");
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(permission_denied_by_the_process_s_capabilities)
{
	struct tu_proc p;
	char want[512];

	if (geteuid() != 0)
		return;
	/* Same uid, but the process holds capabilities padrone has not. */
	start_nobody_hotloop(&p, "--inh-caps=+net_raw --ambient-caps=+net_raw");
	snprintf(want, sizeof(want), "permission denied: process %d (hotloop) holds capabilities "
		 "padrone lacks (cap_net_raw) and padrone runs without CAP_SYS_PTRACE; a process "
		 "may trace only processes whose capabilities it has: run padrone as root", p.pid);
	assert_refused(p.pid, want, 7, AS_NOBODY);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

/* Without CAP_PERFMON (perf_event_paranoid 2 here) the ring backend runs
 * per thread, and the report says so and why; the process runs on. */
START_TEST(an_unprivileged_profile_runs_per_thread_and_says_why)
{
	struct tu_proc p;
	int st;

	int paranoid = 2;
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	if (f) {
		if (fscanf(f, "%d", &paranoid) != 1)
			paranoid = 2;
		fclose(f);
	}
	if (geteuid() != 0 || paranoid <= 0)	/* per CPU is allowed to anyone */
		return;
	start_nobody_hotloop(&p, "");
	const char *padrone = tu_public_path("src/padrone");
	ck_assert_ptr_nonnull(padrone);
	char *out = run(&st, "%s%s -p %d profile 1 2>&1", AS_NOBODY, padrone, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_msg(strstr(out, "\n# sampled per thread (ring backend): threads that live less "
			     "than a sampling period are missed; perf_event_open on CPU 0: "
			     "Permission denied (per-CPU events need CAP_PERFMON or "
			     "perf_event_paranoid <= 0)\n"), "%s", out);
	ck_assert_msg(strstr(out, "hot_function"), "%s", out);
	free(out);
	assert_untraced(p.pid);
	assert_ticks_right(&p, 2);
	tu_kill(&p);
}
END_TEST

START_TEST(bad_command_lines_give_usage_errors)
{
	static const struct { const char *args, *err; } cases[] = {
		{ "", "padroned: --pid PID or --pidof NAME is required\n" },
		{ "--pid x", "padroned: PID must be an integer from 1 to 2147483647, not 'x'\n" },
		{ "--pid 1 --json", "padroned: --freq, --backend, --force and --json go with --profile\n" },
		{ "--pid 1 extra", "padroned: unexpected argument: extra\n" },
		{ "--pid 1 --profile 0", "padroned: --profile SECONDS must be a number from 0.01 to 86400, not '0'\n" },
		{ "--pid 1 --profile 1 --freq 0", "padroned: --freq HZ must be an integer from 1 to 1000000, not '0'\n" },
		{ "--pid 1 --profile 1 -b dtrace", "padroned: unknown backend 'dtrace': use ring or bpf\n" },
		{ "--pid 1 --instrument f", "padroned: --instrument needs --for SECONDS: how long to "
					     "run instrumented\n" },
		{ "--pid 1 --for 2", "padroned: --for, --mode, --analyses, --I1, --D1, --LL, --duty, "
				      "--max-overhead and --output go with --instrument\n" },
		{ "--pid 1 --duty 20/180", "padroned: --for, --mode, --analyses, --I1, --D1, --LL, "
					   "--duty, --max-overhead and --output go with "
					   "--instrument\n" },
		{ "--pid 1 --max-overhead 5", "padroned: --for, --mode, --analyses, --I1, --D1, --LL, "
					      "--duty, --max-overhead and --output go with "
					      "--instrument\n" },
		{ "--pid 1 --analyses edges", "padroned: --for, --mode, --analyses, --I1, --D1, --LL, "
					      "--duty, --max-overhead and --output go with "
					      "--instrument\n" },
		{ "--pid 1 --instrument f --for 0", "padroned: --for SECONDS must be a number from 0.01 "
						     "to 86400, not '0'\n" },
		{ "--pid 1 --instrument f,,g --for 1", "padroned: --instrument wants FUNC[,FUNC...], "
							"not 'f,,g'\n" },
		{ "--pid 1 --instrument f --for 1 --mode all", "padroned: --mode must be exhaustive or "
								"sample, not 'all'\n" },
		{ "--pid 1 --instrument f --for 1 --json -o x", "padroned: --output writes Cachegrind's "
								 "format, not JSON: use --json or --output\n" },
		{ "--pid 1 --instrument f --for 1 --profile 1", "padroned: --instrument excludes "
								 "--profile, --cfg and --every\n" },
	};
	int st;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = run(&st, "%s %s 2>&1", PADRONED, cases[i].args);
		ck_assert_int_eq(st, 2);
		ck_assert_msg(strncmp(out, cases[i].err, strlen(cases[i].err)) == 0, "%s: %s",
			      cases[i].args, out);
		free(out);
	}
	/* Every option padroned knows is in its man page, and the other way. */
	char *help = run(&st, "%s --help", PADRONED);
	ck_assert_int_eq(st, 0);
	char *man = run(&st, "cat %s", tu_srcpath("man/padroned.8"));
	const char *opts[] = { "pid", "profile", "freq", "backend", "force", "json", "help", "version",
			       "instrument", "for", "mode", "I1", "D1", "LL", "output", "duty",
			       "max-overhead" };
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char a[32], b[32];
		snprintf(a, sizeof(a), "--%s", opts[i]);
		snprintf(b, sizeof(b), "Fl \\-%s", opts[i]);
		ck_assert_msg(strstr(help, a), "--help lacks %s", a);
		ck_assert_msg(strstr(man, b), "padroned.8 lacks %s", a);
	}
	free(help);
	free(man);
	char *v = run(&st, "%s --version", PADRONE);
	ck_assert_int_eq(st, 0);
	ck_assert_int_eq(strncmp(v, "padrone ", 8), 0);
	free(v);
}
END_TEST

/* ------------------------------------------------------------- padroned */

/* The end of a test with padroned d serving p: SIGTERM makes it leave
 * (status 0), and p runs on untraced, computing right. */
static void end_served(struct tu_proc *d, struct tu_proc *p)
{
	kill(d->pid, SIGTERM);
	int st = tu_wait(d, 20000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padroned ended with 0x%x", st);
	tu_kill(d);
	assert_untraced(p->pid);
	assert_ticks_right(p, 2);
	tu_kill(p);
}

/* A client of padroned speaking the protocol itself: connected, greeted. */
static int raw_client(pid_t pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	char err[128];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/padroned-%d.sock", rundir, (int)pid);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(padrone_msg_send(fd, PADRONE_MSG_HELLO, NULL, 0), 0);
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 20000, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.type, PADRONE_MSG_HELLO);
	padrone_msgbuf_free(&b);
	return fd;
}

static void raw_command(int fd, const char *a, const char *b)
{
	char *words[] = { (char *)a, (char *)b, NULL };
	char *payload;
	size_t len;

	ck_assert_int_eq(padrone_msg_pack_words(b ? 2 : 1, words, &payload, &len), 0);
	ck_assert_int_eq(padrone_msg_send(fd, PADRONE_MSG_COMMAND, payload, len), 0);
	free(payload);
}

/* Read one reply: its standard output (malloc'd) and exit status (-1 if the
 * connection ended first). */
static char *raw_reply(int fd, struct padrone_msgbuf *b, int *status)
{
	char *text = NULL, err[128];
	size_t len;
	FILE *f = open_memstream(&text, &len);
	struct padrone_msg m;

	*status = -1;
	while (padrone_msg_recv(fd, b, &m, 60000, err, sizeof(err)) == 1) {
		if (m.type == PADRONE_MSG_STDOUT)
			fwrite(m.payload, 1, m.len, f);
		if (m.type == PADRONE_MSG_EXIT) {
			int32_t st;
			memcpy(&st, m.payload, sizeof(st));
			*status = st;
			break;
		}
	}
	fclose(f);
	return text;
}

/* Wait (bounded) until fd has bytes waiting to be read. */
static void wait_for_bytes(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
}

/* The biggest function of the C library: its disassembly is more than a
 * socket holds (that is checked). */
#define BIG_FUNCTION "__libc_ifunc_impl_list"

static char *big_disas(pid_t pid)
{
	int st;
	char *out = run(&st, "%s -p %d disas " BIG_FUNCTION, PADRONE, pid);

	ck_assert_int_eq(st, 0);
	ck_assert_msg(strlen(out) > 100000, "only %zu bytes: %.200s", strlen(out), out);
	return out;
}

/* `padrone -p PID disas BIG | less`: a client that stops reading holds up
 * no one, is not dropped for it, and loses nothing when it reads again;
 * SIGTERM is honoured with such a client connected. */
START_TEST(a_client_that_stops_reading_holds_up_nobody)
{
	struct tu_proc p, d;
	unsigned long long hot;
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	char *want = big_disas(p.pid);
	int slow = raw_client(p.pid);
	raw_command(slow, "disas", BIG_FUNCTION);
	raw_command(slow, "disas", BIG_FUNCTION);
	wait_for_bytes(slow);	/* its first reply is coming: padroned has the rest */
	/* Others are served meanwhile: a read-only command, then a profile. */
	char *out = run(&st, "%s -p %d info threads", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_ptr_nonnull(strstr(out, "hotloop"));
	free(out);
	out = run(&st, "%s -p %d profile 0.2", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	free(out);
	/* It was kept, and reading now it gets both replies whole. */
	struct padrone_msgbuf b = { 0 };
	for (int i = 0; i < 2; i++) {
		out = raw_reply(slow, &b, &st);
		ck_assert_int_eq(st, 0);
		ck_assert_str_eq(out, want);
		free(out);
	}
	padrone_msgbuf_free(&b);
	close(slow);

	/* One that never reads again: SIGTERM ends padroned all the same. */
	slow = raw_client(p.pid);
	raw_command(slow, "disas", BIG_FUNCTION);
	raw_command(slow, "disas", BIG_FUNCTION);
	wait_for_bytes(slow);
	end_served(&d, &p);
	close(slow);
	free(want);
}
END_TEST

/* Start `padrone -p PID WORDS...` with its output (and errors) on a pipe. */
static void start_padrone(struct tu_proc *c, pid_t pid, const char *cmd)
{
	char arg[16], line[256];
	char *argv[16] = { (char *)PADRONE, "-p", arg };
	int n = 3;

	snprintf(arg, sizeof(arg), "%d", (int)pid);
	snprintf(line, sizeof(line), "%s", cmd);
	for (char *w = strtok(line, " "); w && n < 15; w = strtok(NULL, " "))
		argv[n++] = strdup(w);
	argv[n] = NULL;
	ck_assert_int_eq(tu_spawn(c, argv, true), 0);
	for (int i = 3; i < n; i++)
		free(argv[i]);
}

/* Wait (bounded) until the entry of the function at addr in process pid
 * jumps away (a measuring stub is in), after an endbr64 if it has one. */
static void wait_patched(pid_t pid, unsigned long long addr)
{
	static const unsigned char endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	char path[64];
	unsigned char code[8];

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	for (int waited = 0; waited < 30000; waited += 20) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, code, sizeof(code), (off_t)addr), (ssize_t)sizeof(code));
		close(fd);
		size_t at = memcmp(code, endbr64, sizeof(endbr64)) == 0 ? sizeof(endbr64) : 0;
		if (code[at] == 0xe9)
			return;
		usleep(20000);
	}
	ck_abort_msg("the entry of the function at 0x%llx was never patched", addr);
}

/* c, a padrone, ends by itself with status 0. */
static void assert_exits_ok(struct tu_proc *c)
{
	int st = tu_wait(c, 20000);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padrone ended with 0x%x", st);
	tu_kill(c);
}

/* ^C to c, a padrone running a long profile: it prints the report of what
 * was sampled, ended early, and exits 0. */
/* ^C to a profile seen sampling at time since (mono_s): it ends at once
 * and reports at least the time that passed since then. */
static void interrupt_profile(struct tu_proc *c, double since)
{
	char line[256];
	double secs = 0, least = mono_s() - since;

	kill(c->pid, SIGINT);
	ck_assert_int_gt(tu_wait_for(c, "# pid ", line, sizeof(line), 20000), 0);
	ck_assert_int_eq(sscanf(strstr(line, " in "), " in %lf s", &secs), 1);
	ck_assert_msg(secs >= least - 0.01 && secs < 40, "%.2f s, sampled for %.2f s before ^C",
		      secs, least);
	assert_exits_ok(c);
}

/* A long profile holds up only what must wait for it: a read-only command
 * runs meanwhile; a measure waits, told what for, and runs after. */
START_TEST(a_long_command_holds_up_only_what_must_wait)
{
	struct tu_proc p, d, a, c;
	unsigned long long hot;
	char line[256];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	start_padrone(&a, p.pid, "profile 60");
	double since = wait_sampling(d.pid);
	start_padrone(&c, p.pid, "measure hot_function 3");
	/* proves the profile runs in padroned */
	ck_assert_int_gt(tu_wait_for(&c, "padroned: busy: ", line, sizeof(line), 20000), 0);
	ck_assert_msg(strstr(line, "padroned: busy: waiting for profile of client 1 (pid "),
		      "%s", line);
	char *out = run(&st, "%s -p %d info threads \\; disas hot_function", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_ptr_nonnull(strstr(out, "hotloop"));
	ck_assert_ptr_nonnull(strstr(out, "hot_function"));
	free(out);
	ck_assert_int_eq(tu_wait(&a, 0), -ETIMEDOUT);	/* all that while */
	ck_assert_int_eq(tu_wait(&c, 0), -ETIMEDOUT);
	interrupt_profile(&a, since);
	ck_assert_int_gt(tu_wait_for(&c, "hot_function: 3 calls", line, sizeof(line), 30000), 0);
	assert_exits_ok(&c);
	end_served(&d, &p);
}
END_TEST

/* ^C in padrone, or padrone going away, cancels its command in padroned
 * as ^C does without padroned: a profile ends with what it sampled, a
 * measure with the calls timed so far. */
START_TEST(ctrl_c_or_hanging_up_cancels_the_command_in_padroned)
{
	struct tu_proc p, d, c;
	unsigned long long hot;
	char line[256];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	start_padrone(&c, p.pid, "profile 60");
	double since = wait_sampling(d.pid);
	usleep(500000);
	interrupt_profile(&c, since);

	start_padrone(&c, p.pid, "measure -t 60 hot_function 1000000");
	wait_patched(p.pid, hot);
	kill(c.pid, SIGINT);
	ck_assert_int_gt(tu_wait_for(&c, "hot_function: ", line, sizeof(line), 20000), 0);
	ck_assert_int_gt(tu_wait_for(&c, "(only ", line, sizeof(line), 20000), 0);
	ck_assert_msg(strstr(line, " of 1000000 calls came before the timeout or ^C)"), "%s", line);
	assert_exits_ok(&c);

	/* A client that asks for a minute's profile and hangs up. */
	int fd = raw_client(p.pid);
	raw_command(fd, "profile", "60");
	usleep(300000);
	close(fd);
	start_padrone(&c, p.pid, "profile 0.2");
	ck_assert_int_gt(tu_wait_for(&c, "# pid ", line, sizeof(line), 30000), 0);
	assert_exits_ok(&c);
	char *out = run(&st, "%s -p %d info replacements", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_msg(!strstr(out, "hot_function"), "a stub stayed: %s", out);	/* measure's is out */
	free(out);
	end_served(&d, &p);
}
END_TEST

/* 100 clients at once (profile, hot, info), with one that hangs up in the
 * middle of its profile and one that never reads: every one is served,
 * right, and padroned goes on. */
START_TEST(a_hundred_clients_at_once)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char dir[PATH_MAX];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	int quitter = raw_client(p.pid), slow = raw_client(p.pid);
	raw_command(quitter, "profile", "60");
	raw_command(slow, "disas", BIG_FUNCTION);
	raw_command(slow, "disas", BIG_FUNCTION);
	snprintf(dir, sizeof(dir), "%s/clients", rundir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	close(quitter);
	char *out = run(&st, "d=%s; for i in $(seq 0 99); do "
			"case $((i %% 3)) in 0) c='profile 0.2';; 1) c='hot 3';; 2) c='info threads';; esac; "
			"(%s -p %d $c > $d/out.$i 2>&1; echo $? > $d/st.$i) & done; wait; "
			"cat $d/st.* | sort | uniq -c", dir, PADRONE, p.pid);
	ck_assert_msg(st == 0 && strcmp(out, "    100 0\n") == 0, "statuses: %s", out);
	free(out);
	for (int i = 0; i < 100; i++) {
		char path[PATH_MAX + 16], want[64];
		snprintf(path, sizeof(path), "cat %s/out.%d", dir, i);
		out = run(&st, "%s", path);
		if (i % 3 == 2)
			snprintf(want, sizeof(want), "\n%-8d hotloop ", p.pid);
		else
			snprintf(want, sizeof(want), "# pid %d: ", p.pid);
		ck_assert_msg(strstr(out, want), "client %d: %s", i, out);
		free(out);
	}
	out = run(&st, "%s -p %d info threads", PADRONE, p.pid);	/* still serving */
	ck_assert_int_eq(st, 0);
	free(out);
	end_served(&d, &p);
	close(slow);
}
END_TEST

/* Connections that sit idle lock nobody out: past the limit the one idle
 * longest makes room (told so); with --idle-timeout they are closed. */
START_TEST(idle_connections_lock_nobody_out)
{
	enum { IDLE = 300 };
	struct tu_proc p, d;
	unsigned long long hot;
	int fds[IDLE], st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	for (int i = 0; i < IDLE; i++)
		fds[i] = raw_client(p.pid);
	char *out = run(&st, "%s -p %d info threads", PADRONE, p.pid);
	ck_assert_int_eq(st, 0);
	ck_assert_ptr_nonnull(strstr(out, "hotloop"));
	free(out);
	/* The first ones were closed, saying why. */
	struct padrone_msgbuf b = { 0 };
	struct padrone_msg m;
	char err[128];
	ck_assert_int_eq(padrone_msg_recv(fds[0], &b, &m, 20000, err, sizeof(err)), 1);
	ck_assert_int_eq(m.type, PADRONE_MSG_BYE);
	ck_assert_msg(strncmp(m.payload, "padroned: closing this idle connection: to make room "
			      "for another client\n", m.len) == 0, "%.*s", (int)m.len, m.payload);
	padrone_msgbuf_free(&b);
	for (int i = 0; i < IDLE; i++)
		close(fds[i]);
	kill(d.pid, SIGTERM);
	tu_wait(&d, 20000);
	tu_kill(&d);

	char arg[16], line[256];
	char *argv[] = { (char *)PADRONED, "--pid", arg, "--idle-timeout", "1", NULL };
	snprintf(arg, sizeof(arg), "%d", p.pid);
	ck_assert_int_eq(tu_spawn(&d, argv, true), 0);
	ck_assert_int_gt(tu_wait_for(&d, "padroned: serving", line, sizeof(line), 15000), 0);
	int fd = raw_client(p.pid);
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 20000, err, sizeof(err)), 1);
	ck_assert_int_eq(m.type, PADRONE_MSG_BYE);
	ck_assert_msg(strncmp(m.payload, "padroned: closing this connection: idle for 1 s\n",
			      m.len) == 0, "%.*s", (int)m.len, m.payload);
	ck_assert_int_eq(padrone_msg_recv(fd, &b, &m, 20000, err, sizeof(err)), -EPIPE);
	padrone_msgbuf_free(&b);
	close(fd);
	end_served(&d, &p);
}
END_TEST

/* A second padroned for a process points at the first, with status 21. */
START_TEST(a_second_padroned_points_at_the_first)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char want[512];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	snprintf(want, sizeof(want), "padroned: process %d is already served by padroned %d on "
		 "%s/padroned-%d.sock: send it commands with 'padrone -p %d COMMAND' (stop it "
		 "with 'padrone -p %d detach')\n", p.pid, d.pid, rundir, p.pid, p.pid, p.pid);
	const char *modes[] = { "", "--profile 1", "--cfg main" };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char *out = run(&st, "%s --pid %d %s 2>&1", PADRONED, p.pid, modes[i]);
		ck_assert_msg(st == 21, "%s: status %d", modes[i], st);
		ck_assert_str_eq(out, want);
		free(out);
	}
	char *out = run(&st, "%s -p %d info threads", PADRONE, p.pid);	/* undisturbed */
	ck_assert_int_eq(st, 0);
	free(out);
	end_served(&d, &p);
}
END_TEST

/* A padrone run with another PADRONE_RUNDIR than padroned's finds no
 * socket and tries to attach: the process's tracer is that padroned, so the
 * message says where it serves from and how to reach it. */
START_TEST(a_padrone_looking_elsewhere_is_told_padroneds_run_directory)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char other[300], want[1024];
	int st;

	start_hotloop(&p, &hot);
	start_padroned(&d, p.pid);
	snprintf(other, sizeof other, "%s/elsewhere", rundir);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	snprintf(want, sizeof want, "; that padroned serves it from the run directory %s, and this "
		 "padrone looks in %s: run it with PADRONE_RUNDIR=%s\n", rundir, other, rundir);
	char *out = run(&st, "PADRONE_RUNDIR=%s %s -p %d info threads 2>&1", other, PADRONE, p.pid);
	ck_assert_msg(st == 8, "status %d: %s", st, out);
	ck_assert_msg(strstr(out, "is already traced by process") && strstr(out, want), "%s", out);
	free(out);
	out = run(&st, "%s -p %d info threads", PADRONE, p.pid);	/* undisturbed */
	ck_assert_int_eq(st, 0);
	free(out);
	end_served(&d, &p);
}
END_TEST

/* The prompt: ^C clears the line being typed (like bash: "^C", a fresh
 * prompt, nothing run, nothing in the history) or cancels the running
 * command, also one running in padroned; ^D leaves saying what that did. */
START_TEST(ctrl_c_and_ctrl_d_at_the_prompt)
{
	struct tu_proc p, d;
	unsigned long long hot;
	char hist[128], buf[65536], want[128];
	size_t len = 0;
	int master, st;

	start_hotloop(&p, &hot);
	snprintf(hist, sizeof(hist), "%s/history", rundir);
	setenv("PADRONE_HISTORY", hist, 1);
	for (int served = 0; served < 2; served++) {
		if (served)
			start_padroned(&d, p.pid);
		char arg[16];
		snprintf(arg, sizeof(arg), "%d", p.pid);
		pid_t pid = forkpty(&master, NULL, NULL, NULL);
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			execl(PADRONE, "padrone", "-p", arg, (char *)NULL);
			_exit(127);
		}
		len = 0;
		snprintf(want, sizeof(want), "(padrone %d) ", p.pid);
		ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, want), "%s", buf);
		ck_assert_int_eq(write(master, "help hot", 8), 8);
		usleep(200000);
		ck_assert_int_eq(write(master, "\003", 1), 1);
		snprintf(want, sizeof(want), "help hot^C\r\n(padrone %d) ", p.pid);
		ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, want), "%s", buf);
		ck_assert_int_eq(write(master, "info stops\r", 11), 11);
		ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, "by padrone since it attached"),
			      "%s", buf);
		len = 0;	/* from here on: the prompt after the profile */
		ck_assert_int_eq(write(master, "profile 60\r", 11), 11);
		wait_sampling(served ? d.pid : pid);
		usleep(500000);
		ck_assert_int_eq(write(master, "\003", 1), 1);
		ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, "hot_function"), "%s", buf);
		/* the prompt after the report, not the one before "profile 60"
		 * that buf may begin with: a ^D typed before libedit's raw mode
		 * is lost (the tty turns it into a NUL) */
		snprintf(want, sizeof(want), "\n(padrone %d) ", p.pid);
		ck_assert_msg(pty_expect(master, buf, sizeof(buf), &len, want), "%s", buf);
		ck_assert_int_eq(write(master, "\004", 1), 1);
		if (served)
			snprintf(want, sizeof(want), "left padroned serving process %d (it keeps "
				 "serving)", p.pid);
		else
			snprintf(want, sizeof(want), "detached from process %d", p.pid);
		if (!pty_expect(master, buf, sizeof(buf), &len, want))
			ck_abort_msg("served %d, no '%s' after ^D; padrone's threads: %s; it wrote: %s",
				     served, want, threads_of(pid), buf);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padrone ended with 0x%x: %s",
			      st, buf);
		close(master);
	}
	unsetenv("PADRONE_HISTORY");
	char *h = run(&st, "cat %s", hist);
	ck_assert_msg(!strstr(h, "help") && strstr(h, "\ninfo\\040stops\n") &&
		      strstr(h, "\nprofile\\04060\n"), "%s", h);
	free(h);
	ck_assert_int_eq(tu_wait(&d, 0), -ETIMEDOUT);	/* padroned serves on */
	end_served(&d, &p);
}
END_TEST

static void setup(void)
{
	snprintf(rundir, sizeof(rundir), "/tmp/padrone-e2e-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(rundir));
	setenv("PADRONE_RUNDIR", rundir, 1);	/* children find it too */
}

static void teardown(void)
{
	int st;
	free(run(&st, "rm -rf %s", rundir));
}

int main(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("e2e");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, profile_json_names_the_hot_function_and_the_target_runs_on);
	tcase_add_test(tc, sigterm_makes_padroned_detach_cleanly);
	tcase_add_test(tc, info_lists_modules_and_stops);
	tcase_add_test(tc, padrone_detach_ends_padroned);
	tcase_add_test(tc, padroned_ends_when_its_process_does);
	tcase_add_test(tc, padroned_ends_when_its_process_execs);
	tcase_add_test(tc, ctrl_c_ends_a_profile_early_and_padrone_detaches);
	tcase_add_test(tc, a_signal_while_attaching_ends_a_one_shot_profile_at_once);
	tcase_add_test(tc, the_process_leaving_during_a_measure_gives_its_status);
	tcase_add_test(tc, a_rate_above_10khz_names_the_option_that_forces_it);
	tcase_add_test(tc, a_stopped_target_stays_stopped);
	tcase_add_test(tc, padrone_one_shot_and_a_piped_session);
	tcase_add_test(tc, the_example_client_finds_the_hot_function);
	tcase_add_test(tc, the_threads_target_keeps_its_threads_right);
	tcase_add_test(tc, the_signals_target_loses_no_signal);
	tcase_add_test(tc, the_terminal_session_edits_completes_and_keeps_history);
	tcase_add_test(tc, no_such_process);
	tcase_add_test(tc, a_zombie);
	tcase_add_test(tc, a_kernel_thread);
	tcase_add_test(tc, an_already_traced_process);
	tcase_add_test(tc, permission_denied);
	tcase_add_test(tc, permission_denied_across_user_namespaces);
	tcase_add_test(tc, permission_denied_by_the_process_s_capabilities);
	tcase_add_test(tc, bad_command_lines_give_usage_errors);
	suite_add_tcase(s, tc);
	/* issue 14's sampling, profile life and statuses: CK_RUN_CASE=hardening */
	tc = tcase_create("hardening");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, a_thread_in_d_state_gives_the_timeout_status);
	tcase_add_test(tc, the_process_exiting_during_a_profile_gives_status_9);
	tcase_add_test(tc, the_process_exec_ing_during_a_profile_gives_status_10);
	tcase_add_test(tc, read_only_commands_interrupt_no_system_call);
	tcase_add_test(tc, an_unprivileged_profile_runs_per_thread_and_says_why);
	suite_add_tcase(s, tc);
	/* padroned with many clients: CK_RUN_CASE=daemon runs these alone. */
	tc = tcase_create("daemon");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, a_client_that_stops_reading_holds_up_nobody);
	tcase_add_test(tc, a_long_command_holds_up_only_what_must_wait);
	tcase_add_test(tc, ctrl_c_or_hanging_up_cancels_the_command_in_padroned);
	tcase_add_test(tc, a_hundred_clients_at_once);
	tcase_add_test(tc, idle_connections_lock_nobody_out);
	tcase_add_test(tc, a_second_padroned_points_at_the_first);
	tcase_add_test(tc, a_padrone_looking_elsewhere_is_told_padroneds_run_directory);
	tcase_add_test(tc, ctrl_c_and_ctrl_d_at_the_prompt);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
