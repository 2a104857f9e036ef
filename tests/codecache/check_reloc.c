/* The relocator on real compiled code: functions built by gcc and clang at
 * -O0 and -O2 are relocated into a buffer near them, called, and must give
 * the original's results; libc's functions are relocated and the copies
 * decoded back; what cannot be relocated is refused by name and address. */
#include "codecache/codecache.h"
#include "tests/lib/tu.h"

#include <Zydis/Zydis.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const variants[] = {
	"tests/codecache/corpus-cc-O0.so",
	"tests/codecache/corpus-cc-O2.so",
	"tests/codecache/corpus-clang-O0.so",
	"tests/codecache/corpus-clang-O2.so",
	"tests/codecache/corpus-cc-O2-cet.so",
};

/* A read-write mapping within reach of near (the copies are written, then
 * made read-execute: never writable and executable at once). */
static void *map_near(const void *near, size_t size)
{
	uint64_t base = ((uint64_t)near & ~0xffffffULL);
	for (uint64_t step = 16 << 20; step < (1ULL << 30); step += 16 << 20) {
		for (int dir = -1; dir <= 1; dir += 2) {
			uint64_t at = base + (uint64_t)((int64_t)dir * (int64_t)step);
			void *p = mmap((void *)at, size, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p != MAP_FAILED)
				return p;
		}
	}
	return NULL;
}

struct copy {
	void *mem;
	size_t size;
};

/* Relocate fn (whole, or its first prefix bytes with a jump back) into a
 * fresh mapping; returns the copy's entry or NULL (message in err). */
static void *relocate(void *fn, size_t fn_size, size_t prefix, struct copy *c, struct cc_error *err)
{
	struct cc_reloc_opts o = { .sz = sizeof o, .min_len = prefix, .jump_back = prefix != 0 };
	struct cc_reloc *r;

	if (cc_reloc__new(fn, fn_size, (uint64_t)fn, &o, &r, err) < 0)
		return NULL;
	c->size = (cc_reloc__size(r) + 4095) & ~4095UL;
	c->mem = map_near(fn, c->size);
	ck_assert_ptr_nonnull(c->mem);
	int rc = cc_reloc__encode(r, (uint64_t)c->mem, c->mem, c->size, err);
	cc_reloc__free(r);
	ck_assert_int_eq(mprotect(c->mem, c->size, PROT_READ | PROT_EXEC), 0);
	return rc < 0 ? NULL : c->mem;
}

static void unmap_copy(struct copy *c)
{
	munmap(c->mem, c->size);
}

static size_t sym_size(void *fn)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;

	ck_assert(dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT));
	ck_assert_ptr_nonnull(sym);
	return sym->st_size;
}

/* The corpus functions, for __typeof__ in COPY below. */
int cc_sum(const int *a, int n);
int cc_switch(int x);
long cc_fib(int n);
size_t cc_strlen_plus(const char *s);
int cc_counter(int k);
double cc_poly(double x);
int cc_apply(int (*f)(int), int x);
unsigned cc_crc(const unsigned char *p, size_t n);
int cc_flag_is(int v);
int cc_tail(int x);
int cc_sorted_median(int *a, int n);
int cc_words(const char *s);
long cc_asm_loop(long n);
long cc_asm_jrcxz(long x);
long cc_asm_jecxz(long x);
long cc_asm_loopne(const char *s, long max);
long cc_asm_loope(const char *s, long max);

static int add_one(int x) { return x + 1; }

/* Call every corpus function through get(name) and compare with the
 * original; prefix 0 relocates whole functions. */
