/* session-cfg.c: control-flow graphs and hot loops of the attached process
 * (cfg/ over the session's target: code from its memory, names from the
 * session's symbolizer). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "cfg/cfg.h"
#include "profile/profile.h"
#include "src/session.h"

struct padrone_cfg {
	struct cfg_function *f;
};

/* Names for cfg/ from profile/'s symbolizer (.symtab from the files on
 * disk, .dynsym, PLT, .eh_frame). */
static int symbolize(void *arg, uint64_t addr, char *name, size_t size, uint64_t *start)
{
	struct prof_sym sym;
	if (prof_symbolizer__lookup(arg, addr, &sym) < 0 || sym.bounds == PROF_BOUNDS_NONE ||
	    sym.bounds == PROF_BOUNDS_EH_FRAME)
		return -ENOENT;
	snprintf(name, size, "%s", sym.name);
	*start = sym.start;
	return 0;
}

static int open_reader(struct padrone_session *s, struct cfg_reader **r)
{
	struct attach_target *t = padrone_session_target(s);
	struct prof_symbolizer *sym;
	if (!t)
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	int err = padrone_session_symbolizer(s, &sym);
	if (err < 0)
		return err;
	err = cfg_reader__open_live(t, NULL, r);
	if (err < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, err,
					    "cannot read the code of process %d: %s",
					    (int)attach_target__pid(t), strerror(-err));
	cfg_reader__set_symbolizer(*r, symbolize, NULL, sym);
	return 0;
}

/* A name as every command resolves it; what no ELF file defines (a PLT
 * stub's name@plt, the vdso's functions) as cfg/ reads it from memory. */
static int resolve(struct padrone_session *s, struct cfg_reader *r, const char *what,
		   uint64_t *addr)
{
	struct padrone_named nm;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(what, &end, 0);
	if (*what && !*end && !errno) {
		*addr = v;
		return 0;
	}
	int rc = padrone_session_resolve(s, what, &nm);
	if (rc == 0)
		*addr = nm.addr;
	if (rc != -ENOENT)
		return rc;
	if (cfg_reader__lookup(r, what, addr) == 0)
		return 0;
	return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT,
				    "no function named '%s' in process %d", what,
				    (int)attach_target__pid(padrone_session_target(s)));
}

/* What is mapped at addr, for a message: "r--p of /usr/bin/prog". */
static void mapping_of(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	struct attach_maps *maps;
	snprintf(buf, size, "unknown mapping");
	if (attach_maps__read(pid, &maps) < 0)
		return;
	const struct attach_map *m = attach_maps__find(maps, addr);
	if (m)
		snprintf(buf, size, "%c%c%c%c mapping of %s", m->prot & ATTACH_MAP_R ? 'r' : '-',
			 m->prot & ATTACH_MAP_W ? 'w' : '-', m->prot & ATTACH_MAP_X ? 'x' : '-',
			 m->prot & ATTACH_MAP_SHARED ? 's' : 'p', m->path[0] ? m->path : "[anon]");
	attach_maps__free(maps);
}

/* The last profile's samples in user code, by the instruction sampled:
 * what cfg/ counts on blocks and loops. */
static void attribute_samples(struct padrone_session *s, struct cfg_function *f)
{
	const struct prof_hot *hot = padrone_session_hot(s);
	size_t n = hot ? prof_hot__stack_count(hot) : 0, k = 0;
	struct cfg_sample *v = n ? malloc(n * sizeof(*v)) : NULL;

	for (size_t i = 0; v && i < n; i++) {
		const struct prof_hot_frame *fr;
		size_t nf;
		uint64_t count;
		/* in the kernel: not this process's code (as the report's self) */
		if (prof_hot__stack(hot, i, &fr, &nf, &count) == 0 && nf &&
		    fr[0].addr < PROF_KERNEL_START)
			v[k++] = (struct cfg_sample){ fr[0].addr, count };
	}
	if (v)
		cfg_function__attribute(f, v, k);
	free(v);
}

static int build(struct padrone_session *s, struct cfg_reader *r, uint64_t addr,
		 struct cfg_function **f)
{
	struct cfg_build_opts bo = { .sz = sizeof(bo), .find_entry = true };
	pid_t pid = attach_target__pid(padrone_session_target(s));
	uint8_t b;
	if (cfg_reader__read(r, addr, &b, 1) != 1)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EFAULT,
					    "no code at %#lx in process %d", (unsigned long)addr,
					    (int)pid);
	/* readable data (an ELF header, a string) would decode as nonsense
	 * and look like a function */
	if (!cfg_reader__is_code(r, addr)) {
		char what[PATH_MAX + 32];
		mapping_of(pid, addr, what, sizeof(what));
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOEXEC,
					    "%#lx in process %d is not code: it is in a "
					    "non-executable %s", (unsigned long)addr, (int)pid, what);
	}
	int err = cfg_function__build(r, addr, &bo, f);
	if (err < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, err, "%s", cfg_reader__errmsg(r));
	attribute_samples(s, *f);
	return 0;
}

