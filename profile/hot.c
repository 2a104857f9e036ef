/* hot.c: samples ranked by function.
 *
 * Each distinct chain is walked once: its first IP gets the self count, and
 * every distinct function on it gets the inclusive count (once per sample,
 * so recursion does not inflate it). Return addresses are checked against
 * the code before them: one not preceded by a call instruction ends the
 * chain (a frame-pointer walk through code without frame pointers yields
 * such garbage). An address that no symbol or FDE covers is attributed as
 * PADRONE does: the caller's call instruction, just before the next return
 * address in the chain, names the callee's entry.
 */
#include "profile/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 512

struct prof_hot {
	struct prof_func *funcs;
	size_t n, cap;
	/* (module, start) -> index, open addressing */
	uint64_t *keys;
	uint32_t *vals;
	size_t slots;
	struct prof_totals tot;
	uint64_t cut;
	/* memo of code bytes before return addresses */
	uint64_t *code_addr;
	uint8_t (*code)[8];
	int8_t *code_ok;
	size_t code_slots, code_n;
	/* per-chain scratch: functions already counted inclusively */
	uint32_t seen[MAX_FRAMES];
	size_t nseen;
	/* every chain as counted (prof_hot__stack): its frames in frames[] */
	struct hot_stack { size_t first, n; uint64_t count; } *stacks;
	size_t nstacks, stacks_cap;
	struct prof_hot_frame *frames;
	size_t nframes, frames_cap;
};

static uint64_t mix(uint64_t k)
{
	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ull;
	k ^= k >> 29;
	return k ? k : 1;
}

/* ------------------------------------------------------------ code bytes */

static int grow_code(struct prof_hot *h)
{
	size_t ns = h->code_slots ? h->code_slots * 2 : 1024;
	uint64_t *a = calloc(ns, sizeof(*a));
	uint8_t (*c)[8] = calloc(ns, sizeof(*c));
	int8_t *ok = calloc(ns, sizeof(*ok));

	if (!a || !c || !ok) {
		free(a);
		free(c);
		free(ok);
		return -ENOMEM;
	}
	for (size_t i = 0; i < h->code_slots; i++) {
		if (!h->code_addr[i])
			continue;
		size_t j = mix(h->code_addr[i]) & (ns - 1);
		while (a[j])
			j = (j + 1) & (ns - 1);
		a[j] = h->code_addr[i];
		memcpy(c[j], h->code[i], 8);
		ok[j] = h->code_ok[i];
	}
	free(h->code_addr);
	free(h->code);
	free(h->code_ok);
	h->code_addr = a;
	h->code = c;
	h->code_ok = ok;
	h->code_slots = ns;
	return 0;
}

/* The 8 bytes just before ret, read from the target once. */
static const uint8_t *code_before(struct prof_hot *h, struct prof_symbolizer *sym, uint64_t ret)
{
	if ((h->code_n + 1) * 2 > h->code_slots && grow_code(h) < 0)
		return NULL;
	size_t j = mix(ret) & (h->code_slots - 1);
	for (; h->code_addr[j]; j = (j + 1) & (h->code_slots - 1))
		if (h->code_addr[j] == ret)
			return h->code_ok[j] ? h->code[j] : NULL;
	h->code_addr[j] = ret;
	h->code_n++;
	h->code_ok[j] = ret > 8 && prof_symbolizer__read(sym, ret - 8, h->code[j], 8) == 8;
	return h->code_ok[j] ? h->code[j] : NULL;
}

/* Whether the instruction ending at ret is a call (the forms compilers
 * emit: e8 rel32; ff /2 with a register, [reg], [reg+disp8], [rip+disp32],
 * [reg+disp32], with or without SIB). b holds the 8 bytes before ret. */
