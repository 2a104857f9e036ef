/* profile-overhead: what sampling costs the target.
 *
 * Runs tests/targets/prof_hot (one busy thread printing its work rate every
 * 100 ms) and measures, in one run, its rate unprofiled and while profiled
 * by padrone (ring and bpf backends) and by `perf record -g -p PID -F HZ`
 * (per-task events, like the ring backend) and `perf record -g -a -F HZ`
 * (per-CPU events, like the bpf backend),
 * at 999 Hz and 4 kHz. Windows alternate with unprofiled ones, so a busy
 * machine slows both sides of each ratio alike; each ratio is the median
 * over rounds of (rate while profiled / mean of the unprofiled windows
 * around it).
 *
 * usage: profile-overhead [ROUNDS [WINDOW_LINES]]
 * Goals: ring >= 0.99 at 999 Hz, and never below perf's ratio.
 */
#include "profile/profile.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum tool { BASE, RING, BPF, PERF, PERF_ALL };
static const char *tool_name[] = { "unprofiled", "padrone ring", "padrone bpf", "perf record -p",
				   "perf record -a" };

struct mode {
	enum tool tool;
	unsigned hz;
	double ratio[32];	/* wall-clock rate ratios */
	double cpu_ratio[32];	/* per-CPU-second rate ratios */
	int n;
	uint64_t samples, lost;
	double cpu_s;		/* the target's CPU time while profiled */
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

struct rates {
	double wall;	/* units per second */
	double cpu;	/* units per second of the target's CPU time */
	double cpu_s;	/* the target's CPU time in the window */
};

/* Units over lines lines, starting at a line just printed (lines that
 * waited in the pipe while a profiler started or stopped are skipped). */
static struct rates window(int lines)
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
	double c1 = target_cpu();
	return (struct rates){ units / (now() - t0), units / (c1 - c0), c1 - c0 };
}

#define PERF_DATA "/tmp/padrone-bench-perf.data"

/* perf record -g -p PID (per-task events, as padrone's ring backend), or
 * -a (per-CPU events, as the bpf backend; it samples every process). */
static pid_t start_perf(enum tool tool, unsigned hz)
{
	char pid[32], freq[32];
	pid_t p = fork();

	snprintf(pid, sizeof(pid), "%d", target_pid);
	snprintf(freq, sizeof(freq), "%u", hz);
	if (p == 0) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(126);
		if (tool == PERF)
			execl(perf_bin, "perf", "record", "-q", "-g", "-p", pid, "-F", freq, "-o",
			      PERF_DATA, (char *)NULL);
		else
			execl(perf_bin, "perf", "record", "-q", "-g", "-a", "-F", freq, "-o",
			      PERF_DATA, (char *)NULL);
		_exit(127);
	}
	usleep(300000);	/* perf's own set-up is not the target's cost */
	return p;
}

/* Stops perf; returns how many samples of the target it recorded. */
static uint64_t stop_perf(pid_t p)
{
	char cmd[512], line[256];
	unsigned long long n = 0;
	int st;
	FILE *f;

	/* perf can miss a SIGINT that lands before it polls: repeat it, and
	 * after 5 s give up on a clean stop */
	kill(p, SIGINT);
	for (int i = 0; waitpid(p, &st, WNOHANG) == 0; i++) {
		if (i == 50) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			break;
		}
		usleep(100000);
		if (i % 10 == 9)
			kill(p, SIGINT);
	}
	snprintf(cmd, sizeof(cmd), "'%s' report -i %s --pid %d --stdio --sort pid 2>/dev/null",
		 perf_bin, PERF_DATA, target_pid);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		double v;
		char unit = 0;
		if (sscanf(line, "# Samples: %lf%c", &v, &unit) >= 1)
			n = (unsigned long long)(v * (unit == 'K' ? 1e3 : unit == 'M' ? 1e6 : 1));
	}
	if (f)
		pclose(f);
	unlink(PERF_DATA);
	unlink(PERF_DATA ".old");	/* perf keeps the previous file under that name */
	return n;
}

static struct rates measure(struct mode *m, int lines)
{
	struct prof_sampler *s = NULL;
	struct prof_error err;
	pid_t perf = 0;
	struct rates rate;
	double c0 = target_cpu();	/* the profiler's whole life, for its samples */

