/* pipeline-rings: cross-process ring throughput, CAB vs N-way vs
 * FastForward, over ring sizes within and beyond a core's L2.
 *
 * The producer (this process, CPU 0) writes fixed-size records of
 * RECORD_WORDS words (a REP unit with three slots) as fast as it can; the
 * consumer (a forked process mapping the ring from its fd, CPU 1) reads
 * every word. Time runs from the first record to the consumer's end of
 * stream.
 *
 * Rings: the CAB paper's point is cache friendliness at realistic buffer
 * sizes, so the rows go from rings that stay in the two cores' private
 * caches (64 KiB .. 1 MiB) to rings larger than L2 (4 and 16 MiB), each
 * ring size with small and large chunks. N-way gets the same geometry
 * (nchunks buffers of chunk bytes); FastForward the same bytes as slots.
 *
 * Throughput is given both as GB/s and as events (records) per second: a
 * record is one event of the instrumented program (a REP unit), so events/s
 * is what bounds how fast a target can run while profiled.
 *
 * Usage: pipeline-rings [MiB per run (32) [runs (7)]] [--rt]. Each row runs
 * every kind that many times and shows the best and the median run: the
 * machine is shared, and the best of short runs is the least disturbed.
 * --rt runs both sides SCHED_FIFO during each run (root only; the CPUs are
 * handed back between runs) for figures undisturbed by other processes. */
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
#define PAYLOADS 1024
#define MAX_RUNS 64
#define NKINDS 3
#define UNDISTURBED 0.9	/* a best run with less CPU than this is not judged */

struct geo {
	size_t chunk;
	unsigned nchunks;
};

/* By ring size; the first four are the earlier bench's rows. */
static const struct geo geos[] = {
	{ 4096, 16 },	 { 16384, 16 }, { 65536, 16 },	{ 4096, 256 },
	{ 262144, 16 },	 { 65536, 64 }, { 65536, 256 }, { 1048576, 16 },
};
#define NGEOS (sizeof geos / sizeof geos[0])

static const char *names[NKINDS] = { "CAB", "N-way", "FastForward" };
static int reps = 7;
static bool rt;

/* Records per run: the MiB asked for, and at least four laps of the ring,
 * so that the first lap (lines never written yet) weighs little. */
static uint64_t records_for(const struct geo *g, uint64_t nrec)
{
	uint64_t laps = 4 * (uint64_t)g->chunk * g->nchunks / (RECORD_WORDS * 8);
	return nrec > laps ? nrec : laps;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);	/* best effort */
}

/* SCHED_FIFO for this process (and what it forks), or back to normal. */
static int set_rt(bool on)
{
	struct sched_param sp = { .sched_priority = on ? 1 : 0 };
	return sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &sp);
}

struct sum {
	uint64_t s, words;
};

/* The analysis: read every word. Four sums, so that it is not one chain of
 * dependent adds: at one add per cycle that chain, not the ring, would set
 * the pace for every kind alike. */
static int consume(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct sum *a = arg;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	size_t i = 0;

	for (; i + 4 <= n; i += 4) {
		s0 += w[i];
		s1 += w[i + 1];
		s2 += w[i + 2];
		s3 += w[i + 3];
	}
	for (; i < n; i++)
		s0 += w[i];
	a->s += s0 + s1 + s2 + s3;
	a->words += n;
	(void)flags;
	return 0;
}

struct result {
	uint64_t end_ns, words, sum, cpu_ns;
	int rc;
};

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

/* Payloads come from a table in cache, as register values would: built
 * word by word in a stack array, they would stall every record on
 * store-to-load forwarding and measure that instead of the ring. */
static uint64_t pl[PAYLOADS][RECORD_WORDS - 1];

/* One run's figures. */
struct run {
	double gbs, share, ns_prod, ns_cons;
};

