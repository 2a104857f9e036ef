/* REP: block table checks, recovery of hand-written and random blocks, the
 * PiPA optimisations against the plain encoding, counts, split feeds, bad
 * streams, and saved files (round trip, every truncation, corruption). */
#include "tests/lib/tu.h"
#include "pipeline/rep.h"
#include "pipeline/rep-internal.h"
#include "pipeline/cab.h"
#include "pipeline/pipeline.h"
#include "tests/pipeline/check_rep-gen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ table checks */

START_TEST(table_rejects_bad_blocks)
{
	struct rep_table *t;
	struct rep_instr in[2] = { { 0x1000, 3, 0 }, { 0x1003, 4, 0 } };
	struct rep_mref m = { .pc = 0x1000, .size = 8, .type = REP_REF_READ, .scale = 1,
			      .base = 0, .index = REP_NO_SLOT, .seg = REP_NO_SLOT, .count = REP_NO_SLOT };
	struct rep_block b = { .id = 7, .nslots = 1, .pc = 0x1000, .ninstrs = 2, .nrefs = 1,
			       .instrs = in, .refs = &m };

	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b), 0);
	ck_assert_int_eq(rep_table__add(t, &b), -EEXIST);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "block id 7 is already"));

	b.id = 8;
	m.scale = 3;
	ck_assert_int_eq(rep_table__add(t, &b), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "block 8 reference 0: scale 3"));
	m.scale = 1;
	m.base = 1;
	ck_assert_int_eq(rep_table__add(t, &b), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "beyond its 1 slots"));
	m.base = 0;
	m.type = REP_REF_INSTR;
	ck_assert_int_eq(rep_table__add(t, &b), -EINVAL);
	m.type = REP_REF_WRITE;
	m.pc = 0x2000;
	ck_assert_int_eq(rep_table__add(t, &b), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "pc 0x2000 is not an instruction"));
	m.pc = 0x1003;
	b.id = 0;
	ck_assert_int_eq(rep_table__add(t, &b), -EINVAL);
	b.id = 8;
	ck_assert_int_eq(rep_table__add(t, &b), 0);
	ck_assert_uint_eq(rep_table__size(t), 2);
	ck_assert_uint_eq(rep_table__block(t, 8)->refs[0].pc, 0x1003);
	ck_assert_ptr_null(rep_table__block(t, 9));
	rep_table__free(t);
}
END_TEST

/* ------------------------------------------------------------ hand-written */

/*  0x1000 mov rax, [rbx+8]          slot0 = rbx
 *  0x1004 add [rbx+rcx*4+16], eax   slot1 = rcx (rbx reused)
 *  0x1008 push rbp                  slot2 = rsp
 *  0x1009 mov rdx, fs:[0x28]        slot3 = fs base
 *  0x1012 mov rsi, [rip+0x100]      absolute 0x1019+0x100
 *  0x1019 rep movsq                 slot4 = rsi, slot5 = rdi, slot6 = rcx */
static void handmade(struct rep_table **tp)
{
	static const struct rep_instr in[] = {
		{ 0x1000, 4, 0 }, { 0x1004, 4, 0 }, { 0x1008, 1, 0 },
		{ 0x1009, 9, 0 }, { 0x1012, 7, 0 }, { 0x1019, 3, 0 },
	};
	const uint16_t N = REP_NO_SLOT;
	static struct rep_mref m[7];
	m[0] = (struct rep_mref){ .pc = 0x1000, .disp = 8, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 0, .index = N, .seg = N, .count = N };
	m[1] = (struct rep_mref){ .pc = 0x1004, .disp = 16, .size = 4, .type = REP_REF_MODIFY, .scale = 4, .base = 0, .index = 1, .seg = N, .count = N };
	m[2] = (struct rep_mref){ .pc = 0x1008, .disp = -8, .size = 8, .type = REP_REF_WRITE, .scale = 1, .base = 2, .index = N, .seg = N, .count = N };
	m[3] = (struct rep_mref){ .pc = 0x1009, .disp = 0x28, .size = 8, .type = REP_REF_READ, .scale = 1, .base = N, .index = N, .seg = 3, .count = N };
	m[4] = (struct rep_mref){ .pc = 0x1012, .disp = 0x1119, .size = 8, .type = REP_REF_READ, .scale = 1, .base = N, .index = N, .seg = N, .count = N };
	m[5] = (struct rep_mref){ .pc = 0x1019, .disp = 0, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 4, .index = N, .seg = N, .count = 6 };
	m[6] = (struct rep_mref){ .pc = 0x1019, .disp = 0, .size = 8, .type = REP_REF_WRITE, .scale = 1, .base = 5, .index = N, .seg = N, .count = 6 };
	struct rep_block b = { .id = 3, .nslots = 7, .pc = 0x1000, .ninstrs = 6, .nrefs = 7,
			       .instrs = in, .refs = m };
	ck_assert_int_eq(rep_table__new(tp), 0);
	ck_assert_int_eq(rep_table__add(*tp, &b), 0);
}

static void count_refs(void *arg, const struct rep_ref *refs, size_t n)
{
	(void)refs;
	*(uint64_t *)arg += n;
}

/* Recovery with no sink (counting only) skips the addresses of blocks
 * without a rep group: its counts are those of a full recovery, and a
 * rep group is still checked (a corrupt count is an error). */
START_TEST(counting_without_a_sink_counts_as_a_full_recovery)
{
	struct rep_table *t;
	static const struct rep_instr in4[] = { { 0x2000, 4, 0 }, { 0x2004, 3, 0 } };
	const uint16_t N = REP_NO_SLOT;
	struct rep_mref m4 = { .pc = 0x2000, .disp = 8, .size = 8, .type = REP_REF_READ,
			       .scale = 1, .base = 0, .index = N, .seg = N, .count = N };
	struct rep_block b4 = { .id = 4, .nslots = 1, .pc = 0x2000, .ninstrs = 2, .nrefs = 1,
				.instrs = in4, .refs = &m4 };
	uint64_t w[64];
	size_t n = 0;

	handmade(&t);
	ck_assert_int_eq(rep_table__add(t, &b4), 0);
	for (int k = 0; k < 5; k++) {
		w[n++] = REP_S_WORD(4, 1);
		w[n++] = 0x5000 + 64 * (uint64_t)k;
		if (k % 2 == 0) {
			const uint64_t u[8] = { REP_S_WORD(3, 7), 0x5000, 3, 0x7ff0, 0x70000,
						0x9000, 0xa000, (uint64_t)k };
			memcpy(w + n, u, sizeof u);
			n += 8;
		}
	}
	struct rep_recover *full, *counting;
	uint64_t delivered = 0;
	ck_assert_int_eq(rep_recover__new(t, count_refs, &delivered, &full), 0);
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &counting), 0);
	ck_assert_int_eq(rep_recover__feed(full, w, n, 0), 0);
	ck_assert_int_eq(rep_recover__feed(counting, w, n, 0), 0);
	rep_recover__flush(full);
	struct rep_recover_stats a, b;
	rep_recover__stats(full, &a);
	rep_recover__stats(counting, &b);
	ck_assert_uint_eq(a.units, 8);
	ck_assert_uint_eq(a.refs + a.instrs, delivered);
	ck_assert_uint_eq(b.units, a.units);
	ck_assert_uint_eq(b.refs, a.refs);
	ck_assert_uint_eq(b.instrs, a.instrs);
	ck_assert_uint_eq(b.bytes, a.bytes);
	for (uint32_t id = 3; id <= 4; id++)
		ck_assert_uint_eq(rep_recover__block_count(counting, id),
				  rep_recover__block_count(full, id));
	ck_assert_uint_eq(rep_recover__edge_count(counting, 4, 3),
			  rep_recover__edge_count(full, 4, 3));
	/* a count running past the user address space, counting only */
	const uint64_t bad[8] = { REP_S_WORD(3, 7), 0x5000, 3, 0x7ff0, 0x70000, 0x9000,
				  0xa000, (REP_ADDR_LIMIT - 0xa000) / 8 + 1 };
	ck_assert_int_eq(rep_recover__feed(counting, bad, 8, UINT64_MAX), -EBADMSG);
	rep_recover__free(full);
	rep_recover__free(counting);
	rep_table__free(t);
}
END_TEST

START_TEST(recovers_handmade_block)
{
	struct rep_table *t;
	struct refvec got = { 0 }, want = { 0 };
	uint64_t u[8] = { REP_S_WORD(3, 7), 0x5000 /* rbx */, 3 /* rcx */, 0x7ff0 /* rsp */,
			  0x70000 /* fs */, 0x9000 /* rsi */, 0xa000 /* rdi */, 2 /* count */ };

	handmade(&t);
	ck_assert_int_eq(recover_all(t, u, 8, &got), 0);
	refvec_push(&want, 0x1000, 0x1000, 4, REP_REF_INSTR);
	refvec_push(&want, 0x1000, 0x5008, 8, REP_REF_READ);
	refvec_push(&want, 0x1004, 0x1004, 4, REP_REF_INSTR);
	refvec_push(&want, 0x1004, 0x5000 + 3 * 4 + 16, 4, REP_REF_MODIFY);
	refvec_push(&want, 0x1008, 0x1008, 1, REP_REF_INSTR);
	refvec_push(&want, 0x1008, 0x7fe8, 8, REP_REF_WRITE);
	refvec_push(&want, 0x1009, 0x1009, 9, REP_REF_INSTR);
	refvec_push(&want, 0x1009, 0x70028, 8, REP_REF_READ);
	refvec_push(&want, 0x1012, 0x1012, 7, REP_REF_INSTR);
	refvec_push(&want, 0x1012, 0x1119, 8, REP_REF_READ);
	for (int i = 0; i < 2; i++) {	/* rep movsq, count 2: fetch, read, write per iteration */
		refvec_push(&want, 0x1019, 0x1019, 3, REP_REF_INSTR);
		refvec_push(&want, 0x1019, 0x9000 + 8 * i, 8, REP_REF_READ);
		refvec_push(&want, 0x1019, 0xa000 + 8 * i, 8, REP_REF_WRITE);
	}
	/* and the fetch that finds rcx at 0 (valgrind's count: lackey, Cachegrind) */
	refvec_push(&want, 0x1019, 0x1019, 3, REP_REF_INSTR);
	size_t where;
	ck_assert_msg(refvec_eq(&got, &want, &where), "first difference at ref %zu (got %zu refs)",
		      where, got.n);

	/* Count 0: the instruction is fetched once and touches nothing. */
	u[7] = 0;
	got.n = 0;
	ck_assert_int_eq(recover_all(t, u, 8, &got), 0);
	ck_assert_uint_eq(got.n, 11);
	ck_assert_uint_eq(got.v[10].type, REP_REF_INSTR);
	ck_assert_uint_eq(got.v[10].pc, 0x1019);

	/* A count that would run past the user address space is corrupt,
	 * named by its offset. */
	u[7] = (REP_ADDR_LIMIT - 0xa000) / 8 + 1;	/* rdi's side goes one element too far */
	got.n = 0;
	uint64_t two[16];
	memcpy(two, u, sizeof u);
	memcpy(two + 8, u, sizeof u);
	two[7] = 1;
	ck_assert_int_eq(recover_all(t, two, 16, &got), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "REP unit at offset 64"));
	ck_assert_msg(strstr(rep_errmsg(), "iterations of 8 bytes up from 0xa000 leave the user address space"),
		      "%s", rep_errmsg());
	/* the first unit was delivered (one iteration: 14 refs), and the second up to the rep */
	ck_assert_uint_eq(got.n, 14 + 10);
	free(got.v);
	free(want.v);
	rep_table__free(t);
}
END_TEST

