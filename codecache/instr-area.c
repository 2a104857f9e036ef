/* instr-area.c: the threads' state area of instrumented copies (issue 10;
 * the design is told in instr.c): the rings mapped in the target and in
 * padrone, the state blocks filled, the rows given to threads through their
 * gs_base, and rows kept right as threads are cloned, exit and fork. */
#include "codecache/instr.h"
#include "pipeline/cab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int remote(struct cc_instr *in, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		  uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret, const char *what)
{
	const uint64_t args[6] = { a0, a1, a2, a3, a4, a5 };
	int rc = cc__syscall(in->c, nr, args, ret);

	if (rc < 0)
		return rc;
	if (*ret < 0 && *ret > -4096)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, (int)*ret, "%s in process %d: %s", what,
				in->c->pid, strerror((int)-*ret));
	return 0;
}

/* The options of every ring of the function. Made while the target runs
 * and without their memory (populate_later): whoever consumes a ring
 * populates it. */
static struct cab_opts ring_opts(const struct cc_instr *in)
{
	return (struct cab_opts){ .sz = sizeof(struct cab_opts),
				  .mode = in->sampling ? CAB_SAMPLING : CAB_EXHAUSTIVE,
				  .chunk_bytes = in->o.chunk_bytes, .nchunks = in->o.nchunks,
				  .consumer_timeout_ms = in->o.consumer_timeout_ms,
				  .max_record_words = IS_GUARD_WORDS, .populate_later = true };
}

/* World stopped, the rings' range recorded: the one memfd all the rings
 * live in, made inside the target (its name in the area), and padrone's
 * own fd of it, opened while no thread of the target can have closed or
 * replaced the target's. */
int cc__instr_open_rings(struct cc_instr *in)
{
	uint64_t name_at = in->area->addr + (in->area->nrows + 1) * IS_ROW;
	char path[64];
	int64_t ret;
	int rc = remote(in, SYS_memfd_create, name_at, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0, 0,
			0, &ret, "memfd_create");

	if (rc < 0)
		return rc;
	in->rings_fd = (int)ret;
	in->rings_fd_open = true;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", in->c->pid, in->rings_fd);
	if ((in->rings_file = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -errno, "cannot open %s: %s", path,
				strerror(errno));
	return 0;
}

/* Ring i at slot i of the memfd, as it will be of the range in the target. */
static int make_ring(struct cc_instr *in, int fd, size_t i)
{
	struct cab_opts co = ring_opts(in);
	struct ring *rg = &in->rings[i];
	struct cab_layout l;
	int rc = cab_ring__create_at(fd, i * in->ring_stride, &co, &rg->r);

	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, rc, "ring %zu of %s: %s", i, in->name,
				cab_errmsg());
	cab_ring__layout(rg->r, &l);
	if (l.total_bytes > in->ring_stride)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -EINVAL, "a ring of %" PRIu64 " bytes "
				"in a slot of %" PRIu64, l.total_bytes, in->ring_stride);
	rg->map = in->rings_at + i * in->ring_stride;
	rg->len = l.total_bytes;
	return cab_ring__attach_producer(rg->r, in->c->pid) < 0 ?
		cc__fail(in->c, CC_PHASE_ALLOCATE, -EBUSY, "%s", cab_errmsg()) : 0;
}

/* Is the target's fd of the rings still their memfd? Between the two
 * stops of the install the target ran, and may have closed it and opened
 * another file under its number (a write through that mapping would
 * harm the file). */
static int same_memfd(struct cc_instr *in)
{
	char path[64];
	struct stat mine, theirs;

	snprintf(path, sizeof path, "/proc/%d/fd/%d", in->c->pid, in->rings_fd);
	if (fstat(in->rings_file, &mine) < 0 || stat(path, &theirs) < 0 ||
	    mine.st_dev != theirs.st_dev || mine.st_ino != theirs.st_ino) {
		in->rings_fd_open = false;	/* not ours to close any more */
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ESTALE, "process %d closed or replaced "
				"its fd %d, the rings' memfd padrone made, during the install: "
				"nothing was installed", in->c->pid, in->rings_fd);
	}
	return 0;
}

