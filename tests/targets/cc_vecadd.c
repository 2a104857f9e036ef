/* cc_vecadd: padrone's live-replacement demo (PADRONE's vecadd).
 *
 * Adds two float vectors over and over with vecadd(), built for SSE2, and
 * every half second prints its own time per call and a checksum of the
 * result: "round 3: 312.4 ns/call checksum 5c2d9e11". The time is CPU time
 * (this thread's), so a busy machine does not inflate it. The inputs never
 * change, so the checksum must never change either, whichever vecadd runs.
 * Runs forever, or ROUNDS rounds: cc_vecadd [ROUNDS].
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 2048

static float a[N], b[N], c[N];

/* noipa: a real call every time, nothing assumed about it by its caller */
__attribute__((noipa)) void vecadd(float *restrict dst, const float *restrict x,
				   const float *restrict y, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = x[i] + y[i];
}

static double now(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t checksum(const float *v, int n)
{
	uint32_t h = 2166136261u;
	const unsigned char *p = (const unsigned char *)v;
	for (size_t i = 0; i < (size_t)n * sizeof *v; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : -1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < N; i++) {
		a[i] = (float)(i % 97) * 0.25f;
		b[i] = (float)(i % 13) - 6.5f;
	}
	printf("cc_vecadd: pid %d, vecadd of %d floats\n", getpid(), N);
	for (long r = 1; rounds < 0 || r <= rounds; r++) {
		long calls = 0;
		double t0 = now(CLOCK_MONOTONIC), cpu0 = now(CLOCK_THREAD_CPUTIME_ID);
		do {
			for (int k = 0; k < 1000; k++)
				vecadd(c, a, b, N);
			calls += 1000;
		} while (now(CLOCK_MONOTONIC) - t0 < 0.5);
		double cpu = now(CLOCK_THREAD_CPUTIME_ID) - cpu0;
		printf("round %ld: %.1f ns/call checksum %08x\n", r, cpu * 1e9 / (double)calls,
		       checksum(c, N));
		memset(c, 0, sizeof c);
	}
	return 0;
}
