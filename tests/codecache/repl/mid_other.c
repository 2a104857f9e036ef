/* mid for cc_leaf, the second replacement (built -O2: smaller than
 * mid_new.o, so it is placed where that one was once freed). */
long leaf(long x);

long mid(long x)
{
	return leaf(x) + 1;
}
