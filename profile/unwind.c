/* unwind.c: walking the stacks of a stopped target, trusting only what
 * unwind information says.
 *
 * libunwind does the stepping, over accessors of our own: registers from
 * one PTRACE_GETREGS, memory through attach_target__read (read-only
 * mappings cached by page for the time of one stop), and unwind tables
 * found here rather than by libunwind-ptrace, which opens each module's
 * ELF file by the path in /proc/PID/maps: a deleted executable (a package
 * upgraded under a running service) then has no tables, and neither has a
 * static executable linked without .eh_frame_hdr (gcc -static passes no
 * --eh-frame-hdr). Here a module's .eh_frame_hdr search table is used where
 * it lies in the target's memory; a module mapped without one gets a table
 * built from the .eh_frame of the very file it maps (opened through
 * /proc/PID/map_files and checked by device and inode), served to libunwind
 * at an address no process can map. Either way libunwind reads the FDEs
 * themselves from the target.
 *
 * libunwind falls back to frame-pointer guesses where a pc has no unwind
 * information, and ends a walk as if complete when the guess finds a null
 * %rbp: a caller freeing code must not take that for the outermost frame.
 * So before each step the frame's pc is looked up in the tables (and in the
 * signal return trampoline's code): without information the walk stops
 * there, and says so.
 *
 * The tables are unwind-tables.c's.
 */
#include "profile/unwind.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/user.h>
#include <unistd.h>

const char *prof_walk_end_name(enum prof_walk_end e)
{
	switch (e) {
	case PROF_WALK_COMPLETE: return "complete";
	case PROF_WALK_NO_INFO: return "no_unwind_info";
	case PROF_WALK_BAD_FRAME: return "bad_frame";
	case PROF_WALK_TOO_DEEP: return "too_deep";
	case PROF_WALK_NO_REGS: return "no_registers";
	}
	return "?";
}

/* ------------------------------------------------------------- memory */

static void forget_pages(struct prof_unwinder *u)
{
	for (size_t i = 0; i < NPAGES; i++)
		u->pages[i].addr = 0;
}

/* Reads go only where the maps (read at this stop, the world stopped) say
 * there is memory: anywhere else the kernel would take an address below
 * the stack for the stack growing down (attach/ checks again). Memory that
 * cannot change while the world is stopped but by padrone's own writes
 * (which come after the walks of a stop) is read by page and kept. */
int prof__uw_read_mem(struct prof_unwinder *u, uint64_t addr, void *buf, size_t len)
{
	uint8_t *out = buf;

	while (len) {
		const struct attach_map *m = attach_maps__find(u->maps, addr);
		uint64_t page = addr & ~(uint64_t)(PAGE - 1);
		size_t off = (size_t)(addr - page), n = PAGE - off < len ? PAGE - off : len;
		if (!m)
			return -EFAULT;
		if (m->prot & ATTACH_MAP_W) {
			if (attach_target__read(u->t, addr, out, n) != (ssize_t)n)
				return -EFAULT;
		} else {
			struct uw_page *p = &u->pages[(page / PAGE) % NPAGES];
			if (p->addr != page) {
				p->addr = 0;
				if (attach_target__read(u->t, page, p->data, PAGE) != PAGE)
					return -EFAULT;
				p->addr = page;
			}
			memcpy(out, p->data + off, n);
		}
		addr += n;
		out += n;
		len -= n;
	}
	return 0;
}

static const struct uw_module *synth_module(const struct prof_unwinder *u, uint64_t addr)
{
	for (size_t i = 0; i < u->nmods; i++) {
		const struct uw_module *m = &u->mods[i];
		if (m->table && addr >= m->synth && addr < m->synth + m->table_bytes)
			return m;
	}
	return NULL;
}

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct walk *w = arg;

	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (addr >= SYNTH_BASE && addr < 2 * SYNTH_BASE) {
		const struct uw_module *m = synth_module(w->u, addr);
		if (!m)
			return -UNW_EINVAL;
		size_t off = (size_t)(addr - m->synth), n = m->table_bytes - off;
		*val = 0;
		memcpy(val, (const uint8_t *)m->table + off, n < sizeof *val ? n : sizeof *val);
		return 0;
	}
	if (prof__uw_read_mem(w->u, addr, val, sizeof *val) == 0)
		return 0;
	w->unreadable = addr;
	return -UNW_EINVAL;
}