static bool is_call_before(const uint8_t *b)
{
	const uint8_t *e = b + 8;

	if (e[-5] == 0xe8)
		return true;
	for (int len = 2; len <= 7; len++) {
		const uint8_t *p = e - len;
		if (p[0] != 0xff || ((p[1] >> 3) & 7) != 2)
			continue;
		unsigned mod = p[1] >> 6, rm = p[1] & 7;
		int want = 2 + (mod != 3 && rm == 4);	/* opcode, modrm, sib */
		if (mod == 1)
			want += 1;
		else if (mod == 2 || (mod == 0 && rm == 5))
			want += 4;
		else if (mod == 0 && rm == 4 && len >= 3 && (p[2] & 7) == 5)
			want += 4;
		if (want == len)
			return true;
	}
	return false;
}

/* The entry of the function a call instruction ending at ret went to, or
 * 0 when the call is indirect through a register. */
static uint64_t callee_of(struct prof_symbolizer *sym, const uint8_t *b, uint64_t ret)
{
	const uint8_t *e = b + 8;
	int32_t d;

	if (e[-5] == 0xe8) {
		memcpy(&d, e - 4, 4);
		return ret + (uint64_t)(int64_t)d;
	}
	if (e[-6] == 0xff && e[-5] == 0x15) {	/* call *disp32(%rip) */
		uint64_t target = 0;
		memcpy(&d, e - 4, 4);
		if (prof_symbolizer__read(sym, ret + (uint64_t)(int64_t)d, &target, 8) == 8)
			return target;
	}
	return 0;
}

/* ------------------------------------------------------------ functions */

static long func_index(struct prof_hot *h, const struct prof_sym *s)
{
	uint64_t key = mix((uint64_t)(uintptr_t)s->module ^ mix(s->start));

	if ((h->n + 1) * 2 > h->slots) {
		size_t ns = h->slots ? h->slots * 2 : 1024;
		uint64_t *k = calloc(ns, sizeof(*k));
		uint32_t *v = calloc(ns, sizeof(*v));
		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		for (size_t i = 0; i < h->slots; i++) {
			if (!h->vals[i])
				continue;
			size_t j = h->keys[i] & (ns - 1);
			while (v[j])
				j = (j + 1) & (ns - 1);
			k[j] = h->keys[i];
			v[j] = h->vals[i];
		}
		free(h->keys);
		free(h->vals);
		h->keys = k;
		h->vals = v;
		h->slots = ns;
	}
	size_t j = key & (h->slots - 1);
	for (; h->vals[j]; j = (j + 1) & (h->slots - 1)) {
		struct prof_func *f = &h->funcs[h->vals[j] - 1];
		if (h->keys[j] == key && f->start == s->start && f->module == s->module)
			return h->vals[j] - 1;
	}
	if (h->n == h->cap) {
		size_t nc = h->cap ? h->cap * 2 : 256;
		void *p = realloc(h->funcs, nc * sizeof(*h->funcs));
		if (!p)
			return -ENOMEM;
		h->funcs = p;
		h->cap = nc;
	}
	h->funcs[h->n] = (struct prof_func){ .name = s->name, .module = s->module,
					     .build_id = s->build_id, .start = s->start,
					     .end = s->end, .bounds = s->bounds };
	h->keys[j] = key;
	h->vals[j] = (uint32_t)++h->n;
	return (long)h->n - 1;
}

int prof_hot__add(struct prof_hot *h, const struct prof_sym *s, uint64_t self, uint64_t inclusive)
{
	long f = func_index(h, s);

	if (f < 0)
		return (int)f;
	h->funcs[f].self += self;
	h->funcs[f].inclusive += inclusive;
	return 0;
}

/* Names the function holding addr. caller_ret is the next return address
 * of the chain (0 if none): its call instruction may name the entry. */
