/* padrone-workload: the demo workload demo.sh runs padrone on.
 *
 * A small "render farm": two worker threads, one drawing Mandelbrot tiles
 * (nearly all its time in mandel_escape), one checksumming them with a
 * CRC-32 (crc32_update) and sorting scanlines (qsort with a comparison
 * function of ours). The main thread prints progress once a second:
 *
 *	tiles N crc 0xC
 *
 * where C is the checksum of the last tile, the same for every tile of the
 * same size: a change would mean the program was disturbed.
 *
 * usage: padrone-workload [SECONDS]   (default: until killed)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define W 96
#define H 64
#define MAX_ITER 600

static uint8_t tile[2][W * H];		/* double-buffered: render one, check the other */
static atomic_uint ready_tiles;
static atomic_uint checked_tiles;
static atomic_uint last_crc;
static atomic_bool stop;

__attribute__((noinline)) int mandel_escape(double cr, double ci)
{
	double zr = 0, zi = 0;
	int i;

	for (i = 0; i < MAX_ITER && zr * zr + zi * zi < 4.0; i++) {
		double t = zr * zr - zi * zi + cr;
		zi = 2 * zr * zi + ci;
		zr = t;
	}
	return i;
}

__attribute__((noinline)) void render_tile(uint8_t *out)
{
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			out[y * W + x] = (uint8_t)mandel_escape(-2.0 + 2.6 * x / W, -1.2 + 2.4 * y / H);
}

__attribute__((noinline)) uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

static int cmp_bytes(const void *a, const void *b)
{
	return *(const uint8_t *)a - *(const uint8_t *)b;
}

static void *renderer(void *arg)
{
	for (unsigned n = 0; !atomic_load(&stop); n++) {
		render_tile(tile[n & 1]);
		atomic_store(&ready_tiles, n + 1);
		while (!atomic_load(&stop) && atomic_load(&checked_tiles) + 1 < n + 1)
			usleep(100);	/* the checker is a tile behind at most */
	}
	return NULL;
}

static void *checker(void *arg)
{
	uint8_t line[W];

	for (unsigned n = 0; !atomic_load(&stop);) {
		if (atomic_load(&ready_tiles) <= n) {
			usleep(200);
			continue;
		}
		const uint8_t *t = tile[n & 1];
		uint32_t crc = crc32_update(0, t, sizeof(tile[0]));
		for (int y = 0; y < H; y++) {	/* sorted scanlines must not change the CRC */
			memcpy(line, t + y * W, W);
			qsort(line, W, 1, cmp_bytes);
		}
		atomic_store(&last_crc, crc);
		atomic_store(&checked_tiles, ++n);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double limit = argc > 1 ? atof(argv[1]) : 0;
	pthread_t r, c;
	struct timespec t0, now;

	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&r, NULL, renderer, NULL);
	pthread_setname_np(r, "renderer");
	pthread_create(&c, NULL, checker, NULL);
	pthread_setname_np(c, "checker");
	printf("ready pid %d\n", (int)getpid());
	for (;;) {
		sleep(1);
		printf("tiles %u crc 0x%08x\n", atomic_load(&checked_tiles), atomic_load(&last_crc));
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (limit > 0 && (double)(now.tv_sec - t0.tv_sec) >= limit)
			break;
	}
	atomic_store(&stop, true);
	pthread_join(r, NULL);
	pthread_join(c, NULL);
	return 0;
}
