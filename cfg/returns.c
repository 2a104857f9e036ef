/* returns.c: which functions return, for the CFGs of their callers: a
 * fixpoint over the call graph, remembered per reader (build.c explores
 * each function; this file decides what the answers are). */
#include "cfg/internal.h"

#include <errno.h>

/* The summary to remember: once the budget ran out, "returns" may only
 * mean "a callee was not looked at", so it is not kept (UNKNOWN: ask again
 * in a later build). "Never returns" holds whatever the callees do, since
 * the ones not looked at were assumed to return. */
static enum cfg_ret to_memo(const struct cfg_reader *r, enum cfg_ret ret)
{
	return ret == CFG_RET_YES && r->callee_cut ? CFG_RET_UNKNOWN : ret;
}

/* ------------------------------------------------------------ noreturn
 *
 * Does a function return? It returns if a path from its entry reaches a
 * ret, or a call or tail call to a function that returns. That is a
 * fixpoint over the call graph: callees are analysed depth first, and a
 * callee already being analysed (recursion) is taken not to return until
 * shown otherwise. Answers that rest on such an assumption stay provisional
 * until the component's first function is done; if its answer contradicts
 * what was assumed, the component is analysed again. Answers only go from
 * "no" to "yes", so this ends. */

#define RET_VAL(state, index) ((uint32_t)(state) | (uint32_t)(index) << 8)

static void ret_depends(struct cfg_reader *r, uint32_t low)
{
	struct cfg_ret_frame *top = r->depth ? &r->frames[r->depth - 1] : NULL;
	if (top && low < top->low)
		top->low = low;
}

/* The answer known for entry (final, provisional or assumed); false if
 * none yet. */
bool cfg__ret_known(struct cfg_reader *r, uint64_t entry, enum cfg_ret *out)
{
	uint32_t *v = util_hmap__get(&r->rets, entry);
	if (!v || *v == CFG_RET_UNKNOWN)
		return false;
	uint32_t ix = *v >> 8;
	switch (*v & 0xff) {
	case CFG_RET_BUSY:
		r->frames[ix].used = true;
		ret_depends(r, ix);
		*out = r->frames[ix].assume;
		return true;
	case CFG_RET_PROV:
		ret_depends(r, r->prov[ix].low);
		*out = r->prov[ix].ret;
		return true;
	default:
		*out = (enum cfg_ret)*v;
		return true;
	}
}

int cfg__ret_push(struct cfg_reader *r, uint64_t entry)
{
	uint32_t k = r->depth;
	if (util_hmap__put(&r->rets, entry, RET_VAL(CFG_RET_BUSY, k)) < 0)
		return -ENOMEM;
	r->frames[k] = (struct cfg_ret_frame){ entry, CFG_RET_NO, false, k, (uint32_t)r->nprov };
	r->depth++;
	return 0;
}

/* Forget the provisional answers given since frame k was pushed. */
static void ret_drop(struct cfg_reader *r, const struct cfg_ret_frame *f)
{
	for (size_t i = f->mark; i < r->nprov; i++)
		util_hmap__put(&r->rets, r->prov[i].entry, CFG_RET_UNKNOWN);
	r->nprov = f->mark;
}

/* The top frame's analysis gave ret: must it be done again (the
 * assumption it was analysed under was used, and was wrong)? */
bool cfg__ret_again(struct cfg_reader *r, enum cfg_ret ret)
{
	struct cfg_ret_frame *f = &r->frames[r->depth - 1];
	if (!f->used || ret == f->assume || f->assume != CFG_RET_NO)
		return false;
	ret_drop(r, f);
	f->assume = ret;
	f->used = false;
	f->low = r->depth - 1;
	return true;
}

/* The top frame is done with answer ret: final if it rests on no frame
 * below (then so are the provisional answers of its component), else
 * provisional, and its caller rests on what it rests on. */
void cfg__ret_pop(struct cfg_reader *r, enum cfg_ret ret)
{
	struct cfg_ret_frame *f = &r->frames[--r->depth];
	if (f->low == r->depth) {
		for (size_t i = f->mark; i < r->nprov; i++)
			util_hmap__put(&r->rets, r->prov[i].entry, to_memo(r, r->prov[i].ret));
		r->nprov = f->mark;
		util_hmap__put(&r->rets, f->entry, to_memo(r, ret));
		return;
	}
	if (cfg__grow(&r->prov, &r->cprov, r->nprov + 1, sizeof(*r->prov)) < 0) {
		/* cannot keep it: ask again next time */
		util_hmap__put(&r->rets, f->entry, CFG_RET_UNKNOWN);
	} else {
		r->prov[r->nprov] = (struct cfg_ret_prov){ f->entry, (uint8_t)ret, f->low };
		util_hmap__put(&r->rets, f->entry, RET_VAL(CFG_RET_PROV, r->nprov));
		r->nprov++;
	}
	ret_depends(r, f->low);
}

/* Callee analysis is transitive (a callee's callees...): in a large C++
 * library one call can lead to thousands of functions. The budget bounds
 * what one cfg_function__build spends on it. */
enum cfg_ret cfg__callee_returns(struct cfg_reader *r, uint64_t entry)
{
	enum cfg_ret ret;
	if (cfg__ret_known(r, entry, &ret))
		return ret;
	if (!cfg__reader_is_code(r, entry))
		return CFG_RET_YES;
	if (r->depth >= CFG_MAX_CALLEE_DEPTH || r->callee_budget == 0) {
		r->callee_cut = true;	/* "returns", without looking */
		return CFG_RET_YES;
	}
	if (cfg__ret_push(r, entry) < 0)
		return CFG_RET_YES;
	do
		ret = cfg__may_return(r, entry) ? CFG_RET_YES : CFG_RET_NO;
	while (cfg__ret_again(r, ret));
	cfg__ret_pop(r, ret);
	return ret;
}