static int run(enum cab_kind kind, const struct geo *g, uint64_t nrec, struct run *out)
{
	struct cab_opts o = { .sz = sizeof o, .kind = kind, .chunk_bytes = g->chunk,
			      .nchunks = g->nchunks, .max_record_words = RECORD_WORDS,
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
	if (rt)
		set_rt(true);	/* the consumer inherits it */
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		consumer(cab_ring__fd(r), fds[1]);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &c, 1) != 1 || cab_producer__open(r, &p))
		return -1;
	pin(0);
	uint64_t t0 = now_ns(), c0 = cpu_ns();
	for (uint64_t i = 0; i < nrec; i++)
		cab_producer__put(p, CAB_HDR(i + 1, RECORD_WORDS - 1), pl[i % PAYLOADS],
				  RECORD_WORDS - 1);
	cab_producer__flush(p);
	uint64_t pcpu = cpu_ns() - c0;
	struct result res;
	ssize_t got = read(fds[0], &res, sizeof res);
	waitpid(pid, NULL, 0);
	if (rt) {
		set_rt(false);
		usleep(20000);	/* let the machine's other processes run */
	}
	close(fds[0]);
	cab_producer__close(p);
	cab_ring__close(r);
	uint64_t expect = 0;	/* what the consumer must have summed */
	for (uint64_t i = 0; i < nrec; i++) {
		expect += CAB_HDR(i + 1, RECORD_WORDS - 1);
		for (int k = 0; k < RECORD_WORDS - 1; k++)
			expect += pl[i % PAYLOADS][k];
	}
	if (got != sizeof res || res.rc || res.words != nrec * RECORD_WORDS || res.sum != expect) {
		fprintf(stderr, "pipeline-rings: %s %u x %zu: consumer got %llu words (rc %d), want %llu\n",
			names[kind], g->nchunks, g->chunk, (unsigned long long)res.words, res.rc,
			(unsigned long long)(nrec * RECORD_WORDS));
		return -1;
	}
	double wall = (double)(res.end_ns - t0);
	double sp = (double)pcpu / wall, sc = (double)res.cpu_ns / wall;
	out->gbs = (double)nrec * RECORD_WORDS * 8 / wall;
	out->share = sp < sc ? sp : sc;
	out->ns_prod = (double)pcpu / (double)nrec;
	out->ns_cons = (double)res.cpu_ns / (double)nrec;
	return 0;
}

/* Records (events) per second, in millions, of a GB/s figure. */
static double mrec(double gbs)
{
	return gbs * 1e9 / (RECORD_WORDS * 8) / 1e6;
}

