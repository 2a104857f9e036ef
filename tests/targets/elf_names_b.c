/* elf_names' second file: another `static int counter`. */
static int counter;

__attribute__((noinline)) int bump_b(void)
{
	return counter += 2;
}
