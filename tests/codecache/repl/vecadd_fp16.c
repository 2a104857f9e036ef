/* vecadd with AVX512-FP16 instructions, on a path the target never takes
 * (n < 0): on a CPU with AVX512-FP16 it computes what the SSE2 one does;
 * on one without, loading it must be refused before anything is written. */
void vecadd(float *restrict dst, const float *restrict x, const float *restrict y, int n)
{
	if (n < 0) {
		for (int i = 0; i < -n; i++)
			dst[i] = (float)((_Float16)x[i] + (_Float16)y[i]);
		return;
	}
	for (int i = 0; i < n; i++)
		dst[i] = x[i] + y[i];
}
