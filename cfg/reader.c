/* The reader: cached code bytes, cached decoded instructions, modules
 * (symbols, FDEs, PLT slots) and names. */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cfg__reader_err(struct cfg_reader *r, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return err;
}

const char *cfg_reader__errmsg(const struct cfg_reader *r)
{
	return r ? r->err : "no reader";
}

int cfg__reader_alloc(const struct cfg_reader_ops *ops, void *ctx, struct cfg_reader **out)
{
	struct cfg_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (!UTIL_OPTS_COPY(&r->ops, ops)) {
		free(r);
		return -EINVAL;
	}
	r->ops.sz = sizeof(r->ops);
	r->ctx = ctx;
	cfg__decoder_init(&r->dec);
	if (util_hmap__init(&r->pages, 64) < 0 || util_hmap__init(&r->insns, 1024) < 0 ||
	    util_hmap__init(&r->rets, 64) < 0) {
		util_hmap__fini(&r->pages);
		util_hmap__fini(&r->insns);
		free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

int cfg_reader__new(const struct cfg_reader_ops *ops, void *ctx,
		    const struct cfg_reader_opts *opts, struct cfg_reader **out)
{
	if (!ops || !out || ops->sz < offsetof(struct cfg_reader_ops, is_code) || !ops->read)
		return -EINVAL;
	(void)opts;
	return cfg__reader_alloc(ops, ctx, out);
}

static void drop_pages(struct cfg_reader *r)
{
	for (size_t i = 0; i < r->npages; i++)
		free(r->pagev[i]);
	r->npages = 0;
	util_hmap__clear(&r->pages);
}

static void drop_insns(struct cfg_reader *r)
{
	for (size_t i = 0; i * CFG_INSN_CHUNK < r->ninsns; i++)
		free(r->insnv[i]);
	r->ninsns = 0;
	util_hmap__clear(&r->insns);
}

static void drop_caches(struct cfg_reader *r)
{
	drop_pages(r);
	drop_insns(r);
	util_hmap__clear(&r->rets);
}

void cfg__reader_trim(struct cfg_reader *r)
{
	/* callee summaries stay: a few bytes each, and costly to redo */
	if (r->ninsns > CFG_INSN_CACHE_MAX)
		drop_insns(r);
	if (r->npages > CFG_PAGE_CACHE_MAX)
		drop_pages(r);
}

static void drop_modules(struct cfg_reader *r)
{
	for (size_t i = 0; i < r->nmods; i++)
		cfg__module_fini(&r->mods[i]);
	r->nmods = 0;
}

void cfg_reader__free(struct cfg_reader *r)
{
	if (!r)
		return;
	drop_caches(r);
	drop_modules(r);
	free(r->mods);
	free(r->pagev);
	free(r->insnv);
	free(r->prov);
	util_hmap__fini(&r->pages);
	util_hmap__fini(&r->insns);
	util_hmap__fini(&r->rets);
	if (r->ops.destroy)
		r->ops.destroy(r->ctx);
	free(r);
}

void cfg_reader__set_symbolizer(struct cfg_reader *r, cfg_symbolize_fn symbolize,
				cfg_lookup_fn lookup, void *arg)
{
	r->usym = symbolize;
	r->ulookup = lookup;
	r->uarg = arg;
}

int cfg_reader__flush(struct cfg_reader *r)
{
	drop_caches(r);
	if (r->refresh) {	/* a live process may have mapped new code */
		drop_modules(r);
		return r->refresh(r);
	}
	return 0;	/* a file's modules do not change */
}

/* ------------------------------------------------------------ code bytes */

static const struct cfg_page *page_get(struct cfg_reader *r, uint64_t pa)
{
	uint32_t *ix = util_hmap__get(&r->pages, pa);
	if (ix)
		return r->pagev[*ix];
	struct cfg_page *p = malloc(sizeof(*p));
	if (!p || cfg__grow(&r->pagev, &r->cpages, r->npages + 1, sizeof(*r->pagev)) < 0 ||
	    util_hmap__put(&r->pages, pa, (uint32_t)r->npages) < 0) {
		free(p);
		return NULL;
	}
	p->addr = pa;
	ssize_t n = r->ops.read(r->ctx, pa, p->data, sizeof(p->data));
	p->len = n < 0 ? (int32_t)n : (int32_t)n;
	r->pagev[r->npages++] = p;
	return p;
}

ssize_t cfg_reader__read(struct cfg_reader *r, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		uint64_t a = addr + done;
		uint64_t pa = a & ~(uint64_t)4095;
		const struct cfg_page *p = page_get(r, pa);
		if (!p)
			return done ? (ssize_t)done : -ENOMEM;
		size_t off = (size_t)(a - pa);
		if (p->len <= 0 || off >= (size_t)p->len)
			return done ? (ssize_t)done : (p->len < 0 ? p->len : -EFAULT);
		size_t n = (size_t)p->len - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)buf + done, p->data + off, n);
		done += n;
		if (p->len < 4096 && off + n >= (size_t)p->len)
			break;
	}
	return (ssize_t)done;
}

