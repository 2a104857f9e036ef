/* vecadd whose scale factor a constructor sets: loaded without running
 * it, every result would be 0 (the target's checksum changes). */
static float scale;

__attribute__((constructor)) static void init_scale(void)
{
	scale = 1.0f;
}

void vecadd(float *restrict dst, const float *restrict x, const float *restrict y, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = (x[i] + y[i]) * scale;
}