/* World stopped: the memfd over the whole range reserved for the rings
 * (one mmap: ring i lies at slot i of both), then closed in the target. */
int cc__instr_map_rings(struct cc_instr *in)
{
	int64_t ret;
	int rc = same_memfd(in);

	if (rc == 0)
		rc = remote(in, SYS_mmap, in->rings_at, in->rings_size, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_FIXED, (uint64_t)in->rings_fd, 0, &ret,
			    "mmap of the rings");
	if (rc < 0)
		return rc;
	remote(in, SYS_close, (uint64_t)in->rings_fd, 0, 0, 0, 0, 0, &ret, "close");
	in->rings_fd_open = false;
	close(in->rings_file);	/* the rings hold their own */
	in->rings_file = -1;
	return 0;
}

/* The rings out of the target: their memfd closed if still open, the
 * whole range reserved for them unmapped. */
void cc__instr_unmap_rings(struct cc_instr *in)
{
	int64_t ret;

	if (in->rings_fd_open)
		remote(in, SYS_close, (uint64_t)in->rings_fd, 0, 0, 0, 0, 0, &ret, "close");
	in->rings_fd_open = false;
	for (size_t i = 0; i < in->nrings; i++)
		in->rings[i].map = 0;
	if (in->rings_at)
		remote(in, SYS_munmap, in->rings_at, in->rings_size, 0, 0, 0, 0, &ret,
		       "munmap of the rings");
	in->rings_at = 0;
}

/* The range the rings go in, a slot (a ring's size in whole pages) per
 * row: reserved (PROT_NONE, no memory behind it) before the directory
 * records it, so that a later session unmaps whatever rings a padrone
 * killed inside the install had mapped there. */
int cc__instr_reserve_rings(struct cc_instr *in)
{
	struct cab_opts co = ring_opts(in);
	size_t bytes;
	int64_t ret;
	int rc;

	if ((rc = cab_ring__size(&co, &bytes)) < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, rc, "rings for %s: %s", in->name,
				cab_errmsg());
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	in->ring_stride = (bytes + page - 1) / page * page;
	uint64_t size = in->ring_stride * in->area->nrows;
	if ((rc = remote(in, SYS_mmap, 0, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, (uint64_t)-1, 0, &ret,
			 "reserving room for the rings")) < 0)
		return rc;
	in->rings_at = (uint64_t)ret;
	in->rings_size = size;
	return 0;
}

static int log2_exact(uint64_t v)
{
	int s = 0;

	while ((1ULL << s) < v)
		s++;
	return (1ULL << s) == v ? s : -1;
}

static void put_state(uint8_t *blk, size_t off, uint64_t v)
{
	memcpy(blk + off, &v, 8);
}

/* The function's state block in row i of its area (the sink row: nrows). */
uint64_t cc__instr_block_of(const struct cc_instr *in, size_t i)
{
	return in->area->addr + i * IS_ROW + in->section * IS_SIZE;
}

/* The sink row's address: the gs_base of threads with no ring. */
static uint64_t sink_row(const struct area *a)
{
	return a->addr + a->nrows * IS_ROW;
}

/* Thread i's state block (the sink when rg is NULL), no owner yet
 * (cc__instr_write_owners). */
