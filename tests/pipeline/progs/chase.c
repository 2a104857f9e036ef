/* chase: follow a random cycle through 16384 nodes of 64 bytes (1 MiB),
 * four times round; prints the number of steps and a checksum. Every load
 * depends on the previous one, and consecutive nodes are far apart. */
#include <stdint.h>
#include <stdio.h>

#define NODES 16384

struct node {
	struct node *next;
	long payload[7];
};
static struct node nodes[NODES];
static uint32_t order[NODES];

int main(void)
{
	uint64_t x = 88172645463325252ull;
	long sum = 0, steps = 0;

	for (uint32_t i = 0; i < NODES; i++)
		order[i] = i;
	for (uint32_t i = NODES - 1; i > 0; i--) {	/* Fisher-Yates, xorshift */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t j = (uint32_t)(x % (i + 1)), t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (uint32_t i = 0; i < NODES; i++) {
		nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];
		nodes[order[i]].payload[0] = i;
	}
	struct node *p = &nodes[order[0]];
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < NODES; i++, steps++) {
			sum += p->payload[0];
			p = p->next;
		}
	printf("chase %ld %ld\n", steps, sum);
	return 0;
}