struct seen {
	uint64_t n, first, last;
};

static void last_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct seen *s = arg;
	if (!s->n)
		s->first = refs[0].addr;
	s->n += n;
	s->last = refs[n - 1].addr;
}

/* A genuine copy of 2 GiB and 8 bytes (rep stosq, 2^28 + 1 iterations, more
 * than the old fixed limit allowed) is recovered in full; the limit is the
 * address space: the last element that fits is fine, one more is not. */
START_TEST(large_copies_are_bounded_by_the_address_space)
{
	struct rep_table *t;
	const uint16_t N = REP_NO_SLOT;
	struct rep_mref m = { .pc = 0x3000, .size = 8, .type = REP_REF_WRITE, .scale = 1, .base = 0,
			      .index = N, .seg = N, .count = 1 };
	struct rep_block b = { .id = 1, .nslots = 2, .pc = 0x3000, .nrefs = 1, .refs = &m };
	struct rep_recover *r;
	struct seen seen = { 0, 0, 0 };

	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b), 0);
	uint64_t u[3] = { REP_S_WORD(1, 2), 0x10000000, (1ULL << 28) + 1 };
	ck_assert_int_eq(rep_recover__new(t, last_sink, &seen, &r), 0);
	ck_assert_msg(rep_recover__feed(r, u, 3, 0) == 0, "%s", rep_errmsg());
	rep_recover__flush(r);
	ck_assert_uint_eq(seen.n, (1ULL << 28) + 1);
	ck_assert_uint_eq(seen.first, 0x10000000);
	ck_assert_uint_eq(seen.last, 0x10000000 + (1ULL << 31));

	/* Right up to the end of the address space, and one element past. */
	u[1] = REP_ADDR_LIMIT - 3 * 8;
	u[2] = 3;
	ck_assert_int_eq(rep_recover__feed(r, u, 3, 0), 0);
	u[2] = 4;
	ck_assert_int_eq(rep_recover__feed(r, u, 3, 0), -EBADMSG);
	u[1] = REP_ADDR_LIMIT;	/* even one element there is not a user address */
	u[2] = 1;
	ck_assert_int_eq(rep_recover__feed(r, u, 3, 0), -EBADMSG);
	u[2] = 0;	/* but no iteration touches nothing */
	ck_assert_int_eq(rep_recover__feed(r, u, 3, 0), 0);
	rep_recover__free(r);
	rep_table__free(t);
}
END_TEST

/*  0x2000 std
 *  0x2001 repne scasb       DF known set; rcx before and after
 *  0x2003 cld
 *  0x2004 repe cmpsq        DF from rflags; rcx before and after
 * slots: 0 rdi, 1 rcx, 2 rcx after, 3 rsi, 4 rdi, 5 rcx, 6 rcx after, 7 rflags */
static void early_stoppers(struct rep_table **tp)
{
	static const struct rep_instr in[] = {
		{ 0x2000, 1, 0 }, { 0x2001, 2, 0 }, { 0x2003, 1, 0 }, { 0x2004, 3, 0 },
	};
	const uint16_t N = REP_NO_SLOT;
	static struct rep_mref m[3];
	m[0] = (struct rep_mref){ .pc = 0x2001, .size = 1, .type = REP_REF_READ, .scale = 1,
				  .base = 0, .index = N, .seg = N, .count = 1, .count_end = 2,
				  .flags = REP_MREF_COUNT_DIFF | REP_MREF_DOWN, .rflags = N };
	for (int k = 1; k <= 2; k++)
		m[k] = (struct rep_mref){ .pc = 0x2004, .size = 8, .type = REP_REF_READ, .scale = 1,
					  .base = (uint16_t)(k == 1 ? 3 : 4), .index = N, .seg = N,
					  .count = 5, .count_end = 6, .rflags = 7,
					  .flags = REP_MREF_COUNT_DIFF | REP_MREF_DF_SLOT };
	struct rep_block b = { .id = 4, .nslots = 8, .pc = 0x2000, .ninstrs = 4, .nrefs = 3,
			       .instrs = in, .refs = m };
	ck_assert_int_eq(rep_table__new(tp), 0);
	ck_assert_msg(rep_table__add(*tp, &b) == 0, "%s", rep_errmsg());
}

/* repne scasb finds its byte after 3 of 100 possible iterations, going
 * down; repe cmpsq differs at the 2nd of 5, down when rflags says DF = 1,
 * up when it says 0: exactly the bytes the CPU touched. */
START_TEST(string_instructions_that_stop_early_or_go_down)
{
	struct rep_table *t;
	struct refvec got = { 0 }, want = { 0 };
	uint64_t u[9] = { REP_S_WORD(4, 8), 0x5010, 100, 97, 0x6000, 0x7000, 5, 3, 0x402 };

	early_stoppers(&t);
	ck_assert_int_eq(recover_all(t, u, 9, &got), 0);
	refvec_push(&want, 0x2000, 0x2000, 1, REP_REF_INSTR);
	for (int i = 0; i < 3; i++) {
		refvec_push(&want, 0x2001, 0x2001, 2, REP_REF_INSTR);
		refvec_push(&want, 0x2001, 0x5010 - (uint64_t)i, 1, REP_REF_READ);
	}
	refvec_push(&want, 0x2003, 0x2003, 1, REP_REF_INSTR);
	for (int i = 0; i < 2; i++) {
		refvec_push(&want, 0x2004, 0x2004, 3, REP_REF_INSTR);
		refvec_push(&want, 0x2004, 0x6000 - 8 * (uint64_t)i, 8, REP_REF_READ);
		refvec_push(&want, 0x2004, 0x7000 - 8 * (uint64_t)i, 8, REP_REF_READ);
	}
	size_t where;
	ck_assert_msg(refvec_eq(&got, &want, &where), "differs at %zu (%zu refs)", where, got.n);

	u[8] = 0x202;	/* DF clear (IF set): cmpsq goes up */
	got.n = 0;
	ck_assert_int_eq(recover_all(t, u, 9, &got), 0);
	ck_assert_uint_eq(got.n, want.n);
	ck_assert_uint_eq(got.v[got.n - 2].addr, 0x6008);
	ck_assert_uint_eq(got.v[got.n - 1].addr, 0x7008);

	u[2] = u[3] = 7;	/* found at once: rcx unchanged, no iteration, one fetch */
	got.n = 0;
	ck_assert_int_eq(recover_all(t, u, 9, &got), 0);
	ck_assert_uint_eq(got.n, 1 + 1 + 1 + 2 * 3);
	ck_assert_uint_eq(got.v[1].type, REP_REF_INSTR);
	ck_assert_uint_eq(got.v[1].pc, 0x2001);

	/* rcx after above rcx before: corrupt, not 2^64 - 1 iterations. */
	u[3] = 8;
	ck_assert_int_eq(recover_all(t, u, 9, &got), -EBADMSG);
	ck_assert_msg(strstr(rep_errmsg(), "instruction 0x2001: 18446744073709551615 iterations of 1 bytes down from 0x5010 leave"),
		      "%s", rep_errmsg());
	/* Going down below address 0 is as impossible as going past the top. */
	u[3] = 7;
	u[1] = 5;
	u[2] = 7 + 7;
	ck_assert_int_eq(recover_all(t, u, 9, &got), -EBADMSG);
	u[2] = 7 + 6;	/* 5, 4, ..., 0 */
	ck_assert_int_eq(recover_all(t, u, 9, &got), 0);

	/* The flags need their slots and a count; one direction. */
	struct rep_table *t2;
	const struct rep_block *b = rep_table__block(t, 4);
	struct rep_mref m[3];
	memcpy(m, b->refs, sizeof m);
	struct rep_block nb = *b;
	nb.refs = m;
	nb.id = 5;
	ck_assert_int_eq(rep_table__new(&t2), 0);
	m[0].count_end = 8;
	ck_assert_int_eq(rep_table__add(t2, &nb), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "beyond its 8 slots"));
	m[0].count_end = 2;
	m[0].flags |= REP_MREF_DF_SLOT;
	m[0].rflags = 7;
	ck_assert_int_eq(rep_table__add(t2, &nb), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "direction both known and read from rflags"));
	m[0].flags &= (uint16_t)~REP_MREF_DF_SLOT;
	m[2].flags = REP_MREF_COUNT_DIFF;
	ck_assert_int_eq(rep_table__add(t2, &nb), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "must share one count slot, its flags and slots"));
	m[2].flags = m[1].flags;
	m[0].count = REP_NO_SLOT;
	ck_assert_int_eq(rep_table__add(t2, &nb), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "without a count slot"));
	m[0].count = 1;
	m[0].flags = 0x80;
	ck_assert_int_eq(rep_table__add(t2, &nb), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "unknown flags 0x80"));
	/* Slots a flag does not use are stored as none. */
	m[0].flags = REP_MREF_DOWN;
	m[0].count_end = 3;
	ck_assert_int_eq(rep_table__add(t2, &nb), 0);
	ck_assert_uint_eq(rep_table__block(t2, 5)->refs[0].count_end, REP_NO_SLOT);
	rep_table__free(t2);
	free(got.v);
	free(want.v);
	rep_table__free(t);
}
END_TEST

static int tally_fn(void *arg, uint32_t from, uint32_t to, uint64_t n)
{
	uint64_t *t = arg;
	t[from ? 1 : 0] += n;
	return 0;
}

/* More successors than the two kept inline per block go to the hash
 * table; counts, lookups and merges agree either way. */
START_TEST(many_successors)
{
	struct rep_table *t;
	struct rep_recover *r, *r2;
	uint64_t s[2 * 40 * 10];
	size_t n = 0;

	ck_assert_int_eq(rep_table__new(&t), 0);
	for (uint32_t id = 1; id <= 40; id++) {
		struct rep_block b = { .id = id, .pc = 0x100 * id };
		ck_assert_int_eq(rep_table__add(t, &b), 0);
	}
	/* 1 k 1 k ... (k % 9 + 1 times) for k = 2..40 */
	for (uint32_t k = 2; k <= 40; k++)
		for (uint32_t j = 0; j < k % 9 + 1; j++) {
			s[n++] = REP_S_WORD(1, 0);
			s[n++] = REP_S_WORD(k, 0);
		}
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &r), 0);
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &r2), 0);
	ck_assert_int_eq(rep_recover__feed(r, s, n, 0), 0);
	ck_assert_int_eq(rep_recover__feed(r2, s, n, 0), 0);
	for (uint32_t k = 2; k <= 40; k++)
		ck_assert_uint_eq(rep_recover__edge_count(r, 1, k), k % 9 + 1);
	/* and back: every k -> 1, but the last unit (40) has no successor */
	for (uint32_t k = 2; k <= 40; k++)
		ck_assert_uint_eq(rep_recover__edge_count(r, k, 1), k % 9 + 1 - (k == 40));
	ck_assert_int_eq(rep_recover__merge(r, r2), 0);
	uint64_t tally[2] = { 0, 0 };
	ck_assert_int_eq(rep_recover__foreach_count(r, tally_fn, tally), 0);
	ck_assert_uint_eq(tally[0], n * 2);	/* units, twice */
	ck_assert_uint_eq(tally[1], (n - 1) * 2);	/* edges, twice */
	for (uint32_t k = 2; k <= 40; k++)
		ck_assert_uint_eq(rep_recover__edge_count(r, 1, k), 2 * (k % 9 + 1));
	rep_recover__free(r2);
	rep_recover__free(r);
	rep_table__free(t);
}
END_TEST

