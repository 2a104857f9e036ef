/* rowcol: sum a 256x256 matrix of doubles row by row ("row") or column by
 * column ("col"); prints the sum. A memory pattern for the cache
 * validation against cachegrind. */
#include <stdio.h>
#include <string.h>

#define N 256
static double m[N][N];

int main(int argc, char **argv)
{
	int col = argc > 1 && !strcmp(argv[1], "col");
	double sum = 0;

	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			m[i][j] = i * 0.5 + j;
	for (int rep = 0; rep < 2; rep++)
		for (int a = 0; a < N; a++)
			for (int b = 0; b < N; b++)
				sum += col ? m[b][a] : m[a][b];
	printf("rowcol %s %.1f\n", col ? "col" : "row", sum);
	return 0;
}
