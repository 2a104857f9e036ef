/* pipeline-rings: cross-process ring throughput, CAB vs N-way vs
 * FastForward, at several chunk sizes.
 *
 * The producer (this process, CPU 0) writes fixed-size records of
 * RECORD_WORDS words (a REP unit with three slots) as fast as it can; the
 * consumer (a forked process mapping the ring from its fd, CPU 1) reads
 * every word. Time runs from the first record to the consumer's end of
 * stream. Each configuration runs reps times (argv[2], default 7) over
 * argv[1] MiB (default 32); the best run is shown: the machine is shared,
 * and short runs with the best taken are the ones least disturbed by other
 * processes. The load average is printed with the figures. */
#include "pipeline/cab.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RECORD_WORDS 4
#define NCHUNKS 16
#define PAYLOADS 1024

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);	/* best effort */
}

struct sum {
	uint64_t s, words;
};

/* The analysis: read every word. */
static int consume(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct sum *a = arg;
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += w[i];
	a->s += s;
	a->words += n;
	return 0;
}

struct result {
	uint64_t end_ns, words, sum, cpu_ns;
	int rc;
};

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void consumer(int fd, int out)
{
	struct cab_ring *r;
	struct cab_consumer *c;
	struct sum a = { 0, 0 };
	struct result res = { 0 };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	pin(1);
	res.rc = cab_ring__open(fd, &r);
	if (!res.rc)
		res.rc = cab_consumer__open(r, &c);
	if (write(out, "S", 1) != 1)
		_exit(1);
	uint64_t c0 = cpu_ns();
	if (!res.rc)
		res.rc = cab_consumer__run(c, consume, &a, NULL);
	res.end_ns = now_ns();
	res.cpu_ns = cpu_ns() - c0;
	res.words = a.words;
	res.sum = a.s;
	_exit(write(out, &res, sizeof res) == sizeof res ? 0 : 1);
}

/* CPU share each side had during the last run (CPU time / wall time), and
 * its CPU nanoseconds per record. */
static double share_prod, share_cons, ns_prod, ns_cons;

/* One run: seconds, or a negative value on error. */
static double run(enum cab_kind kind, size_t chunk, uint64_t nrec)
{
	struct cab_opts o = { .sz = sizeof o, .kind = kind, .chunk_bytes = chunk,
			      .nchunks = NCHUNKS, .max_record_words = RECORD_WORDS,
			      .spin_us = 200 };
	struct cab_ring *r;
	struct cab_producer *p;
	int fds[2];
	char c;

	if (cab_ring__create(&o, &r)) {
		fprintf(stderr, "pipeline-rings: %s\n", cab_errmsg());
		return -1;
	}
	if (pipe(fds))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		consumer(cab_ring__fd(r), fds[1]);
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1 || cab_producer__open(r, &p))
		return -1;
	pin(0);
	/* Payloads come from a table in cache, as register values would: built
	 * word by word in a stack array, they would stall every record on
	 * store-to-load forwarding and measure that instead of the ring. */
	static uint64_t pl[PAYLOADS][RECORD_WORDS - 1];
	uint64_t expect = 0;
	for (uint64_t i = 0; i < PAYLOADS; i++)
		for (int k = 0; k < RECORD_WORDS - 1; k++)
			pl[i][k] = i * 0x9E3779B97F4A7C15ULL + (uint64_t)k;
	uint64_t t0 = now_ns(), c0 = cpu_ns();
	for (uint64_t i = 0; i < nrec; i++)
		cab_producer__put(p, CAB_HDR(i + 1, RECORD_WORDS - 1), pl[i % PAYLOADS], RECORD_WORDS - 1);
	cab_producer__flush(p);
	uint64_t pcpu = cpu_ns() - c0;
	for (uint64_t i = 0; i < nrec; i++) {	/* what the consumer must have summed */
		expect += CAB_HDR(i + 1, RECORD_WORDS - 1);
		for (int k = 0; k < RECORD_WORDS - 1; k++)
			expect += pl[i % PAYLOADS][k];
	}
	struct result res;
	ssize_t got = read(fds[0], &res, sizeof res);
	waitpid(pid, NULL, 0);
	close(fds[0]);
	cab_producer__close(p);
	cab_ring__close(r);
	if (got != sizeof res || res.rc || res.words != nrec * RECORD_WORDS || res.sum != expect) {
		fprintf(stderr, "pipeline-rings: kind %d chunk %zu: consumer got %llu words (rc %d), want %llu\n",
			kind, chunk, (unsigned long long)res.words, res.rc,
			(unsigned long long)(nrec * RECORD_WORDS));
		return -1;
	}
	share_prod = (double)pcpu / (double)(res.end_ns - t0);
	share_cons = (double)res.cpu_ns / (double)(res.end_ns - t0);
	ns_prod = (double)pcpu / (double)nrec;
	ns_cons = (double)res.cpu_ns / (double)nrec;
	return (double)(res.end_ns - t0) / 1e9;
}

