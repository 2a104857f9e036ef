/* function.c: a built function's accessors (cfg.h), and the names of its
 * enums. */
#include "cfg/internal.h"

uint64_t cfg_function__entry(const struct cfg_function *f) { return f->entry; }
const char *cfg_function__name(const struct cfg_function *f) { return f->name; }
bool cfg_function__noreturn(const struct cfg_function *f) { return f->noreturn; }
size_t cfg_function__unresolved_count(const struct cfg_function *f) { return f->unresolved; }
size_t cfg_function__insn_count(const struct cfg_function *f) { return f->ninsns; }
size_t cfg_function__range_count(const struct cfg_function *f) { return f->nranges; }
size_t cfg_function__block_count(const struct cfg_function *f) { return f->nblocks; }
size_t cfg_function__entry_block(const struct cfg_function *f) { return f->entry_block; }
size_t cfg_function__edge_count(const struct cfg_function *f) { return f->nedges; }
size_t cfg_function__jump_table_count(const struct cfg_function *f) { return f->ntables; }
size_t cfg_function__call_count(const struct cfg_function *f) { return f->ncalls; }
size_t cfg_function__loop_count(const struct cfg_function *f) { return f->nloops; }

enum cfg_error cfg_function__error(const struct cfg_function *f, uint64_t *at, const char **msg)
{
	if (at)
		*at = f->err_at;
	if (msg)
		*msg = f->err_msg;
	return f->err;
}

const struct cfg_range *cfg_function__range(const struct cfg_function *f, size_t i)
{
	return i < f->nranges ? &f->ranges[i] : NULL;
}

const struct cfg_range *cfg_function__range_of(const struct cfg_function *f, uint64_t addr)
{
	for (size_t i = 0; i < f->nranges; i++)
		if (addr >= f->ranges[i].start && addr < f->ranges[i].end)
			return &f->ranges[i];
	return NULL;
}

const struct cfg_block *cfg_function__block(const struct cfg_function *f, size_t i)
{
	return i < f->nblocks ? &f->blocks[i] : NULL;
}

ssize_t cfg_function__block_at(const struct cfg_function *f, uint64_t addr)
{
	/* first block starting above addr */
	size_t lo = UTIL_UPPER_BOUND(f->blocks, f->nblocks, start, addr);
	/* overlapping blocks: look back a little */
	for (size_t k = lo; k > 0 && lo - k < 8; k--)
		if (addr >= f->blocks[k - 1].start && addr < f->blocks[k - 1].end)
			return (ssize_t)(k - 1);
	return -1;
}

const struct cfg_edge *cfg_function__edge(const struct cfg_function *f, size_t i)
{
	return i < f->nedges ? &f->edges[i] : NULL;
}

const struct cfg_jump_table *cfg_function__jump_table(const struct cfg_function *f, size_t i)
{
	return i < f->ntables ? &f->tables[i] : NULL;
}

const struct cfg_call *cfg_function__call(const struct cfg_function *f, size_t i)
{
	return i < f->ncalls ? &f->calls[i] : NULL;
}

const struct cfg_loop *cfg_function__loop(const struct cfg_function *f, size_t i)
{
	return i < f->nloops ? &f->loops[i] : NULL;
}

const char *cfg_edge_kind_name(enum cfg_edge_kind k)
{
	static const char *const n[] = { "fallthrough", "taken", "not_taken", "jump",
					 "jump_table", "call_return", "tail_call" };
	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

const char *cfg_error_name(enum cfg_error e)
{
	static const char *const n[] = { "none", "unreadable", "invalid instruction",
					 "branch outside code", "limit", "unresolved indirect jump" };
	return (unsigned)e < sizeof(n) / sizeof(n[0]) ? n[e] : "?";
}
