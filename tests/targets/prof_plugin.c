/* prof_plugin: a shared library prof_dlopen loads, runs and unloads. */
#include <stdint.h>

__attribute__((noinline)) uint64_t prof_plugin_spin(uint64_t x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		x = (x ^ (x >> 9)) * 0xd6e8feb86659fd93ull + i;
	return x;
}