/* A unit marked spoiled (a signal handler overwrote its slots before its
 * commit): checked as any header, then skipped and counted, its slot's
 * address never delivered, no edge across it; a spoiled header with bad
 * fields is still bad data. */
START_TEST(spoiled_units_are_counted_and_skipped)
{
	struct rep_table *t;
	struct rep_recover *r;
	struct refvec got = { 0 };
	const uint16_t N = REP_NO_SLOT;
	struct rep_mref m = { .pc = 0x10, .disp = 0, .size = 4, .type = REP_REF_READ, .scale = 1,
			      .base = 0, .index = N, .seg = N, .count = N };

	ck_assert_int_eq(rep_table__new(&t), 0);
	for (uint32_t id = 1; id <= 2; id++) {
		struct rep_block b = { .id = id, .nslots = 1, .pc = 0x10 * id, .nrefs = 1, .refs = &m };
		m.pc = 0x10 * id;
		ck_assert_int_eq(rep_table__add(t, &b), 0);
	}
	/* 1 2 (2 spoiled) 1 2 */
	uint64_t s[] = { REP_S_WORD(1, 1), 100, REP_S_WORD(2, 1), 200,
			 REP_S_WORD(2, 1) | REP_S_SPOILED, 0xbad, REP_S_WORD(1, 1), 101,
			 REP_S_WORD(2, 1), 201 };
	ck_assert_int_eq(rep_recover__new(t, sink, &got, &r), 0);
	ck_assert_int_eq(rep_recover__feed(r, s, sizeof s / 8, 0), 0);
	rep_recover__flush(r);
	struct rep_recover_stats st;
	rep_recover__stats(r, &st);
	ck_assert_uint_eq(st.units, 4);
	ck_assert_uint_eq(st.spoiled, 1);
	ck_assert_uint_eq(st.gaps, 0);
	ck_assert_uint_eq(got.n, 4);
	for (size_t i = 0; i < got.n; i++)
		ck_assert_uint_ne(got.v[i].addr, 0xbad);
	ck_assert_uint_eq(rep_recover__block_count(r, 2), 2);
	ck_assert_uint_eq(rep_recover__edge_count(r, 1, 2), 2);
	ck_assert_uint_eq(rep_recover__edge_count(r, 2, 1), 0);	/* not across it */
	uint64_t bad[] = { REP_S_WORD(2, 3) | REP_S_SPOILED, 1, 2, 3 };
	ck_assert_int_eq(rep_recover__feed(r, bad, 4, UINT64_MAX), -EBADMSG);
	rep_recover__free(r);
	rep_table__free(t);
	free(got.v);
}
END_TEST

/* A repeat unit takes the slots it does not hold from the unit before it,
 * which must be its block's: after a gap, a spoiled unit or another
 * block's, it is counted as spoiled and skipped. */
START_TEST(repeat_units_need_their_block_just_before)
{
	struct rep_table *t;
	struct rep_recover *r;
	struct refvec got = { 0 };
	const uint16_t N = REP_NO_SLOT;
	struct rep_mref m = { .pc = 0x10, .disp = 0, .size = 4, .type = REP_REF_READ, .scale = 1,
			      .base = 0, .index = 1, .seg = N, .count = N };
	const uint64_t R = REP_S_REPEAT;

	ck_assert_int_eq(rep_table__new(&t), 0);
	for (uint32_t id = 1; id <= 2; id++) {
		struct rep_block b = { .id = id, .nslots = 2, .pc = 0x10 * id, .nrefs = 1, .refs = &m };
		m.pc = 0x10 * id;
		ck_assert_int_eq(rep_table__add(t, &b), 0);
	}
	/* 1, 1 again holding slot 0 (its base 1000 from before), 2, 1 again
	 * (skipped: 2 came between), 1, 1 again holding nothing */
	uint64_t s[] = { REP_S_WORD(1, 2), 1000, 1, REP_S_WORD(1, 1) | R, 2000,
			 REP_S_WORD(2, 2), 3000, 3, REP_S_WORD(1, 1) | R, 0xbad,
			 REP_S_WORD(1, 2), 4000, 4, REP_S_WORD(1, 0) | R };
	ck_assert_int_eq(rep_recover__new(t, sink, &got, &r), 0);
	ck_assert_int_eq(rep_recover__feed(r, s, sizeof s / 8, 0), 0);
	/* after a gap, nothing comes before it */
	ck_assert_int_eq(rep_recover__gap(r), 0);
	uint64_t after_gap[] = { REP_S_WORD(1, 1) | R, 0xbad };
	ck_assert_int_eq(rep_recover__feed(r, after_gap, 2, UINT64_MAX), 0);
	rep_recover__flush(r);
	struct rep_recover_stats st;
	rep_recover__stats(r, &st);
	ck_assert_uint_eq(st.units, 5);
	ck_assert_uint_eq(st.spoiled, 2);
	const uint64_t want[] = { 1001, 2001, 3003, 4004, 4004 };
	ck_assert_uint_eq(got.n, 5);
	for (size_t i = 0; i < got.n; i++)
		ck_assert_uint_eq(got.v[i].addr, want[i]);
	ck_assert_uint_eq(rep_recover__edge_count(r, 1, 1), 2);
	/* a repeat unit holds fewer slots than its block has; never spoiled */
	uint64_t bad[][3] = { { REP_S_WORD(1, 2) | R, 1, 2 }, { REP_S_WORD(1, 1) | R | REP_S_SPOILED, 1 } };
	for (size_t i = 0; i < 2; i++) {
		ck_assert_int_eq(rep_recover__feed(r, bad[i], 3 - i, UINT64_MAX), -EBADMSG);
		ck_assert_msg(strstr(rep_errmsg(), i ? "not a unit header" : "holds fewer"), "%s",
			      rep_errmsg());
	}
	rep_recover__free(r);
	rep_table__free(t);
	free(got.v);
}
END_TEST

START_TEST(counts_blocks_and_edges)
{
	struct rep_table *t;
	struct rep_recover *r, *r2;
	const uint16_t N = REP_NO_SLOT;
	struct rep_mref m = { .pc = 0x10, .disp = 0, .size = 4, .type = REP_REF_READ, .scale = 1, .base = 0, .index = N, .seg = N, .count = N };

	ck_assert_int_eq(rep_table__new(&t), 0);
	for (uint32_t id = 1; id <= 3; id++) {
		struct rep_block b = { .id = id, .nslots = id == 2 ? 0 : 1, .pc = 0x10 * id,
				       .nrefs = id == 2 ? 0 : 1, .refs = &m };
		m.pc = 0x10 * id;
		ck_assert_int_eq(rep_table__add(t, &b), 0);
	}
	/* 1 2 3 1 2 3 1 | gap | 3 */
	uint64_t s[] = { REP_S_WORD(1, 1), 100, REP_S_WORD(2, 0), REP_S_WORD(3, 1), 200,
			 REP_S_WORD(1, 1), 101, REP_S_WORD(2, 0), REP_S_WORD(3, 1), 201,
			 REP_S_WORD(1, 1), 102 };
	uint64_t s2[] = { REP_S_WORD(3, 1), 202 };
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &r), 0);
	ck_assert_int_eq(rep_recover__feed(r, s, sizeof s / 8, 0), 0);
	ck_assert_int_eq(rep_recover__gap(r), 0);
	ck_assert_int_eq(rep_recover__feed(r, s2, 2, UINT64_MAX), 0);
	ck_assert_uint_eq(rep_recover__block_count(r, 1), 3);
	ck_assert_uint_eq(rep_recover__block_count(r, 2), 2);
	ck_assert_uint_eq(rep_recover__block_count(r, 3), 3);
	ck_assert_uint_eq(rep_recover__edge_count(r, 1, 2), 2);
	ck_assert_uint_eq(rep_recover__edge_count(r, 2, 3), 2);
	ck_assert_uint_eq(rep_recover__edge_count(r, 3, 1), 2);
	ck_assert_uint_eq(rep_recover__edge_count(r, 1, 3), 0);	/* not across the gap */
	struct rep_recover_stats st;
	rep_recover__stats(r, &st);
	ck_assert_uint_eq(st.units, 8);
	ck_assert_uint_eq(st.refs, 6);
	ck_assert_uint_eq(st.bytes, sizeof s + sizeof s2);

	/* Every block and edge once: 3 blocks, 4 edges (1-2, 2-3, 3-1 and none
	 * across the gap). */
	uint64_t tally[2] = { 0, 0 };
	ck_assert_int_eq(rep_recover__foreach_count(r, tally_fn, tally), 0);
	ck_assert_uint_eq(tally[0], 3 + 2 + 3);
	ck_assert_uint_eq(tally[1], 2 + 2 + 2);

	/* Merging two workers' counts adds them. */
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &r2), 0);
	ck_assert_int_eq(rep_recover__feed(r2, s, sizeof s / 8, 0), 0);
	ck_assert_int_eq(rep_recover__merge(r, r2), 0);
	ck_assert_uint_eq(rep_recover__block_count(r, 1), 6);
	ck_assert_uint_eq(rep_recover__edge_count(r, 3, 1), 4);
	rep_recover__free(r2);
	rep_recover__free(r);
	rep_table__free(t);
}
END_TEST

START_TEST(bad_streams_name_the_offset)
{
	struct rep_table *t;
	struct refvec got = { 0 };
	uint64_t u[8] = { REP_S_WORD(3, 7), 1, 2, 3, 4, 5, 6, 0 };
	uint64_t s[24];

	handmade(&t);
	memcpy(s, u, sizeof u);
	memcpy(s + 8, u, sizeof u);
	s[16] = REP_S_WORD(99, 0);
	ck_assert_int_eq(recover_all(t, s, 17, &got), -EBADMSG);
	ck_assert_str_eq(rep_errmsg(), "REP unit at offset 128: unknown block id 99");
	ck_assert_uint_eq(got.n, 2 * 11);	/* what came before was delivered */

	s[16] = REP_S_WORD(3, 6);
	ck_assert_int_eq(recover_all(t, s, 17, &got), -EBADMSG);
	ck_assert_str_eq(rep_errmsg(), "REP unit at offset 128: block 3 has 7 slots, the unit says 6");
	s[8] = 0;
	ck_assert_int_eq(recover_all(t, s, 16, &got), -EBADMSG);
	ck_assert_str_eq(rep_errmsg(), "REP unit at offset 64: 0 is not a unit header");

	/* A unit cut by a gap (lost data) is truncated. */
	struct rep_recover *r;
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &r), 0);
	ck_assert_int_eq(rep_recover__feed(r, u, 8, 1000), 0);
	ck_assert_int_eq(rep_recover__feed(r, u, 5, UINT64_MAX), 0);
	ck_assert_int_eq(rep_recover__gap(r), -EBADMSG);
	ck_assert_str_eq(rep_errmsg(), "truncated REP unit at offset 1064: 5 of 8 words");
	rep_recover__free(r);
	free(got.v);
	rep_table__free(t);
}
END_TEST