const struct cfg_insn *cfg__reader_insn(struct cfg_reader *r, uint64_t addr)
{
	uint32_t *ix = util_hmap__get(&r->insns, addr);
	if (ix)
		return &r->insnv[*ix / CFG_INSN_CHUNK][*ix % CFG_INSN_CHUNK];
	if (r->ninsns % CFG_INSN_CHUNK == 0) {
		size_t chunks = r->ninsns / CFG_INSN_CHUNK;
		if (cfg__grow(&r->insnv, &r->cinsnv, chunks + 1, sizeof(*r->insnv)) < 0)
			return NULL;
		r->insnv[chunks] = malloc(CFG_INSN_CHUNK * sizeof(struct cfg_insn));
		if (!r->insnv[chunks])
			return NULL;
	}
	if (util_hmap__put(&r->insns, addr, (uint32_t)r->ninsns) < 0)
		return NULL;
	struct cfg_insn *in = &r->insnv[r->ninsns / CFG_INSN_CHUNK][r->ninsns % CFG_INSN_CHUNK];
	r->ninsns++;
	uint8_t b[ZYDIS_MAX_INSTRUCTION_LENGTH];
	ssize_t n = cfg_reader__read(r, addr, b, sizeof(b));
	cfg__decode_bytes(&r->dec, addr, b, n > 0 ? (size_t)n : 0, in);
	return in;
}

bool cfg_reader__is_code(struct cfg_reader *r, uint64_t addr)
{
	return cfg__reader_is_code(r, addr);
}

bool cfg__reader_is_code(struct cfg_reader *r, uint64_t addr)
{
	if (r->ops.is_code)
		return r->ops.is_code(r->ctx, addr);
	uint8_t b;
	return cfg_reader__read(r, addr, &b, 1) == 1;
}

/* ------------------------------------------------------------ modules */

int cfg__reader_add_module(struct cfg_reader *r, struct cfg_module **out)
{
	if (cfg__grow(&r->mods, &r->cmods, r->nmods + 1, sizeof(*r->mods)) < 0)
		return -ENOMEM;
	struct cfg_module *m = &r->mods[r->nmods++];
	memset(m, 0, sizeof(*m));
	*out = m;
	return 0;
}

struct cfg_module *cfg__reader_module(struct cfg_reader *r, uint64_t addr)
{
	for (size_t i = 0; i < r->nmods; i++) {
		struct cfg_module *m = &r->mods[i];
		if (addr < m->lo || addr >= m->hi)
			continue;
		if (!m->parsed) {
			m->parsed = true;	/* once, even if it fails */
			cfg__module_parse_memory(r, m, m->lo);
			cfg__module_sort(m);
		}
		return m;
	}
	return NULL;
}

