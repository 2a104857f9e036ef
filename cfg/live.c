/* The live reader: code read from a running process through attach/, the
 * address space from its maps, every mapped ELF image parsed from the
 * process's own memory. */
#include "attach/attach.h"
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct live_ctx {
	struct attach_target *t;
	struct attach_maps *maps;
	bool no_modules;
};

static ssize_t live_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct live_ctx *l = ctx;
	return attach_target__read(l->t, addr, buf, len);
}

static bool live_is_code(void *ctx, uint64_t addr)
{
	struct live_ctx *l = ctx;
	const struct attach_map *m = l->maps ? attach_maps__find(l->maps, addr) : NULL;
	return m && (m->prot & ATTACH_MAP_X);
}

static void live_destroy(void *ctx)
{
	struct live_ctx *l = ctx;
	attach_maps__free(l->maps);
	free(l);
}

/* One module per mapped file that has executable code, spanning all its
 * mappings; parsed when first needed. */
static int live_refresh(struct cfg_reader *r)
{
	struct live_ctx *l = r->ctx;
	struct attach_maps *maps;
	int err = attach_maps__read(attach_target__pid(l->t), &maps);
	if (err < 0)
		return cfg__reader_err(r, err, "cannot read the maps of process %d: %s",
				      (int)attach_target__pid(l->t), strerror(-err));
	attach_maps__free(l->maps);
	l->maps = maps;
	if (l->no_modules)
		return 0;
	size_t n = attach_maps__count(maps);
	for (size_t i = 0; i < n; i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		if (!(m->prot & ATTACH_MAP_X) || !m->path[0] ||
		    (m->path[0] != '/' && strcmp(m->path, "[vdso]") != 0))
			continue;
		const struct attach_map *first = attach_maps__first_of(maps, m->path);
		if (!first || first->offset != 0)
			continue;
		bool known = false;
		for (size_t k = 0; k < r->nmods && !known; k++)
			known = r->mods[k].lo == first->start;
		if (known)
			continue;
		struct cfg_module *mod;
		if ((err = cfg__reader_add_module(r, &mod)) < 0)
			return err;
		mod->path = strdup(m->path);
		mod->lo = first->start;
		mod->hi = first->end;
		for (size_t k = 0; k < n; k++) {
			const struct attach_map *o = attach_maps__at(maps, k);
			if (!strcmp(o->path, m->path) && o->end > mod->hi)
				mod->hi = o->end;
		}
	}
	return 0;
}

int cfg_reader__open_live(struct attach_target *t, const struct cfg_reader_opts *opts,
			  struct cfg_reader **out)
{
	if (!t || !out)
		return -EINVAL;
	*out = NULL;
	struct live_ctx *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->t = t;
	if (opts && opts->sz >= offsetof(struct cfg_reader_opts, no_modules) + sizeof(bool))
		l->no_modules = opts->no_modules;
	struct cfg_reader_ops ops = {
		.sz = sizeof(ops), .read = live_read, .is_code = live_is_code,
		.destroy = live_destroy,
	};
	struct cfg_reader *r;
	int err = cfg__reader_alloc(&ops, l, &r);
	if (err < 0) {
		free(l);
		return err;
	}
	r->refresh = live_refresh;
	if ((err = live_refresh(r)) < 0) {
		/* keep the reason: the caller has no reader to ask */
		cfg_reader__free(r);
		return err;
	}
	*out = r;
	return 0;
}