int padrone_session__cfg(struct padrone_session *s, const char *what, struct padrone_cfg **out)
{
	struct cfg_reader *r;
	uint64_t addr;
	*out = NULL;
	int err = open_reader(s, &r);
	if (err < 0)
		return err;
	struct padrone_cfg *c = calloc(1, sizeof(*c));
	if (!c)
		err = padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	if (err == 0)
		err = resolve(s, r, what, &addr);
	if (err == 0)
		err = build(s, r, addr, &c->f);
	cfg_reader__free(r);
	if (err < 0) {
		free(c);
		return err;
	}
	*out = c;
	return 0;
}

void padrone_cfg__free(struct padrone_cfg *c)
{
	if (!c)
		return;
	cfg_function__free(c->f);
	free(c);
}

uint64_t padrone_cfg__entry(const struct padrone_cfg *c)
{
	return cfg_function__entry(c->f);
}

const char *padrone_cfg__name(const struct padrone_cfg *c)
{
	return cfg_function__name(c->f);
}

const char *padrone_cfg__error(const struct padrone_cfg *c)
{
	const char *msg;
	return cfg_function__error(c->f, NULL, &msg) == CFG_ERR_NONE ? "" : msg;
}

char *padrone_cfg__format(const struct padrone_cfg *c, enum padrone_cfg_format fmt)
{
	static const enum cfg_format map[] = {
		[PADRONE_CFG_TEXT] = CFG_FORMAT_TEXT, [PADRONE_CFG_JSON] = CFG_FORMAT_JSON,
		[PADRONE_CFG_DOT] = CFG_FORMAT_DOT,   [PADRONE_CFG_DISAS] = CFG_FORMAT_DISAS,
		[PADRONE_CFG_LOOPS] = CFG_FORMAT_LOOPS,
	};
	if ((unsigned)fmt >= sizeof(map) / sizeof(map[0])) {
		errno = EINVAL;
		return NULL;
	}
	struct cfg_write_opts wo = { .sz = sizeof(wo), .format = map[fmt] };
	ssize_t n = cfg_function__snprint(c->f, NULL, 0, &wo);
	char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!text || cfg_function__snprint(c->f, text, (size_t)n + 1, &wo) < 0) {
		free(text);
		errno = n < 0 ? (int)-n : ENOMEM;
		return NULL;
	}
	return text;
}

/* ---------------------------------------------------------- hot loops */

/* Function pf's hottest loop in *h (strings borrowed from the report); no
 * loop when its code cannot be read. */
static void find_hot_loop(struct padrone_session *s, struct cfg_reader *r,
			  const struct padrone_function *pf, struct padrone_hot_loop *h)
{
	struct cfg_function *f;

	*h = (struct padrone_hot_loop){ .function = pf->name, .module = pf->module,
					.entry = pf->start, .function_samples = pf->self };
	if (pf->end <= pf->start || build(s, r, pf->start, &f) < 0)
		return;
	h->entry = cfg_function__entry(f);
	ssize_t l = cfg_function__hottest_loop(f);
	if (l >= 0) {
		const struct cfg_loop *L = cfg_function__loop(f, (size_t)l);
		h->header = cfg_function__block(f, L->header)->start;
		h->depth = L->depth;
		h->irreducible = L->irreducible;
		h->samples = L->samples;
		h->blocks = L->block_count;
	}
	cfg_function__free(f);
}

/* The list's own copies of the report's strings (padrone.h's Lists);
 * false when out of memory (the list's free takes it as it is). */
static bool own_hot_loop_strings(struct padrone_hot_loop_list *l)
{
	bool ok = true;

	for (size_t i = 0; i < l->count; i++) {
		struct padrone_hot_loop *h = &l->items[i];
		ok &= (h->function = strdup(h->function)) != NULL;
		ok &= (h->module = strdup(h->module)) != NULL;
	}
	return ok;
}

int padrone_session__hot_loops(struct padrone_session *s, size_t max,
			       struct padrone_hot_loop_list **out)
{
	const struct padrone_report *rep = padrone_session__report(s);
	struct padrone_hot_loop_list *l;
	struct cfg_reader *r;
	int err;

	*out = NULL;
	if (!rep)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT,
					    "no profile yet: run 'profile' first");
	if ((err = open_reader(s, &r)) < 0)
		return err;
	size_t n = padrone_report__count(rep) < max ? padrone_report__count(rep) : max;
	l = calloc(1, sizeof *l);
	if (l)
		l->items = calloc(n ? n : 1, sizeof *l->items);
	if (l && l->items) {
		l->count = n;
		for (size_t i = 0; i < n; i++)
			find_hot_loop(s, r, padrone_report__function(rep, i), &l->items[i]);
	}
	cfg_reader__free(r);
	if (!l || !l->items || !own_hot_loop_strings(l)) {
		padrone_hot_loop_list__free(l);
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	*out = l;
	return 0;
}

void padrone_hot_loop_list__free(struct padrone_hot_loop_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++) {
		free((char *)l->items[i].function);
		free((char *)l->items[i].module);
	}
	free(l->items);
	free(l);
}
