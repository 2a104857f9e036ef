/* hotloop: a single-threaded, CPU-bound target with one clearly hot function.
 *
 * usage: hotloop [-d SECONDS] [-w WORK] [-s SLEEP_US] [-f FIFO] [-e TICK]
 *   -d SECONDS   run that long, print "done ticks N" and exit 0 (default 0: forever)
 *   -w WORK      iterations of hot_function per tick (default 2000000, ~5 ms)
 *   -s SLEEP_US  nanosleep that long after each tick (default 0: always busy)
 *   -f FIFO      before each tick, block in read(2) for one byte from FIFO;
 *                exit 0 when its writer closes it
 *   -e TICK      print the checksum tick TICK must show (with the same -w), exit
 *
 * output (line-buffered):
 *   ready PID hot_function 0xADDR     once, first
 *   tick N checksum 0xX               after each tick; X = hot_function(N, WORK),
 *                                     so `hotloop -e N -w WORK` checks it
 *   done ticks N                      at the end of -d
 *   error WHAT: STRERROR              a failed sleep or read (exit 1): a
 *                                     system call restarted wrongly shows here
 *
 * hot_function keeps integer and SSE state live in its loop, so registers
 * or xsave state corrupted by a tracer change the checksum. The stopper case
 * is hotloop + SIGSTOP. Dies of SIGPIPE when its reader goes away.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) uint64_t hot_function(uint64_t seed, long iters);

uint64_t hot_function(uint64_t seed, long iters)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	double acc = (double)(seed & 0xffff);
	for (long i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		acc = acc * 0.999999 + (double)(x & 0xff);
	}
	uint64_t bits;
	memcpy(&bits, &acc, sizeof bits);
	return x ^ bits;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double duration = 0;
	long work = 2000000, sleep_us = 0, expect = -1;
	const char *fifo = NULL;
	int c;

	while ((c = getopt(argc, argv, "d:w:s:f:e:")) != -1) {
		switch (c) {
		case 'd': duration = atof(optarg); break;
		case 'w': work = atol(optarg); break;
		case 's': sleep_us = atol(optarg); break;
		case 'f': fifo = optarg; break;
		case 'e': expect = atol(optarg); break;
		default:
			fprintf(stderr, "usage: hotloop [-d SECONDS] [-w WORK] [-s SLEEP_US] "
					"[-f FIFO] [-e TICK]\n");
			return 2;
		}
	}
	if (expect >= 0) {
		printf("tick %ld checksum 0x%016" PRIx64 "\n", expect,
		       hot_function((uint64_t)expect, work));
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd = -1;
	if (fifo && (fd = open(fifo, O_RDONLY)) < 0) {
		printf("error open %s: %s\n", fifo, strerror(errno));
		return 1;
	}
	printf("ready %d hot_function %p\n", (int)getpid(), (void *)hot_function);
	double start = now_s();
	long tick;
	for (tick = 1; duration <= 0 || now_s() - start < duration; tick++) {
		if (fd >= 0) {
			char b;
			ssize_t n = read(fd, &b, 1);
			if (n == 0)
				break;
			if (n < 0) {
				printf("error read: %s\n", strerror(errno));
				return 1;
			}
		}
		printf("tick %ld checksum 0x%016" PRIx64 "\n", tick,
		       hot_function((uint64_t)tick, work));
		if (sleep_us > 0) {
			struct timespec ts = { sleep_us / 1000000, (sleep_us % 1000000) * 1000 };
			if (nanosleep(&ts, NULL) < 0) {
				printf("error nanosleep: %s\n", strerror(errno));
				return 1;
			}
		}
	}
	printf("done ticks %ld\n", tick - 1);
	return 0;
}