static int fill_state(struct cc_instr *in, const struct ring *rg, uint64_t self, uint8_t *blk)
{
	memset(blk, 0, IS_SIZE);
	put_state(blk, IS_SELF, self);
	put_state(blk, IS_MAGICW, CAB_MAGIC);
	put_state(blk, IS_AREA, in->area->addr);
	put_state(blk, IS_AREA_SIZE, in->area->size);
	put_state(blk, IS_SINK, sink_row(in->area));
	put_state(blk, IS_GATE, cc__instr_gate(in, !in->off));
	for (size_t off = IS_JUNK_END; off < IS_SIZE; off += 8)
		put_state(blk, off, CAB_MAGIC);
	if (!rg) {
		put_state(blk, IS_PTR, self + IS_JUNK);
		put_state(blk, IS_MODE, IS_MODE_SINK);
		return 0;
	}
	struct cab_layout l;
	cab_ring__layout(rg->r, &l);
	int shift = log2_exact((uint64_t)l.chunk_words * 8);
	if (shift < 0 || l.meta_gap != IS_META_GAP)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -EINVAL, "ring chunks of %u bytes: "
				"instrumentation needs a power of two", l.chunk_words * 8);
	put_state(blk, IS_PTR, rg->map + l.data_offset);
	put_state(blk, IS_DATA, rg->map + l.data_offset);
	put_state(blk, IS_SHIFT, (uint64_t)shift);
	put_state(blk, IS_NCHUNKS, l.nchunks);
	put_state(blk, IS_CHUNK_BYTES, (uint64_t)l.chunk_words * 8);
	put_state(blk, IS_META, rg->map + l.meta_offset);
	put_state(blk, IS_META_STRIDE, l.meta_stride);
	put_state(blk, IS_MODE, in->sampling ? IS_MODE_SAMPLING : IS_MODE_EXHAUSTIVE);
	put_state(blk, IS_WAIT_NS, (uint64_t)l.wait_ms * 1000000u);
	put_state(blk, IS_TIMEOUT_NS, (uint64_t)l.consumer_timeout_ms * 1000000u);
	static const struct { size_t is; size_t lay; } words[] = {
		{ IS_A_PROD_SEQ, offsetof(struct cab_layout, prod_seq) },
		{ IS_A_CONS_SLEEPING, offsetof(struct cab_layout, cons_sleeping) },
		{ IS_A_CONS_SEQ, offsetof(struct cab_layout, cons_seq) },
		{ IS_A_PROD_WAITING, offsetof(struct cab_layout, prod_waiting) },
		{ IS_A_CONS_STATE, offsetof(struct cab_layout, cons_state) },
		{ IS_A_HEARTBEAT, offsetof(struct cab_layout, cons_heartbeat_ns) },
		{ IS_A_PROD_DROPPING, offsetof(struct cab_layout, prod_dropping) },
		{ IS_A_DROPPED_RECORDS, offsetof(struct cab_layout, dropped_records) },
		{ IS_A_DROPPED_WORDS, offsetof(struct cab_layout, dropped_words) },
		{ IS_A_PROD_WAITS, offsetof(struct cab_layout, prod_waits) },
		{ IS_A_PROD_WAIT_NS, offsetof(struct cab_layout, prod_wait_ns) },
	};
	for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
		uint32_t off;
		memcpy(&off, (const char *)&l + words[i].lay, 4);
		put_state(blk, words[i].is, rg->map + off);
	}
	return 0;
}

static int read_word(const struct cc_instr *in, size_t i, size_t off, uint64_t *out)
{
	if (i >= in->nrings)
		return -EINVAL;
	ssize_t n = attach_target__read(in->t, cc__instr_block_of(in, i) + off, out, sizeof *out);
	return n == (ssize_t)sizeof *out ? 0 : n < 0 ? (int)n : -EIO;
}

int cc_instr__stub_calls(const struct cc_instr *in, size_t i, uint64_t *out)
{
	return read_word(in, i, IS_STUB_CALLS, out);
}

int cc_instr__calls(const struct cc_instr *in, size_t i, uint64_t *out)
{
	return in->counts_calls ? read_word(in, i, IS_CALLS, out) : -ENOTSUP;
}

static int thread_regs(struct cc_instr *in, pid_t tid, struct user_regs_struct *regs)
{
	int rc = attach_target__get_regs(in->c->t, tid, regs);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot read the registers of "
				"thread %d: %s", tid, attach_target__errmsg(in->c->t));
	return 0;
}

