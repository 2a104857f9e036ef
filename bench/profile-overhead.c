/* profile-overhead: what sampling costs the target.
 *
 * Runs tests/targets/prof_hot (one busy thread printing its work rate every
 * 100 ms) and measures, in one run, its rate unprofiled and while profiled
 * by padrone (ring and bpf backends; ring runs per CPU where permitted,
 * as root here, else per thread: its report says which), by
 * `perf record -g -p PID -F HZ` (per-task events, like the ring backend's
 * per-thread mode) and `perf record -g -a -F HZ`
 * (per-CPU events, like the bpf backend), and by the floor: a bare
 * cpu-clock event on the target that samples but records nothing (no
 * fields, no ring): the timer interrupt alone, which no timer-driven
 * sampler can beat. At 999 Hz and 4 kHz.
 *
 * Each profiler is set up once per round, then switched on and off
 * several times (padrone: start/stop; perf: its control fifo; the floor:
 * ioctl), its windows alternating with unprofiled ones, so slow drifts of
 * a busy machine fall on both sides of a ratio alike. Each profiled
 * window gives a ratio, the target's rate in it over the mean of its rates
 * in the unprofiled windows either side; the figure is the median of all
 * of them.
 *
 * usage: profile-overhead [ROUNDS [WINDOW_LINES [PAIRS]]]
 * Goals: ring >= 0.99 at 999 Hz, and never below perf's ratio.
 */
#include "profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum tool { RING, BPF, PERF, PERF_ALL, FLOOR };
static const char *tool_name[] = { "padrone ring", "padrone bpf", "perf record -p",
				   "perf record -a", "timer floor" };

#define MAX_WINDOWS 512

struct mode {
	enum tool tool;
	unsigned hz;
	/* per profiled window, its rate over the mean of the unprofiled
	 * windows either side */
	double ratio[MAX_WINDOWS];	/* wall-clock rates */
	double cpu_ratio[MAX_WINDOWS];	/* per-CPU-second rates */
	int n;
	uint64_t samples, lost;
	double cpu_s;		/* the target's CPU time while sampled */
};

static FILE *target_out;
static pid_t target_pid;
static const char *perf_bin;

/* Work units of the next "rate R units U" line. */
static double read_units(void)
{
	char line[256];

	while (fgets(line, sizeof(line), target_out)) {
		if (strstr(line, "BAD")) {
			fprintf(stderr, "profile-overhead: the target reports a bad checksum\n");
			exit(1);
		}
		const char *u = strstr(line, " units ");
		if (!strncmp(line, "rate ", 5) && u)
			return atof(u + 7);
	}
	fprintf(stderr, "profile-overhead: the target stopped\n");
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The target's CPU time in seconds (schedstat: ns on CPU, interrupts
 * included, as this kernel has no IRQ time accounting). */