static void check_variant(void *h, size_t prefix)
{
	struct cc_error err = { 0 };
	struct copy c;
	char what[128];

#define COPY(name) ({								\
	void *fn_ = dlsym(h, #name);						\
	ck_assert_msg(fn_ != NULL, "%s missing", #name);			\
	snprintf(what, sizeof what, "%s (prefix %zu)", #name, prefix);		\
	size_t sz_ = sym_size(fn_);	/* a function shorter than the prefix	\
					 * is relocated whole */		\
	void *cp_ = relocate(fn_, sz_, prefix < sz_ ? prefix : sz_, &c, &err);	\
	ck_assert_msg(cp_ != NULL, "%s: %s", what, err.msg);			\
	(__typeof__(&name))cp_; })
#define ORIG(name) ((__typeof__(&name))dlsym(h, #name))

	{
		int a[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -3, 77 };
		int (*f)(const int *, int) = COPY(cc_sum);
		ck_assert_int_eq(f(a, 12), ORIG(cc_sum)(a, 12));
		ck_assert_int_eq(f(a, 0), 0);
		unmap_copy(&c);
	}
	{
		int (*f)(int) = COPY(cc_switch);
		for (int x = -2; x < 12; x++)
			ck_assert_int_eq(f(x), ORIG(cc_switch)(x));
		unmap_copy(&c);
	}
	{
		long (*f)(int) = COPY(cc_fib);
		ck_assert_int_eq(f(20), 6765);
		unmap_copy(&c);
	}
	{
		size_t (*f)(const char *) = COPY(cc_strlen_plus);
		ck_assert_uint_eq(f("relocated"), 10);
		unmap_copy(&c);
	}
	{
		int (*f)(int) = COPY(cc_counter);
		int before = ORIG(cc_counter)(0);
		ck_assert_int_eq(f(5), before + 5);	/* the same static variable */
		ck_assert_int_eq(ORIG(cc_counter)(1), before + 6);
		unmap_copy(&c);
	}
	{
		double (*f)(double) = COPY(cc_poly);
		ck_assert(f(2.5) == ORIG(cc_poly)(2.5));
		ck_assert(f(-1.0) == 3.25 + 1.5 + 0.125);
		unmap_copy(&c);
	}
	{
		int (*f)(int (*)(int), int) = COPY(cc_apply);
		ck_assert_int_eq(f(add_one, 10), 23);
		unmap_copy(&c);
	}
	{
		const unsigned char msg[] = "the quick brown fox";
		unsigned (*f)(const unsigned char *, size_t) = COPY(cc_crc);
		ck_assert_uint_eq(f(msg, sizeof msg), ORIG(cc_crc)(msg, sizeof msg));
		unmap_copy(&c);
	}
	{
		int (*f)(int) = COPY(cc_flag_is);
		ck_assert_int_eq(f(10), ORIG(cc_flag_is)(10));
		unmap_copy(&c);
	}
	{
		int (*f)(int) = COPY(cc_tail);
		ck_assert_int_eq(f(4), 38);
		unmap_copy(&c);
	}
	{
		int a[] = { 9, 1, 8, 2, 7, 3, 6 };
		int (*f)(int *, int) = COPY(cc_sorted_median);
		ck_assert_int_eq(f(a, 7), 6);
		ck_assert_int_eq(a[0], 1);
		unmap_copy(&c);
	}
	{
		int (*f)(const char *) = COPY(cc_words);
		ck_assert_int_eq(f("  one two\tthree\n four "), 4);
		unmap_copy(&c);
	}
	{
		long (*f)(long) = COPY(cc_asm_loop);
		ck_assert_int_eq(f(100), 5050);
		ck_assert_int_eq(f(1), 1);
		unmap_copy(&c);
	}
	{
		long (*f)(long) = COPY(cc_asm_jrcxz);
		ck_assert_int_eq(f(0), 7);
		ck_assert_int_eq(f(3), 11);
		ck_assert_int_eq(f(1L << 40), 11);
		unmap_copy(&c);
	}
	{
		long (*f)(long) = COPY(cc_asm_jecxz);
		ck_assert_int_eq(f(0), 5);
		ck_assert_int_eq(f(1L << 40), 5);	/* ecx is zero */
		ck_assert_int_eq(f(9), 13);
		unmap_copy(&c);
	}
	{
		long (*f)(const char *, long) = COPY(cc_asm_loopne);
		ck_assert_int_eq(f("abc:def", 7), 4);
		ck_assert_int_eq(f("abcdef", 6), 6);
		unmap_copy(&c);
	}
	{
		long (*f)(const char *, long) = COPY(cc_asm_loope);
		ck_assert_int_eq(f("   x", 4), 4);
		ck_assert_int_eq(f("y", 1), 1);
		ck_assert_int_eq(f("    ", 4), 4);
		unmap_copy(&c);
	}
#undef COPY
#undef ORIG
}


static void *open_variant(int i)
{
	void *h = dlopen(tu_path(variants[i]), RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "dlopen %s: %s", variants[i], dlerror());
	return h;
}

START_TEST(whole_functions_give_the_same_results)
{
	void *h = open_variant(_i);
	check_variant(h, 0);
	dlclose(h);
}
END_TEST

START_TEST(displaced_prefixes_jump_back_and_give_the_same_results)
{
	void *h = open_variant(_i);
	check_variant(h, 5);	/* what an entry jmp rel32 displaces */
	check_variant(h, 9);	/* with endbr64 kept, or a longer patch */
	dlclose(h);
}
END_TEST

static const uint8_t *relocated(const uint8_t *code, size_t len, uint64_t src, uint64_t dst,
				const struct cc_reloc_opts *o, uint8_t *out, size_t *out_len,
				struct cc_error *err)
{
	struct cc_reloc *r;

	if (cc_reloc__new(code, len, src, o, &r, err) < 0)
		return NULL;
	*out_len = cc_reloc__size(r);
	int rc = cc_reloc__encode(r, dst, out, 64, err);
	cc_reloc__free(r);
	return rc < 0 ? NULL : out;
}

START_TEST(short_branches_are_widened_and_internal_ones_follow_the_copy)
{
	/* 0: jmp +2 (to 4); 2: nop; 3: nop; 4: je -6 (to 0); 6: jne +0x10
	 * (outside, 0x1018); 8: ret */
	const uint8_t code[] = { 0xeb, 0x02, 0x90, 0x90, 0x74, 0xfa, 0x75, 0x10, 0xc3 };
	uint8_t out[64];
	size_t n;
	struct cc_error err;
	const uint64_t src = 0x1000, dst = 0x5000;

	ck_assert_ptr_nonnull(relocated(code, sizeof code, src, dst, NULL, out, &n, &err));
	const uint8_t want[] = {
		0xe9, 0x02, 0x00, 0x00, 0x00,		/* 0: jmp 7 */
		0x90, 0x90,				/* 5, 6 */
		0x0f, 0x84, 0xf3, 0xff, 0xff, 0xff,	/* 7: je 0 */
		0x0f, 0x85, 0x00, 0x00, 0x00, 0x00,	/* 13: jne 0x1018 */
		0xc3,					/* 19 */
	};
	int32_t rel = (int32_t)(0x1018 - (dst + 19));
	memcpy((uint8_t *)want + 15, &rel, 4);
	ck_assert_uint_eq(n, sizeof want);
	ck_assert_mem_eq(out, want, sizeof want);
}
END_TEST

START_TEST(jrcxz_and_loop_become_a_test_over_a_rel32_jump)
{
	/* 0: jrcxz +0x20; 2: loop -2; 4: ret */
	const uint8_t code[] = { 0xe3, 0x20, 0xe2, 0xfe, 0xc3 };
	uint8_t out[64];
	size_t n, off;
	struct cc_error err;
	struct cc_reloc *r;

	ck_assert_int_eq(cc_reloc__new(code, sizeof code, 0x1000, NULL, &r, &err), 0);
	n = cc_reloc__size(r);
	ck_assert_uint_eq(n, 9 + 9 + 1);
	ck_assert_int_eq(cc_reloc__encode(r, 0x8000, out, sizeof out, &err), 0);
	const uint8_t head[] = { 0xe3, 0x02, 0xeb, 0x05, 0xe9 };
	ck_assert_mem_eq(out, head, sizeof head);
	int32_t rel;
	memcpy(&rel, out + 5, 4);
	ck_assert_uint_eq(0x8000 + 9 + (int64_t)rel, 0x1022);
	const uint8_t loop[] = { 0xe2, 0x02, 0xeb, 0x05, 0xe9 };
	ck_assert_mem_eq(out + 9, loop, sizeof loop);
	memcpy(&rel, out + 14, 4);
	ck_assert_uint_eq(0x8000 + 18 + (int64_t)rel, 0x8000 + 9);	/* loops on its copy */
	ck_assert_int_eq(cc_reloc__map(r, 0x1004, &off), 0);
	ck_assert_uint_eq(off, 18);
	uint64_t pc;
	ck_assert_int_eq(cc_reloc__unmap(r, 9, &pc), 0);
	ck_assert_uint_eq(pc, 0x1002);
	ck_assert_int_eq(cc_reloc__unmap(r, 11, &pc), -ENOENT);
	ck_assert_int_eq(cc_reloc__map(r, 0x1001, &off), -ENOENT);
	cc_reloc__free(r);
}
END_TEST

START_TEST(what_cannot_be_relocated_is_refused_by_name_and_address)
{
	uint8_t out[64];
	size_t n;
	struct cc_error err;

	/* lea rax, [rip+0x100] copied 4 GiB away */
	const uint8_t lea[] = { 0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3 };
	ck_assert_ptr_null(relocated(lea, sizeof lea, 0x400000, 0x400000 + (4ULL << 30), NULL,
				     out, &n, &err));
	ck_assert_int_eq(err.err, -ERANGE);
	ck_assert_msg(strstr(err.msg, "lea rax, [") && strstr(err.msg, "0x400000") &&
		      strstr(err.msg, "reach"), "%s", err.msg);

	/* a call whose target is out of reach */
	const uint8_t call[] = { 0xe8, 0x00, 0x00, 0x00, 0x00 };
	ck_assert_ptr_null(relocated(call, sizeof call, 0x400000, 0x7f0000000000ULL, NULL,
				     out, &n, &err));
	ck_assert_msg(strstr(err.msg, "call") && strstr(err.msg, "0x400000"), "%s", err.msg);

	/* 0x06 (push es) does not exist in 64-bit mode */
	const uint8_t bad[] = { 0x90, 0x06, 0xc3 };
	ck_assert_ptr_null(relocated(bad, sizeof bad, 0x2000, 0x3000, NULL, out, &n, &err));
	ck_assert_int_eq(err.err, -EILSEQ);
	ck_assert_msg(strstr(err.msg, "0x2001"), "%s", err.msg);

	/* a call cut by the end of the code */
	const uint8_t cut[] = { 0x90, 0xe8, 0x00, 0x00 };
	ck_assert_ptr_null(relocated(cut, sizeof cut, 0x2000, 0x3000, NULL, out, &n, &err));
	ck_assert_msg(strstr(err.msg, "0x2001") && strstr(err.msg, "end"), "%s", err.msg);

	/* jmp +1 lands inside mov eax, 1 */
	const uint8_t mid[] = { 0xeb, 0x01, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3 };
	ck_assert_ptr_null(relocated(mid, sizeof mid, 0x2000, 0x3000, NULL, out, &n, &err));
	ck_assert_int_eq(err.err, -ENOTSUP);
	ck_assert_msg(strstr(err.msg, "jmp") && strstr(err.msg, "0x2000") &&
		      strstr(err.msg, "middle of an instruction (0x2003)"), "%s", err.msg);
}
END_TEST

START_TEST(prefixes_cover_whole_instructions_and_see_inner_returns)
{
	/* 0: push rbp; 1: call 0 (5 bytes); 6: nop; 7: ret */
	const uint8_t code[] = { 0x55, 0xe8, 0xfa, 0xff, 0xff, 0xff, 0x90, 0xc3 };
	struct cc_reloc_opts o = { .sz = sizeof o, .min_len = 5, .jump_back = true };
	struct cc_reloc *r;
	struct cc_error err;

	ck_assert_int_eq(cc_reloc__new(code, sizeof code, 0x1000, &o, &r, &err), 0);
	ck_assert_uint_eq(cc_reloc__src_len(r), 6);	/* push + call */
	ck_assert_uint_eq(cc_reloc__count(r), 2);
	ck_assert(!cc_reloc__has_inner_return(r));	/* returns to 0x1006, outside */
	ck_assert_uint_eq(cc_reloc__size(r), 1 + 5 + 5);
	cc_reloc__free(r);
	o.min_len = 7;
	ck_assert_int_eq(cc_reloc__new(code, sizeof code, 0x1000, &o, &r, &err), 0);
	ck_assert(cc_reloc__has_inner_return(r));
	cc_reloc__free(r);
}
END_TEST

/* ----------------------------------------------- libc, decoded back */

struct checked {
	unsigned funcs, refused, insns;
	char first_refusal[512];
};

/* Decode the copy at dst and check each instruction against the original:
 * same bytes, or the same absolute operand/branch target (mapped into the
 * copy when it pointed inside the function). */
static void verify_copy(const uint8_t *orig, size_t len, uint64_t src, const uint8_t *copy,
			uint64_t dst, struct cc_reloc *r, struct checked *st)
{
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t pos = 0; pos < len;) {
		ZydisDecodedInstruction a, b;
		ZydisDecodedOperand oa[ZYDIS_MAX_OPERAND_COUNT], ob[ZYDIS_MAX_OPERAND_COUNT];
		size_t off;
		ck_assert(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, orig + pos, len - pos, &a, oa)));
		ck_assert_int_eq(cc_reloc__map(r, src + pos, &off), 0);
		ck_assert(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, copy + off, 16, &b, ob)));
		st->insns++;
		if (!(a.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) {
			ck_assert_int_eq(a.length, b.length);
			ck_assert_mem_eq(orig + pos, copy + off, a.length);
		} else {
			uint64_t ta = 0, tb = 0;
			for (unsigned i = 0; i < a.operand_count_visible; i++)
				if ((oa[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && oa[i].imm.is_relative) ||
				    (oa[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
				     oa[i].mem.base == ZYDIS_REGISTER_RIP))
					ZydisCalcAbsoluteAddress(&a, &oa[i], src + pos, &ta);
			const ZydisDecodedInstruction *pb = &b;
			const ZydisDecodedOperand *pob = ob;
			uint64_t at = dst + off;
			ZydisDecodedInstruction c;
			ZydisDecodedOperand oc[ZYDIS_MAX_OPERAND_COUNT];
			if (b.mnemonic != a.mnemonic || b.meta.category != a.meta.category) {
				ck_assert_msg(0, "mnemonic changed at 0x%" PRIx64, src + pos);
			} else if (a.raw.imm[0].is_relative && a.raw.imm[0].size == 8 &&
				   (a.mnemonic == ZYDIS_MNEMONIC_JRCXZ || a.mnemonic == ZYDIS_MNEMONIC_JECXZ ||
				    a.mnemonic == ZYDIS_MNEMONIC_LOOP || a.mnemonic == ZYDIS_MNEMONIC_LOOPE ||
				    a.mnemonic == ZYDIS_MNEMONIC_LOOPNE)) {
				/* op +2; jmp +5; jmp rel32: the target is in the third */
				size_t skip = b.length + 2;
				ck_assert(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, copy + off + skip, 16, &c, oc)));
				pb = &c;
				pob = oc;
				at += skip;
			}
			for (unsigned i = 0; i < pb->operand_count_visible; i++)
				if ((pob[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && pob[i].imm.is_relative) ||
				    (pob[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
				     pob[i].mem.base == ZYDIS_REGISTER_RIP))
					ZydisCalcAbsoluteAddress(pb, &pob[i], at, &tb);
			size_t toff;
			bool is_branch = a.raw.imm[0].is_relative;
			uint64_t want = ta;
			if (is_branch && ta >= src && ta < src + len && cc_reloc__map(r, ta, &toff) == 0)
				want = dst + toff;
			ck_assert_msg(tb == want, "target of the copy of 0x%" PRIx64 " is 0x%" PRIx64
				      ", want 0x%" PRIx64, src + pos, tb, want);
		}
		pos += a.length;
	}
}

static void sweep_module(const char *path, uint64_t base, struct checked *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(e);
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			gelf_getsym(d, (int)i, &s);
			if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
			    s.st_size == 0)
				continue;
			const uint8_t *code = (const uint8_t *)(base + s.st_value);
			uint64_t src = base + s.st_value;
			uint64_t dst = src + (256 << 20);
			struct cc_reloc *r;
			struct cc_error err;
			st->funcs++;
			if (cc_reloc__new(code, s.st_size, src, NULL, &r, &err) < 0) {
				st->refused++;
				ck_assert_msg(strstr(err.msg, "0x"), "refusal without an address: %s",
					      err.msg);
				if (!st->first_refusal[0])
					snprintf(st->first_refusal, sizeof st->first_refusal, "%s",
						 err.msg);
				continue;
			}
			uint8_t *copy = malloc(cc_reloc__size(r));
			ck_assert_int_eq(cc_reloc__encode(r, dst, copy, cc_reloc__size(r), &err), 0);
			verify_copy(code, s.st_size, src, copy, dst, r, st);
			free(copy);
			cc_reloc__free(r);
		}
	}
	elf_end(e);
	close(fd);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (!strstr(info->dlpi_name, "/libc.so.6"))
		return 0;
	sweep_module(info->dlpi_name, info->dlpi_addr, arg);
	return 1;
}

START_TEST(every_function_of_libc_relocates_and_decodes_back)
{
	struct checked st = { 0 };

	ck_assert_int_eq(dl_iterate_phdr(find_libc, &st), 1);
	fprintf(stderr, "# libc: %u functions, %u instructions checked, %u refused%s%s\n",
		st.funcs, st.insns, st.refused, st.refused ? ", first: " : "", st.first_refusal);
	ck_assert_uint_gt(st.funcs, 1000);
	ck_assert_uint_le(st.refused * 100, st.funcs);	/* data in text, at most 1% */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reloc");
	TCase *tc = tcase_create("reloc");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, whole_functions_give_the_same_results, 0, 5);
	tcase_add_loop_test(tc, displaced_prefixes_jump_back_and_give_the_same_results, 0, 5);
	tcase_add_test(tc, short_branches_are_widened_and_internal_ones_follow_the_copy);
	tcase_add_test(tc, jrcxz_and_loop_become_a_test_over_a_rel32_jump);
	tcase_add_test(tc, what_cannot_be_relocated_is_refused_by_name_and_address);
	tcase_add_test(tc, prefixes_cover_whole_instructions_and_see_inner_returns);
	tcase_add_test(tc, every_function_of_libc_relocates_and_decodes_back);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
