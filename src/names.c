/* names.c: the one way a command turns a function's name into an address
 * (cfg, disas, loops, replace, measure alike). */
#include "src/session.h"
#include "attach/attach.h"
#include "elf/elf.h"
#include "profile/profile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int resolve_elf(struct padrone_session *s, const char *name, struct padrone_named *out)
{
	struct elf_modules *ms;
	struct elf_def d;
	char why[1024];
	int rc;

	if ((rc = padrone_session_modules(s, &ms)) < 0)
		return rc;
	rc = elf_modules__resolve(ms, name, ELF_RESOLVE_USER, &d, why, sizeof why);
	if (rc == 0) {
		out->addr = d.addr;
		out->size = d.sym->size;
		out->ifunc = d.sym->kind == ELF_SYM_IFUNC;
		snprintf(out->module, sizeof out->module, "%s", d.module->path);
	}
	if (rc == -ENOTUNIQ)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, rc, "%s", why);
	return rc;
}

/* JIT code, named by the process's perf map as profile and bt name it. */
static int resolve_perfmap(struct padrone_session *s, const char *name,
			   struct padrone_named *out)
{
	struct prof_symbolizer *sym;
	uint64_t start, end;

	if (padrone_session_symbolizer(s, &sym) < 0)
		return -ENOENT;
	if (prof_symbolizer__perfmap_find(sym, name, &start, &end) < 0)
		return -ENOENT;
	out->addr = start;
	out->size = end - start;
	return 0;
}

int padrone_session_resolve(struct padrone_session *s, const char *name,
			    struct padrone_named *out)
{
	int rc;

	memset(out, 0, sizeof *out);
	if (!padrone_session_target(s))
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	rc = resolve_elf(s, name, out);
	if (rc != -ENOENT)
		return rc;
	if (padrone_sub_name_addr(name, &out->addr) == 0)
		return 0;
	return resolve_perfmap(s, name, out);
}