static void resolve(struct prof_hot *h, struct prof_symbolizer *sym, uint64_t addr,
		    uint64_t caller_ret, struct prof_sym *out)
{
	if (prof_symbolizer__lookup(sym, addr, out) == 0 || addr >= PROF_KERNEL_START ||
	    !caller_ret)
		return;
	const uint8_t *b = code_before(h, sym, caller_ret);
	uint64_t entry = b ? callee_of(sym, b, caller_ret) : 0;
	uint64_t ms, me;
	if (!entry || entry > addr ||
	    prof_symbolizer__mapping(sym, addr, &ms, &me, NULL) < 0 || entry < ms)
		return;
	out->start = entry;
	out->end = prof_symbolizer__limit(sym, entry + 1);
	if (out->end <= addr)
		out->end = addr + 1;
	out->bounds = PROF_BOUNDS_CALLCHAIN;
	out->name = prof_symbolizer__intern(sym, "sub_%llx", (unsigned long long)entry);
}

/* Room for one more chain of up to n frames in stacks[] and frames[]. */
static int reserve_stack(struct prof_hot *h, size_t n)
{
	if (h->nstacks == h->stacks_cap) {
		size_t nc = h->stacks_cap ? h->stacks_cap * 2 : 256;
		void *p = realloc(h->stacks, nc * sizeof(*h->stacks));
		if (!p)
			return -ENOMEM;
		h->stacks = p;
		h->stacks_cap = nc;
	}
	if (h->nframes + n > h->frames_cap) {
		size_t nc = h->frames_cap ? h->frames_cap : 4096;
		while (nc < h->nframes + n)
			nc *= 2;
		void *p = realloc(h->frames, nc * sizeof(*h->frames));
		if (!p)
			return -ENOMEM;
		h->frames = p;
		h->frames_cap = nc;
	}
	return 0;
}

static int count_chain(struct prof_hot *h, struct prof_symbolizer *sym, const uint64_t *ips,
		       size_t n, uint64_t count)
{
	h->nseen = 0;
	if (n > MAX_FRAMES)
		n = MAX_FRAMES;
	if (reserve_stack(h, n) < 0)
		return -ENOMEM;
	struct hot_stack *st = &h->stacks[h->nstacks++];
	*st = (struct hot_stack){ .first = h->nframes, .count = count };
	for (size_t i = 0; i < n; i++) {
		uint64_t a = ips[i];
		/* ips[0] and the first user frame after kernel frames are
		 * interrupted IPs; the rest are return addresses */
		bool exact = i == 0 || (ips[i - 1] >= PROF_KERNEL_START && a < PROF_KERNEL_START);
		if (!exact && a < PROF_KERNEL_START) {
			const uint8_t *b = code_before(h, sym, a);
			if (!b || !is_call_before(b)) {
				h->cut += count;
				break;
			}
		}
		uint64_t next = 0;
		if (i + 1 < n && (ips[i + 1] < PROF_KERNEL_START) == (a < PROF_KERNEL_START))
			next = ips[i + 1];
		struct prof_sym s;
		resolve(h, sym, exact ? a : a - 1, next, &s);
		long f = func_index(h, &s);
		if (f < 0)
			return (int)f;
		h->frames[h->nframes++] = (struct prof_hot_frame){ .addr = a, .func = (uint32_t)f };
		st->n++;
		if (i == 0)
			h->funcs[f].self += count;
		if (i == 0 && a >= PROF_KERNEL_START)
			h->tot.kernel_samples += count;
		bool dup = false;
		for (size_t k = 0; k < h->nseen && !dup; k++)
			dup = h->seen[k] == (uint32_t)f;
		if (!dup) {
			h->seen[h->nseen++] = (uint32_t)f;
			h->funcs[f].inclusive += count;
		}
	}
	return 0;
}

static int cmp_func(const void *a, const void *b)
{
	const struct prof_func *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->inclusive != y->inclusive)
		return x->inclusive > y->inclusive ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

/* Hottest first; the stacks' frames follow their functions to their new
 * indices. */