const struct cfg_fde *cfg__reader_fde_at(struct cfg_reader *r, uint64_t addr)
{
	struct cfg_module *m = cfg__reader_module(r, addr);
	return m ? cfg__module_fde_at(m, addr) : NULL;
}

const char *cfg__reader_slot_name(struct cfg_reader *r, uint64_t slot)
{
	struct cfg_module *m = cfg__reader_module(r, slot);
	const char *n = m ? cfg__module_slot_name(m, slot) : NULL;
	return n ? n : "";
}

bool cfg__reader_stub(struct cfg_reader *r, uint64_t addr, uint64_t *slot, const char **name)
{
	const struct cfg_insn *in = cfg__reader_insn(r, addr);
	if (in && in->mnemonic == ZYDIS_MNEMONIC_ENDBR64)
		in = cfg__reader_insn(r, addr + in->len);
	if (!in || in->kind != CFG_I_JMP_IND || !in->rip_mem)
		return false;
	if (slot)
		*slot = in->target;
	if (name)
		*name = cfg__reader_slot_name(r, in->target);
	return true;
}

static int user_symbolize(struct cfg_reader *r, uint64_t addr, char *name, size_t size,
			  uint64_t *start)
{
	if (!r->usym)
		return -ENOENT;
	uint64_t s = 0;
	int err = r->usym(r->uarg, addr, name, size, &s);
	if (err == 0 && start)
		*start = s;
	return err;
}

int cfg_reader__symbolize(struct cfg_reader *r, uint64_t addr, char *name, size_t size,
			  uint64_t *start)
{
	if (size)
		name[0] = '\0';
	if (user_symbolize(r, addr, name, size, start) == 0)
		return 0;
	struct cfg_module *m = cfg__reader_module(r, addr);
	const struct cfg_sym *s = m ? cfg__module_sym_at(m, addr) : NULL;
	if (s) {
		snprintf(name, size, "%s", s->name);
		if (start)
			*start = s->addr;
		return 0;
	}
	const char *sn;
	uint64_t slot;
	if (m && cfg__reader_stub(r, addr, &slot, &sn) && *sn) {
		snprintf(name, size, "%s@plt", sn);
		if (start)
			*start = addr;
		return 0;
	}
	return -ENOENT;
}

const char *cfg__reader_name_at(struct cfg_reader *r, uint64_t addr, char *buf, size_t size)
{
	uint64_t start = 0;
	if (cfg_reader__symbolize(r, addr, buf, size, &start) == 0 && start == addr)
		return buf;
	buf[0] = '\0';
	return buf;
}

static bool is_cold_name(const char *n)
{
	return strstr(n, ".cold") != NULL;
}

bool cfg__reader_is_entry(struct cfg_reader *r, uint64_t addr)
{
	char name[256];
	uint64_t start = 0;
	if (user_symbolize(r, addr, name, sizeof(name), &start) == 0 && start == addr)
		return !is_cold_name(name);
	struct cfg_module *m = cfg__reader_module(r, addr);
	if (!m)
		return false;
	const struct cfg_sym *s = cfg__module_sym_at(m, addr);
	if (s && s->addr == addr)
		return !is_cold_name(s->name);
	const struct cfg_fde *f = cfg__module_fde_at(m, addr);
	return f && f->start == addr && f->entry;
}

int cfg_reader__lookup(struct cfg_reader *r, const char *name, uint64_t *addr)
{
	if (r->ulookup && r->ulookup(r->uarg, name, addr) == 0)
		return 0;
	/* a PLT stub's NAME@plt is among a file's symbols as elf/ names it
	 * (cfg_reader__open_elf); a live process's are resolved by elf/
	 * before cfg/ is asked (src/session-cfg.c) */
	for (size_t i = 0; i < r->nmods; i++) {
		struct cfg_module *m = cfg__reader_module(r, r->mods[i].lo);
		if (!m)
			continue;
		for (size_t j = 0; j < m->nsyms; j++)
			if (strcmp(m->syms[j].name, name) == 0) {
				*addr = m->syms[j].addr;
				return 0;
			}
	}
	return cfg__reader_err(r, -ENOENT, "no function named %s", name);
}

