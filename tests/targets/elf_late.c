/* elf_late: a library that comes after the first look. Prints "ready";
 * on SIGUSR1 dlopens argv[1] (and keeps it) and prints "loaded"; prints
 * "tick N" every 50 ms. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

static volatile sig_atomic_t asked;

static void on_usr1(int sig)
{
	(void)sig;
	asked = 1;
}

int main(int argc, char **argv)
{
	void *h = NULL;

	if (argc != 2)
		return 2;
	signal(SIGUSR1, on_usr1);
	printf("ready\n");
	fflush(stdout);
	for (long n = 1;; n++) {
		if (asked && !h) {
			h = dlopen(argv[1], RTLD_NOW);
			if (h)
				printf("loaded\n");
			else
				printf("BAD dlopen: %s\n", dlerror());
		}
		printf("tick %ld\n", n);
		fflush(stdout);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
}
