/* Small containers for cfg/: array growth (the hash map is util/'s). */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cfg__grow(void *pptr, size_t *cap, size_t n, size_t sz)
{
	void **p = pptr;
	if (n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 8;
	while (nc < n)
		nc *= 2;
	void *np = realloc(*p, nc * sz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}
