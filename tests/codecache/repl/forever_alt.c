/* cc_threads' forever(): still never returns. */
void forever(void)
{
	for (;;)
		__asm__ volatile("pause");
}
