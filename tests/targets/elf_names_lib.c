/* libelf_names.so: a global scale(), the name elf_names keeps a static
 * function under. */
__attribute__((noinline)) int scale(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5;
}

int lib_scale(int x)
{
	return scale(x) + 1;
}
