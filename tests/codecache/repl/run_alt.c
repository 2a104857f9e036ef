/* cc_threads' run_it() again. */
int run_it(void (*fn)(void))
{
	fn();
	return 1;
}
