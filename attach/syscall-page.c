/* attach/syscall-page.c: the page in the target through which remote
 * system calls run, so that a padrone killed in the middle of one leaves
 * the thread as it was.
 *
 * Pointed at a `syscall` found anywhere in the target's code, a thread
 * whose tracer dies runs that call and then whatever follows it, with
 * every signal blocked: it crashes. Pointed at the page's code instead
 * (syscall-page.S), it runs the call, then restores its own signal mask
 * and registers from the frame padrone wrote, and goes on where it was.
 *
 * The page is one anonymous mapping, read-only and executable, written
 * through /proc/PID/mem like the code cache; it stays in the target after
 * detach, and a later session finds it again by its first bytes, so only
 * the very first system call in a process (the mmap that makes the page)
 * goes through a raw `syscall`.
 */
#include "attach/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

extern const unsigned char attach_scpage_begin[], attach_scpage_frame[], attach_scpage_entry[],
	attach_scpage_end[];

#define SCPAGE_SIZE 4096u
#define SCPAGE_MAGIC_LEN 24	/* "padrone syscall page 2\0", padded */

/* The kernel's own restart codes (include/linux/errno.h), which a thread
 * stopped inside a system call shows in rax. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

static size_t frame_offset(void)
{
	return (size_t)(attach_scpage_frame - attach_scpage_begin);
}

void attach__scframe_fill(struct attach__scframe *f, const struct user_regs_struct *regs,
			  uint64_t mask)
{
	*f = (struct attach__scframe){
		.rip = regs->rip, .rax = regs->rax, .rcx = regs->rcx, .rdx = regs->rdx,
		.rsi = regs->rsi, .rdi = regs->rdi, .r8 = regs->r8, .r9 = regs->r9,
		.r10 = regs->r10, .r11 = regs->r11, .mask = mask,
	};
	/* Stopped inside a system call of its own: with no signal to deliver
	 * the kernel would make it again at resume, and so does the page. */
	long rax = (long)regs->rax;
	if ((long)regs->orig_rax < 0)
		return;
	if (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND) {
		f->rax = regs->orig_rax;
		f->rip = regs->rip - 2;
	} else if (rax == -ERESTART_RESTARTBLOCK) {
		f->rax = SYS_restart_syscall;
		f->rip = regs->rip - 2;
	}
}

static bool is_page(struct attach_target *t, uint64_t at)
{
	unsigned char magic[SCPAGE_MAGIC_LEN];
	return attach_target__read(t, at, magic, sizeof magic) == (ssize_t)sizeof magic &&
	       memcmp(magic, attach_scpage_begin, sizeof magic) == 0;
}

/* A thread of ours whose pc is in [at, at + SCPAGE_SIZE): one that was in
 * the page's code when an earlier padrone died, still restoring itself
 * from the frame a new one would overwrite. */
static bool page_in_use(struct attach_target *t, uint64_t at)
{
	for (size_t i = 0; i < t->nth; i++) {
		struct user_regs_struct r;
		if (t->th[i].stop == AT_RUNNING || t->th[i].zombie ||
		    attach__ptrace(PTRACE_GETREGS, t->th[i].tid, NULL, &r) < 0)
			continue;
		if (r.rip - at < SCPAGE_SIZE)
			return true;
	}
	return false;
}

/* The page an earlier session left, if any (and free to use). */
static uint64_t find_page(struct attach_target *t)
{
	struct attach_maps *m;
	uint64_t found = 0;
	if (attach_maps__read(t->pid, &m) < 0)
		return 0;
	for (size_t i = 0; i < attach_maps__count(m) && !found; i++) {
		const struct attach_map *mp = attach_maps__at(m, i);
		if (mp->path[0] || mp->prot != (ATTACH_MAP_R | ATTACH_MAP_X) ||
		    mp->end - mp->start != SCPAGE_SIZE)
			continue;
		if (is_page(t, mp->start) && !page_in_use(t, mp->start))
			found = mp->start;
	}
	attach_maps__free(m);
	return found;
}

static int make_page(struct attach_target *t, pid_t tid, uint64_t *page)
{
	uint64_t args[6] = { 0, SCPAGE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			     (uint64_t)-1, 0 };
	int64_t at = 0;
	int r = attach__raw_syscall(t, tid, SYS_mmap, args, &at);
	if (r < 0)
		return r;
	if (at < 0 || at % 4096)
		return attach__fail(t, at < 0 ? (int)at : -EFAULT, "cannot map the syscall page "
				    "in process %d (%s): %s", (int)t->pid, t->comm,
				    at < 0 ? strerror((int)-at) : "odd address");
	size_t len = (size_t)(attach_scpage_end - attach_scpage_begin);
	/* The magic last: a page half written is never taken for one. */
	r = attach_target__write(t, (uint64_t)at + SCPAGE_MAGIC_LEN,
				 attach_scpage_begin + SCPAGE_MAGIC_LEN, len - SCPAGE_MAGIC_LEN);
	if (r == 0)
		r = attach_target__write(t, (uint64_t)at, attach_scpage_begin, SCPAGE_MAGIC_LEN);
	if (r < 0) {
		uint64_t unmap[6] = { (uint64_t)at, SCPAGE_SIZE, 0, 0, 0, 0 };
		int64_t ignored;
		attach__raw_syscall(t, tid, SYS_munmap, unmap, &ignored);
		return r;
	}
	*page = (uint64_t)at;
	return 0;
}

int attach__scpage_entry(struct attach_target *t, pid_t tid, uint64_t *entry)
{
	if (t->no_sc_page)
		return -ENOEXEC;
	if (t->sc_page && !is_page(t, t->sc_page))
		t->sc_page = 0;	/* unmapped by the target itself */
	if (!t->sc_page)
		t->sc_page = find_page(t);
	if (!t->sc_page) {
		int r = make_page(t, tid, &t->sc_page);
		if (r < 0) {
			t->no_sc_page = true;	/* a raw `syscall` still works */
			return r;
		}
	}
	*entry = t->sc_page + (uint64_t)(attach_scpage_entry - attach_scpage_begin);
	return 0;
}

int attach__scpage_set_frame(struct attach_target *t, const struct attach__scframe *f)
{
	return attach_target__write(t, t->sc_page + frame_offset(), f, sizeof *f);
}

uint64_t attach__scpage_at(const struct attach_target *t, const unsigned char *sym)
{
	return t->sc_page + (uint64_t)(sym - attach_scpage_begin);
}

uint64_t attach__scpage_of(struct attach_target *t, uint64_t addr)
{
	uint64_t page = addr & ~(uint64_t)(SCPAGE_SIZE - 1);
	return addr && is_page(t, page) ? page : 0;
}