static double target_cpu(void)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", target_pid);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%llu", &ns) != 1) {
		fprintf(stderr, "profile-overhead: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return (double)ns * 1e-9;
}

struct tally {
	double units, secs, cpu;
	double t0, t1;		/* the last window, CLOCK_MONOTONIC */
};

static double wall_rate(const struct tally *t)
{
	return t->units / t->secs;
}

static double cpu_rate(const struct tally *t)
{
	return t->units / t->cpu;
}

/* Adds lines lines of work to t, starting at a line just printed (lines
 * that waited in the pipe while a profiler switched are skipped). */
static void window(int lines, struct tally *t)
{
	double units = 0, t0, c0;

	for (int i = 0; i < 1000; i++) {
		double a = now();
		read_units();
		if (now() - a > 0.03)
			break;
	}
	t0 = now();
	c0 = target_cpu();
	for (int i = 0; i < lines; i++)
		units += read_units();
	t->cpu += target_cpu() - c0;
	t->t0 = t0;
	t->t1 = now();
	t->secs += t->t1 - t0;
	t->units += units;
}

/* ------------------------------------------------------- perf record */

static char perf_dir[64];	/* perf.data and perf's control fifos */
static char perf_data[96], perf_ctl[96], perf_ack[96];
static FILE *perf_ctl_f;
static int perf_ack_fd = -1;

static void perf_paths(void)
{
	snprintf(perf_dir, sizeof(perf_dir), "/tmp/padrone-bench-XXXXXX");
	if (!mkdtemp(perf_dir)) {
		fprintf(stderr, "profile-overhead: mkdtemp: %s\n", strerror(errno));
		exit(1);
	}
	snprintf(perf_data, sizeof(perf_data), "%s/perf.data", perf_dir);
	snprintf(perf_ctl, sizeof(perf_ctl), "%s/ctl", perf_dir);
	snprintf(perf_ack, sizeof(perf_ack), "%s/ack", perf_dir);
	if (mkfifo(perf_ctl, 0600) < 0 || mkfifo(perf_ack, 0600) < 0) {
		fprintf(stderr, "profile-overhead: mkfifo: %s\n", strerror(errno));
		exit(1);
	}
}

static void perf_cleanup(void)
{
	unlink(perf_data);
	unlink(perf_ctl);
	unlink(perf_ack);
	rmdir(perf_dir);
}

/* Sends "enable" or "disable" through perf's control fifo and waits for
 * its ack ("ack\n\0"): then its events are on (off). */
static void perf_command(pid_t p, const char *cmd)
{
	char ack[16] = "";
	ssize_t n = 0;

	if (fprintf(perf_ctl_f, "%s\n", cmd) < 0 || fflush(perf_ctl_f) ||
	    (n = read(perf_ack_fd, ack, sizeof(ack) - 1)) < 3 || strncmp(ack, "ack", 3)) {
		fprintf(stderr, "profile-overhead: perf record did not ack \"%s\"\n", cmd);
		kill(p, SIGKILL);
		exit(1);
	}
}

/* perf record -g -p PID (per-task events, as padrone's ring backend per
 * thread), or
 * -a (per-CPU events, as the bpf backend; it samples every process),
 * started with its events off (-D -1) and switched through its control
 * fifo: on a loaded machine perf takes seconds to set up, and until then
 * the target is not sampled at all. -k: sample times on our clock, to
 * count the samples of our windows. -B -N: no build-id pass at exit, which
 * can outlast our patience with -a; -m: 4 MiB rings, so that a perf
 * starved of CPU by other load loses fewer samples. */
static pid_t start_perf(enum tool tool, unsigned hz)
{
	char pid[32], freq[32], ctl[256];
	pid_t p;

	snprintf(pid, sizeof(pid), "%d", target_pid);
	snprintf(freq, sizeof(freq), "%u", hz);
	snprintf(ctl, sizeof(ctl), "fifo:%s,%s", perf_ctl, perf_ack);
	p = fork();
	if (p == 0) {
		char *args[] = { "perf", "record", "-q", "-g", "-k", "CLOCK_MONOTONIC", "-B", "-N",
				 "-m", "1024", "-D", "-1", "--control", ctl, "-F", freq, "-o",
				 perf_data, "-a", NULL, NULL };
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(126);
		if (tool == PERF) {
			args[18] = "-p";
			args[19] = pid;
		}
		execv(perf_bin, args);
		_exit(127);
	}
	/* each open waits for perf to open the other end */
	perf_ctl_f = fopen(perf_ctl, "we");
	perf_ack_fd = perf_ctl_f ? open(perf_ack, O_RDONLY | O_CLOEXEC) : -1;
	if (perf_ack_fd < 0) {
		fprintf(stderr, "profile-overhead: cannot open perf's control fifos\n");
		kill(p, SIGKILL);
		exit(1);
	}
	return p;
}

/* Stops perf; returns how many samples of the target it recorded within
 * the n windows [t0[i], t1[i]] (perf acks its enable and disable commands
 * late on a loaded machine: the span it sampled is not known better). */
static uint64_t stop_perf(pid_t p, const double *t0, const double *t1, int nw)
{
	char cmd[512], line[256];
	uint64_t n = 0;
	int st;
	FILE *f;

	fclose(perf_ctl_f);
	close(perf_ack_fd);
	/* perf can miss a SIGINT that lands before it polls: repeat it, and
	 * after 10 s give up on a clean stop */
	kill(p, SIGINT);
	for (int i = 0; waitpid(p, &st, WNOHANG) == 0; i++) {
		if (i == 100) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			break;
		}
		usleep(100000);
		if (i % 10 == 9)
			kill(p, SIGINT);
	}
	/* the time of each of the target's samples: -k CLOCK_MONOTONIC made
	 * it our clock */
	snprintf(cmd, sizeof(cmd), "'%s' script -i %s --pid %d -F time 2>/dev/null", perf_bin,
		 perf_data, target_pid);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		double t;
		if (sscanf(line, " %lf", &t) != 1)
			continue;
		for (int i = 0; i < nw; i++)
			n += t >= t0[i] && t <= t1[i];
	}
	if (f)
		pclose(f);
	unlink(perf_data);
	return n;
}

