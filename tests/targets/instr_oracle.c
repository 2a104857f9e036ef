/* instr_oracle: one memory kernel called over and over on known data, for
 * checking instrumentation against valgrind's lackey and cachegrind
 * (tests/codecache/oracle.sh).
 *
 * Usage: instr_oracle KERNEL CALLS [gs]
 * KERNEL is one of
 *	stream:  o[i] = a * x[i] + y[i] over 8192 longs per array
 *	chase:   a walk of 16384 24-byte nodes linked in a shuffled order (a
 *		 fixed seed), one lap per call, summing their values and
 *		 counting each visit in the node (a read-modify-write, lackey's
 *		 "M")
 *	branchy: 4096 ints, each sent down one of three paths by its value:
 *		 a histogram's update (another "M"), a call of another
 *		 function, a subtraction
 *	tls:     4096 longs of thread-local data (reached through fs) read
 *		 and rewritten, sums kept in a local array, which the stack
 *		 protector guards with its canary at %fs:0x28
 *	mixed:   a rep movsb of 4096 bytes, 16-byte unaligned SSE loads over
 *		 them (some straddling two lines), an 8-byte load straddling
 *		 two lines, a repne scasb stopping on the byte it looks for,
 *		 a locked add, an xchg and a lock cmpxchg with memory, a push
 *		 of memory, a call
 *	flags:   a function whose first instruction reads the zero flag its
 *		 caller set (never so in compiled code, which the ABI forbids:
 *		 the copy's gate must leave the flags alone there), setting o[0]
 *		 to 1 when it is set, as it always is
 *	redzone: a leaf function that keeps its two sums of x (all of them,
 *		 the odd ones) in its red zone, the 16 bytes below rsp, across a
 *		 loop of several blocks (what a copy's commit must step over)
 *	bump:    a loop of one block moving two pointers by constant steps,
 *		 one up through x by add, one down through o by lea, copying
 *		 4096 longs of x to every other long of o, backwards
 * The data is the same on every run and every call sees the same input
 * (their values may change, never their addresses), so each call makes
 * the same references. The arrays are 2 MiB aligned, so that a cache's
 * sets see the same addresses under valgrind as natively.
 * Prints "KERNEL=0xADDR" (where it is in this run), then "ready".
 * CALLS > 0: calls KERNEL that many times back to back, doing nothing
 * else (the run cachegrind and lackey watch: no other reference between
 * two calls), prints "result R" (a checksum) and exits.
 * CALLS = 0: calls it forever, checking each result against the first, and
 * prints "alive CALLS bad MISMATCHES" every 50 ms; SIGUSR1 pauses and resumes
 * the calls ("paused CALLS" once paused).
 * With gs, a second thread first points its gs base at a block of its own
 * (arch_prctl, as some runtimes do) and then reads it through %gs every
 * millisecond, counting a wrong value as a mismatch too (instrumentation
 * needs gs and must refuse such a process); "gs set" before "ready".
 */
#include <asm/prctl.h>
#include <emmintrin.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_N 8192
#define CHASE_N 16384
#define BRANCHY_N 4096
#define MIXED_N 4096
#define MARK 0xab
#define MARK_AT 1000
#define ALIGN (2u << 20)

struct node {
	struct node *next;
	long value;
	long visits;
};

#define TLS_N 4096

static long *x, *y, *o;
/* the initial thread's static TLS, aligned as the arrays are (see above) */
static __thread long tls_data[TLS_N] __attribute__((aligned(8192)));
static struct node *nodes;
static int *v;
static unsigned char *src, *dst;
static long hist[8];

__attribute__((noinline)) void stream(long a, const long *x, const long *y, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = a * x[i] + y[i];
}

__attribute__((noinline)) long chase(struct node *p, long steps)
{
	long sum = 0;

	for (long i = 0; i < steps; i++) {
		sum += p->value;
		p->visits++;
		p = p->next;
	}
	return sum;
}

__attribute__((noinline)) long helper(int k)
{
	return k * 7 + 1;
}

__attribute__((noinline)) long branchy(const int *v, long n, long *hist)
{
	long s = 0;

	for (long i = 0; i < n; i++) {
		int k = v[i];
		if (k & 1)
			hist[k & 7] += k;
		else if (k % 3 == 0)
			s += helper(k);
		else
			s -= k;
	}
	return s;
}

