/* The same read(2) as cc_reader's reader(), compiled: the replacement. */
long reader(int fd, void *buf, unsigned long n)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"(0L), "D"((long)fd), "S"(buf), "d"(n)
			 : "rcx", "r11", "memory");
	return r;
}
