/* Replacements of cc_throw's functions, built as C (with the .eh_frame gcc
 * puts in by default, which the loader does not register): scaled calls
 * check_value, which throws through it; twice calls nothing. */
void check_value(int v);

int scaled(int v)
{
	check_value(v);
	return v + v + v;
}

int twice(int v)
{
	return v + v;
}
