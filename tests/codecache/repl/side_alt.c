/* cc_side's functions written in C: replacements for the test of branches
 * into the bytes a patch overwrites. */
long twice_plus(long x)
{
	return 2 * x + 1;
}

long thrice_plus(long x)
{
	return 3 * x + 1;
}

long plus_one(long x)
{
	return x + 1;
}
