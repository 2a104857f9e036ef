/* cc_threads' blocker() again: a system call by number. */
long blocker(long nr)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
	return r;
}