static int sort_funcs(struct prof_hot *h)
{
	if (!h->n)	/* qsort's array may not be NULL, even when empty */
		return 0;
	struct tagged {
		struct prof_func f;	/* first: cmp_func compares these */
		uint32_t old;
	} *t = malloc(h->n * sizeof(*t));
	uint32_t *now = malloc(h->n * sizeof(*now));
	if (!t || !now) {
		free(t);
		free(now);
		return -ENOMEM;
	}
	for (size_t i = 0; i < h->n; i++)
		t[i] = (struct tagged){ h->funcs[i], (uint32_t)i };
	qsort(t, h->n, sizeof(*t), cmp_func);
	for (size_t i = 0; i < h->n; i++) {
		h->funcs[i] = t[i].f;
		now[t[i].old] = (uint32_t)i;
	}
	for (size_t i = 0; i < h->nframes; i++)
		h->frames[i].func = now[h->frames[i].func];
	free(t);
	free(now);
	return 0;
}

int prof_hot__new(const struct prof_totals *t, struct prof_hot **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	if (t)
		(*out)->tot = *t;
	return 0;
}

int prof_hot__rank(struct prof_hot *h)
{
	uint64_t total = h->tot.samples;

	if (sort_funcs(h) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		h->funcs[i].self_pct = total ? 100.0 * (double)h->funcs[i].self / (double)total : 0;
		h->funcs[i].inclusive_pct =
			total ? 100.0 * (double)h->funcs[i].inclusive / (double)total : 0;
	}
	return 0;
}

int prof_hot__build(const struct prof_sampler *smp, struct prof_symbolizer *sym,
		    struct prof_hot **out, struct prof_error *err)
{
	struct prof_hot *h;
	struct prof_totals t;
	uint64_t total = 0;
	int r = 0;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	prof_sampler__totals(smp, &t);
	t.kernel_samples = 0;	/* counted below, chain by chain */
	if (prof_hot__new(&t, &h) < 0) {
		prof__seterr(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	/* code mapped while sampling: the current maps first (and the JIT's
	 * perf map as it is now), then what the MMAP2 records said for code
	 * unmapped since */
	const struct prof_mmap *mm;
	size_t nmm = prof_sampler__mmaps(smp, &mm);
	prof_symbolizer__refresh(sym);	/* fails only if the target is gone */
	if (nmm && prof_symbolizer__note_mmaps(sym, mm, nmm) < 0) {
		prof__seterr(err, -ENOMEM, "%s", prof_symbolizer__errmsg(sym));
		prof_hot__free(h);
		return -ENOMEM;
	}
	for (size_t i = 0; i < prof_sampler__stack_count(smp); i++) {
		const uint64_t *ips;
		size_t n;
		uint64_t count;
		prof_sampler__stack(smp, i, &ips, &n, &count);
		total += count;
		r = count_chain(h, sym, ips, n, count);
		if (r < 0) {
			prof__seterr(err, r, "out of memory");
			prof_hot__free(h);
			return r;
		}
	}
	h->tot.samples = total;
	if (prof_hot__rank(h) < 0) {
		prof__seterr(err, -ENOMEM, "out of memory");
		prof_hot__free(h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

void prof_hot__free(struct prof_hot *h)
{
	if (!h)
		return;
	free(h->funcs);
	free(h->keys);
	free(h->vals);
	free(h->code_addr);
	free(h->code);
	free(h->code_ok);
	free(h->stacks);
	free(h->frames);
	free(h);
}

size_t prof_hot__count(const struct prof_hot *h)
{
	return h->n;
}

const struct prof_func *prof_hot__at(const struct prof_hot *h, size_t i)
{
	return i < h->n ? &h->funcs[i] : NULL;
}

const struct prof_totals *prof_hot__totals(const struct prof_hot *h)
{
	return &h->tot;
}

uint64_t prof_hot__chains_cut(const struct prof_hot *h)
{
	return h->cut;
}

size_t prof_hot__stack_count(const struct prof_hot *h)
{
	return h->nstacks;
}

int prof_hot__stack(const struct prof_hot *h, size_t i, const struct prof_hot_frame **frames,
		    size_t *n, uint64_t *count)
{
	if (i >= h->nstacks)
		return -ENOENT;
	*frames = h->frames + h->stacks[i].first;
	*n = h->stacks[i].n;
	*count = h->stacks[i].count;
	return 0;
}