/* ---------------------------------------------------------- registers */

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct user_regs_struct *r = &((struct walk *)arg)->regs;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	switch (reg) {
	case UNW_X86_64_RAX: *val = r->rax; break;
	case UNW_X86_64_RDX: *val = r->rdx; break;
	case UNW_X86_64_RCX: *val = r->rcx; break;
	case UNW_X86_64_RBX: *val = r->rbx; break;
	case UNW_X86_64_RSI: *val = r->rsi; break;
	case UNW_X86_64_RDI: *val = r->rdi; break;
	case UNW_X86_64_RBP: *val = r->rbp; break;
	case UNW_X86_64_RSP: *val = r->rsp; break;
	case UNW_X86_64_R8: *val = r->r8; break;
	case UNW_X86_64_R9: *val = r->r9; break;
	case UNW_X86_64_R10: *val = r->r10; break;
	case UNW_X86_64_R11: *val = r->r11; break;
	case UNW_X86_64_R12: *val = r->r12; break;
	case UNW_X86_64_R13: *val = r->r13; break;
	case UNW_X86_64_R14: *val = r->r14; break;
	case UNW_X86_64_R15: *val = r->r15; break;
	case UNW_X86_64_RIP: *val = r->rip; break;
	default: return -UNW_EBADREG;
	}
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static int acc_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
			 unw_word_t *off, void *arg)
{
	(void)as, (void)addr, (void)buf, (void)len, (void)off, (void)arg;
	return -UNW_ENOINFO;	/* the symbolizer names frames */
}

static int acc_dyn_list(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as, (void)addr, (void)arg;
	return -UNW_ENOINFO;
}

static void acc_put_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as, (void)pi, (void)arg;	/* libunwind frees what table searches make */
}

/* ---------------------------------------------------------- the walker */

static unw_accessors_t accessors = {
	.find_proc_info = prof__uw_find_proc_info,
	.put_unwind_info = acc_put_info,
	.get_dyn_info_list_addr = acc_dyn_list,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_proc_name,
};

static void forget_code(struct prof_unwinder *u)
{
	for (size_t i = 0; i < NCFI; i++)
		u->cfi[i].yes = -1;
	for (size_t i = 0; i < NSIGRET; i++)
		u->sigret[i].yes = -1;
	unw_flush_cache(u->as, 0, 0);
}

int prof_unwinder__new(struct attach_target *t, struct prof_unwinder **out, struct prof_error *err)
{
	struct prof_unwinder *u = calloc(1, sizeof *u);

	*out = NULL;
	if (!u || !(u->pages = calloc(NPAGES, sizeof *u->pages))) {
		free(u);
		prof__seterr(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	u->t = t;
	u->pid = attach_target__pid(t);
	u->next_synth = SYNTH_BASE;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u->pages);
		free(u);
		prof__seterr(err, -ENOMEM, "libunwind: cannot create an address space");
		return -ENOMEM;
	}
	/* the rules found per pc, kept from one stop to the next */
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	unw_set_cache_size(u->as, 1024, 0);
	forget_code(u);
	*out = u;
	return 0;
}

void prof_unwinder__free(struct prof_unwinder *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->nmods; i++)
		prof__uw_module_free(&u->mods[i]);
	free(u->mods);
	attach_maps__free(u->maps);
	unw_destroy_addr_space(u->as);
	free(u->pages);
	free(u);
}

/* FNV-1a over what places code: each executable mapping's range, offset
 * and file. */
static uint64_t exec_maps_sig(const struct attach_maps *m)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < attach_maps__count(m); i++) {
		const struct attach_map *mp = attach_maps__at(m, i);
		if (!(mp->prot & ATTACH_MAP_X))
			continue;
		uint64_t v[5] = { mp->start, mp->end, mp->offset, mp->inode,
				  (uint64_t)mp->dev_major << 32 | mp->dev_minor };
		const unsigned char *b = (const unsigned char *)v;
		for (size_t j = 0; j < sizeof v; j++)
			h = (h ^ b[j]) * 1099511628211ull;
		for (const char *q = mp->path; *q; q++)
			h = (h ^ (unsigned char)*q) * 1099511628211ull;
	}
	return h;
}