static int reps = 7;

/* The best run's seconds; *share: the CPU its slower-served side had;
 * ns[2]: the least CPU ns per record of producer and consumer over the runs. */
static double best(enum cab_kind kind, size_t chunk, uint64_t nrec, double *share, double *ns)
{
	double b = 1e9;
	ns[0] = ns[1] = 1e9;
	for (int i = 0; i < reps; i++) {
		double t = run(kind, chunk, nrec);
		if (t < 0)
			return -1;
		if (ns_prod < ns[0])
			ns[0] = ns_prod;
		if (ns_cons < ns[1])
			ns[1] = ns_cons;
		if (t < b) {
			b = t;
			*share = share_prod < share_cons ? share_prod : share_cons;
		}
	}
	return b;
}

/* Both ends in this thread, alternating every half chunk: the CPU ns per
 * record of producer plus consumer with no other core involved (no
 * spinning, no cache-line transfers): what each design costs in itself. */
static double one_thread(enum cab_kind kind, size_t chunk, uint64_t nrec)
{
	struct cab_opts o = { .sz = sizeof o, .kind = kind, .chunk_bytes = chunk,
			      .nchunks = NCHUNKS, .max_record_words = RECORD_WORDS };
	static uint64_t pl[PAYLOADS][RECORD_WORDS - 1];
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct sum a = { 0, 0 };
	struct timespec t0, t1;
	uint64_t batch = chunk / (RECORD_WORDS * 8) / 2;

	if (cab_ring__create(&o, &r) || cab_producer__open(r, &p) || cab_consumer__open(r, &c))
		return -1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	for (uint64_t i = 0; i < nrec;) {
		for (uint64_t j = 0; j < batch && i < nrec; j++, i++)
			cab_producer__put(p, CAB_HDR(i + 1, RECORD_WORDS - 1), pl[i % PAYLOADS],
					  RECORD_WORDS - 1);
		cab_consumer__poll(c, consume, &a);
	}
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		cab_consumer__poll(c, consume, &a);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
	if (a.words != nrec * RECORD_WORDS)
		return -1;
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
	       (double)nrec;
}

