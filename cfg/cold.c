/* Cold parts: code a compiler moved out of its function (gcc's FUNC.cold
 * in .text.unlikely) gets an FDE of its own. In a stripped image nothing
 * names it, and the cold part of a leaf function even starts in a
 * function's entry state, like a function reached by a tail call. What
 * tells them apart is how the rest of the module reaches them, so the
 * module's FDEs are swept once (linear decoding: compilers put no data in
 * FDE-covered code) for direct calls and jumps:
 *  - nothing calls a cold part, and no entry of the module is one;
 *  - jumps into it come from one other FDE only, its parent's;
 *  - if it starts in an entry state, they are all conditional: a branch
 *    to unlikely code is taken on a condition, while a tail call to a
 *    function that is only ever tail-called (gcc's tc_forward-like static
 *    functions, crt's register_tm_clones) is an unconditional jmp;
 *  - no symbol other than a ".cold" one starts there. */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FROM_NONE UINT32_MAX
#define FROM_MANY (UINT32_MAX - 1)
#define COLD_CALLED 1	/* a direct call targets it, or it is a module entry */
#define COLD_UNCOND 2	/* an unconditional jmp from another FDE enters it */
#define COLD_MAX_FDE (4u << 20)	/* larger "functions" are not swept */

static ssize_t fde_index(const struct cfg_module *m, uint64_t start)
{
	size_t lo = 0, hi = m->nfdes;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->fdes[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->nfdes && m->fdes[lo].start == start ? (ssize_t)lo : -1;
}

static void note_jump(uint32_t *from, uint8_t *flags, size_t to, uint32_t src, bool cond)
{
	if (from[to] == FROM_NONE)
		from[to] = src;
	else if (from[to] != src)
		from[to] = FROM_MANY;
	if (!cond)
		flags[to] |= COLD_UNCOND;
}

/* Decode FDE i linearly; note the calls and the jumps leaving it for FDE
 * starts. */
static int sweep_fde(struct cfg_reader *r, const struct cfg_module *m, size_t i, uint8_t **buf,
		     size_t *cap, uint32_t *from, uint8_t *flags)
{
	const struct cfg_fde *fd = &m->fdes[i];
	size_t len = (size_t)(fd->end - fd->start);
	if (len > COLD_MAX_FDE)
		return 0;
	if (cfg__grow(buf, cap, len + ZYDIS_MAX_INSTRUCTION_LENGTH, 1) < 0)
		return -ENOMEM;
	/* past the page cache: a sweep of libLLVM would fill it with the
	 * whole module inside one build, before any trim */
	ssize_t n = r->ops.read(r->ctx, fd->start, *buf, len);
	if (n <= 0)
		return 0;
	struct cfg_insn in;
	for (size_t off = 0; off < (size_t)n;) {
		cfg__decode_bytes(&r->dec, fd->start + off, *buf + off, (size_t)n - off, &in);
		if (in.kind == CFG_I_INVALID || in.kind == CFG_I_UNREADABLE || !in.len)
			break;
		off += in.len;
		if (in.kind != CFG_I_CALL && in.kind != CFG_I_JMP && in.kind != CFG_I_JCC)
			continue;
		if (in.target >= fd->start && in.target < fd->end)
			continue;
		ssize_t to = fde_index(m, in.target);
		if (to < 0)
			continue;
		if (in.kind == CFG_I_CALL)
			flags[to] |= COLD_CALLED;
		else
			note_jump(from, flags, (size_t)to, (uint32_t)i, in.kind == CFG_I_JCC);
	}
	return 0;
}

/* Does a symbol other than a cold part's start at addr? */
static bool named_function(struct cfg_reader *r, uint64_t addr)
{
	char name[256];
	uint64_t start;
	return cfg_reader__symbolize(r, addr, name, sizeof(name), &start) == 0 && start == addr &&
	       !strstr(name, ".cold");
}

static bool is_cold(struct cfg_reader *r, const struct cfg_module *m, size_t j,
		    const uint32_t *from, const uint8_t *flags)
{
	return !(flags[j] & COLD_CALLED) && from[j] < m->nfdes && from[j] != j &&
	       (!m->fdes[j].entry || !(flags[j] & COLD_UNCOND)) &&
	       !cfg__reader_stub(r, m->fdes[j].start, NULL, NULL) &&
	       !named_function(r, m->fdes[j].start);
}

static int find_colds(struct cfg_reader *r, struct cfg_module *m)
{
	size_t n = m->nfdes;
	uint32_t *from = malloc((n ? n : 1) * sizeof(*from));
	uint8_t *flags = calloc(n ? n : 1, 1), *cold = calloc(n ? n : 1, 1), *buf = NULL;
	size_t cap = 0;
	int err = from && flags && cold ? 0 : -ENOMEM;
	for (size_t i = 0; !err && i < n; i++)
		from[i] = FROM_NONE;
	for (size_t i = 0; !err && i < m->nentries; i++) {
		ssize_t k = fde_index(m, m->entries[i]);
		if (k >= 0)
			flags[k] |= COLD_CALLED;
	}
	for (size_t i = 0; !err && i < n; i++)
		err = sweep_fde(r, m, i, &buf, &cap, from, flags);
	size_t ncold = 0;
	for (size_t j = 0; !err && j < n; j++)
		ncold += cold[j] = is_cold(r, m, j, from, flags);
	if (!err && ncold && !(m->colds = malloc(ncold * sizeof(*m->colds))))
		err = -ENOMEM;
	for (size_t j = 0; !err && j < n; j++) {
		if (!cold[j])
			continue;
		uint32_t p = from[j];	/* a cold part entered from another */
		for (int step = 0; step < 8 && cold[p] && from[p] < n; step++)
			p = from[p];
		m->colds[m->ncolds++] = (struct cfg_cold){ m->fdes[j].start, m->fdes[p].start };
	}
	free(from);
	free(flags);
	free(cold);
	free(buf);
	return err;
}

/* The cold part whose FDE covers addr: its parent's entry. The module's
 * sweep gives it; failing that, a "FUNC.cold" symbol names the parent. */
bool cfg__reader_cold_parent(struct cfg_reader *r, uint64_t addr, uint64_t *parent)
{
	struct cfg_module *m = cfg__reader_module(r, addr);
	const struct cfg_fde *fd = m ? cfg__module_fde_at(m, addr) : NULL;
	if (!fd)
		return false;
	if (!m->cold_done) {
		m->cold_done = true;	/* once, even if it fails */
		if (find_colds(r, m) < 0) {
			free(m->colds);
			m->colds = NULL;
			m->ncolds = 0;
		}
	}
	size_t lo = 0, hi = m->ncolds;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->colds[mid].start < fd->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t p = 0;
	if (lo < m->ncolds && m->colds[lo].start == fd->start) {
		p = m->colds[lo].parent;
	} else {
		char name[256];
		uint64_t start;
		char *dot;
		if (cfg_reader__symbolize(r, fd->start, name, sizeof(name), &start) < 0 ||
		    start != fd->start || !(dot = strstr(name, ".cold")))
			return false;
		*dot = '\0';
		if (cfg_reader__lookup(r, name, &p) < 0)
			return false;
	}
	if (parent)
		*parent = p;
	return true;
}
