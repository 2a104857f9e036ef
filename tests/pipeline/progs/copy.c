/* copy: streaming copies of 128 KiB with `rep movsb` and with `rep movsq`
 * (string instructions, one memory access per iteration under valgrind),
 * then a byte-wise checksum of the destination. */
#include <stdint.h>
#include <stdio.h>

#define BYTES (128 * 1024)
static unsigned char src[BYTES], dst[BYTES], dst2[BYTES];

static void copy_movsb(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void copy_movsq(void *d, const void *s, size_t n)
{
	n /= 8;
	__asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

int main(void)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < BYTES; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	copy_movsb(dst, src, BYTES);
	copy_movsq(dst2, dst, BYTES);
	copy_movsq(dst, dst2 + 8, BYTES - 8);
	for (size_t i = 0; i < BYTES; i += 64)
		sum = sum * 31 + dst[i] + dst2[i];
	printf("copy %u\n", sum);
	return 0;
}