/* Every thread's gs must be free: fs is glibc's TLS, gs normally 0. */
int cc__instr_check_gs(struct cc_instr *in, const pid_t *tids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		int rc = thread_regs(in, tids[i], &regs);
		if (rc < 0)
			return rc;
		if (regs.gs_base || regs.gs)
			return cc__fail(in->c, CC_PHASE_REDIRECT, -EBUSY, "thread %d of process %d "
					"uses gs (gs_base 0x%llx), which instrumentation needs; "
					"nothing was changed", tids[i], in->c->pid,
					(unsigned long long)regs.gs_base);
	}
	return 0;
}

/* Joining an area: every thread's gs_base is in it (a thread cloned
 * while instrumented got a row or the sink, before it ran). */
int cc__instr_check_joined(struct cc_instr *in, const pid_t *tids, size_t n)
{
	const struct area *a = in->area;

	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		int rc = thread_regs(in, tids[i], &regs);
		if (rc < 0)
			return rc;
		if (regs.gs_base < a->addr || regs.gs_base >= a->addr + a->size)
			return cc__fail(in->c, CC_PHASE_REDIRECT, -EBUSY, "thread %d of process %d "
					"uses gs (gs_base 0x%llx, not padrone's), which "
					"instrumentation needs; nothing was changed", tids[i],
					in->c->pid, (unsigned long long)regs.gs_base);
	}
	return 0;
}

/* World stopped: no thread's gs_base in the area any more (the sink's
 * threads' too). */
void cc__instr_reset_gs(struct cc_cache *c, const struct area *a)
{
	pid_t tids[CI_MAX_THREADS];
	int n = attach_target__threads(c->t, tids, CI_MAX_THREADS);

	for (int i = 0; i < n && i < (int)CI_MAX_THREADS; i++) {
		struct user_regs_struct regs;
		if (attach_target__get_regs(c->t, tids[i], &regs) == 0 &&
		    regs.gs_base >= a->addr && regs.gs_base < a->addr + a->size)
			attach_target__set_gs_base(c->t, tids[i], 0);
	}
}

/* A stopped thread's fs base (its thread pointer), 0 if unknown: the
 * owner its row records, which the stub checks (instr-stub.S). */
static uint64_t fs_base_of(struct attach_target *t, pid_t tid)
{
	struct user_regs_struct regs;

	return attach_target__get_regs(t, tid, &regs) == 0 ? regs.fs_base : 0;
}

/* A new area (world stopped): a row for each of the nlive threads and
 * the spares, the sink row, the rings' name. Rows are given to threads at
 * the install's stop (cc__instr_take_rows). */
int cc__instr_new_area(struct cc_instr *in, size_t nlive)
{
	static const char name[] = "padrone-ring";
	size_t n = nlive + (in->o.spare_rings ? in->o.spare_rings : 4);
	struct area *a = calloc(1, sizeof *a);
	int rc;

	if (!a || !(a->tid = calloc(n, sizeof *a->tid)) || !(a->free = calloc(n, sizeof *a->free)) ||
	    !(a->owner = calloc(n, sizeof *a->owner))) {
		if (a) {
			free(a->tid);
			free(a->free);
		}
		free(a);
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	}
	pid_t own = attach_target__own_pid(in->c->t);
	a->own_pid = own > 0 ? own : 0;	/* unknown: the stub checks the fs base alone */
	a->refs = 1;
	a->nrows = n;
	a->size = (n + 1) * IS_ROW + 64;
	a->taken[0] = true;
	for (size_t i = 0; i < n; i++)
		a->free[i] = true;
	in->area = a;
	in->section = 0;
	if ((rc = cc_cache__alloc(in->c, CC_DATA, a->size, 64, in->fn.addr, &a->addr)) < 0)
		return rc;
	return cc_cache__write(in->c, a->addr + (n + 1) * IS_ROW, name, sizeof name);
}

/* World stopped, a new area: its rows to the threads there are now, in
 * order; those past its rows (born since the area was made, more than its
 * spares) get the sink (cc__instr_set_gs). How many rows were taken. */
