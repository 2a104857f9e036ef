/* Another build of cc_threads' work(): same results, other code. */
unsigned work(unsigned x)
{
	for (unsigned i = 0; i < 200; i += 2) {
		x = (x ^ (x >> 7)) * 2654435761u + i;
		x = (x ^ (x >> 7)) * 2654435761u + i + 1;
	}
	return x;
}