	if (m->tool == PERF || m->tool == PERF_ALL) {
		perf = start_perf(m->tool, m->hz);
	} else if (m->tool != BASE) {
		struct prof_opts o = { .sz = sizeof(o), .freq_hz = m->hz,
				       .backend = m->tool == BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING };
		if (prof_sampler__open(target_pid, &o, &s, &err) < 0 || prof_sampler__start(s) < 0) {
			fprintf(stderr, "profile-overhead: %s\n", s ? prof_sampler__errmsg(s) : err.msg);
			exit(1);
		}
	}
	rate = window(lines);
	m->cpu_s += target_cpu() - c0;
	if (perf)
		m->samples += stop_perf(perf);
	if (s) {
		struct prof_totals t;
		prof_sampler__stop(s);
		prof_sampler__totals(s, &t);
		if (t.fell_back) {
			fprintf(stderr, "profile-overhead: bpf fell back: %s\n", t.fallback_reason);
			exit(1);
		}
		m->samples += t.samples;
		m->lost += t.lost;
		prof_sampler__free(s);
	}
	return rate;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
	int rounds = argc > 1 ? atoi(argv[1]) : 5, lines = argc > 2 ? atoi(argv[2]) : 15;
	const char *top = getenv("top_builddir");
	char path[4096];
	int pfd[2];
	struct mode modes[] = {
		{ .tool = RING, .hz = 999 }, { .tool = PERF, .hz = 999 },
		{ .tool = BPF, .hz = 999 }, { .tool = PERF_ALL, .hz = 999 },
		{ .tool = RING, .hz = 4000 }, { .tool = PERF, .hz = 4000 },
		{ .tool = BPF, .hz = 4000 }, { .tool = PERF_ALL, .hz = 4000 },
	};
	size_t nm = sizeof(modes) / sizeof(*modes);

	if (rounds < 1 || rounds > 32 || lines < 1) {
		fprintf(stderr, "usage: profile-overhead [ROUNDS(1-32) [WINDOW_LINES]]\n");
		return 2;
	}
	perf_bin = find_perf();
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
	window(5);	/* warm up */

	for (int r = 0; r < rounds; r++) {
		struct rates before = measure(&(struct mode){ .tool = BASE }, lines);
		for (size_t i = 0; i < nm; i++) {
			if ((modes[i].tool == PERF || modes[i].tool == PERF_ALL) && !perf_bin)
				continue;
			struct rates during = measure(&modes[i], lines);
			struct rates after = measure(&(struct mode){ .tool = BASE }, lines);
			modes[i].ratio[modes[i].n] = during.wall / ((before.wall + after.wall) / 2);
			modes[i].cpu_ratio[modes[i].n++] = during.cpu / ((before.cpu + after.cpu) / 2);
			before = after;
		}
	}
	kill(target_pid, SIGKILL);
	waitpid(target_pid, NULL, 0);

	printf("target work-rate ratio, profiled / unprofiled; median of %d rounds of %d x 100 ms "
	       "windows, alternating with unprofiled ones\n", rounds, lines);
	printf("  target at nice %s; wall: units per second; cpu: units per second of the target's own CPU time "
	       "(sampling interrupts included; immune to other load on a shared machine)\n",
	       niced ? "-15" : "0");
	for (size_t i = 0; i < nm; i++) {
		if (!modes[i].n) {
			printf("%-15s %4u Hz: not run (perf not found)\n", tool_name[modes[i].tool],
			       modes[i].hz);
			continue;
		}
		double cpu = median(modes[i].cpu_ratio, modes[i].n);
		/* what one recorded sample costs the target: the CPU share lost,
		 * times its CPU time, over the samples (perf's count spans its
		 * start-up and stop too, so its cost is, if anything, low) */
		double per_s = modes[i].cpu_s > 0 ? modes[i].samples / modes[i].cpu_s : 0;
		printf("%-15s %4u Hz: ratio wall %.4f cpu %.4f", tool_name[modes[i].tool],
		       modes[i].hz, median(modes[i].ratio, modes[i].n), cpu);
		if (per_s > 0)
			printf("  %.0f samples/CPU-s, %.1f us each", per_s, (1 - cpu) / per_s * 1e6);
		if (modes[i].tool == RING || modes[i].tool == BPF)
			printf(", %llu lost", (unsigned long long)modes[i].lost);
		if (!modes[i].samples)
			printf("  [recorded nothing: the ratio of events that never sample]");
		printf("\n");
	}
	/* the goals, side by side: each backend against perf's like mode */
	for (unsigned hz = 999; hz <= 4000; hz = hz == 999 ? 4000 : 5000) {
		for (int pair = 0; pair < 2; pair++) {
			enum tool ours = pair ? BPF : RING, theirs = pair ? PERF_ALL : PERF;
			const struct mode *a = NULL, *b = NULL;
			for (size_t i = 0; i < nm; i++) {
				if (modes[i].hz == hz && modes[i].n && modes[i].tool == ours)
					a = &modes[i];
				if (modes[i].hz == hz && modes[i].n && modes[i].tool == theirs)
					b = &modes[i];
			}
			if (!a)
				continue;
			double ca = median((double *)a->cpu_ratio, a->n);
			printf("ratio %u Hz: %s %.4f", hz, tool_name[ours], ca);
			if (hz == 999)
				printf(" (goal >= 0.99: %s)", ca >= 0.99 ? "met" : "MISSED");
			if (b && b->samples) {
				double cb = median((double *)b->cpu_ratio, b->n);
				printf(" vs %s %.4f (goal >= perf: %s)", tool_name[theirs], cb,
				       ca >= cb ? "met" : "MISSED");
			} else if (b) {
				printf(" vs %s: no samples recorded, nothing to compare", tool_name[theirs]);
			}
			printf("\n");
		}
	}
	return 0;
}