__attribute__((noinline)) long mixed(const unsigned char *src, unsigned char *dst, long n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	long c = n;

	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
	__m128i acc = _mm_setzero_si128();
	for (long i = 0; i + 17 <= n; i += 16)
		acc = _mm_add_epi64(acc, _mm_loadu_si128((const __m128i *)(dst + i + 1)));
	long lo = _mm_cvtsi128_si64(acc), hi = _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc));
	long w;
	memcpy(&w, dst + 60, sizeof w);
	/* repne scasb: where the one MARK byte is, stopping on it (rcx left
	 * above 0); a locked add, an xchg with memory and a lock cmpxchg
	 * (valgrind traces the first two as a load and a modify, the third as
	 * a modify); a push of memory */
	unsigned char *at = dst;
	long left = n;
	__asm__ volatile("repne scasb" : "+D"(at), "+c"(left) : "a"(MARK) : "memory", "cc");
	__atomic_fetch_add(&hist[1], left, __ATOMIC_SEQ_CST);
	long popped, swapped = left, expected = 0;
	__asm__ volatile("push %1\n\tpop %0" : "=r"(popped) : "m"(hist[3]));
	__asm__ volatile("xchg %0, %1" : "+m"(hist[4]), "+r"(swapped));
	__asm__ volatile("lock cmpxchg %2, %0" : "+m"(hist[5]), "+a"(expected) : "r"(w) : "cc");
	return lo + hi + w + (at - dst) + popped + helper((int)(w & 0xff));
}

__attribute__((noinline, stack_protect)) long tls(long n)
{
	long part[4] = { 0 };

	for (long i = 0; i < n; i++) {
		part[i & 3] += tls_data[i];
		tls_data[i] = i * 3;	/* as setup leaves it */
	}
	return part[0] + 2 * part[1] + 3 * part[2] + helper((int)part[3]);
}

static void *aligned(size_t bytes)
{
	void *p = aligned_alloc(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN);

	if (!p) {
		perror("aligned_alloc");
		exit(1);
	}
	return p;
}