/* ------------------------------------------------------- profilers */

/* The floor: a cpu-clock event on the target that samples but records
 * nothing (no fields, no ring): the timer interrupt and perf's
 * bookkeeping, which every timer-driven sampler pays. prof_hot has one
 * thread. */
static int open_floor(unsigned hz)
{
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
				     .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1,
				     .sample_freq = hz, .exclude_hv = 1, .disabled = 1 };
	int fd = (int)syscall(SYS_perf_event_open, &a, target_pid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "profile-overhead: perf_event_open: %s\n", strerror(errno));
		exit(1);
	}
	return fd;
}

struct profiler {
	struct mode *m;
	struct prof_sampler *s;
	pid_t perf;
	int fd;
	/* perf: the profiled windows, their samples counted afterwards */
	double t0[MAX_WINDOWS], t1[MAX_WINDOWS];
	int nw;
};

static void prof_open(struct profiler *p, struct mode *m)
{
	struct prof_error err;

	*p = (struct profiler){ .m = m, .fd = -1 };
	if (m->tool == PERF || m->tool == PERF_ALL) {
		p->perf = start_perf(m->tool, m->hz);
	} else if (m->tool == FLOOR) {
		p->fd = open_floor(m->hz);
	} else {
		struct prof_opts o = { .sz = sizeof(o), .freq_hz = m->hz,
				       .backend = m->tool == BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING };
		if (prof_sampler__open(target_pid, &o, &p->s, &err) < 0) {
			fprintf(stderr, "profile-overhead: %s\n", err.msg);
			exit(1);
		}
	}
}

static void prof_switch(struct profiler *p, bool on)
{
	if (p->perf) {
		perf_command(p->perf, on ? "enable" : "disable");
	} else if (p->fd >= 0) {
		ioctl(p->fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
	} else if (on && prof_sampler__start(p->s) < 0) {
		fprintf(stderr, "profile-overhead: %s\n", prof_sampler__errmsg(p->s));
		exit(1);
	} else if (!on) {
		prof_sampler__stop(p->s);
	}
}

static void prof_close(struct profiler *p)
{
	struct mode *m = p->m;

	if (p->perf) {
		m->samples += stop_perf(p->perf, p->t0, p->t1, p->nw);
	} else if (p->fd >= 0) {
		uint64_t ns = 0;
		/* no ring: the timer fired once per period of the count */
		if (read(p->fd, &ns, sizeof(ns)) == sizeof(ns))
			m->samples += ns / (1000000000ull / m->hz);
		close(p->fd);
	} else {
		struct prof_totals t;
		prof_sampler__totals(p->s, &t);
		if (t.fell_back) {
			fprintf(stderr, "profile-overhead: bpf fell back: %s\n", t.fallback_reason);
			exit(1);
		}
		m->samples += t.samples;
		m->lost += t.lost;
		prof_sampler__free(p->s);
	}
}

/* One round of mode m: pairs windows profiled, each between unprofiled
 * ones. */
static void round_of(struct mode *m, int lines, int pairs)
{
	struct profiler p;
	struct tally before = { 0 };

	prof_open(&p, m);
	window(lines, &before);
	for (int i = 0; i < pairs && m->n < MAX_WINDOWS; i++) {
		struct tally on = { 0 }, after = { 0 };
		double c0 = target_cpu();
		prof_switch(&p, true);
		window(lines, &on);
		prof_switch(&p, false);
		if (p.perf) {
			p.t0[p.nw] = on.t0;
			p.t1[p.nw++] = on.t1;
			m->cpu_s += on.cpu;
		} else {
			m->cpu_s += target_cpu() - c0;
		}
		window(lines, &after);
		m->ratio[m->n] = wall_rate(&on) / ((wall_rate(&before) + wall_rate(&after)) / 2);
		m->cpu_ratio[m->n++] = cpu_rate(&on) / ((cpu_rate(&before) + cpu_rate(&after)) / 2);
		before = after;
	}
	prof_close(&p);
}

/* ------------------------------------------------------- report */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_WINDOWS];

	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The noise of a mode's median ratio: its standard error, from the median
 * absolute deviation of the windows (robust to a disturbed window). */