START_TEST(optimised_streams_recover_the_same_references)
{
	uint64_t seed = seed_from_env(), s = seed;
	static const unsigned opts[] = { 0, REP_OPT_STACK, REP_OPT_BASE, REP_OPT_STACK | REP_OPT_BASE };
	uint64_t regs[MAXI + 1][REP_NREGS];
	uint64_t unit[4][1 + 4 * MAXI * REP_MAX_OPERANDS];
	uint64_t saved_slots[4] = { 0 };

	for (int iter = 0; iter < 3000; iter++) {
		struct rblock b;
		struct rep_built built[4];
		struct rep_table *t[4];
		struct refvec want = { 0 };

		gen_block(&s, &b);
		gen_regs(&s, &b, regs);
		truth(&b, (const uint64_t (*)[REP_NREGS])regs, &want);
		for (int k = 0; k < 4; k++) {
			ck_assert_msg(rep_build(b.in, b.n, 1 + (uint32_t)iter, opts[k], &built[k]) == 0,
				      "seed %#" PRIx64 " iter %d: %s", seed, iter, rep_errmsg());
			ck_assert_int_eq(rep_table__new(&t[k]), 0);
			ck_assert_msg(rep_table__add(t[k], &built[k].block) == 0,
				      "seed %#" PRIx64 " iter %d: %s", seed, iter, rep_errmsg());
			int len = rep_encode(&built[k], (const uint64_t (*)[REP_NREGS])regs, unit[k],
					     sizeof unit[k] / 8);
			ck_assert_int_eq(len, 1 + built[k].block.nslots);
			struct refvec got = { 0 };
			ck_assert_msg(recover_all(t[k], unit[k], (size_t)len, &got) == 0,
				      "seed %#" PRIx64 " iter %d opts %u: %s", seed, iter, opts[k],
				      rep_errmsg());
			size_t where;
			ck_assert_msg(refvec_eq(&got, &want, &where),
				      "seed %#" PRIx64 " iter %d opts %u: differs at ref %zu (%zu vs %zu refs)",
				      seed, iter, opts[k], where, got.n, want.n);
			free(got.v);
			saved_slots[k] += built[k].block.nslots;
		}
		/* Each optimisation only ever removes slots. */
		ck_assert_msg(built[1].block.nslots <= built[0].block.nslots &&
			      built[2].block.nslots <= built[0].block.nslots &&
			      built[3].block.nslots <= built[1].block.nslots &&
			      built[3].block.nslots <= built[2].block.nslots,
			      "seed %#" PRIx64 " iter %d: slot counts %u %u %u %u", seed, iter,
			      built[0].block.nslots, built[1].block.nslots, built[2].block.nslots,
			      built[3].block.nslots);
		for (int k = 0; k < 4; k++) {
			rep_table__free(t[k]);
			rep_built__free(&built[k]);
		}
		free(want.v);
	}
	/* And over many blocks they do remove some. */
	ck_assert_msg(saved_slots[3] < saved_slots[1] && saved_slots[1] < saved_slots[0] &&
		      saved_slots[2] < saved_slots[0], "seed %#" PRIx64 ": slots %" PRIu64 " %" PRIu64
		      " %" PRIu64 " %" PRIu64, seed, saved_slots[0], saved_slots[1], saved_slots[2],
		      saved_slots[3]);
}
END_TEST

START_TEST(push_pop_run_takes_one_stack_slot)
{
	/* push rbp; push rbx; push r12; sub rsp, 24; mov [rsp+8], rdi; ...
	 * pop r12; pop rbx; pop rbp. */
	struct rep_insn in[9];
	int32_t deltas[9] = { -8, -8, -8, -24, 0, 24, 8, 8, 8 };
	uint64_t pc = 0x1000;
	memset(in, 0, sizeof in);
	for (int i = 0; i < 9; i++) {
		in[i].pc = pc;
		in[i].len = 2;
		pc += 2;
		in[i].rsp_delta = deltas[i];
		if (i == 3 || i == 5)
			continue;	/* sub/add rsp: no memory */
		in[i].nops = 1;
		in[i].ops[0] = (struct rep_operand){ .type = i < 3 || i == 4 ? REP_REF_WRITE : REP_REF_READ,
						     .base = REP_REG_RSP, .size = 8,
						     .disp = i < 3 ? -8 : i == 4 ? 8 : 0 };
	}
	struct rep_built plain, opt;
	ck_assert_int_eq(rep_build(in, 9, 1, 0, &plain), 0);
	ck_assert_int_eq(rep_build(in, 9, 1, REP_OPT_STACK, &opt), 0);
	ck_assert_uint_eq(plain.block.nslots, 7);
	ck_assert_uint_eq(opt.block.nslots, 1);
	ck_assert_uint_eq(opt.ncaps, 1);
	ck_assert_uint_eq(opt.caps[0].reg, REP_REG_RSP);
	ck_assert_uint_eq(opt.caps[0].insn, 0);
	/* The pops read where the pushes wrote, from the one value. */
	ck_assert_int_eq(opt.block.refs[0].disp, -8);
	ck_assert_int_eq(opt.block.refs[2].disp, -24);
	ck_assert_int_eq(opt.block.refs[3].disp, -48 + 8);
	ck_assert_int_eq(opt.block.refs[4].disp, -24);
	ck_assert_int_eq(opt.block.refs[6].disp, -8);
	rep_built__free(&plain);
	rep_built__free(&opt);
}
END_TEST

/* repne scasb as the last instruction, direction unknown: rcx is captured
 * before and after it (from regs[n], after the last instruction), rflags
 * before it, and the unit recovers the iterations it ran. */
START_TEST(build_captures_rcx_after_and_rflags)
{
	struct rep_insn in[2];
	memset(in, 0, sizeof in);
	in[0] = (struct rep_insn){ .pc = 0x100, .len = 3, .nops = 1 };
	in[0].ops[0] = (struct rep_operand){ .type = REP_REF_READ, .base = REP_REG_RBX, .size = 8 };
	in[1] = (struct rep_insn){ .pc = 0x103, .len = 2, .nops = 1,
				   .clobbers = 1u << REP_REG_RCX | 1u << REP_REG_RDI };
	in[1].ops[0] = (struct rep_operand){ .type = REP_REF_READ, .base = REP_REG_RDI, .size = 1,
					     .count = REP_REG_RCX,
					     .flags = REP_OPF_COUNT_DIFF | REP_OPF_DF };
	struct rep_built b;
	ck_assert_msg(rep_build(in, 2, 9, REP_OPT_STACK | REP_OPT_BASE, &b) == 0, "%s", rep_errmsg());
	ck_assert_uint_eq(b.block.nslots, 5);	/* rbx, rdi, rcx, rcx after, rflags */
	const struct rep_mref *m = &b.block.refs[1];
	ck_assert_uint_eq(m->flags, REP_MREF_COUNT_DIFF | REP_MREF_DF_SLOT);
	bool after = false, flags = false;
	for (uint32_t c = 0; c < b.ncaps; c++) {
		if (b.caps[c].slot == m->count_end)
			after = b.caps[c].after && b.caps[c].reg == REP_REG_RCX && b.caps[c].insn == 1;
		if (b.caps[c].slot == m->rflags)
			flags = !b.caps[c].after && b.caps[c].reg == REP_REG_RFLAGS && b.caps[c].insn == 1;
	}
	ck_assert(after && flags);
	/* in instruction order, an instruction's captures before it first (the
	 * instrumenter lays them out in one pass) */
	for (uint32_t c = 1; c < b.ncaps; c++)
		ck_assert_msg(b.caps[c - 1].insn < b.caps[c].insn ||
			      (b.caps[c - 1].insn == b.caps[c].insn &&
			       b.caps[c - 1].after <= b.caps[c].after),
			      "capture %u (insn %u, after %u) follows insn %u, after %u", c,
			      b.caps[c].insn, b.caps[c].after, b.caps[c - 1].insn, b.caps[c - 1].after);
	uint64_t regs[3][REP_NREGS] = { { 0 } };
	regs[0][REP_REG_RBX] = regs[1][REP_REG_RBX] = 0x8000;
	regs[1][REP_REG_RDI] = 0x9004;
	regs[1][REP_REG_RCX] = 10;
	regs[1][REP_REG_RFLAGS] = 0x446;	/* DF set */
	regs[2][REP_REG_RCX] = 6;		/* 4 iterations ran */
	uint64_t u[8];
	ck_assert_int_eq(rep_encode(&b, (const uint64_t (*)[REP_NREGS])regs, u, 8), 6);
	struct rep_table *t;
	struct refvec got = { 0 };
	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b.block), 0);
	ck_assert_int_eq(recover_all(t, u, 6, &got), 0);
	ck_assert_uint_eq(got.n, 2 + 4 * 2);
	ck_assert_uint_eq(got.v[3].addr, 0x9004);
	ck_assert_uint_eq(got.v[9].addr, 0x9001);
	rep_table__free(t);
	rep_built__free(&b);
	free(got.v);
}
END_TEST

START_TEST(structure_fields_share_one_base_slot)
{
	/* mov rax,[rbx]; mov rcx,[rbx+8]; mov [rbx+16],rdx; mov rbx,[rbx+24]; mov [rbx],rax */
	struct rep_insn in[5];
	memset(in, 0, sizeof in);
	for (int i = 0; i < 5; i++) {
		in[i].pc = 0x2000 + 3 * (uint64_t)i;
		in[i].len = 3;
		in[i].nops = 1;
		in[i].ops[0] = (struct rep_operand){ .type = i == 2 || i == 4 ? REP_REF_WRITE : REP_REF_READ,
						     .base = REP_REG_RBX, .size = 8, .disp = 8 * (i % 4) };
	}
	in[3].clobbers = 1u << REP_REG_RBX;
	struct rep_built plain, opt;
	ck_assert_int_eq(rep_build(in, 5, 2, 0, &plain), 0);
	ck_assert_int_eq(rep_build(in, 5, 2, REP_OPT_BASE, &opt), 0);
	ck_assert_uint_eq(plain.block.nslots, 5);
	ck_assert_uint_eq(opt.block.nslots, 2);	/* rbx before and after it was loaded */
	ck_assert_uint_eq(opt.block.refs[3].base, 0);
	ck_assert_uint_eq(opt.block.refs[4].base, 1);
	ck_assert_uint_eq(opt.caps[1].insn, 4);
	rep_built__free(&plain);
	rep_built__free(&opt);
}
END_TEST

