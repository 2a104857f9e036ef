/* The demo's replacement: the same vecadd as tests/targets/cc_vecadd.c,
 * compiled with -O3 -mavx2 -c. */
void vecadd(float *restrict c, const float *restrict a, const float *restrict b, int n)
{
	for (int i = 0; i < n; i++)
		c[i] = a[i] + b[i];
}
