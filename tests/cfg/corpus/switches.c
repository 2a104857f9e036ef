/* Switches: dense ones become jump tables (absolute or PIC), sparse ones
 * compare trees; a char switch; a switch inside a loop. */
#include "corpus.h"

NOINLINE int sw_dense(int x)
{
	switch (x) {
	case 0: return corpus_sink + 3;
	case 1: return corpus_sink * 7;
	case 2: return corpus_sink - 11;
	case 3: corpus_sink++; return 19;
	case 4: return corpus_sink ^ 23;
	case 5: return corpus_sink + 29;
	case 6: return corpus_sink * 31;
	case 7: corpus_sink--; return 37;
	default: return -1;
	}
}

NOINLINE int sw_offset(int x)
{
	/* cases 10..20: the index is shifted before the table */
	switch (x) {
	case 10: corpus_sink += 1; break;
	case 11: corpus_sink += 2; break;
	case 12: corpus_sink *= 3; break;
	case 13: corpus_sink -= 4; break;
	case 14: corpus_sink ^= 5; break;
	case 16: corpus_sink += 6; break;
	case 17: corpus_sink |= 7; break;
	case 18: corpus_sink &= 0xfff; break;
	case 20: corpus_sink += 9; break;
	default: return 0;
	}
	return corpus_sink & 0xff;
}

/* cases below zero (error codes): gcc bounds the table from below,
 * cmp x, -6; jb default, and indexes with x + 6 in 32 bits */
NOINLINE int sw_negative(int x)
{
	switch (x) {
	case -6: return corpus_sink + 61;
	case -5: return corpus_sink * 53;
	case -4: corpus_sink++; return 47;
	case -3: return corpus_sink - 43;
	case -2: return corpus_sink ^ 41;
	case -1: corpus_sink--; return 37;
	default: return 0;
	}
}

NOINLINE int sw_pick(int x)
{
	return (x * 7 + corpus_sink) % 9;
}

/* on a callee's result: the index is rax as the call left it (glibc's
 * iconv switches on __gconv's) */
NOINLINE int sw_result(int x)
{
	switch (sw_pick(x)) {
	case 0: return corpus_sink + 5;
	case 1: return corpus_sink * 3;
	case 2: corpus_sink++; return 8;
	case 3: return corpus_sink - 13;
	case 4: return corpus_sink ^ 17;
	case 5: return corpus_sink + 19;
	case 6: corpus_sink--; return 23;
	case 7: return corpus_sink * 29;
	default: return -2;
	}
}

NOINLINE int sw_sparse(int x)
{
	switch (x) {
	case 1: return 10;
	case 100: return corpus_sink + 20;
	case 1000: return 30;
	case 10000: return corpus_sink - 40;
	case 100000: return 50;
	default: return 0;
	}
}

NOINLINE int sw_char(const char *s)
{
	int n = 0;
	for (; *s; s++) {
		switch (*s) {
		case 'a': n += 1; break;
		case 'b': n += 2; break;
		case 'c': n *= 3; break;
		case 'd': n -= 4; break;
		case 'e': n ^= 5; break;
		case 'f': n += corpus_sink; break;
		case 'g': n <<= 1; break;
		case 'h': n >>= 1; break;
		default: n++; break;
		}
	}
	return n;
}

NOINLINE long sw_fallthrough(unsigned x, long acc)
{
	switch (x & 7) {
	case 0: acc += 1; /* fall through */
	case 1: acc *= 3; /* fall through */
	case 2: acc -= 5; break;
	case 3: acc ^= 0x55; /* fall through */
	case 4: acc += corpus_sink; break;
	case 5: acc <<= 2; break;
	case 6: acc = -acc; /* fall through */
	default: acc += 7; break;
	}
	return acc;
}

long switches_run(int n)
{
	long s = 0;
	static const char *words[] = { "abcdefgh", "hgfedcba", "zzz", "face", "bead" };
	for (int i = 0; i < n; i++) {
		s += sw_dense(i % 10);
		s += sw_offset(i % 23);
		s += sw_sparse(i % 3 == 0 ? 100 : i % 3 == 1 ? 10000 : i);
		s += sw_negative(i % 8 - 7);
		s += sw_result(i);
		s += sw_char(words[i % 5]);
		s = sw_fallthrough((unsigned)i, s);
	}
	return s;
}