size_t cc__instr_take_rows(struct cc_instr *in, const pid_t *tids, size_t nlive)
{
	struct area *a = in->area;
	size_t n = nlive < a->nrows ? nlive : a->nrows;

	for (size_t i = 0; i < a->nrows; i++) {
		a->tid[i] = i < n ? tids[i] : 0;
		a->free[i] = i >= n;
		a->owner[i] = i < n ? fs_base_of(in->c->t, tids[i]) : 0;
	}
	return n;
}

/* Joining the area of share: a free section. */
int cc__instr_join_area(struct cc_instr *in, const struct cc_instr *share)
{
	struct area *a = share->area;

	if (!cc_instr__active(share) || share->t != in->c->t || a->gone)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -EINVAL, "the instrumentation to share "
				"the threads' state with is not active in process %d", in->c->pid);
	for (unsigned k = 0; k < IS_SECTIONS; k++)
		if (!a->taken[k]) {
			a->taken[k] = true;
			a->refs++;
			in->area = a;
			in->section = k;
			return 0;
		}
	return cc__fail(in->c, CC_PHASE_REDIRECT, -ENOSPC, "%d functions are instrumented, "
			"the most at once; uninstrument one first", IS_SECTIONS);
}

/* The target running: the function's rings, one per row, made in the
 * memfd (not yet mapped in the target), then its state blocks in every row
 * (no thread reads them before the install: the entry still goes to the
 * original; their owners come at the install's stop). */
int cc__instr_make_rings(struct cc_instr *in)
{
	const struct area *a = in->area;
	size_t n = a->nrows;
	int fd = in->rings_file, rc = 0;

	if (!(in->rings = calloc(n, sizeof *in->rings)))
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n && rc == 0; i++) {
		in->rings[i].tid = __atomic_load_n(&a->tid[i], __ATOMIC_ACQUIRE);
		in->nrings++;
		rc = make_ring(in, fd, i);
	}
	/* the whole range, that the target's one mapping has no page past
	 * the file's end; then neither side can resize it */
	if (rc == 0 && (ftruncate(fd, (off_t)in->rings_size) < 0 ||
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0))
		rc = cc__fail(in->c, CC_PHASE_ALLOCATE, -errno, "cannot size the rings' memfd: %s",
			      strerror(errno));
	if (rc < 0)
		return rc;
	uint8_t *blk = malloc(IS_SIZE);
	if (!blk)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	for (size_t i = 0; i <= n && rc == 0; i++)
		if ((rc = fill_state(in, i < n ? &in->rings[i] : NULL, cc__instr_block_of(in, i),
				     blk)) == 0)
			rc = cc_cache__write(in->c, cc__instr_block_of(in, i), blk, IS_SIZE);
	free(blk);
	return rc;
}

/* World stopped: each row's owner in the function's block of the row, as
 * the area has it now (threads came and went since the blocks were
 * written). */
int cc__instr_write_owners(struct cc_instr *in)
{
	const struct area *a = in->area;

	for (size_t i = 0; i < a->nrows; i++) {
		uint64_t blk = cc__instr_block_of(in, i), owner = a->owner[i];
		uint64_t pid = owner ? (uint64_t)a->own_pid : 0;
		int rc;
		if ((rc = cc_cache__write(in->c, blk + IS_OWNER, &owner, sizeof owner)) < 0 ||
		    (rc = cc_cache__write(in->c, blk + IS_OWNER_PID, &pid, sizeof pid)) < 0)
			return rc;
	}
	return 0;
}

/* Every row's gate (the sink's and spare rows' too, so that a thread
 * cloned or forked later starts as the others are): one byte each, the
 * landings' low byte (instr-emit.c), which a thread reads old or new,
 * never torn; no stop, no thread moved. A thread already past the gate
 * finishes its call the way it went in. */
int cc_instr__switch(struct cc_instr *in, bool on)
{
	if (!cc_instr__active(in))
		return -EINVAL;
	uint8_t low = (uint8_t)cc__instr_gate(in, on);

	for (size_t i = 0; i <= in->area->nrows; i++) {
		int rc = attach_target__write(in->t, cc__instr_block_of(in, i) + IS_GATE, &low, 1);
		if (rc < 0)
			return rc;
	}
	in->off = !on;
	return 0;
}

