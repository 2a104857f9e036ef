/* A replacement of bump_a that means elf_names' counter, but names it as
 * `extern int counter`: two statics of the target have that name. */
extern int counter;

int bump_a(void)
{
	return ++counter;
}
