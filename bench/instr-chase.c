/* instr-chase: one thread following a pointer chain, for bench/instr-overhead.
 *
 * Usage: instr-chase [NODES]   (default 1 << 18 nodes of 64 bytes: 16 MiB,
 * larger than the last-level cache, so most steps miss)
 * The nodes form one random cycle; each call of chase(p, 1000) takes 1000
 * steps and returns where it ended, and the caller checks that against the
 * same walk through an index array (the target's own result check).
 * Prints "ready", then every 50 ms "alive CALLS bad MISMATCHES".
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct node {
	struct node *next;
	long pad[7];
};

static atomic_long calls, bad;

__attribute__((noinline)) struct node *chase(struct node *p, long steps)
{
	for (long i = 0; i < steps; i++)
		p = p->next;
	return p;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1L << 18;
	if (n < 2)
		return 2;
	struct node *nodes = calloc((size_t)n, sizeof *nodes);
	long *perm = malloc((size_t)n * sizeof *perm), *at = malloc((size_t)n * sizeof *at);
	if (!nodes || !perm || !at)
		return 1;
	srand(7);
	for (long i = 0; i < n; i++)
		perm[i] = i;
	for (long i = n - 1; i > 0; i--) {
		long j = rand() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (long i = 0; i < n; i++) {
		nodes[perm[i]].next = &nodes[perm[(i + 1) % n]];
		at[perm[i]] = i;	/* node perm[i] is step i of the cycle */
	}
	printf("ready\n");
	fflush(stdout);
	struct node *p = &nodes[perm[0]];
	long step = 0;
	struct timespec last;
	clock_gettime(CLOCK_MONOTONIC, &last);
	for (;;) {
		p = chase(p, 1000);
		step = (step + 1000) % n;
		atomic_fetch_add(&calls, 1);
		if (at[p - nodes] != step)
			atomic_fetch_add(&bad, 1);
		if ((atomic_load(&calls) & 63) == 0) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((now.tv_sec - last.tv_sec) * 1000000000L + now.tv_nsec - last.tv_nsec >=
			    50000000L) {
				last = now;
				printf("alive %ld bad %ld\n", atomic_load(&calls), atomic_load(&bad));
				fflush(stdout);
			}
		}
	}
}
