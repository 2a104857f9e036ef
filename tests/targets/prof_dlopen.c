/* prof_dlopen: code that comes and goes. In a loop: dlopen the library
 * given as argv[1], spin in its prof_plugin_spin for 300 ms of CPU time
 * (so that on a loaded machine too the spin outweighs the loading), dlclose it
 * (its code is unmapped), idle for a second.
 *
 * Prints "ready", then per cycle "loaded N" and "unloaded N checksum C":
 * C is the result of the plugin's work, which must never change ("BAD
 * checksum" otherwise).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	uint64_t expect = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: prof_dlopen LIBRARY\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (unsigned long n = 1;; n++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		uint64_t (*spin)(uint64_t, unsigned) = (uint64_t (*)(uint64_t, unsigned))dlsym(h, "prof_plugin_spin");
		uint64_t c = 0;
		double t0 = cpu_now();
		printf("loaded %lu\n", n);
		while (cpu_now() - t0 < 0.3) {
			c = spin(5, 100000);
			if (expect && c != expect)
				printf("BAD checksum\n");
			expect = c;
		}
		dlclose(h);
		printf("unloaded %lu checksum %016llx\n", n, (unsigned long long)c);
		usleep(1000000);
	}
}
