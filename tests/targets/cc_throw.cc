// cc_throw: C++ exceptions thrown through a function padrone may replace.
//
// scaled() calls check_value(), which throws for multiples of 7; main
// catches them. Each round adds scaled(i) and twice(i) for i = 1..7000 and
// prints "round N: ok sum S caught 1000" when both the sum and the number
// of exceptions caught are what they must be ("BAD" otherwise). A
// replacement of scaled that the unwinder cannot walk through makes the
// first throw abort the process.
#include <cstdio>
#include <stdexcept>
#include <unistd.h>

extern "C" __attribute__((noipa)) void check_value(int v)
{
	if (v % 7 == 0)
		throw std::runtime_error("a multiple of 7");
}

extern "C" __attribute__((noipa)) int scaled(int v)
{
	check_value(v);
	return v * 3;
}

// read from memory: long enough (10 bytes) for the jump a patch writes
static volatile int two = 2;

extern "C" __attribute__((noipa)) int twice(int v)
{
	return v * two;
}

int main()
{
	long want = 0;

	setvbuf(stdout, nullptr, _IOLBF, 0);
	for (long i = 1; i <= 7000; i++)
		want += (i % 7 ? 3 * i : 0) + 2 * i;
	std::printf("cc_throw: pid %d ready\n", (int)getpid());
	for (long r = 1;; r++) {
		long sum = 0, caught = 0;
		for (int i = 1; i <= 7000; i++) {
			try {
				sum += scaled(i);
			} catch (const std::runtime_error &) {
				caught++;
			}
			sum += twice(i);
		}
		std::printf("round %ld: %s sum %ld caught %ld\n", r,
			    sum == want && caught == 1000 ? "ok" : "BAD", sum, caught);
		usleep(50000);
	}
}