static double median_error(const double *v, int n)
{
	double med = median(v, n), dev[MAX_WINDOWS];

	for (int i = 0; i < n; i++)
		dev[i] = fabs(v[i] - med);
	return 1.253 * 1.4826 * median(dev, n) / sqrt((double)n);
}

/* ours against theirs: ahead, or behind by less than twice the noise of the
 * difference (the two medians cannot be told apart), or behind. */
static const char *verdict(const struct mode *a, const struct mode *b)
{
	double ca = median(a->cpu_ratio, a->n), cb = median(b->cpu_ratio, b->n);
	double ea = median_error(a->cpu_ratio, a->n), eb = median_error(b->cpu_ratio, b->n);

	if (ca >= cb)
		return "met";
	return cb - ca <= 2 * sqrt(ea * ea + eb * eb) ? "a tie (the gap is within the noise)" : "MISSED";
}

static const struct mode *find_mode(const struct mode *modes, size_t n, enum tool tool,
				    unsigned hz)
{
	for (size_t i = 0; i < n; i++)
		if (modes[i].tool == tool && modes[i].hz == hz && modes[i].n)
			return &modes[i];
	return NULL;
}

static void print_modes(const struct mode *modes, size_t nm)
{
	for (size_t i = 0; i < nm; i++) {
		const struct mode *m = &modes[i];
		if (!m->n) {
			printf("%-15s %4u Hz: not run (perf not found)\n", tool_name[m->tool], m->hz);
			continue;
		}
		double cpu = median(m->cpu_ratio, m->n);
		/* what one recorded sample costs the target: the CPU share lost
		 * over the samples per CPU-second while sampled */
		double per_s = m->cpu_s > 0 ? (double)m->samples / m->cpu_s : 0;
		printf("%-15s %4u Hz: ratio wall %.4f cpu %.4f", tool_name[m->tool], m->hz,
		       median(m->ratio, m->n), cpu);
		if (per_s > 0)
			printf("  %.0f samples/CPU-s, %.1f us each", per_s, (1 - cpu) / per_s * 1e6);
		if (m->tool == RING || m->tool == BPF)
			printf(", %llu lost", (unsigned long long)m->lost);
		if (m->tool == FLOOR)
			printf("  (samples, records nothing)");
		if (!m->samples)
			printf("  [recorded nothing: the ratio of events that never sample]");
		printf("\n");
	}
}

/* The goals, side by side: each backend against perf's like mode, and the
 * floor no timer-driven sampler can beat. */