int prof_unwinder__sync(struct prof_unwinder *u)
{
	struct attach_maps *m;
	int rc = attach_maps__read(u->pid, &m);

	if (rc < 0)
		return rc;
	attach_maps__free(u->maps);
	u->maps = m;
	forget_pages(u);	/* padrone may have written code since */
	uint64_t sig = exec_maps_sig(m);
	if (sig == u->maps_sig && u->nmods)
		return 0;
	u->maps_sig = sig;
	forget_code(u);
	return prof__uw_modules_update(u);
}

/* Is the code at pc the signal return trampoline (glibc's and musl's
 * __restore_rt: mov $15,%rax; syscall), the frame a handler returns to?
 * Read from the code itself, so that a trampoline without unwind
 * information is still known. */
static bool is_sigreturn(struct prof_unwinder *u, uint64_t pc)
{
	static const uint8_t restore_rt[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	size_t h = (size_t)((pc ^ (pc >> 12)) % NSIGRET);
	uint8_t code[9];

	if (u->sigret[h].yes >= 0 && u->sigret[h].pc == pc)
		return u->sigret[h].yes;
	bool yes = prof__uw_read_mem(u, pc, code, sizeof code) == 0 && !memcmp(code, restore_rt, sizeof code);
	u->sigret[h].pc = pc;
	u->sigret[h].yes = yes;
	return yes;
}

/* Has pc (as libunwind looks it up) unwind information? */
static bool has_info(struct walk *w, uint64_t pc)
{
	struct prof_unwinder *u = w->u;
	size_t h = (size_t)((pc ^ (pc >> 10)) % NCFI);
	unw_proc_info_t pi;

	if (u->cfi[h].yes >= 0 && u->cfi[h].pc == pc)
		return u->cfi[h].yes;
	memset(&pi, 0, sizeof pi);
	bool yes = prof__uw_find_proc_info(u->as, pc, &pi, 0, w) == 0;
	u->cfi[h].pc = pc;
	u->cfi[h].yes = yes;
	return yes;
}

/* Why pc has no unwind information, in words. */
static void no_info_why(struct prof_unwinder *u, uint64_t pc, char *buf, size_t size)
{
	const struct attach_map *mp = attach_maps__find(u->maps, pc);
	struct uw_module *m = prof__uw_module_at(u, pc);

	if (!mp)
		snprintf(buf, size, "0x%" PRIx64 " is not mapped", pc);
	else if (!(mp->prot & ATTACH_MAP_X))
		snprintf(buf, size, "0x%" PRIx64 " is not in executable memory (%s)", pc,
			 *mp->path ? mp->path : "anonymous");
	else if (!m)
		snprintf(buf, size, "0x%" PRIx64 " is in %s, which has no unwind information", pc,
			 *mp->path ? mp->path : "anonymous memory");
	else if (m->info < 0)
		snprintf(buf, size, "no unwind information for 0x%" PRIx64 " in %s: %s", pc, m->path,
			 m->why);
	else
		snprintf(buf, size, "no FDE of %s covers 0x%" PRIx64, m->path, pc);
}

static void stop_at(struct prof_walk_stop *stop, enum prof_walk_end why, size_t frame,
		    uint64_t pc, uint64_t sp)
{
	stop->why = why;
	stop->frame = frame;
	stop->pc = pc;
	stop->sp = sp;
	stop->msg[0] = '\0';
}

size_t prof_unwinder__walk(struct prof_unwinder *u, pid_t tid, struct prof_walk_frame *frames,
			   size_t max, struct prof_walk_stop *stop)
{
	struct walk w = { .u = u };
	unw_cursor_t cur;
	size_t n = 0;
	bool interrupted = false;
	int rc;

	stop_at(stop, PROF_WALK_NO_REGS, 0, 0, 0);
	if ((rc = attach_target__get_regs(u->t, tid, &w.regs)) < 0) {
		snprintf(stop->msg, sizeof stop->msg, "the registers of thread %d cannot be read: %s",
			 (int)tid, strerror(-rc));
		return 0;
	}
	stop_at(stop, PROF_WALK_NO_REGS, 0, w.regs.rip, w.regs.rsp);
	if (!max || !u->maps || (rc = unw_init_remote(&cur, u->as, &w)) < 0) {
		snprintf(stop->msg, sizeof stop->msg, "libunwind cannot start on thread %d: %s",
			 (int)tid, u->maps ? unw_strerror(rc) : "no maps read");
		return 0;
	}
	for (;;) {
		unw_word_t pc = 0, sp = 0;
		unw_save_loc_t loc = { .type = UNW_SLT_NONE };
		unw_get_reg(&cur, UNW_REG_IP, &pc);
		unw_get_reg(&cur, UNW_REG_SP, &sp);
		if (n && !pc) {	/* nothing returns to 0: not a frame */
			stop->why = PROF_WALK_BAD_FRAME;
			snprintf(stop->msg, sizeof stop->msg, "the frame at pc 0x%" PRIx64 " returns "
				 "to address 0", stop->pc);
			break;
		}
		if (n && unw_get_save_loc(&cur, UNW_X86_64_RIP, &loc) < 0)
			loc.type = UNW_SLT_NONE;
		frames[n] = (struct prof_walk_frame){ .pc = pc, .sp = sp, .interrupted = interrupted,
			.pc_at = loc.type == UNW_SLT_MEMORY ? loc.u.addr : 0 };
		stop_at(stop, PROF_WALK_COMPLETE, n, pc, sp);
		if (++n == max) {
			stop->why = PROF_WALK_TOO_DEEP;
			snprintf(stop->msg, sizeof stop->msg, "more than %zu frames", max);
			break;
		}
		/* a return address is looked up at the call before it */
		bool tramp = is_sigreturn(u, pc);
		if (!tramp && !has_info(&w, n == 1 || interrupted ? pc : pc - 1)) {
			stop->why = PROF_WALK_NO_INFO;
			no_info_why(u, n == 1 || interrupted ? pc : pc - 1, stop->msg, sizeof stop->msg);
			break;
		}
		w.unreadable = 0;
		int s = unw_step(&cur);
		if (s > 0 && w.unreadable) {	/* libunwind took what it could not read for 0 */
			s = -UNW_EINVAL;
		}
		if (s == 0)
			break;
		if (s < 0) {
			stop->why = PROF_WALK_BAD_FRAME;
			if (w.unreadable)
				snprintf(stop->msg, sizeof stop->msg, "the frame at pc 0x%" PRIx64 " cannot "
					 "be unwound: its unwind information leads to 0x%" PRIx64 ", which "
					 "is not mapped", (uint64_t)pc, w.unreadable);
			else
				snprintf(stop->msg, sizeof stop->msg, "the frame at pc 0x%" PRIx64 " cannot "
					 "be unwound: %s", (uint64_t)pc, unw_strerror(s));
			break;
		}
		interrupted = tramp;
	}
	return n;
}

int prof_unwinder__fde_starts(struct prof_unwinder *u, uint64_t addr, uint64_t **starts,
			      size_t *count)
{
	struct uw_module *m = u->maps ? prof__uw_module_at(u, addr) : NULL;
	struct walk w = { .u = u };
	int rc;

	*starts = NULL;
	*count = 0;
	if (!m)
		return -ENOENT;
	if ((rc = prof__uw_module_tables(u, m)) < 0)
		return rc;
	size_t n = m->di.u.rti.table_len * sizeof(unw_word_t) / 8;
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unw_word_t pair;	/* int32 start, int32 fde, off segbase */
		if (acc_mem(u->as, m->di.u.rti.table_data + 8 * i, &pair, 0, &w) < 0) {
			free(v);
			return -EFAULT;
		}
		v[i] = m->di.u.rti.segbase + (uint64_t)(int64_t)(int32_t)(uint32_t)pair;
	}
	*starts = v;
	*count = n;
	return 0;
}