START_TEST(units_split_across_feeds)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;

	make_corpus(&s, &c, 20, 400);
	for (int round = 0; round < 20; round++) {
		struct rep_recover *r;
		struct refvec got = { 0 };
		ck_assert_int_eq(rep_recover__new(c.t, sink, &got, &r), 0);
		size_t at = 0;
		while (at < c.n) {
			size_t k = 1 + rnd_below(&s, round < 10 ? 3 : 200);
			if (k > c.n - at)
				k = c.n - at;
			ck_assert_msg(rep_recover__feed(r, c.w + at, k, UINT64_MAX) == 0,
				      "seed %#" PRIx64 ": %s", seed, rep_errmsg());
			at += k;
		}
		ck_assert_int_eq(rep_recover__gap(r), 0);
		rep_recover__flush(r);
		size_t where;
		ck_assert_msg(refvec_eq(&got, &c.want, &where), "seed %#" PRIx64 ": differs at %zu",
			      seed, where);
		rep_recover__free(r);
		free(got.v);
	}
	free_corpus(&c);
}
END_TEST

/* ----------------------------------------------- fast plans and general path */

/* What a recoverer delivered: the references, each batch's length, and
 * (swap) the batch kept by the sink, as the live simulator feed does. */
struct delivery {
	struct refvec refs;
	size_t *lens, nlens;
	struct rep_recover *r;
	bool swap;
};

static void delivery_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct delivery *d = arg;

	sink(&d->refs, refs, n);
	d->lens = realloc(d->lens, (d->nlens + 1) * sizeof(*d->lens));
	ck_assert_ptr_nonnull(d->lens);
	d->lens[d->nlens++] = n;
	if (d->swap) {		/* keep the array handed over, give a fresh one */
		struct rep_ref *fresh = malloc(REP_RECOVER_BATCH * sizeof(*fresh));
		ck_assert_ptr_nonnull(fresh);
		memset(fresh, 0xa5, REP_RECOVER_BATCH * sizeof(*fresh));
		free((void *)refs);
		rep_recover__set_batch(d->r, fresh);
	}
}

/* Steps of n slots (what a repeat unit adds to the values of the slots it
 * does not hold): most 0 (a base the loop never changes), the others an
 * index's or a pointer's step, now and then a large one. */
static void gen_steps(uint64_t *s, int64_t *steps, uint32_t n)
{
	static const int64_t some[] = { 1, -1, 8, -8, 16, 0x300, -0x180, 64 };

	for (uint32_t k = 0; k < n; k++)
		steps[k] = rnd_below(s, 2) ? 0 : rnd_below(s, 8) ? some[rnd_below(s, 8)] :
			   (int64_t)rnd(s);
}

/* A table of nblocks, half of them without string instructions (their
 * units take the fast plans), some with steps, and a stream of nunits
 * with spoiled units and, if bad, corrupt headers; boundaries get the
 * units' starts. */
static void mixed_corpus(uint64_t *s, struct corpus *c, int nblocks, int nunits, bool bad,
			 bool *boundary)
{
	uint64_t regs[MAXI + 1][REP_NREGS];
	struct rblock *bs = calloc((size_t)nblocks, sizeof(*bs));
	struct rep_built *built = calloc((size_t)nblocks, sizeof(*built));
	const size_t most = 1 + MAXI * REP_MAX_OPERANDS * 4;

	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(rep_table__new(&c->t), 0);
	for (int i = 0; i < nblocks; i++) {
		gen_no_rep = i % 2 == 0;
		gen_block(s, &bs[i]);
		ck_assert_int_eq(rep_build(bs[i].in, bs[i].n, (uint32_t)i + 1,
					   rnd_below(s, 2) ? REP_OPT_STACK | REP_OPT_BASE : 0,
					   &built[i]), 0);
		if (i % 5 == 4) {	/* as the blocks analysis's copy: a header alone */
			built[i].ncaps = 0;
			built[i].block.nslots = 0;
			built[i].block.nrefs = 0;
		}
		int64_t steps[REP_MAX_SLOTS];
		gen_steps(s, steps, built[i].block.nslots);
		built[i].block.steps = rnd_below(s, 2) ? steps : NULL;
		ck_assert_int_eq(rep_table__add(c->t, &built[i].block), 0);
	}
	gen_no_rep = false;
	c->w = malloc((size_t)nunits * most * 8);
	for (int u = 0, i = 0, again = 0; u < nunits; u++) {
		if (again-- <= 0) {	/* a new block, sometimes run again and again (a loop) */
			i = (int)rnd_below(s, (unsigned)nblocks);
			again = rnd_below(s, 4) ? 0 : (int)rnd_below(s, 60);
		}
		gen_regs(s, &bs[i], regs);
		boundary[c->n] = true;
		size_t at = c->n;
		c->n += (size_t)rep_encode(&built[i], (const uint64_t (*)[REP_NREGS])regs, c->w + c->n,
					   most);
		if (rnd_below(s, 20) == 0)
			c->w[at] |= REP_S_SPOILED;
		if (bad && rnd_below(s, 150) == 0) {	/* unknown id, wrong length, not a header */
			static const uint64_t junk[] = { REP_S_WORD(999999, 1), 0, 1ULL << 40 };
			c->w[at] = rnd_below(s, 4) ? junk[rnd_below(s, 3)] :
				   REP_S_WORD(i + 1, (c->w[at] >> 48) + 1);
		}
	}
	for (int i = 0; i < nblocks; i++)
		rep_built__free(&built[i]);
	free(built);
	free(bs);
}

/* Feed c to both recoverers as CAB spans cut anywhere (units carried
 * across spans), chunks starting on unit boundaries, gaps now and then.
 * Span by span, the results and messages must agree. */
static void feed_spans(struct rep_recover *a, struct rep_recover *b, const struct corpus *c,
		       const bool *boundary, uint64_t *s, uint64_t seed)
{
	size_t at = 0, call = 0;
	char msg[320];

	while (at < c->n) {
		size_t k = 1 + rnd_below(s, rnd_below(s, 4) ? 40 : 3000);
		if (k > c->n - at)
			k = c->n - at;
		unsigned flags = (boundary[at] && rnd_below(s, 3) == 0 ? CAB_SPAN_CHUNK : 0) |
				 (rnd_below(s, 25) == 0 ? CAB_SPAN_GAP : 0);
		int ra = rep_recover__cab_fn(a, c->w + at, k, flags);
		snprintf(msg, sizeof msg, "%s", rep_errmsg());
		int rb = rep_recover__cab_fn(b, c->w + at, k, flags);
		ck_assert_msg(ra == rb && !strcmp(msg, rep_errmsg()),
			      "seed %#" PRIx64 " call %zu: %d (%s) against %d (%s)", seed, call, ra,
			      msg, rb, rep_errmsg());
		at += k;
		call++;
	}
	rep_recover__flush(a);
	rep_recover__flush(b);
}

static void expect_same_delivery(const struct delivery *a, const struct delivery *b,
				 uint64_t seed)
{
	size_t where;

	ck_assert_msg(refvec_eq(&a->refs, &b->refs, &where),
		      "seed %#" PRIx64 ": references differ at %zu (%zu vs %zu)", seed, where,
		      a->refs.n, b->refs.n);
	ck_assert_msg(a->nlens == b->nlens && !memcmp(a->lens, b->lens, a->nlens * sizeof(*a->lens)),
		      "seed %#" PRIx64 ": batches differ (%zu vs %zu)", seed, a->nlens, b->nlens);
}

static void expect_same_block_counts(struct rep_recover *a, struct rep_recover *b, int nblocks)
{
	for (uint32_t x = 1; x <= (uint32_t)nblocks; x++) {
		ck_assert_uint_eq(rep_recover__block_count(a, x), rep_recover__block_count(b, x));
		for (uint32_t y = 1; y <= (uint32_t)nblocks; y++)
			ck_assert_uint_eq(rep_recover__edge_count(a, x, y),
					  rep_recover__edge_count(b, x, y));
	}
}

static void expect_same_counts(struct rep_recover *a, struct rep_recover *b, int nblocks,
			       uint64_t seed)
{
	struct rep_recover_stats sa, sb;

	rep_recover__stats(a, &sa);
	rep_recover__stats(b, &sb);
	ck_assert_msg(!memcmp(&sa, &sb, sizeof sa), "seed %#" PRIx64 ": stats differ: units %" PRIu64
		      " %" PRIu64 ", refs %" PRIu64 " %" PRIu64 ", corrupt %" PRIu64 " %" PRIu64, seed,
		      sa.units, sb.units, sa.refs, sb.refs, sa.corrupt, sb.corrupt);
	expect_same_block_counts(a, b, nblocks);
}

/* Units of blocks without a string instruction are written from the
 * block's precomputed plan; everything else (string instructions, spoiled
 * units, a batch that ends inside a unit, units cut between spans, corrupt
 * data, gaps) goes the general way. Both must deliver exactly the same:
 * references, batches, results and messages, stats, block and edge counts;
 * and with no corrupt data, the references the blocks really made. */
START_TEST(fast_plans_deliver_what_the_general_path_does)
{
	uint64_t seed = seed_from_env(), s = seed, spoiled = 0;
	const int nblocks = 40, nunits = 6000;

	for (int round = 0; round < 8; round++) {
		struct corpus c;
		bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
		struct delivery fast = { .swap = round % 2 }, general = { 0 };
		bool bad = round >= 2;

		ck_assert_ptr_nonnull(boundary);
		mixed_corpus(&s, &c, nblocks, nunits, bad, boundary);
		ck_assert_int_eq(rep_recover__new(c.t, delivery_sink, &fast, &fast.r), 0);
		ck_assert_int_eq(rep_recover__new(c.t, delivery_sink, &general, &general.r), 0);
		rep__recover_general_only(general.r);
		feed_spans(fast.r, general.r, &c, boundary, &s, seed);
		expect_same_delivery(&fast, &general, seed);
		expect_same_counts(fast.r, general.r, nblocks, seed);
		struct rep_recover_stats st;
		rep_recover__stats(fast.r, &st);
		spoiled += st.spoiled;	/* (a round can lose most units to corrupt data) */
		if (bad)
			ck_assert_uint_gt(st.corrupt, 0);
		rep_recover__free(fast.r);
		rep_recover__free(general.r);
		free(fast.refs.v);
		free(fast.lens);
		free(general.refs.v);
		free(general.lens);
		free(boundary);
		free_corpus(&c);
	}
	ck_assert_msg(spoiled > 0, "seed %#" PRIx64 ": no spoiled unit in any round", seed);
}
END_TEST

/* Without a sink, the common units are counted at once, the rest the
 * general way: the same counts, stats and messages. */
START_TEST(counting_fast_path_counts_what_the_general_path_does)
{
	uint64_t seed = seed_from_env(), s = seed;
	const int nblocks = 40, nunits = 6000;

	for (int round = 0; round < 4; round++) {
		struct corpus c;
		bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
		struct rep_recover *fast, *general;

		ck_assert_ptr_nonnull(boundary);
		mixed_corpus(&s, &c, nblocks, nunits, round >= 2, boundary);
		ck_assert_int_eq(rep_recover__new(c.t, NULL, NULL, &fast), 0);
		ck_assert_int_eq(rep_recover__new(c.t, NULL, NULL, &general), 0);
		rep__recover_general_only(general);
		feed_spans(fast, general, &c, boundary, &s, seed);
		expect_same_counts(fast, general, nblocks, seed);
		rep_recover__free(fast);
		rep_recover__free(general);
		free(boundary);
		free_corpus(&c);
	}
}
END_TEST