static void print_goals(const struct mode *modes, size_t nm)
{
	for (unsigned hz = 999; hz <= 4000; hz = hz == 999 ? 4000 : 5000) {
		const struct mode *fl = find_mode(modes, nm, FLOOR, hz);
		double cf = fl ? median(fl->cpu_ratio, fl->n) : 1;
		if (fl)
			printf("floor %u Hz: %.4f: the timer interrupt alone costs the target %.1f%% "
			       "here; no cpu-clock sampler can do better\n", hz, cf, (1 - cf) * 100);
		for (int pair = 0; pair < 2; pair++) {
			enum tool ours = pair ? BPF : RING, theirs = pair ? PERF_ALL : PERF;
			const struct mode *a = find_mode(modes, nm, ours, hz);
			const struct mode *b = find_mode(modes, nm, theirs, hz);
			if (!a)
				continue;
			double ca = median(a->cpu_ratio, a->n);
			printf("ratio %u Hz: %s %.4f", hz, tool_name[ours], ca);
			if (hz == 999)
				printf(" (goal >= 0.99: %s%s)", ca >= 0.99 ? "met" : "MISSED",
				       cf < 0.99 ? "; out of reach, the floor is below it" : "");
			if (b && b->samples) {
				double cb = median(b->cpu_ratio, b->n);
				printf(" vs %s %.4f (goal >= perf: %s; noise +-%.4f)", tool_name[theirs],
				       cb, verdict(a, b), median_error(a->cpu_ratio, a->n));
			} else if (b) {
				printf(" vs %s: no samples recorded, nothing to compare",
				       tool_name[theirs]);
			}
			printf("\n");
		}
	}
}

static const char *find_perf(void)
{
	static const char *cands[] = { "/usr/bin/perf", "/usr/bin/perf_6.1", "/usr/sbin/perf" };

	for (size_t i = 0; i < sizeof(cands) / sizeof(*cands); i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, lines = argc > 2 ? atoi(argv[2]) : 4;
	int pairs = argc > 3 ? atoi(argv[3]) : 3;
	const char *top = getenv("top_builddir");
	char path[4096];
	int pfd[2];
	struct mode modes[] = {
		{ .tool = RING, .hz = 999 }, { .tool = PERF, .hz = 999 },
		{ .tool = BPF, .hz = 999 }, { .tool = PERF_ALL, .hz = 999 },
		{ .tool = FLOOR, .hz = 999 },
		{ .tool = RING, .hz = 4000 }, { .tool = PERF, .hz = 4000 },
		{ .tool = BPF, .hz = 4000 }, { .tool = PERF_ALL, .hz = 4000 },
		{ .tool = FLOOR, .hz = 4000 },
	};
	size_t nm = sizeof(modes) / sizeof(*modes);

	if (rounds < 1 || rounds > 32 || lines < 1 || pairs < 1) {
		fprintf(stderr, "usage: profile-overhead [ROUNDS(1-32) [WINDOW_LINES [PAIRS]]]\n");
		return 2;
	}
	perf_bin = find_perf();
	if (perf_bin)
		perf_paths();
	snprintf(path, sizeof(path), "%s/tests/targets/prof_hot", top ? top : ".");
	if (pipe(pfd) < 0)
		return 1;
	target_pid = fork();
	if (target_pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execl(path, "prof_hot", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	target_out = fdopen(pfd[0], "r");
	/* on a shared machine, other load preempting the target makes every
	 * window noisier; a higher priority (where permitted) keeps it on its
	 * CPU, as on a machine it has to itself */
	bool niced = setpriority(PRIO_PROCESS, (id_t)target_pid, -15) == 0;
	struct tally warm = { 0 };
	window(5, &warm);

	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < nm; i++)
			if (perf_bin || (modes[i].tool != PERF && modes[i].tool != PERF_ALL))
				round_of(&modes[i], lines, pairs);
	kill(target_pid, SIGKILL);
	waitpid(target_pid, NULL, 0);
	if (perf_bin)
		perf_cleanup();

	printf("target work-rate ratio, profiled / unprofiled; median over %d rounds x %d windows "
	       "of %d x 100 ms profiled, each between unprofiled ones\n", rounds, pairs, lines);
	printf("  target at nice %s; wall: units per second; cpu: units per second of the target's "
	       "own CPU time (sampling interrupts included; other load on a shared machine does not "
	       "count)\n", niced ? "-15" : "0");
	print_modes(modes, nm);
	print_goals(modes, nm);
	return 0;
}