int main(int argc, char **argv)
{
	static const size_t chunks[] = { 4096, 16384, 65536, 262144 };
	static const char *names[] = { "CAB", "N-way", "FastForward" };
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 0) : 32;
	double load[2] = { 0, 0 };
	uint64_t nrec = mib * 1024 * 1024 / (RECORD_WORDS * 8);
	double best_cab = 0, worst_nway_ratio = 1e9, worst_ffq_ratio = 1e9;
	double cost[4][3][2];

	if (argc > 2)
		reps = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
	getloadavg(load, 1);
	printf("cross-process ring throughput: %llu MiB per run (%llu records of %d bytes), "
	       "%d chunks per ring, best of %d, producer CPU 0, consumer CPU 1, %ld CPUs online\n",
	       (unsigned long long)mib, (unsigned long long)nrec, RECORD_WORDS * 8, NCHUNKS, reps,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("(cpu: the smaller share of a CPU the producer or the consumer got in the best run;\n"
	       " 100%% = the ring ran undisturbed, as on an idle machine)\n");
	printf("%8s  %-24s %-24s %-26s %9s %9s\n", "chunk", "CAB GB/s (Mev/s) cpu",
	       "N-way GB/s (Mev/s) cpu", "FastForward GB/s (Mev/s) cpu", "CAB/Nway", "CAB/FF");
	for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
		double gbs[3], mev[3], share[3];
		for (int kind = 0; kind < 3; kind++) {
			double t = best((enum cab_kind)kind, chunks[k], nrec, &share[kind], cost[k][kind]);
			if (t <= 0) {
				fprintf(stderr, "pipeline-rings: %s failed\n", names[kind]);
				return 1;
			}
			gbs[kind] = (double)nrec * RECORD_WORDS * 8 / t / 1e9;
			mev[kind] = (double)nrec / t / 1e6;
		}
		char col[3][40];
		for (int kind = 0; kind < 3; kind++)
			snprintf(col[kind], sizeof col[kind], "%5.2f (%6.1f) %3.0f%%", gbs[kind], mev[kind],
				 100 * share[kind]);
		printf("%7zuK  %-24s %-24s %-26s %8.2fx %8.2fx\n", chunks[k] / 1024, col[0], col[1],
		       col[2], gbs[0] / gbs[1], gbs[0] / gbs[2]);
		if (gbs[0] > best_cab)
			best_cab = gbs[0];
		if (gbs[0] / gbs[1] < worst_nway_ratio)
			worst_nway_ratio = gbs[0] / gbs[1];
		if (gbs[0] / gbs[2] < worst_ffq_ratio)
			worst_ffq_ratio = gbs[0] / gbs[2];
	}
	printf("CPU cost per record (least over the runs; includes spinning while the other side is\n"
	       "descheduled), producer / consumer ns:\n");
	printf("%8s  %-24s %-24s %-26s %9s %9s\n", "chunk", "CAB", "N-way", "FastForward",
	       "Nway/CAB", "FF/CAB");
	for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
		char col[3][40];
		for (int kind = 0; kind < 3; kind++)
			snprintf(col[kind], sizeof col[kind], "%6.2f / %6.2f", cost[k][kind][0],
				 cost[k][kind][1]);
		double sum[3];
		for (int kind = 0; kind < 3; kind++)
			sum[kind] = cost[k][kind][0] + cost[k][kind][1];
		printf("%7zuK  %-24s %-24s %-26s %8.2fx %8.2fx\n", chunks[k] / 1024, col[0], col[1], col[2],
		       sum[1] / sum[0], sum[2] / sum[0]);
	}
	printf("(ratios: total CPU per record of the other kind over CAB's; > 1 means CAB is cheaper)\n");
	printf("one thread, both ends alternating every half chunk: CPU ns per record, producer + consumer\n"
	       "(no second core: the designs' own cost, unaffected by the machine's load):\n");
	printf("%8s  %-24s %-24s %-26s %9s %9s\n", "chunk", "CAB", "N-way", "FastForward",
	       "Nway/CAB", "FF/CAB");
	for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
		double ns[3];
		for (int kind = 0; kind < 3; kind++) {
			ns[kind] = 1e9;
			for (int i = 0; i < reps; i++) {
				double t = one_thread((enum cab_kind)kind, chunks[k], nrec);
				if (t < 0) {
					fprintf(stderr, "pipeline-rings: %s failed in one thread\n", names[kind]);
					return 1;
				}
				if (t < ns[kind])
					ns[kind] = t;
			}
		}
		printf("%7zuK  %-24.2f %-24.2f %-26.2f %8.2fx %8.2fx\n", chunks[k] / 1024, ns[0], ns[1],
		       ns[2], ns[1] / ns[0], ns[2] / ns[0]);
	}
	getloadavg(load + 1, 1);
	printf("load average %.1f at the start, %.1f at the end (other processes on this machine)\n",
	       load[0], load[1]);
	printf("goals (CAB paper): CAB >= 1.08x N-way: worst %.2fx %s; CAB >= 1.4x FastForward: worst %.2fx %s; "
	       "CAB >= 4 GB/s: best %.2f GB/s %s\n",
	       worst_nway_ratio, worst_nway_ratio >= 1.08 ? "met" : "NOT MET", worst_ffq_ratio,
	       worst_ffq_ratio >= 1.4 ? "met" : "NOT MET", best_cab, best_cab >= 4 ? "met" : "NOT MET");
	return 0;
}
