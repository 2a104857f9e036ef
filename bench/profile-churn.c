/* profile-churn: how well each way of sampling sees short-lived threads.
 *
 * Runs tests/targets/prof_churn with workers that live ~20 us (one short
 * call each: the main thread starts thousands of threads a second), and
 * samples it, in one run, with padrone's ring backend per thread (events
 * on the target's threads, inherited by new ones: the old default), per
 * CPU (one event per CPU, the target's samples kept: the default where
 * permitted), the bpf backend, and `perf record -p` (when perf is there),
 * in rounds so that a busy machine's drift falls on every mode alike.
 *
 * The figure is samples per CPU-second of the target (its CPU time from
 * /proc/PID/stat, all threads, the dead ones too): a timer-driven sampler
 * that sees every thread gets about HZ; one that misses threads living
 * less than its period gets only what the long-lived main thread runs.
 *
 * usage: profile-churn [ROUNDS [SECONDS [LIFETIME_US]]]   (3, 2, 20)
 * Goal: per-cpu and bpf within 0.7-1.1 of HZ; per-thread is what it was.
 */
#include "profile/profile.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HZ 999u

enum mode { PER_THREAD, PER_CPU, BPF, PERF_P, NMODES };
static const char *mode_name[] = { "ring per-thread (old default)", "ring per-cpu (new default)",
				   "bpf", "perf record -p" };

struct tally {
	uint64_t samples;
	double cpu_s, wall_s;
	int runs;
	char note[160];
};

static pid_t target;

/* The target's CPU time so far, all its threads, living and dead. */
static double cpu_time_s(void)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)target);
	f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One window of padrone's sampler in a mode; 0 or -1 (the note says why). */
static int sample_padrone(enum mode m, double secs, struct tally *t)
{
	struct prof_opts o = { .sz = sizeof(o), .freq_hz = HZ,
			       .backend = m == BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING,
			       .ring_mode = m == PER_CPU ? PROF_RING_PER_CPU : PROF_RING_PER_THREAD };
	struct prof_sampler *s;
	struct prof_error err;
	struct prof_totals tot;

	if (prof_sampler__open(target, &o, &s, &err) < 0) {
		snprintf(t->note, sizeof(t->note), "%.150s", err.msg);
		return -1;
	}
	double c0 = cpu_time_s(), w0 = mono_s();
	if (prof_sampler__start(s) < 0) {
		snprintf(t->note, sizeof(t->note), "%.150s", prof_sampler__errmsg(s));
		prof_sampler__free(s);
		return -1;
	}
	usleep((useconds_t)(secs * 1e6));
	prof_sampler__stop(s);
	double c1 = cpu_time_s(), w1 = mono_s();
	prof_sampler__totals(s, &tot);
	if (tot.fell_back)
		snprintf(t->note, sizeof(t->note), "fell back to ring: %.120s", tot.fallback_reason);
	t->samples += tot.samples;
	t->cpu_s += c1 - c0;
	t->wall_s += w1 - w0;
	t->runs++;
	prof_sampler__free(s);
	return 0;
}

/* perf record -p for secs: its samples of the target. */
static int sample_perf(double secs, struct tally *t)
{
	char cmd[512], data[64];
	int st;

	snprintf(data, sizeof(data), "/tmp/profile-churn-%d.data", (int)getpid());
	snprintf(cmd, sizeof(cmd), "perf record -q -e cpu-clock -F %u -g -B -N -o %s -p %d -- "
		 "sleep %.3f >/dev/null 2>&1", HZ, data, (int)target, secs);
	double c0 = cpu_time_s(), w0 = mono_s();
	st = system(cmd);
	double c1 = cpu_time_s(), w1 = mono_s();
	if (st != 0) {
		snprintf(t->note, sizeof(t->note), "perf record failed (status %d)", st);
		unlink(data);
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "perf script -i %s --pid %d -F tid 2>/dev/null | wc -l", data,
		 (int)target);
	FILE *f = popen(cmd, "r");
	unsigned long long n = 0;
	if (!f || fscanf(f, "%llu", &n) != 1)
		n = 0;
	if (f)
		pclose(f);
	unlink(data);
	t->samples += n;
	t->cpu_s += c1 - c0;
	t->wall_s += w1 - w0;
	t->runs++;
	return 0;
}

static void start_target(const char *top, const char *lifetime)
{
	char path[4096], line[256];
	int pfd[2];

	snprintf(path, sizeof(path), "%s/tests/targets/prof_churn", top ? top : ".");
	if (pipe(pfd) < 0)
		exit(1);
	target = fork();
	if (target == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execl(path, "prof_churn", "-l", lifetime, "-r", "200", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	FILE *out = fdopen(pfd[0], "r");
	if (!out || !fgets(line, sizeof(line), out) || strncmp(line, "ready", 5) != 0) {
		fprintf(stderr, "profile-churn: %s did not start\n", path);
		kill(target, SIGKILL);
		exit(1);
	}
	/* keep reading its output, so that it never blocks on a full pipe */
	if (fork() == 0) {
		while (fgets(line, sizeof(line), out))
			;
		_exit(0);
	}
	fclose(out);
}

static void print(const struct tally *t, double secs, const char *lifetime)
{
	printf("profile-churn: prof_churn -l %s (workers live ~%s us), %g s windows at %u Hz, "
	       "cpu-clock\n", lifetime, lifetime, secs, HZ);
	printf("%-30s %8s %9s %13s %9s\n", "mode", "samples", "cpu s", "samples/cpu-s",
	       "of HZ");
	for (int m = 0; m < NMODES; m++) {
		if (!t[m].runs) {
			printf("%-30s  not run: %s\n", mode_name[m], t[m].note);
			continue;
		}
		double rate = t[m].cpu_s > 0 ? (double)t[m].samples / t[m].cpu_s : 0;
		printf("%-30s %8llu %9.2f %13.1f %9.2f%s%s\n", mode_name[m],
		       (unsigned long long)t[m].samples, t[m].cpu_s, rate, rate / HZ,
		       *t[m].note ? "  " : "", t[m].note);
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	double secs = argc > 2 ? atof(argv[2]) : 2.0;
	const char *lifetime = argc > 3 ? argv[3] : "20";
	struct tally t[NMODES] = { 0 };
	bool perf = system("perf --version >/dev/null 2>&1") == 0;

	if (rounds < 1 || secs <= 0 || secs > 60 || atof(lifetime) <= 0) {
		fprintf(stderr, "usage: profile-churn [ROUNDS [SECONDS [LIFETIME_US]]]\n");
		return 2;
	}
	start_target(getenv("top_builddir"), lifetime);
	if (!perf)
		snprintf(t[PERF_P].note, sizeof(t[PERF_P].note), "no perf here");
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < NMODES; m++) {
			if (m == PERF_P && perf)
				sample_perf(secs, &t[m]);
			else if (m != PERF_P)
				sample_padrone((enum mode)m, secs, &t[m]);
		}
	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	print(t, secs, lifetime);
	return 0;
}
