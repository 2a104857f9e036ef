/* progress.c: one line of progress on a terminal, erased when done. */
#include "src/progress.h"

#include <unistd.h>

/* Shorter commands say nothing: a line that flashes is noise. */
#define PROGRESS_AFTER_S 1.0

void padrone_progress_init(struct padrone_progress *p, FILE *err, const char *what,
			   const char *unit)
{
	int fd = err ? fileno(err) : -1;	/* -1 for memory streams */

	p->tty = fd >= 0 && isatty(fd) ? err : NULL;
	p->what = what;
	p->unit = unit;
	p->shown = false;
}

void padrone_progress_show(struct padrone_progress *p, double elapsed_s, double total_s,
			   uint64_t count)
{
	if (!p->tty || elapsed_s < PROGRESS_AFTER_S)
		return;
	fprintf(p->tty, "\r\033[K%s: %.1f of %.1f s", p->what, elapsed_s, total_s);
	if (count)
		fprintf(p->tty, ", %llu %s", (unsigned long long)count, p->unit);
	fflush(p->tty);
	p->shown = true;
}

void padrone_progress_cb(void *arg, double elapsed_s, double total_s, uint64_t count)
{
	padrone_progress_show(arg, elapsed_s, total_s, count);
}

void padrone_progress_done(struct padrone_progress *p)
{
	if (p->shown) {
		fputs("\r\033[K", p->tty);
		fflush(p->tty);
	}
	p->shown = false;
}
