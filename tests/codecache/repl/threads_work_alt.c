/* Another build of the threads target's work(): the same results (the
 * same operations in the same order), other code. */
#include <stdint.h>
#include <string.h>

uint64_t work(uint64_t seed, long iters)
{
	uint64_t x = seed * 0x2545F4914F6CDD1Dull + 7;
	double acc = 1.0;

	for (long left = iters; left > 0; left--) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		acc = acc + (double)(x >> 40) * 1e-9;
	}
	uint64_t bits;
	memcpy(&bits, &acc, sizeof bits);
	return x ^ bits;
}
