/* codecache-cost: what redirection and measurement add to each call.
 *
 * In this process (the same code as in a target, minus ptrace): a small
 * function is called through a pointer in a loop, plain, then redirected by
 * its entry jmp to a relocated copy of itself in the code cache (the
 * trampoline's cost: one jmp), then through a gate (what replace puts in
 * front of new code whose callers rely on -fipa-ra: it saves and restores
 * the registers they keep, and passes 128 bytes of stack arguments on),
 * saving 3 registers (as for a recursive fib) and all that may be at risk
 * (9 general, 16 vector), then wrapped by the measuring stub while it
 * times every call, and after it has its N calls (the pass-through cost).
 * Windows alternate with plain ones so a busy machine slows both alike; each
 * figure is the median over rounds.
 *
 * usage: codecache-cost [ROUNDS]      Goal: measuring stub < 100 ns per call.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "bench/median.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALLS 2000000

int cost_fn(int x);
__attribute__((noipa)) int cost_fn(int x)
{
	return x * 3 + 1;
}

static int (*volatile fp)(int) = cost_fn;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double per_call(void)
{
	int s = 0;
	double t0 = now();
	for (int i = 0; i < CALLS; i++)
		s += fp(i);
	double t = (now() - t0) / CALLS;
	if (s == 42)
		puts("");
	return t;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "codecache-cost: %s: %s\n", what, why);
	exit(1);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 9;
	struct cc_cache *c;
	struct cc_error err;
	struct cc_func f = { (uint64_t)cost_fn, 0, "cost_fn" };
	struct cc_syms *sy;
	double base[64], tramp[64], meas[64], pass[64], gate3[64], gate_all[64];

	if (rounds > 64)
		rounds = 64;
	if (cc_cache__open(NULL, NULL, &c, &err) < 0 || cc_syms__open(getpid(), &sy, &err) < 0 ||
	    cc_syms__func(sy, "cost_fn", &f, &err) < 0)
		die("open", err.msg);
	/* a copy of cost_fn in the cache, to redirect to */
	struct cc_reloc *r;
	uint64_t copy;
	uint8_t buf[256];
	if (cc_reloc__new((void *)f.addr, f.size, f.addr, NULL, &r, &err) < 0)
		die("relocate", err.msg);
	if (cc_cache__alloc(c, CC_CODE, cc_reloc__size(r), 16, f.addr, &copy) < 0 ||
	    cc_reloc__encode(r, copy, buf, sizeof buf, &err) < 0 ||
	    cc_cache__write(c, copy, buf, cc_reloc__size(r)) < 0)
		die("copy", cc_cache__errmsg(c));
	cc_reloc__free(r);
	/* gates in front of the copy: rcx, rdx, rsi; everything at risk */
	uint32_t sets[2] = { 0x46, 0xffff0fc7 };
	uint64_t gates[2];
	for (int g = 0; g < 2; g++) {
		size_t n = cc__gate_encode(sets[g], 0, 0, NULL);
		uint8_t gbuf[1024];
		if (n > sizeof gbuf || cc_cache__alloc(c, CC_CODE, n, 16, f.addr, &gates[g]) < 0 ||
		    cc__gate_encode(sets[g], gates[g], copy, gbuf) != n ||
		    cc_cache__write(c, gates[g], gbuf, n) < 0)
			die("gate", cc_cache__errmsg(c));
	}

	per_call();	/* warm up */
	for (int i = 0; i < rounds; i++) {
		double b0 = per_call();
		if (cc_cache__redirect(c, &f, copy, NULL) < 0)
			die("redirect", cc_cache__errmsg(c));
		tramp[i] = per_call();
		if (cc_cache__restore(c, f.addr, NULL, NULL) < 0)
			die("restore", cc_cache__errmsg(c));
		double b1 = per_call();
		double *gate_cost[2] = { &gate3[i], &gate_all[i] };
		for (int g = 0; g < 2; g++) {
			if (cc_cache__redirect(c, &f, gates[g], NULL) < 0)
				die("redirect", cc_cache__errmsg(c));
			*gate_cost[g] = per_call() - b1;
			if (cc_cache__restore(c, f.addr, NULL, NULL) < 0)
				die("restore", cc_cache__errmsg(c));
		}

		struct cc_measure_opts mo = { .sz = sizeof mo, .calls = CALLS, .force = true };
		struct cc_measure *m;
		struct cc_measure_result res;
		if (cc_measure__start(c, &f, &mo, &m) < 0)
			die("measure", cc_cache__errmsg(c));
		meas[i] = per_call();		/* every call timed */
		pass[i] = per_call();		/* N reached: passes through */
		if (cc_measure__finish(m, &res) < 0)
			die("finish", cc_cache__errmsg(c));
		cc_measure__free(m);
		double b2 = per_call();
		base[i] = (b0 + b1 + b2) / 3;
		tramp[i] -= (b0 + b1) / 2;
		meas[i] -= (b1 + b2) / 2;
		pass[i] -= (b1 + b2) / 2;
	}
	double b = bench_median(base, rounds);
	printf("plain call through a pointer: %.2f ns/call\n", b);
	printf("trampoline (entry jmp to a copy in the code cache): %+.2f ns/call (ratio %.2f)\n",
	       bench_median(tramp, rounds), (b + bench_median(tramp, rounds)) / b);
	double t = bench_median(tramp, rounds);
	printf("gate saving 3 registers (rcx, rdx, rsi): %+.2f ns/call (ratio %.2f to plain, "
	       "%.2f to the trampoline)\n", bench_median(gate3, rounds),
	       (b + bench_median(gate3, rounds)) / b, (b + bench_median(gate3, rounds)) / (b + t));
	printf("gate saving all 25 at risk (9 general, 16 %s): %+.2f ns/call (ratio %.2f to "
	       "plain, %.2f to the trampoline)\n", __builtin_cpu_supports("avx") ? "ymm" : "xmm",
	       bench_median(gate_all, rounds), (b + bench_median(gate_all, rounds)) / b,
	       (b + bench_median(gate_all, rounds)) / (b + t));
	printf("measuring stub while timing: %+.1f ns/call (ratio %.1f; goal < 100 ns)\n",
	       bench_median(meas, rounds), (b + bench_median(meas, rounds)) / b);
	printf("measuring stub after its N calls: %+.1f ns/call\n", bench_median(pass, rounds));
	cc_syms__free(sy);
	cc_cache__close(c);
	return 0;
}
