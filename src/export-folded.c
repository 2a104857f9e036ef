/* export-folded.c: a profile as folded stacks, the input of FlameGraph's
 * flamegraph.pl, speedscope and inferno: one line per distinct stack of
 * functions, root first, "main;work;leaf COUNT". Names are shown as people
 * read them (C++ demangled); a ';' inside one becomes ':' so it cannot
 * split a frame. Chains of different addresses in the same functions are
 * one line.
 */
#include "src/export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"

struct folded_line {
	char *stack;
	uint64_t count;
};

static int by_stack(const void *a, const void *b)
{
	return strcmp(((const struct folded_line *)a)->stack, ((const struct folded_line *)b)->stack);
}

/* "root;...;leaf" of one chain, malloc'd; NULL when out of memory. */
static char *fold(const struct prof_hot *h, const struct prof_hot_frame *fr, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (size_t i = n; i-- > 0;) {
		char plain[512];
		const char *name = padrone_demangle(prof_hot__at(h, fr[i].func)->name, plain,
						    sizeof(plain));
		if (i + 1 < n)
			fputc(';', f);
		for (const char *c = name; *c; c++)
			fputc(*c == ';' ? ':' : *c == '\n' ? ' ' : *c, f);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int padrone_export_folded(const struct prof_hot *h, FILE *out, char *err, size_t errlen)
{
	size_t n = prof_hot__stack_count(h), k = 0;
	struct folded_line *lines = calloc(n ? n : 1, sizeof(*lines));
	int r = lines ? 0 : -ENOMEM;

	for (size_t i = 0; i < n && r == 0; i++) {
		const struct prof_hot_frame *fr;
		size_t nf;
		uint64_t count;
		if (prof_hot__stack(h, i, &fr, &nf, &count) < 0 || !nf)
			continue;
		lines[k].stack = fold(h, fr, nf);
		lines[k].count = count;
		r = lines[k++].stack ? 0 : -ENOMEM;
	}
	if (r == 0 && k)
		qsort(lines, k, sizeof(*lines), by_stack);
	for (size_t i = 0; i < k && r == 0; i++) {
		uint64_t count = lines[i].count;
		while (i + 1 < k && strcmp(lines[i].stack, lines[i + 1].stack) == 0)
			count += lines[++i].count;
		if (fprintf(out, "%s %llu\n", lines[i].stack, (unsigned long long)count) < 0)
			r = -EIO;
	}
	for (size_t i = 0; i < k; i++)
		free(lines[i].stack);
	free(lines);
	if (r < 0)
		snprintf(err, errlen, "writing folded stacks: %s", strerror(-r));
	return r;
}
