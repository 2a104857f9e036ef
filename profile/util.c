/* util.c: small helpers shared by profile/'s files. */
#include "profile/internal.h"

#include "attach/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

void prof__fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

void prof__seterr(struct prof_error *err, int e, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->err = e;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}


const char *prof_backend_name(enum prof_backend b)
{
	return b == PROF_BACKEND_BPF ? "bpf" : "ring";
}

int prof_backend_parse(const char *name, enum prof_backend *b)
{
	if (!strcmp(name, "ring"))
		*b = PROF_BACKEND_RING;
	else if (!strcmp(name, "bpf"))
		*b = PROF_BACKEND_BPF;
	else
		return -EINVAL;
	return 0;
}

const char *prof_bounds_name(enum prof_bounds b)
{
	switch (b) {
	case PROF_BOUNDS_SYMTAB: return "symtab";
	case PROF_BOUNDS_DYNSYM: return "dynsym";
	case PROF_BOUNDS_EH_FRAME: return "eh_frame";
	case PROF_BOUNDS_CALLCHAIN: return "callchain";
	case PROF_BOUNDS_PERFMAP: return "perfmap";
	case PROF_BOUNDS_NONE: break;
	}
	return "none";
}