/* c's stream as a live copy writes it, into *out (n words): a unit of the
 * block just before it (neither spoiled, no string instruction, whose
 * counts must agree with their addresses) takes a random number of that
 * unit's last slots plus their steps (changed so in c too) and goes as a
 * repeat unit holding the others. steady: every such unit goes so, and
 * nearly always takes as
 * many as the other repeat units of its block (a loop: runs of one header,
 * now and then one that holds more or fewer). Returns the repeat units
 * made. */
static bool has_string_insn(const struct rep_table *t, uint32_t id)
{
	const struct rep_block *b = rep_table__block(t, id);

	for (uint32_t i = 0; i < b->nrefs; i++)
		if (b->refs[i].count != REP_NO_SLOT)
			return true;
	return false;
}

static size_t compact_corpus(uint64_t *s, struct corpus *c, uint64_t **out, size_t *n,
			     bool steady)
{
	size_t made = 0, prev = SIZE_MAX;

	*out = malloc(c->n * 8);
	ck_assert_ptr_nonnull(*out);
	*n = 0;
	for (size_t at = 0; at < c->n; at += REP_S_WORDS(c->w[at])) {
		uint64_t h = c->w[at];
		size_t nslots = (size_t)(h >> 48);
		bool again = prev != SIZE_MAX && (c->w[prev] & ~REP_S_SPOILED) == h &&
			     !(c->w[prev] & REP_S_SPOILED) && nslots && (steady || rnd_below(s, 4)) &&
			     !has_string_insn(c->t, (uint32_t)h);
		size_t take = !again ? 0 : steady && rnd_below(s, 16) ? 1 + (uint32_t)h % nslots :
			      1 + rnd_below(s, (unsigned)nslots);
		const int64_t *steps = rep_table__block(c->t, (uint32_t)h)->steps;
		for (size_t k = nslots - take + 1; k <= nslots; k++)
			c->w[at + k] = c->w[prev + k] + (steps ? (uint64_t)steps[k - 1] : 0);
		(*out)[(*n)++] = take ? ((h & ~(0xffffULL << 48)) | REP_S_REPEAT |
					 (uint64_t)(nslots - take) << 48) : h;
		for (size_t k = 1; k <= nslots - take; k++)
			(*out)[(*n)++] = c->w[at + k];
		made += take > 0;
		prev = at;
	}
	return made;
}

static void feed_cut_anywhere(struct rep_recover *r, const uint64_t *w, size_t n, uint64_t *s)
{
	for (size_t at = 0, k; at < n; at += k) {
		k = 1 + rnd_below(s, rnd_below(s, 4) ? 30 : 2000);
		if (k > n - at)
			k = n - at;
		ck_assert_msg(rep_recover__feed(r, w + at, k, UINT64_MAX) == 0, "%s", rep_errmsg());
	}
	rep_recover__flush(r);
}

/* A stream with repeat units recovers as the same stream of whole units
 * does, cut between feeds anywhere: the same references, counts and stats
 * (the bytes aside), by the fast plans, the general path and counting
 * alone; with runs of one header (a loop's steady state) every other
 * round. */
START_TEST(repeat_units_recover_as_whole_ones)
{
	uint64_t seed = seed_from_env(), s = seed;
	const int nblocks = 30, nunits = 5000;

	for (int round = 0; round < 6; round++) {
		struct corpus c;
		bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
		uint64_t *compact;
		size_t ncompact;

		ck_assert_ptr_nonnull(boundary);
		mixed_corpus(&s, &c, nblocks, nunits, false, boundary);
		ck_assert_uint_gt(compact_corpus(&s, &c, &compact, &ncompact, round % 2), 0);
		struct delivery whole = { 0 }, fast = { 0 }, general = { 0 };
		struct rep_recover *count_whole, *count_compact;
		ck_assert_int_eq(rep_recover__new(c.t, delivery_sink, &whole, &whole.r), 0);
		ck_assert_int_eq(rep_recover__new(c.t, delivery_sink, &fast, &fast.r), 0);
		ck_assert_int_eq(rep_recover__new(c.t, delivery_sink, &general, &general.r), 0);
		ck_assert_int_eq(rep_recover__new(c.t, NULL, NULL, &count_whole), 0);
		ck_assert_int_eq(rep_recover__new(c.t, NULL, NULL, &count_compact), 0);
		rep__recover_general_only(general.r);
		feed_cut_anywhere(whole.r, c.w, c.n, &s);
		feed_cut_anywhere(fast.r, compact, ncompact, &s);
		feed_cut_anywhere(general.r, compact, ncompact, &s);
		feed_cut_anywhere(count_whole, c.w, c.n, &s);
		feed_cut_anywhere(count_compact, compact, ncompact, &s);
		size_t where;
		ck_assert_msg(refvec_eq(&whole.refs, &fast.refs, &where),
			      "seed %#" PRIx64 ": fast plans differ at %zu", seed, where);
		ck_assert_msg(refvec_eq(&whole.refs, &general.refs, &where),
			      "seed %#" PRIx64 ": general path differs at %zu", seed, where);
		struct rep_recover *rs[] = { fast.r, general.r, count_compact };
		struct rep_recover *base[] = { whole.r, whole.r, count_whole };
		for (size_t i = 0; i < 3; i++) {
			struct rep_recover_stats a, b;
			rep_recover__stats(base[i], &a);
			rep_recover__stats(rs[i], &b);
			ck_assert_uint_eq(b.bytes, 8 * ncompact);
			a.bytes = b.bytes = 0;
			ck_assert_msg(!memcmp(&a, &b, sizeof a), "seed %#" PRIx64 ": stats differ "
				      "(%zu): units %" PRIu64 " %" PRIu64 ", spoiled %" PRIu64 " %" PRIu64,
				      seed, i, a.units, b.units, a.spoiled, b.spoiled);
			for (uint32_t x = 1; x <= (uint32_t)nblocks; x++) {
				ck_assert_uint_eq(rep_recover__block_count(base[i], x),
						  rep_recover__block_count(rs[i], x));
				for (uint32_t y = 1; y <= (uint32_t)nblocks; y++)
					ck_assert_uint_eq(rep_recover__edge_count(base[i], x, y),
							  rep_recover__edge_count(rs[i], x, y));
			}
		}
		struct rep_recover *all[] = { whole.r, fast.r, general.r, count_whole, count_compact };
		for (size_t i = 0; i < 5; i++)
			rep_recover__free(all[i]);
		struct delivery *ds[] = { &whole, &fast, &general };
		for (size_t i = 0; i < 3; i++) {
			free(ds[i]->refs.v);
			free(ds[i]->lens);
		}
		free(compact);
		free(boundary);
		free_corpus(&c);
	}
}
END_TEST

static int pool_sink_refs(void *arg, uint64_t stream, const struct rep_ref *refs, size_t n)
{
	(void)stream;
	sink(arg, refs, n);
	return 0;
}

/* A recovery pool cuts a feed into small chunks for its threads, but never
 * before a repeat unit: what it delivers is what one recoverer does. */
START_TEST(a_pool_never_cuts_a_repeat_unit_from_the_one_before)
{
	uint64_t seed = seed_from_env(), s = seed;
	const int nblocks = 30, nunits = 4000;
	struct corpus c;
	bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
	uint64_t *compact;
	size_t ncompact;
	struct refvec serial = { 0 }, pooled = { 0 };

	ck_assert_ptr_nonnull(boundary);
	mixed_corpus(&s, &c, nblocks, nunits, false, boundary);
	ck_assert_uint_gt(compact_corpus(&s, &c, &compact, &ncompact, false), 0);
	ck_assert_int_eq(recover_all(c.t, compact, ncompact, &serial), 0);
	struct rep_pool_opts o = { .sz = sizeof o, .workers = 2, .depth = 8, .chunk_bytes = 64 };
	struct rep_pool *p;
	ck_assert_int_eq(rep_pool__new(c.t, &o, pool_sink_refs, &pooled, &p), 0);
	ck_assert_int_eq(rep_pool__feed(p, 0, compact, ncompact, 0, 0), 0);
	ck_assert_int_eq(rep_pool__finish(p), 0);
	struct rep_pool_stats st;
	rep_pool__stats(p, &st);
	ck_assert_uint_gt(st.chunks, 100);	/* cut small */
	size_t where;
	ck_assert_msg(refvec_eq(&serial, &pooled, &where), "seed %#" PRIx64 ": differs at %zu "
		      "(%zu vs %zu)", seed, where, serial.n, pooled.n);
	rep_pool__free(p);
	free(serial.v);
	free(pooled.v);
	free(compact);
	free(boundary);
	free_corpus(&c);
}
END_TEST

/* ------------------------------------------------ fetches left out */

/* A recoverer's sink: a simulator, and what reached it. */
struct simfeed {
	struct csim *sim;
	int rc;
	size_t refs, hits;	/* references, of them FETCH_HITS */
	size_t runs;		/* loops' runs */
};

static void sim_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct simfeed *f = arg;

	ck_assert_uint_le(n, REP_RECOVER_BATCH);
	f->refs += n;
	for (size_t i = 0; i < n; i++) {
		f->hits += refs[i].type == REP_REF_FETCH_HITS;
		if (refs[i].type == REP_REF_RUN) {	/* (its packed addresses are no references) */
			f->runs++;
			i += rep_run_entries(refs[i].size, refs[i].addr) - 1;
		}
	}
	if (!f->rc)
		f->rc = csim__refs(f->sim, refs, n);
}

static void expect_same_simulation(struct csim *a, struct csim *b, uint64_t seed, int round)
{
	size_t na, nb;
	struct csim_pc_stats *ra = csim_result__sorted(csim__result(a), CSIM_BY_PC, &na);
	struct csim_pc_stats *rb = csim_result__sorted(csim__result(b), CSIM_BY_PC, &nb);

	ck_assert_ptr_nonnull(ra);
	ck_assert_ptr_nonnull(rb);
	ck_assert_msg(na == nb, "seed %#" PRIx64 " round %d: %zu rows against %zu", seed, round,
		      na, nb);
	for (size_t i = 0; i < na; i++)
		ck_assert_msg(ra[i].pc == rb[i].pc && !memcmp(&ra[i].c, &rb[i].c, sizeof ra[i].c),
			      "seed %#" PRIx64 " round %d: pc %#" PRIx64 " (row %zu) differs: Ir %" PRIu64
			      " against %" PRIu64 ", I1 misses %" PRIu64 " against %" PRIu64, seed,
			      round, ra[i].pc, i, ra[i].c.refs[CSIM_INSTR], rb[i].c.refs[CSIM_INSTR],
			      ra[i].c.miss[CSIM_I1][CSIM_INSTR], rb[i].c.miss[CSIM_I1][CSIM_INSTR]);
	free(ra);
	free(rb);
}