int cfg_reader__function_at(struct cfg_reader *r, uint64_t addr, uint64_t *entry)
{
	struct cfg_module *m = cfg__reader_module(r, addr);
	const struct cfg_fde *f = m ? cfg__module_fde_at(m, addr) : NULL;
	char name[256];
	uint64_t start;
	/* one FDE covers all of .plt, each stub is a function of its own */
	if (cfg_reader__symbolize(r, addr, name, sizeof(name), &start) == 0 &&
	    cfg__reader_stub(r, start, NULL, NULL)) {
		*entry = start;
		return 0;
	}
	if (f && cfg__reader_cold_parent(r, addr, entry))
		return 0;
	if (f && f->entry) {
		*entry = f->start;
		return 0;
	}
	if (cfg_reader__symbolize(r, addr, name, sizeof(name), &start) == 0) {
		char *cold = strstr(name, ".cold");
		if (cold) {	/* the parent of a cold part */
			*cold = '\0';
			if (cfg_reader__lookup(r, name, entry) == 0)
				return 0;
		}
		if (!f) {
			*entry = start;
			return 0;
		}
	}
	*entry = f ? f->start : addr;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int cfg_reader__function_starts(struct cfg_reader *r, uint64_t addr, uint64_t **starts,
				size_t *count)
{
	struct cfg_module *m = cfg__reader_module(r, addr);
	*starts = NULL;
	*count = 0;
	if (!m)
		return cfg__reader_err(r, -ENOENT, "no ELF image mapped at %#lx", (unsigned long)addr);
	uint64_t *v = malloc((m->nfdes + m->nentries + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < m->nfdes; i++)
		if (m->fdes[i].entry && !cfg__reader_stub(r, m->fdes[i].start, NULL, NULL) &&
		    !cfg__reader_cold_parent(r, m->fdes[i].start, NULL))
			v[n++] = m->fdes[i].start;
	for (size_t i = 0; i < m->nentries; i++)
		if (cfg__reader_is_code(r, m->entries[i]))
			v[n++] = m->entries[i];
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!k || v[k - 1] != v[i])
			v[k++] = v[i];
	n = k;
	*starts = v;
	*count = n;
	return 0;
}

/* ------------------------------------------------------------ noreturn */

static const char *const noreturn_names[] = {
	"exit", "_exit", "_Exit", "quick_exit", "abort", "__stack_chk_fail",
	"__stack_chk_fail_local", "__assert_fail", "__assert_perror_fail", "__assert",
	"__fortify_fail", "__chk_fail", "__libc_fatal", "__cxa_throw", "__cxa_rethrow",
	"__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_call_unexpected",
	"__cxa_throw_bad_array_new_length", "__cxa_pure_virtual", "_Unwind_Resume",
	"_ZSt9terminatev", "pthread_exit", "__pthread_exit", "thrd_exit", "longjmp",
	"_longjmp", "siglongjmp", "__longjmp_chk", "err", "errx", "verr", "verrx",
	"__libc_start_main", "__libc_start_call_main", "_dl_signal_error", "__malloc_assert",
	"malloc_printerr", "__libc_dynarray_at_failure",
	NULL
};

static size_t base_len(const char *name)
{
	const char *at = strchr(name, '@');
	return at ? (size_t)(at - name) : strlen(name);
}

bool cfg__noreturn_name(const char *name)
{
	size_t n = base_len(name);
	if (n == 0)
		return false;
	for (size_t i = 0; noreturn_names[i]; i++)
		if (strlen(noreturn_names[i]) == n && memcmp(noreturn_names[i], name, n) == 0)
			return true;
	/* C++ library: std::__throw_* */
	return strncmp(name, "_ZSt", 4) == 0 && strstr(name, "__throw_") != NULL &&
	       (size_t)(strstr(name, "__throw_") - name) < n;
}