/* Over the runs of one kind and geometry. */
struct figures {
	double best, median, share;	/* GB/s; share: of the best run */
	double ns[2];			/* least CPU ns per record, producer / consumer */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Runs reps times; while no run had both CPUs (a busy machine), up to
 * twice as many again. */
static int measure(enum cab_kind kind, const struct geo *g, uint64_t nrec, struct figures *st)
{
	double gbs[3 * MAX_RUNS];
	int i;

	st->best = st->share = 0;
	st->ns[0] = st->ns[1] = 1e9;
	for (i = 0; i < reps || (i < 3 * reps && st->share < UNDISTURBED); i++) {
		struct run x;
		if (run(kind, g, nrec, &x))
			return -1;
		gbs[i] = x.gbs;
		if (x.gbs > st->best) {
			st->best = x.gbs;
			st->share = x.share;
		}
		if (x.ns_prod < st->ns[0])
			st->ns[0] = x.ns_prod;
		if (x.ns_cons < st->ns[1])
			st->ns[1] = x.ns_cons;
	}
	qsort(gbs, (size_t)i, sizeof gbs[0], cmp_double);
	st->median = i % 2 ? gbs[i / 2] : (gbs[i / 2 - 1] + gbs[i / 2]) / 2;
	return 0;
}

/* Both ends in this thread, alternating every half chunk: the CPU ns per
 * record of producer plus consumer with no other core involved (no
 * spinning, no cache-line transfers): what each design costs in itself. */
static double one_thread(enum cab_kind kind, const struct geo *g, uint64_t nrec)
{
	struct cab_opts o = { .sz = sizeof o, .kind = kind, .chunk_bytes = g->chunk,
			      .nchunks = g->nchunks, .max_record_words = RECORD_WORDS };
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct sum a = { 0, 0 };
	struct timespec t0, t1;
	uint64_t batch = g->chunk / (RECORD_WORDS * 8) / 2;

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

static void size_str(char *buf, size_t n, size_t bytes)
{
	if (bytes >= 1 << 20)
		snprintf(buf, n, "%zuM", bytes >> 20);
	else
		snprintf(buf, n, "%zuK", bytes >> 10);
}

/* "64K  16 x 4K" and whether the ring is larger than L2. */
static bool row_label(char *buf, size_t n, const struct geo *g, long l2)
{
	char ring[16], chunk[16];
	size_t bytes = g->chunk * g->nchunks;

	size_str(ring, sizeof ring, bytes);
	size_str(chunk, sizeof chunk, g->chunk);
	snprintf(buf, n, "%5s %4u x %-5s", ring, g->nchunks, chunk);
	return l2 > 0 && bytes > (size_t)l2;
}

struct ratio {
	double worst, best;
	int n;
};

static void ratio_add(struct ratio *q, double v)
{
	if (!q->n || v < q->worst)
		q->worst = v;
	if (!q->n || v > q->best)
		q->best = v;
	q->n++;
}

static void goal(const char *what, const struct ratio *q, double want)
{
	if (q->n)
		printf("  %s: %.2fx .. %.2fx over %d rows, %s\n", what, q->worst, q->best, q->n,
		       q->worst >= want ? "met" : "NOT MET");
	else
		printf("  %s: no undisturbed row to judge\n", what);
}

int main(int argc, char **argv)
{
	uint64_t mib = 32;
	int pos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rt"))
			rt = true;
		else if (pos++ == 0)
			mib = strtoull(argv[i], NULL, 0);
		else
			reps = atoi(argv[i]);
	}
	if (reps < 1 || reps > MAX_RUNS)
		reps = 7;
	if (mib < 1)
		mib = 32;
	if (rt && (set_rt(true) || set_rt(false))) {
		printf("(--rt: %s; running without)\n", strerror(errno));
		rt = false;
	}
	for (uint64_t i = 0; i < PAYLOADS; i++)
		for (int k = 0; k < RECORD_WORDS - 1; k++)
			pl[i][k] = i * 0x9E3779B97F4A7C15ULL + (uint64_t)k;

	long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	double load[2] = { 0, 0 };
	uint64_t nrec = mib * 1024 * 1024 / (RECORD_WORDS * 8);
	struct figures st[NGEOS][NKINDS];
	char label[40];

	getloadavg(load, 1);
	printf("cross-process ring throughput: %llu MiB per run and at least 4 laps of the ring "
	       "(%llu+ records of %d bytes),\nbest and median of %d runs, producer CPU 0, consumer "
	       "CPU 1, %ld CPUs online, L2 %ld KiB per core%s\n",
	       (unsigned long long)mib, (unsigned long long)nrec, RECORD_WORDS * 8, reps,
	       sysconf(_SC_NPROCESSORS_ONLN), l2 / 1024, rt ? ", both sides SCHED_FIFO (--rt)" : "");
	printf("(GB/s best/median; Mev/s: millions of events (records) per second in the best run;\n"
	       " cpu: the smaller share of a CPU the producer or the consumer got in the best run,\n"
	       " 100%% = undisturbed; ratios of best runs, of medians in brackets)\n");
	printf("%-17s %-27s %-27s %-27s %-15s %s\n", "ring  chunks", "CAB GB/s  Mev/s cpu",
	       "N-way GB/s  Mev/s cpu", "FastFwd GB/s  Mev/s cpu", "CAB/N-way", "CAB/FF");
	struct ratio in_nway = { 0 }, out_nway = { 0 }, all_ff = { 0 };
	int disturbed = 0;
	double best_cab = 0;
	for (size_t k = 0; k < NGEOS; k++) {
		for (int kind = 0; kind < NKINDS; kind++)
			if (measure((enum cab_kind)kind, &geos[k], records_for(&geos[k], nrec),
				    &st[k][kind])) {
				fprintf(stderr, "pipeline-rings: %s failed\n", names[kind]);
				return 1;
			}
		bool big = row_label(label, sizeof label, &geos[k], l2);
		char col[NKINDS][48];
		for (int kind = 0; kind < NKINDS; kind++)
			snprintf(col[kind], sizeof col[kind], "%5.2f/%5.2f %6.1f %3.0f%%",
				 st[k][kind].best, st[k][kind].median, mrec(st[k][kind].best),
				 100 * st[k][kind].share);
		double rn = st[k][0].best / st[k][1].best, rf = st[k][0].best / st[k][2].best;
		printf("%-17s %-27s %-27s %-27s %5.2fx (%4.2fx) %5.2fx (%4.2fx)%s\n", label, col[0],
		       col[1], col[2], rn, st[k][0].median / st[k][1].median, rf,
		       st[k][0].median / st[k][2].median, big ? "  > L2" : "");
		/* A ratio counts for the goals only if both best runs had their CPUs. */
		if (st[k][0].share >= UNDISTURBED && st[k][1].share >= UNDISTURBED)
			ratio_add(big ? &out_nway : &in_nway, rn);
		else
			disturbed++;
		if (st[k][0].share >= UNDISTURBED && st[k][2].share >= UNDISTURBED)
			ratio_add(&all_ff, rf);
		else
			disturbed++;
		if (st[k][0].best > best_cab)
			best_cab = st[k][0].best;
	}

	printf("CPU cost per record (least over the runs; includes spinning while the other side is\n"
	       "descheduled or ahead), producer / consumer ns:\n");
	printf("%-17s %-20s %-20s %-20s %-15s %s\n", "ring  chunks", "CAB", "N-way", "FastForward",
	       "N-way/CAB", "FF/CAB");
	for (size_t k = 0; k < NGEOS; k++) {
		char col[NKINDS][40];
		double sum[NKINDS];
		for (int kind = 0; kind < NKINDS; kind++) {
			snprintf(col[kind], sizeof col[kind], "%5.2f / %5.2f", st[k][kind].ns[0],
				 st[k][kind].ns[1]);
			sum[kind] = st[k][kind].ns[0] + st[k][kind].ns[1];
		}
		row_label(label, sizeof label, &geos[k], l2);
		printf("%-17s %-20s %-20s %-20s %5.2fx          %5.2fx\n", label, col[0], col[1],
		       col[2], sum[1] / sum[0], sum[2] / sum[0]);
	}
	printf("(ratios: total CPU per record of the other kind over CAB's; > 1 means CAB is cheaper)\n");

	printf("one thread, both ends alternating every half chunk: CPU ns per record, producer + "
	       "consumer\n(no second core: the designs' own cost, unaffected by the machine's load):\n");
	printf("%-17s %-20s %-20s %-20s %-15s %s\n", "ring  chunks", "CAB", "N-way", "FastForward",
	       "N-way/CAB", "FF/CAB");
	for (size_t k = 0; k < NGEOS; k++) {
		double ns[NKINDS];
		for (int kind = 0; kind < NKINDS; kind++) {
			ns[kind] = 1e9;
			for (int i = 0; i < reps; i++) {
				double t = one_thread((enum cab_kind)kind, &geos[k],
						      records_for(&geos[k], nrec));
				if (t < 0) {
					fprintf(stderr, "pipeline-rings: %s failed in one thread\n",
						names[kind]);
					return 1;
				}
				if (t < ns[kind])
					ns[kind] = t;
			}
		}
		row_label(label, sizeof label, &geos[k], l2);
		printf("%-17s %-20.2f %-20.2f %-20.2f %5.2fx          %5.2fx\n", label, ns[0], ns[1],
		       ns[2], ns[1] / ns[0], ns[2] / ns[0]);
	}

	getloadavg(load + 1, 1);
	printf("load average %.1f at the start, %.1f at the end (other processes on this machine)\n",
	       load[0], load[1]);
	printf("goals (CAB paper), on the best runs");
	if (disturbed)
		printf(" (%d ratios left out: a best run had under %.0f%% of a CPU)", disturbed,
		       100 * UNDISTURBED);
	printf(":\n");
	goal("CAB >= 1.08x N-way, rings within L2", &in_nway, 1.08);
	goal("CAB >= 1.08x N-way, rings beyond L2", &out_nway, 1.08);
	goal("CAB >= 1.4x FastForward", &all_ff, 1.4);
	printf("  CAB >= 4 GB/s: best %.2f GB/s (%.1f M events/s of %d bytes), %s\n", best_cab,
	       mrec(best_cab), RECORD_WORDS * 8, best_cab >= 4 ? "met" : "NOT MET");
	return 0;
}