/* A small hierarchy whose first instruction cache has lines of line bytes
 * and sets sets (1: fully associative), so that fetches miss and straddle. */
static struct csim_config small_caches(uint32_t line, uint32_t sets, bool cachegrind)
{
	struct csim_config cfg = { .cachegrind = cachegrind };

	cfg.level[CSIM_I1] = (struct csim_geom){ (uint64_t)line * 4 * sets, 4, line };
	cfg.level[CSIM_D1] = (struct csim_geom){ 1024, 2, 32 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 8192, 4, 64 };
	return cfg;
}

/* With the sink's instruction line given, fetches that hit their block's
 * last line are left out and come back as counts: a simulator fed that
 * gives, row by row, exactly what it gives fed every fetch, on the fast
 * plans and the general path alike, with spoiled and corrupt units, units
 * cut between spans, gaps, and I1 lines of 16 to 64 bytes in one set or
 * many, in both counting modes. */
START_TEST(fetches_left_out_simulate_as_the_whole_stream)
{
	uint64_t seed = seed_from_env(), s = seed, hits = 0, fewer = 0;
	const int nblocks = 40, nunits = 6000;
	static const uint32_t lines[] = { 16, 32, 64 }, sets[] = { 1, 2, 64 };

	for (int round = 0; round < 8; round++) {
		struct corpus c;
		bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
		uint32_t line = lines[round % 3];
		struct csim_config cfg = small_caches(line, sets[round / 3 % 3], round % 2);
		struct simfeed whole = { 0 }, whole2 = { 0 }, fast = { 0 }, general = { 0 };
		struct rep_recover *rw, *rw2, *rf, *rg;

		ck_assert_ptr_nonnull(boundary);
		mixed_corpus(&s, &c, nblocks, nunits, round >= 4, boundary);
		struct simfeed *all[] = { &whole, &whole2, &fast, &general };
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(csim__new(&cfg, &all[i]->sim), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &whole, &rw), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &whole2, &rw2), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &fast, &rf), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &general, &rg), 0);
		rep_recover__set_fetch_line(rf, line);
		rep_recover__set_fetch_line(rg, line);
		rep_recover__set_fetch_sets(rf, sets[round / 3 % 3]);
		rep_recover__set_fetch_sets(rg, sets[round / 3 % 3]);
		rep__recover_general_only(rg);
		uint64_t s2 = s;	/* the same spans for both pairs */
		feed_spans(rw, rf, &c, boundary, &s, seed);
		feed_spans(rw2, rg, &c, boundary, &s2, seed);
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(all[i]->rc, 0);
		expect_same_simulation(whole.sim, fast.sim, seed, round);
		expect_same_simulation(whole.sim, general.sim, seed, round);
		expect_same_counts(rw, rf, nblocks, seed);
		expect_same_counts(rw, rg, nblocks, seed);
		ck_assert_uint_eq(whole.hits, 0);
		ck_assert_uint_le(fast.refs, whole.refs);
		ck_assert_uint_le(general.refs, whole.refs);
		/* (a round can lose most units to corrupt data: these add up) */
		hits += fast.hits;
		fewer += (whole.refs - fast.refs) + (whole.refs - general.refs);
		rep_recover__free(rw);
		rep_recover__free(rw2);
		rep_recover__free(rf);
		rep_recover__free(rg);
		for (int i = 0; i < 4; i++)
			csim__free(all[i]->sim);
		free(boundary);
		free_corpus(&c);
	}
	ck_assert_msg(hits > 0 && fewer > 0, "seed %#" PRIx64 ": no fetch left out in any round",
		      seed);
}
END_TEST

/* A stream of one loop block, as the live simulator gets it: each batch
 * carries the counts of the fetches its units left out, so a report taken
 * between batches shows every instruction of the loop run as often. */
START_TEST(each_batch_carries_its_units_fetch_hits)
{
	struct rep_insn in[6];
	memset(in, 0, sizeof in);
	for (int i = 0; i < 6; i++) {	/* 4-byte instructions, one line of 64 */
		in[i].pc = 0x10000 + 4 * (uint64_t)i;
		in[i].len = 4;
		in[i].nops = i == 2;
		in[i].ops[0] = (struct rep_operand){ .type = REP_REF_READ, .base = REP_REG_RBX,
						     .size = 8 };
	}
	struct rep_built b;
	struct rep_table *t;
	ck_assert_int_eq(rep_build(in, 6, 1, 0, &b), 0);
	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b.block), 0);
	uint64_t regs[7][REP_NREGS] = { { 0 } }, u[8];
	size_t len = (size_t)rep_encode(&b, (const uint64_t (*)[REP_NREGS])regs, u, 8);
	struct csim_config cfg = small_caches(64, 64, true);
	struct simfeed f = { 0 };
	struct rep_recover *r;
	ck_assert_int_eq(csim__new(&cfg, &f.sim), 0);
	ck_assert_int_eq(rep_recover__new(t, sim_sink, &f, &r), 0);
	rep_recover__set_fetch_line(r, 64);
	for (int k = 0; k < 5000; k++) {
		ck_assert_int_eq(rep_recover__feed(r, u, len, UINT64_MAX), 0);
		size_t n;
		struct csim_pc_stats *rows = csim_result__sorted(csim__result(f.sim), CSIM_BY_PC, &n);
		for (size_t i = 1; i < n; i++)	/* every batch so far, whole */
			ck_assert_uint_eq(rows[i].c.refs[CSIM_INSTR], rows[0].c.refs[CSIM_INSTR]);
		free(rows);
	}
	rep_recover__flush(r);
	size_t n;
	struct csim_pc_stats *rows = csim_result__sorted(csim__result(f.sim), CSIM_BY_PC, &n);
	ck_assert_uint_eq(n, 6);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(rows[i].c.refs[CSIM_INSTR], 5000);
	ck_assert_uint_eq(rows[0].c.miss[CSIM_I1][CSIM_INSTR], 1);
	/* one fetch and one read a unit, five fetches as counts a batch */
	ck_assert_uint_lt(f.refs, 5000 * 2 + 5 * (5000 * 2 / (REP_RECOVER_BATCH - 5) + 1) + 1);
	free(rows);
	rep_recover__free(r);
	csim__free(f.sim);
	rep_table__free(t);
	rep_built__free(&b);
}
END_TEST

/* Loops as a live copy writes them, every run of a block after itself in
 * repeat units of one header (recovery's steady state), cut between feeds
 * anywhere: a simulator fed them with the fetches that hit their lines
 * left out, and in the second half of the rounds as loops' runs, gives,
 * row by row, what it gives fed the whole units and every fetch; the block
 * and edge counts and the stats (the bytes aside) are the same, in I1
 * lines of 16 to 64 bytes and both counting modes. */
START_TEST(loops_of_repeat_units_simulate_as_whole_ones)
{
	uint64_t seed = seed_from_env(), s = seed, hits = 0, runs = 0;
	const int nblocks = 12, nunits = 20000;
	static const uint32_t lines[] = { 16, 32, 64 };

	for (int round = 0; round < 8; round++) {
		struct corpus c;
		bool *boundary = calloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4), 1);
		struct csim_config cfg = small_caches(lines[round % 3], 64, round % 2);
		struct simfeed whole = { 0 }, loops = { 0 };
		struct rep_recover *rw, *rl;
		uint64_t *compact;
		size_t ncompact;

		ck_assert_ptr_nonnull(boundary);
		mixed_corpus(&s, &c, nblocks, nunits, false, boundary);
		ck_assert_uint_gt(compact_corpus(&s, &c, &compact, &ncompact, true), 0);
		ck_assert_int_eq(csim__new(&cfg, &whole.sim), 0);
		ck_assert_int_eq(csim__new(&cfg, &loops.sim), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &whole, &rw), 0);
		ck_assert_int_eq(rep_recover__new(c.t, sim_sink, &loops, &rl), 0);
		rep_recover__set_fetch_line(rl, lines[round % 3]);
		rep_recover__set_fetch_sets(rl, 64);
		rep_recover__set_runs(rl, round >= 4);
		feed_cut_anywhere(rw, c.w, c.n, &s);
		feed_cut_anywhere(rl, compact, ncompact, &s);
		ck_assert_int_eq(whole.rc, 0);
		ck_assert_int_eq(loops.rc, 0);
		expect_same_simulation(whole.sim, loops.sim, seed, round);
		expect_same_block_counts(rw, rl, nblocks);
		struct rep_recover_stats a, b;
		rep_recover__stats(rw, &a);
		rep_recover__stats(rl, &b);
		a.bytes = b.bytes = 0;
		ck_assert_msg(!memcmp(&a, &b, sizeof a), "seed %#" PRIx64 " round %d: stats differ: "
			      "units %" PRIu64 " %" PRIu64, seed, round, a.units, b.units);
		hits += loops.hits;
		runs += loops.runs;
		ck_assert(round >= 4 || !loops.runs);
		rep_recover__free(rw);
		rep_recover__free(rl);
		csim__free(whole.sim);
		csim__free(loops.sim);
		free(compact);
		free(boundary);
		free_corpus(&c);
	}
	ck_assert_msg(hits > 0, "seed %#" PRIx64 ": no fetch left out", seed);
	ck_assert_msg(runs > 0, "seed %#" PRIx64 ": no loop's run", seed);
}
END_TEST

/* ------------------------------------------------------------ files */

static char *tmpfile_path(void)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/padrone-rep-%d.rep", (int)getpid());
	return path;
}

static void write_corpus(const char *path, struct corpus *c, size_t cut)
{
	struct rep_writer *w;
	ck_assert_int_eq(rep_writer__open(path, c->t, &w), 0);
	ck_assert_int_eq(rep_writer__stream(w, 1, c->w, cut), 0);
	ck_assert_int_eq(rep_writer__stream(w, 2, c->w + cut, c->n - cut), 0);
	ck_assert_int_eq(rep_writer__close(w), 0);
}

START_TEST(file_round_trip)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	struct rep_reader *rd;
	struct rep_recover *r;
	struct refvec got = { 0 };
	const char *path = tmpfile_path();

	make_corpus(&s, &c, 30, 300);
	write_corpus(path, &c, unit_boundary(&c));
	ck_assert_msg(rep_reader__open(path, &rd) == 0, "%s", rep_errmsg());
	const struct rep_table *t = rep_reader__table(rd);
	ck_assert_uint_eq(rep_table__size(t), 30);
	for (uint32_t id = 1; id <= 30; id++) {
		const struct rep_block *a = rep_table__block(c.t, id), *b = rep_table__block(t, id);
		ck_assert_uint_eq(a->nslots, b->nslots);
		ck_assert_uint_eq(a->ninstrs, b->ninstrs);
		ck_assert_uint_eq(a->nrefs, b->nrefs);
		ck_assert_int_eq(memcmp(a->refs, b->refs, a->nrefs * sizeof(*a->refs)), 0);
		ck_assert_int_eq(memcmp(a->instrs, b->instrs, a->ninstrs * sizeof(*a->instrs)), 0);
	}
	ck_assert_int_eq(rep_recover__new(t, sink, &got, &r), 0);
	ck_assert_msg(rep_reader__replay(rd, r) == 0, "%s", rep_errmsg());
	size_t where;
	ck_assert_msg(refvec_eq(&got, &c.want, &where), "seed %#" PRIx64 ": differs at %zu", seed,
		      where);
	struct rep_recover_stats st;
	rep_recover__stats(r, &st);
	ck_assert_uint_eq(st.units, 300);
	ck_assert_uint_eq(st.gaps, 2);	/* two threads */
	rep_recover__free(r);
	rep_reader__close(rd);
	unlink(path);
	free(got.v);
	free_corpus(&c);
}
END_TEST

