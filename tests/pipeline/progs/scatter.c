/* scatter: 200000 increments of random counters in a 4 MiB table
 * (read-modify-write accesses with no locality); prints a checksum. */
#include <stdint.h>
#include <stdio.h>

#define SLOTS (1u << 20)
static uint32_t table[SLOTS];

int main(void)
{
	uint32_t x = 12345, sum = 0;

	for (int i = 0; i < 200000; i++) {
		x = x * 1103515245u + 12345u;
		table[(x >> 8) & (SLOTS - 1)]++;
	}
	for (uint32_t i = 0; i < SLOTS; i += 4096)
		sum += table[i] * i;
	printf("scatter %u\n", sum);
	return 0;
}