/* Every ring row's mode, one byte each (the stub reads it at a full ring
 * and between its futex waits, so a thread waiting meanwhile stops); the
 * sink row keeps its own. */
int cc_instr__wait_when_full(struct cc_instr *in, bool wait)
{
	uint8_t mode = wait && !in->sampling ? IS_MODE_EXHAUSTIVE : IS_MODE_SAMPLING;

	if (!cc_instr__active(in))
		return -EINVAL;
	for (size_t i = 0; i < in->nrings; i++) {
		int rc = attach_target__write(in->t, cc__instr_block_of(in, i) + IS_MODE, &mode, 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

bool cc_instr__on(const struct cc_instr *in)
{
	return !in->off;
}

/* A new area: each thread's gs_base to its row, those past the rows
 * (tids[nrows..nlive)) to the sink. */
int cc__instr_set_gs(struct cc_instr *in, const pid_t *tids, size_t nlive)
{
	const struct area *a = in->area;

	for (size_t i = 0; i < nlive; i++) {
		uint64_t row = i < a->nrows ? a->addr + i * IS_ROW : sink_row(a);
		int rc = attach_target__set_gs_base(in->c->t, tids[i], row);
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot set gs_base of thread "
					"%d: %s", tids[i], attach_target__errmsg(in->c->t));
	}
	return 0;
}

/* Row i's owner, in every installed function's block of the row; no unit
 * written last (a repeat unit needs the row's thread's own before it). */
static void set_owner(struct cc_instr *in, size_t i, uint64_t fs)
{
	struct area *a = in->area;
	uint64_t pid = (uint64_t)a->own_pid;
	uint32_t none = 0;

	a->owner[i] = fs;
	for (unsigned k = 0; k < IS_SECTIONS; k++) {
		if (!atomic_load(&a->member[k]))
			continue;
		uint64_t blk = a->addr + i * IS_ROW + k * IS_SIZE;
		attach_target__write(in->t, blk + IS_OWNER, &fs, sizeof fs);
		attach_target__write(in->t, blk + IS_OWNER_PID, &pid, sizeof pid);
		attach_target__write(in->t, blk + IS_LAST, &none, sizeof none);
	}
}

/* A row no live thread has, for every function of the area: the new
 * thread's units follow the last ones of the thread that had it before, if
 * any. */
int cc_instr__thread_new(struct cc_instr *in, pid_t tid)
{
	struct area *a = in->area;

	if (!in->installed || in->removed)
		return 0;
	for (size_t i = 0; i < a->nrows; i++) {
		if (!a->free[i])
			continue;
		set_owner(in, i, fs_base_of(in->t, tid));
		int rc = attach_target__set_gs_base(in->t, tid, a->addr + i * IS_ROW);
		if (rc < 0)
			return rc;
		a->free[i] = false;
		__atomic_store_n(&a->tid[i], tid, __ATOMIC_RELEASE);
		for (unsigned k = 0; k < IS_SECTIONS; k++) {
			struct cc_instr *m = atomic_load(&a->member[k]);
			if (m)
				__atomic_store_n(&m->rings[i].tid, tid, __ATOMIC_RELEASE);
		}
		return 0;
	}
	return cc_instr__fork_child(in, tid);
}

/* (At its exit event the thread runs no more user code: it is out of any
 * unit, its last one visible.) Any function of the area does it for all;
 * again is harmless. */
void cc_instr__thread_exit(struct cc_instr *in, pid_t tid)
{
	struct area *a = in->area;

	for (size_t i = 0; a && i < a->nrows; i++)
		if (!a->free[i] && __atomic_load_n(&a->tid[i], __ATOMIC_ACQUIRE) == tid)
			a->free[i] = true;
}

int cc_instr__fork_child(struct cc_instr *in, pid_t tid)
{
	if (!in->installed || in->removed)
		return 0;
	return attach_target__set_gs_base(in->t, tid, in->area->addr + in->area->nrows * IS_ROW);
}