static void *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	void *p = malloc(*n);
	ck_assert_uint_eq(fread(p, 1, *n, f), *n);
	fclose(f);
	return p;
}

static void spill(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

static void count_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	*(size_t *)arg += n;
}

/* Open and replay; returns the error (0 if none) and the refs recovered. */
static int try_file(const char *path, size_t *nrefs)
{
	struct rep_reader *rd;
	struct rep_recover *r;
	int rc = rep_reader__open(path, &rd);
	*nrefs = 0;
	if (rc)
		return rc;
	ck_assert_int_eq(rep_recover__new(rep_reader__table(rd), count_sink, nrefs, &r), 0);
	rc = rep_reader__replay(rd, r);
	rep_recover__free(r);
	rep_reader__close(rd);
	return rc;
}

START_TEST(truncated_files_name_the_offset)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	const char *path = tmpfile_path();
	char cut[80];
	size_t n, nrefs;

	snprintf(cut, sizeof cut, "%s.cut", path);
	make_corpus(&s, &c, 5, 40);
	write_corpus(path, &c, unit_boundary(&c));
	uint8_t *img = slurp(path, &n);
	/* Every proper prefix is an error naming an offset; none is accepted. */
	for (size_t len = 0; len < n; len++) {
		spill(cut, img, len);
		int rc = try_file(cut, &nrefs);
		ck_assert_msg(rc == -EBADMSG, "prefix of %zu/%zu bytes: rc %d (%s)", len, n, rc,
			      rep_errmsg());
		ck_assert_msg(strstr(rep_errmsg(), "offset "), "prefix %zu: %s", len, rep_errmsg());
		ck_assert(nrefs <= c.want.n);
	}
	spill(cut, img, 20);
	try_file(cut, &nrefs);
	ck_assert_str_eq(strstr(rep_errmsg(), ": ") + 2, "truncated header at offset 0 (file has 20 bytes)");
	spill(cut, img, n - 16);	/* the end section is missing */
	ck_assert_int_eq(try_file(cut, &nrefs), -EBADMSG);
	ck_assert_uint_eq(nrefs, c.want.n);	/* everything before it was recovered */
	char want[64];
	snprintf(want, sizeof want, "truncated file: no end section at offset %zu", n - 16);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), want));
	unlink(cut);
	unlink(path);
	free(img);
	free_corpus(&c);
}
END_TEST

START_TEST(corrupt_files_fail_cleanly)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	const char *path = tmpfile_path();
	char bad[80];
	size_t n, nrefs;
	int errors = 0;

	snprintf(bad, sizeof bad, "%s.bad", path);
	gen_no_rep = true;
	make_corpus(&s, &c, 5, 60);
	gen_no_rep = false;
	write_corpus(path, &c, unit_boundary(&c));
	uint8_t *img = slurp(path, &n);
	uint8_t *copy = malloc(n);
	/* Random byte flips: either still a valid file or an error naming an
	 * offset; never a crash or a hang (ASan watches). */
	for (int i = 0; i < 400; i++) {
		memcpy(copy, img, n);
		for (unsigned k = 1 + rnd_below(&s, 4); k; k--)
			copy[rnd_below(&s, (unsigned)n)] ^= (uint8_t)(1 + rnd_below(&s, 255));
		spill(bad, copy, n);
		int rc = try_file(bad, &nrefs);
		if (rc) {
			errors++;
			ck_assert_msg(rc == -EBADMSG && strstr(rep_errmsg(), "offset "),
				      "seed %#" PRIx64 " flip %d: rc %d %s", seed, i, rc, rep_errmsg());
		}
	}
	ck_assert_int_gt(errors, 0);
	unlink(bad);
	unlink(path);
	free(copy);
	free(img);
	free_corpus(&c);
}
END_TEST

/* Little-endian bytes into a buffer. */
struct bytes {
	uint8_t b[512];
	size_t n;
};

static void put_le(struct bytes *x, uint64_t v, int len)
{
	for (int i = 0; i < len; i++)
		x->b[x->n++] = (uint8_t)(v >> (8 * i));
}

/* A version 1 file, byte by byte as version 1 wrote it (references of 32
 * bytes): rep movsq-like reads, 3 iterations from 0x4010. */
static size_t v1_file(uint8_t *out, uint32_t version)
{
	struct bytes x = { .n = 0 };
	memcpy(x.b, "PADRNREP", 8);
	x.n = 8;
	put_le(&x, version, 4);
	put_le(&x, 32, 4);
	put_le(&x, 0, 8);
	put_le(&x, 0, 8);
	put_le(&x, REP_SEC_TABLE, 4);
	put_le(&x, 0, 4);
	put_le(&x, 8 + 24 + 16 + 32, 8);
	put_le(&x, 1, 4);	/* nblocks */
	put_le(&x, 0, 4);
	put_le(&x, 1, 4);	/* id */
	put_le(&x, 2, 2);	/* nslots */
	put_le(&x, 0, 2);
	put_le(&x, 0x1000, 8);
	put_le(&x, 1, 4);	/* ninstrs */
	put_le(&x, 1, 4);	/* nrefs */
	put_le(&x, 0x1000, 8);	/* the instruction */
	put_le(&x, 3, 4);
	put_le(&x, 0, 4);
	put_le(&x, 0x1000, 8);	/* the reference: pc, disp, size, type, scale */
	put_le(&x, 16, 8);
	put_le(&x, 8, 4);
	put_le(&x, REP_REF_READ, 1);
	put_le(&x, 1, 1);
	put_le(&x, 0, 2);	/* base: slot 0 */
	put_le(&x, REP_NO_SLOT, 2);
	put_le(&x, REP_NO_SLOT, 2);
	put_le(&x, 1, 2);	/* count: slot 1 */
	put_le(&x, 0, 2);
	put_le(&x, REP_SEC_STREAM, 4);
	put_le(&x, 0, 4);
	put_le(&x, 8 + 3 * 8, 8);
	put_le(&x, 7, 8);	/* tid */
	put_le(&x, REP_S_WORD(1, 2), 8);
	put_le(&x, 0x4000, 8);
	put_le(&x, 3, 8);
	put_le(&x, REP_SEC_END, 4);
	put_le(&x, 0, 4);
	put_le(&x, 0, 8);
	memcpy(out, x.b, x.n);
	return x.n;
}

START_TEST(version_1_files_still_read)
{
	const char *path = tmpfile_path();
	uint8_t img[512];
	struct rep_reader *rd;
	struct rep_recover *r;
	struct refvec got = { 0 };

	spill(path, img, v1_file(img, 1));
	ck_assert_msg(rep_reader__open(path, &rd) == 0, "%s", rep_errmsg());
	const struct rep_block *b = rep_table__block(rep_reader__table(rd), 1);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->refs[0].flags, 0);
	ck_assert_uint_eq(b->refs[0].count_end, REP_NO_SLOT);
	ck_assert_uint_eq(b->refs[0].count, 1);
	ck_assert_int_eq(rep_recover__new(rep_reader__table(rd), sink, &got, &r), 0);
	ck_assert_msg(rep_reader__replay(rd, r) == 0, "%s", rep_errmsg());
	ck_assert_uint_eq(got.n, 7);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(got.v[2 * i].type, REP_REF_INSTR);
		ck_assert_uint_eq(got.v[2 * i + 1].addr, 0x4010 + 8 * (uint64_t)i);
	}
	ck_assert_uint_eq(got.v[6].type, REP_REF_INSTR);	/* rcx found at 0 */
	rep_recover__free(r);
	rep_reader__close(rd);

	/* A version from the future is refused, by name. */
	spill(path, img, v1_file(img, 3));
	ck_assert_int_eq(rep_reader__open(path, &rd), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "REP version 3 at offset 8, this reads versions 1 to 2"));
	unlink(path);
	free(got.v);
}
END_TEST

START_TEST(unit_crossing_a_section_is_an_error)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	const char *path = tmpfile_path();
	size_t nrefs;

	make_corpus(&s, &c, 5, 40);
	size_t at = unit_boundary(&c);
	while (c.w[at] >> 48 == 0)	/* a unit with slots, to cut inside */
		at += 1;
	write_corpus(path, &c, at + 1);
	ck_assert_int_eq(try_file(path, &nrefs), -EBADMSG);
	/* The unit starts one word before the section ends. */
	unsigned long long unit_off, end_off;
	const char *m = strstr(rep_errmsg(), "REP unit at offset ");
	ck_assert_msg(m && sscanf(m, "REP unit at offset %llu runs past the end of its section at offset %llu",
				  &unit_off, &end_off) == 2, "%s", rep_errmsg());
	ck_assert_uint_eq(end_off - unit_off, 8);
	unlink(path);
	free_corpus(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rep");
	TCase *tc = tcase_create("rep");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, table_rejects_bad_blocks);
	tcase_add_test(tc, recovers_handmade_block);
	tcase_add_test(tc, large_copies_are_bounded_by_the_address_space);
	tcase_add_test(tc, string_instructions_that_stop_early_or_go_down);
	tcase_add_test(tc, counts_blocks_and_edges);
	tcase_add_test(tc, spoiled_units_are_counted_and_skipped);
	tcase_add_test(tc, repeat_units_need_their_block_just_before);
	tcase_add_test(tc, many_successors);
	tcase_add_test(tc, bad_streams_name_the_offset);
	tcase_add_test(tc, optimised_streams_recover_the_same_references);
	tcase_add_test(tc, push_pop_run_takes_one_stack_slot);
	tcase_add_test(tc, structure_fields_share_one_base_slot);
	tcase_add_test(tc, build_captures_rcx_after_and_rflags);
	tcase_add_test(tc, units_split_across_feeds);
	tcase_add_test(tc, fast_plans_deliver_what_the_general_path_does);
	tcase_add_test(tc, counting_fast_path_counts_what_the_general_path_does);
	tcase_add_test(tc, repeat_units_recover_as_whole_ones);
	tcase_add_test(tc, a_pool_never_cuts_a_repeat_unit_from_the_one_before);
	tcase_add_test(tc, fetches_left_out_simulate_as_the_whole_stream);
	tcase_add_test(tc, each_batch_carries_its_units_fetch_hits);
	tcase_add_test(tc, loops_of_repeat_units_simulate_as_whole_ones);
	tcase_add_test(tc, file_round_trip);
	tcase_add_test(tc, truncated_files_name_the_offset);
	tcase_add_test(tc, corrupt_files_fail_cleanly);
	tcase_add_test(tc, unit_crossing_a_section_is_an_error);
	tcase_add_test(tc, version_1_files_still_read);
	tcase_add_test(tc, counting_without_a_sink_counts_as_a_full_recovery);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