/* A fixed pseudo-random sequence (no libc state: the same everywhere). */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void setup(void)
{
	x = aligned(STREAM_N * sizeof *x);
	y = aligned(STREAM_N * sizeof *y);
	o = aligned(STREAM_N * sizeof *o);
	for (long i = 0; i < STREAM_N; i++) {
		x[i] = 3 * i + 1;
		y[i] = i ^ 0x55;
		o[i] = -1;	/* as sum leaves it */
	}
	/* one cycle through all nodes in a shuffled order (Sattolo) */
	long *perm = malloc(CHASE_N * sizeof *perm);
	nodes = aligned(CHASE_N * sizeof *nodes);
	for (long i = 0; i < CHASE_N; i++)
		perm[i] = i;
	for (long i = CHASE_N - 1; i > 0; i--) {
		long j = (long)(next_random() % (uint64_t)i), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (long i = 0; i < CHASE_N; i++) {
		nodes[perm[i]].next = &nodes[perm[(i + 1) % CHASE_N]];
		nodes[perm[i]].value = perm[i] * 5 + 2;
		nodes[perm[i]].visits = 0;
	}
	free(perm);
	v = aligned(BRANCHY_N * sizeof *v);
	for (long i = 0; i < BRANCHY_N; i++)
		v[i] = (int)(next_random() % 1000);
	src = aligned(MIXED_N);
	dst = aligned(MIXED_N);
	for (long i = 0; i < MIXED_N; i++) {
		src[i] = (unsigned char)next_random();
		if (src[i] == MARK)
			src[i]++;
	}
	src[MARK_AT] = MARK;
	for (long i = 0; i < TLS_N; i++)
		tls_data[i] = i * 3;
}

enum kernel { STREAM, CHASE, BRANCHY, MIXED, TLS, FLAGS, REDZONE, BUMP };

/* flags(out): out[0] = ZF, returned too; flags_call(out) calls it with ZF set. */
long flags(long *out);
long flags_call(long *out);
__asm__(".text\n"
	".globl flags\n.type flags, @function\nflags:\n"
	"\tsetz %al\n\tmovzbl %al, %eax\n\tmovq %rax, (%rdi)\n\tret\n"
	".size flags, .-flags\n"
	".globl flags_call\n.type flags_call, @function\nflags_call:\n"
	"\txorl %eax, %eax\n\tcall flags\n\tret\n"
	".size flags_call, .-flags_call\n");

/* redzone(v, n): the sum of v[0..n) plus three times the number of odd
 * ones, both kept at -8(%rsp) and -16(%rsp) until the end. */
long redzone(const long *v, long n);
__asm__(".text\n"
	".globl redzone\n.type redzone, @function\nredzone:\n"
	"\tmovq $0, -8(%rsp)\n\tmovq $0, -16(%rsp)\n\txorl %eax, %eax\n"
	"1:\tmovq (%rdi,%rax,8), %rdx\n\taddq %rdx, -8(%rsp)\n\ttestb $1, %dl\n\tjz 2f\n"
	"\taddq $1, -16(%rsp)\n"
	"2:\taddq $1, %rax\n\tcmpq %rsi, %rax\n\tjne 1b\n"
	"\tmovq -8(%rsp), %rax\n\timulq $3, -16(%rsp), %rdx\n\taddq %rdx, %rax\n\tret\n"
	".size redzone, .-redzone\n");

/* bump(x, o, n): o[2n - 1 - 2k] = x[k] for k < n, walking both with
 * pointers; returns x[n - 1]. */
long bump(const long *x, long *o, long n);
__asm__(".text\n"
	".globl bump\n.type bump, @function\nbump:\n"
	"\tleaq (%rsi,%rdx,8), %rsi\n\tleaq (%rsi,%rdx,8), %rsi\n"
	"1:\tmovq (%rdi), %rax\n\taddq $8, %rdi\n\tmovq %rax, -8(%rsi)\n"
	"\tleaq -16(%rsi), %rsi\n\tsubq $1, %rdx\n\tjnz 1b\n\tret\n"
	".size bump, .-bump\n");

/* One call of the kernel; what it returns (stream: nothing, see sum). No
 * other memory reference: in the counted run, cachegrind's caches see
 * nothing but the kernel's between two calls. */
static long call(enum kernel k)
{
	switch (k) {
	case STREAM:
		stream(5, x, y, o, STREAM_N);
		return 0;
	case CHASE:
		return chase(nodes, CHASE_N);
	case BRANCHY:
		return branchy(v, BRANCHY_N, hist);
	case MIXED:
		return mixed(src, dst, MIXED_N);
	case FLAGS:
		return flags_call(o);
	case REDZONE:
		return redzone(x, STREAM_N);
	case BUMP:
		return bump(x, o, STREAM_N / 2);
	default:
		return tls(TLS_N);
	}
}

/* A checksum of what a call computed: its result, stream's output and
 * branchy's histogram; then the output set to what the next call must
 * overwrite. */
static long sum(long result)
{
	long s = result;

	for (long i = 0; i < STREAM_N; i++)
		s += o[i] * (i + 1);
	for (int i = 0; i < 8; i++)
		s += hist[i] * (i + 1);
	memset(o, 0xff, STREAM_N * sizeof *o);
	memset(hist, 0, sizeof hist);
	return s;
}

static atomic_long gs_bad;

static void *gs_user(void *arg)
{
	static const unsigned long block[1] = { 0x6a5f6273u };
	pthread_barrier_t *ready = arg;

	if (syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)block) != 0) {
		perror("arch_prctl");
		exit(1);
	}
	pthread_barrier_wait(ready);
	for (;;) {
		unsigned long seen;
		__asm__ volatile("mov %%gs:0, %0" : "=r"(seen));
		if (seen != block[0])
			atomic_fetch_add(&gs_bad, 1);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void start_gs_user(void)
{
	pthread_barrier_t ready;
	pthread_t t;

	pthread_barrier_init(&ready, NULL, 2);
	if (pthread_create(&t, NULL, gs_user, &ready) != 0) {
		perror("pthread_create");
		exit(1);
	}
	pthread_barrier_wait(&ready);
	printf("gs set\n");
}

static const char *const names[] = { "stream", "chase", "branchy", "mixed", "tls", "flags",
				     "redzone", "bump" };
static void *const entries[] = { (void *)stream, (void *)chase, (void *)branchy, (void *)mixed,
				  (void *)tls, (void *)flags, (void *)redzone, (void *)bump };

/* SIGUSR1 pauses the calls and resumes them: a test instruments and
 * uninstruments while no call is under way, so that the copy sees whole
 * calls only (a thread inside the kernel would be moved into the copy, or
 * out of it, mid-call). */
static volatile sig_atomic_t paused;

static void toggle_pause(int sig)
{
	(void)sig;
	paused = !paused;
}

/* Between two calls: while paused, say so once and wait. */
static void pause_point(long done)
{
	if (!paused)
		return;
	printf("paused %ld\n", done);
	fflush(stdout);
	while (paused)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

int main(int argc, char **argv)
{
	enum kernel kernel = STREAM;

	while (argc >= 3 && kernel <= BUMP && strcmp(argv[1], names[kernel]))
		kernel++;
	if (argc < 3 || argc > 4 || kernel > BUMP || (argc == 4 && strcmp(argv[3], "gs"))) {
		fprintf(stderr, "usage: instr_oracle stream|chase|branchy|mixed|tls|flags|redzone|"
			"bump CALLS [gs]\n");
		return 2;
	}
	long calls = atol(argv[2]);
	setup();
	if (argc == 4)
		start_gs_user();
	printf("%s=%p\nready\n", names[kernel], entries[kernel]);
	fflush(stdout);
	if (calls > 0) {
		long r = 0;
		for (long c = 0; c < calls; c++)
			r = call(kernel);
		printf("result %ld\n", sum(r));
		return 0;
	}
	long want = sum(call(kernel)), done = 1, bad = 0;
	struct timespec last;
	struct sigaction sa = { .sa_handler = toggle_pause, .sa_flags = SA_RESTART };
	sigaction(SIGUSR1, &sa, NULL);
	clock_gettime(CLOCK_MONOTONIC, &last);
	for (;;) {
		pause_point(done);
		bad += sum(call(kernel)) != want;
		done++;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - last.tv_sec) * 1000000000L + now.tv_nsec - last.tv_nsec >= 50000000L) {
			printf("alive %ld bad %ld\n", done, bad + atomic_load(&gs_bad));
			fflush(stdout);
			last = now;
		}
	}
}
