/* The code cache, redirection and measurement in this process (no target:
 * nothing is stopped, which is fine for a single-threaded test). The corpus
 * shared objects provide real compiled functions to patch; every patch is
 * checked by calling the function, and every undo by the original bytes and
 * results coming back. */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "tests/lib/tu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int resolve_here(void *arg, const char *name, uint64_t *addr)
{
	(void)arg;
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p)
		return -ENOENT;
	*addr = (uint64_t)p;
	return 0;
}

/* A function of a corpus object, with its size from .symtab (the hidden
 * ones are not in .dynsym). */
static struct cc_func corpus_func(const char *so, const char *name)
{
	const char *path = tu_path(so);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h, "%s", dlerror());
	Dl_info info;
	void *any = dlsym(h, "cc_sum");
	ck_assert(any && dladdr(any, &info));
	struct cc_func f = { 0, 0, name };
	int fd = open(path, O_RDONLY);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			gelf_getsym(d, (int)i, &s);
			const char *n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && strcmp(n, name) == 0 && GELF_ST_TYPE(s.st_info) == STT_FUNC) {
				f.addr = (uint64_t)info.dli_fbase + s.st_value;
				f.size = s.st_size;
			}
		}
	}
	elf_end(e);
	close(fd);
	ck_assert_msg(f.addr, "%s not in %s", name, so);
	return f;	/* h stays open: the process is a fork per test */
}

static struct cc_cache *open_here(void)
{
	struct cc_cache *c;
	struct cc_error err;
	ck_assert_msg(cc_cache__open(NULL, NULL, &c, &err) == 0, "%s", err.msg);
	return c;
}

static struct cc_image *image(const char *rel, const char *sym)
{
	struct cc_image_opts o = { .sz = sizeof o, .symbol = sym };
	struct cc_image *im;
	struct cc_error err;
	ck_assert_msg(cc_image__open(tu_path(rel), &o, &im, &err) == 0, "%s", err.msg);
	return im;
}

/* Permissions of the mapping holding addr, as in /proc/self/maps. */
static void perms_of(uint64_t addr, char out[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	strcpy(out, "----");
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char p[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && addr >= lo && addr < hi)
			memcpy(out, p, 5);
	}
	fclose(f);
}

static bool any_wx_mapping(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool wx = false;
	while (fgets(line, sizeof line, f)) {
		char p[5];
		if (sscanf(line, "%*x-%*x %4s", p) == 1 && p[1] == 'w' && p[2] == 'x')
			wx = true;
	}
	fclose(f);
	return wx;
}

START_TEST(areas_are_near_and_never_writable_and_executable)
{
	struct cc_cache *c = open_here();
	uint64_t near = (uint64_t)&resolve_here, code, data, far;
	char p[5];

	ck_assert(!cc_cache__exists(c));
	ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, 100, 16, near, &code), 0);
	ck_assert_int_eq(cc_cache__alloc(c, CC_DATA, 100, 64, near, &data), 0);
	ck_assert(cc_cache__exists(c));
	ck_assert_uint_eq(code % 16, 0);
	ck_assert_uint_eq(data % 64, 0);
	ck_assert_uint_lt(code > near ? code - near : near - code, 1ULL << 31);
	ck_assert_uint_lt(data > near ? data - near : near - data, 1ULL << 31);
	perms_of(code, p);
	ck_assert_str_eq(p, "r-xp");
	perms_of(data, p);
	ck_assert_str_eq(p, "rw-p");
	/* code is written through /proc/self/mem, never made writable */
	const uint8_t ret42[] = { 0xb8, 42, 0, 0, 0, 0xc3 };
	ck_assert_int_eq(cc_cache__write(c, code, ret42, sizeof ret42), 0);
	ck_assert_int_eq(((int (*)(void))code)(), 42);
	ck_assert(!any_wx_mapping());
	/* not the cache: refused */
	ck_assert_int_eq(cc_cache__write(c, near, ret42, sizeof ret42), -EINVAL);
	ck_assert_str_eq(cc_phase_name(cc_cache__errphase(c)), "write");
	ck_assert_msg(strstr(cc_cache__errmsg(c), "write: 0x") &&
		      strstr(cc_cache__errmsg(c), "is not in the code cache"), "%s",
		      cc_cache__errmsg(c));
	/* elsewhere in the address space: another area, near that */
	far = near + (16ULL << 30);
	ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, 64, 16, far, &code), 0);
	ck_assert_uint_lt(code > far ? code - far : far - code, 1ULL << 31);
	cc_cache__close(c);
}
END_TEST

START_TEST(the_cache_grows_and_reuses_freed_blocks)
{
	struct cc_cache_opts o = { .sz = sizeof o, .code_size = 8192 };
	struct cc_cache *c;
	struct cc_error err;
	uint64_t near = (uint64_t)&resolve_here, a[8], again;

	ck_assert_int_eq(cc_cache__open(NULL, &o, &c, &err), 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, 3000, 64, near, &a[i]), 0);
	/* 8 x 3000 bytes do not fit in one 8 KiB area */
	int areas = 1;
	for (int i = 1; i < 8; i++)
		areas += a[i] != a[i - 1] + 3008 && a[i] != a[i - 1] + 3000;
	ck_assert_int_ge(areas, 3);
	/* a block in the middle of an area goes to the free list */
	ck_assert_int_eq(cc_cache__free(c, a[2], 3000), 0);
	ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, 2000, 64, near, &again), 0);
	ck_assert_uint_eq(again, a[2]);
	ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, 0, 16, near, &again), -EINVAL);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "allocate: "), "%s", cc_cache__errmsg(c));
	cc_cache__close(c);
}
END_TEST

/* The start of the mapping holding addr, and whether the one ending there
 * is inaccessible (the guard below the directory). */
static uint64_t mapping_start(uint64_t addr, bool *guard_below)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], prev_p[5] = "";
	unsigned long lo, hi, prev_hi = 0, start = 0;
	char p[5];
	*guard_below = false;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) != 3)
			continue;
		if (addr >= lo && addr < hi) {
			start = lo;
			*guard_below = prev_hi == lo && strcmp(prev_p, "---p") == 0;
		}
		prev_hi = hi;
		memcpy(prev_p, p, 5);
	}
	fclose(f);
	return start;
}

/* A later session finds the directory by its mapping's start: a read-write
 * mapping put right below it (by the target, or the cache's next area) must
 * not merge with it and hide it. */
START_TEST(the_directory_is_found_with_a_mapping_right_below_it)
{
	struct cc_cache *c = open_here();
	uint64_t data;
	bool guard;

	/* near the middle of a free 64 MiB, so the megabyte below is free */
	void *hole = mmap(NULL, 64 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(hole, MAP_FAILED);
	munmap(hole, 64 << 20);
	uint64_t near = (uint64_t)hole + (32 << 20);
	ck_assert_int_eq(cc_cache__alloc(c, CC_DATA, 64, 64, near, &data), 0);
	cc_cache__close(c);
	uint64_t dir = mapping_start(data, &guard);
	ck_assert_msg(guard, "no inaccessible page below the directory at 0x%" PRIx64, dir);
	uint64_t below = dir - 4096 - (1 << 20);
	void *m = mmap((void *)below, 1 << 20, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ck_assert_msg(m == (void *)below, "the megabyte below 0x%" PRIx64 " is taken", dir);
	memset(m, 1, 1 << 20);
	c = open_here();
	ck_assert(cc_cache__exists(c));
	ck_assert_int_eq(cc_cache__alloc(c, CC_DATA, 64, 64, near, &data), 0);
	ck_assert_uint_eq(mapping_start(data, &guard), dir);
	cc_cache__close(c);
	munmap(m, 1 << 20);
}
END_TEST

typedef int int_fn(int);

START_TEST(replace_and_restore_a_function)
{
	static const char *const sos[] = {
		"tests/codecache/corpus-cc-O0.so", "tests/codecache/corpus-cc-O2.so",
		"tests/codecache/corpus-clang-O0.so", "tests/codecache/corpus-clang-O2.so",
		"tests/codecache/corpus-cc-O2-cet.so",
	};
	struct cc_func f = corpus_func(sos[_i], "cc_switch");
	int_fn *sw = (int_fn *)f.addr;
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");
	uint8_t before[16], after[16];
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st };

	memcpy(before, sw, sizeof before);
	ck_assert_int_eq(sw(3), 3 ^ 0x55);
	ck_assert_msg(cc_cache__replace(c, &f, im, resolve_here, NULL, &o) == 0, "%s",
		      cc_cache__errmsg(c));
	ck_assert_int_eq(sw(3), 301);
	ck_assert_int_eq(sw(-7), -699);
	ck_assert_msg(strstr(report, "entry: jmp rel32 at 0x") && strstr(report, "loaded "),
		      "%s", report);
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	if (memcmp(before, endbr64, 4) == 0) {	/* kept, the jmp after it */
		ck_assert_msg(strstr(report, "after endbr64, which stays"), "%s", report);
		ck_assert_mem_eq((uint8_t *)sw, endbr64, 4);
		ck_assert_uint_eq(((uint8_t *)sw)[4], 0xe9);
	} else {
		ck_assert_uint_eq(((uint8_t *)sw)[0], 0xe9);
	}
	ck_assert_int_eq(memcmp(before, endbr64, 4) == 0, _i == 4);
	ck_assert_uint_eq(st.sites, 1);

	struct cc_redirect_info ri[4];
	ck_assert_int_eq(cc_cache__redirects(c, ri, 4), 1);
	ck_assert_str_eq(ri[0].name, "cc_switch");
	ck_assert_msg(strstr(ri[0].source, "alt.o:cc_switch"), "%s", ri[0].source);
	ck_assert(!ri[0].measure);

	ck_assert_msg(cc_cache__restore(c, f.addr, "cc_switch", &o) == 0, "%s", cc_cache__errmsg(c));
	memcpy(after, sw, sizeof after);
	ck_assert_mem_eq(before, after, sizeof before);
	ck_assert_int_eq(sw(3), 3 ^ 0x55);
	ck_assert_int_eq(cc_cache__redirects(c, ri, 4), 0);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

START_TEST(a_later_session_finds_and_undoes_a_replacement)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	int_fn *sw = (int_fn *)f.addr;
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");

	ck_assert_int_eq(cc_cache__replace(c, &f, im, resolve_here, NULL, NULL), 0);
	cc_image__free(im);
	cc_cache__close(c);		/* the session ends; the replacement stays */
	ck_assert_int_eq(sw(2), 201);

	c = open_here();
	ck_assert(cc_cache__exists(c));
	struct cc_redirect_info ri;
	ck_assert_int_eq(cc_cache__redirects(c, &ri, 1), 1);
	ck_assert_uint_eq(ri.func, f.addr);
	ck_assert_int_eq(cc_cache__restore(c, f.addr, NULL, NULL), 0);
	ck_assert_int_eq(sw(2), 44);
	cc_cache__close(c);
}
END_TEST

START_TEST(twice_and_bad_functions_are_refused_clearly)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");

	ck_assert_int_eq(cc_cache__replace(c, &f, im, resolve_here, NULL, NULL), 0);
	/* a function whose first bytes overlap those already patched: a
	 * request that cannot be done (status 2), not a busy one (11) */
	struct cc_func over = { f.addr - 2, f.size + 2, "cc_switch_minus_2" };
	ck_assert_int_eq(cc_cache__replace(c, &over, im, resolve_here, NULL, NULL), -EALREADY);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "the entry of cc_switch_minus_2 is already "
			     "patched"), "%s", cc_cache__errmsg(c));
	ck_assert_int_eq(cc_cache__replace(c, &f, im, resolve_here, NULL, NULL), -EEXIST);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "redirect: cc_switch is already replaced (by ") &&
		      strstr(cc_cache__errmsg(c), "alt.o:cc_switch); restore it first"), "%s",
		      cc_cache__errmsg(c));
	ck_assert_int_eq(cc_cache__restore(c, f.addr, "cc_switch", NULL), 0);
	ck_assert_int_eq(cc_cache__restore(c, f.addr, "cc_switch", NULL), -ENOENT);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "restore: cc_switch (0x") &&
		      strstr(cc_cache__errmsg(c), ") is not replaced"), "%s", cc_cache__errmsg(c));
	ck_assert_int_eq(cc_cache__errphase(c), CC_PHASE_RESTORE);

	struct cc_func tiny = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_nothing");
	ck_assert_int_eq(cc_cache__replace(c, &tiny, im, resolve_here, NULL, NULL), -ENOSPC);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "cc_nothing is 1 bytes long, too short for a "
			     "5-byte jump"), "%s", cc_cache__errmsg(c));

	struct cc_func loop = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_entry_loop");
	ck_assert_int_eq(cc_cache__replace(c, &loop, im, resolve_here, NULL, NULL), -ENOTSUP);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "cc_entry_loop branches into its own first bytes "
			     "(`jnz 0x"), "%s", cc_cache__errmsg(c));

	struct cc_func table = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_table_loop");
	ck_assert_int_eq(cc_cache__replace(c, &table, im, resolve_here, NULL, NULL), -ENOTSUP);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "cc_table_loop branches into its own first bytes "
			     "(`jmp rcx` at 0x"), "%s", cc_cache__errmsg(c));

	/* nothing of the failures stayed patched */
	ck_assert_int_eq(cc_cache__redirects(c, NULL, 0), 0);
	ck_assert_int_eq(((int_fn *)f.addr)(4), 9);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

START_TEST(without_a_symbol_size_the_extent_comes_from_the_cfg)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");
	char report[2048];
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report };
	uint64_t size = f.size;

	f.size = 0;
	ck_assert_msg(cc_cache__replace(c, &f, im, resolve_here, NULL, &o) == 0, "%s",
		      cc_cache__errmsg(c));
	char want[96];
	snprintf(want, sizeof want, "cc_switch: no symbol size; %" PRIu64 " bytes from its control "
		 "flow", size);
	ck_assert_msg(strstr(report, want), "%s (want %s)", report, want);
	ck_assert_int_eq(((int_fn *)f.addr)(3), 301);
	ck_assert_int_eq(cc_cache__restore(c, f.addr, NULL, NULL), 0);
	ck_assert_int_eq(((int_fn *)f.addr)(3), 3 ^ 0x55);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

START_TEST(a_dry_run_reports_and_changes_nothing)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");
	char report[2048];
	struct cc_patch_opts o = { .sz = sizeof o, .dry_run = true, .report = report,
				   .report_size = sizeof report };
	uint8_t before[8];

	memcpy(before, (void *)f.addr, sizeof before);
	ck_assert_msg(cc_cache__replace(c, &f, im, resolve_here, NULL, &o) == 0, "%s",
		      cc_cache__errmsg(c));
	ck_assert_msg(strstr(report, "would load ") && strstr(report, "would write 5 bytes at 0x"),
		      "%s", report);
	ck_assert_mem_eq(before, (void *)f.addr, sizeof before);
	ck_assert_int_eq(cc_cache__redirects(c, NULL, 0), 0);
	ck_assert_int_eq(((int_fn *)f.addr)(3), 3 ^ 0x55);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

/* A caller built against a newer padrone: its larger options struct is
 * taken when the fields this build does not know are zero, refused
 * (nothing patched, nothing restored) when it sets them. */
START_TEST(patch_options_from_a_newer_caller)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_switch");
	struct {
		struct cc_patch_opts o;
		uint64_t newer_field;
	} newer = { .o = { .sz = sizeof newer }, .newer_field = 1 };
	uint8_t before[8];

	memcpy(before, (void *)f.addr, sizeof before);
	ck_assert_int_eq(cc_cache__replace(c, &f, im, resolve_here, NULL, &newer.o), -EINVAL);
	ck_assert_msg(strstr(cc_cache__errmsg(c), "does not know"), "%s", cc_cache__errmsg(c));
	ck_assert_mem_eq(before, (void *)f.addr, sizeof before);
	ck_assert_int_eq(cc_cache__redirects(c, NULL, 0), 0);
	newer.newer_field = 0;
	ck_assert_msg(cc_cache__replace(c, &f, im, resolve_here, NULL, &newer.o) == 0, "%s",
		      cc_cache__errmsg(c));
	ck_assert_int_eq(((int_fn *)f.addr)(3), 301);
	newer.newer_field = 1;
	ck_assert_int_eq(cc_cache__restore(c, f.addr, NULL, &newer.o), -EINVAL);
	ck_assert_int_eq(((int_fn *)f.addr)(3), 301);
	newer.newer_field = 0;
	ck_assert_int_eq(cc_cache__restore(c, f.addr, NULL, &newer.o), 0);
	ck_assert_int_eq(((int_fn *)f.addr)(3), 3 ^ 0x55);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

START_TEST(calls_in_a_hot_caller_are_retargeted)
{
	const char *so = "tests/codecache/corpus-cc-O2.so";
	struct cc_func callee = corpus_func(so, "cc_callee");
	struct cc_func caller = corpus_func(so, "cc_caller");
	int_fn *call = (int_fn *)caller.addr;
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/alt.o", "cc_callee");
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .callers = &caller, .ncallers = 1,
				   .callsites_only = true, .report = report,
				   .report_size = sizeof report, .stats = &st };
	uint8_t entry[8];

	memcpy(entry, (void *)callee.addr, sizeof entry);
	ck_assert_int_eq(call(5), 16 + 19 * 2);
	ck_assert_msg(cc_cache__replace(c, &callee, im, resolve_here, NULL, &o) == 0, "%s",
		      cc_cache__errmsg(c));
	ck_assert_msg(strstr(report, "caller cc_caller at 0x") && strstr(report, "direct call"),
		      "%s", report);
	ck_assert_uint_ge(st.sites, 1);
	ck_assert_int_eq(call(5), 5000 + 6000 * 2);	/* the caller goes to the new code */
	ck_assert_mem_eq(entry, (void *)callee.addr, sizeof entry);	/* entry untouched */
	ck_assert_int_eq(cc_cache__restore(c, callee.addr, NULL, NULL), 0);
	ck_assert_int_eq(call(5), 16 + 19 * 2);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

typedef long fib_fn(int);

START_TEST(measure_times_every_call_including_recursion)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O0.so", "cc_fib");
	fib_fn *fib = (fib_fn *)f.addr;
	struct cc_cache *c = open_here();
	struct cc_measure_opts o = { .sz = sizeof o, .calls = 10000, .force = true };
	struct cc_measure *m;
	struct cc_measure_result r;
	uint8_t before[16];
	uint64_t done;

	memcpy(before, fib, sizeof before);
	ck_assert_msg(cc_measure__start(c, &f, &o, &m) == 0, "%s", cc_cache__errmsg(c));
	ck_assert_int_eq(fib(12), 144);			/* 2 * fib(13) - 1 calls */
	ck_assert_int_eq(cc_measure__poll(m, &done), 0);
	ck_assert_uint_eq(done, 465);
	struct cc_redirect_info ri;
	ck_assert_int_eq(cc_cache__redirects(c, &ri, 1), 1);
	ck_assert(ri.measure);
	ck_assert_int_eq(cc_measure__finish(m, &r), 0);
	ck_assert_uint_eq(r.calls, 465);
	ck_assert_uint_eq(r.skipped, 0);
	ck_assert(r.min_ns > 0 && r.min_ns <= r.p50_ns && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns);
	ck_assert(r.mean_ns > r.p50_ns);		/* a few long outer calls */
	ck_assert(r.tsc_ghz > 0.1 && r.tsc_ghz < 10);
	ck_assert(!r.has_ipc);
	ck_assert_mem_eq(before, fib, sizeof before);	/* the stub is gone */
	ck_assert_int_eq(cc_cache__redirects(c, NULL, 0), 0);
	ck_assert_int_eq(fib(10), 55);
	cc_measure__free(m);
	cc_cache__close(c);
}
END_TEST

START_TEST(measure_stops_timing_after_n_calls)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-clang-O2.so", "cc_switch");
	int_fn *sw = (int_fn *)f.addr;
	struct cc_cache *c = open_here();
	struct cc_measure_opts o = { .sz = sizeof o, .calls = 100, .force = true };
	struct cc_measure *m;
	struct cc_measure_result r;
	uint64_t done;

	ck_assert_msg(cc_measure__start(c, &f, &o, &m) == 0, "%s", cc_cache__errmsg(c));
	long sum = 0;
	for (int i = 0; i < 250; i++)
		sum += sw(i % 10);
	ck_assert_int_eq(cc_measure__wait(m, 1000, &done), 0);
	ck_assert_uint_eq(done, 100);
	ck_assert_int_eq(cc_measure__finish(m, &r), 0);
	ck_assert_uint_eq(r.calls, 100);
	long want = 0;
	for (int i = 0; i < 250; i++)
		want += sw(i % 10);
	ck_assert_int_eq(sum, want);
	ck_assert_int_eq(cc_measure__finish(m, &r), -EALREADY);
	cc_measure__free(m);
	cc_cache__close(c);
}
END_TEST

START_TEST(symbols_of_a_process_by_name)
{
	struct cc_syms *sy;
	struct cc_error err;
	struct cc_func f;
	uint64_t a;

	ck_assert_msg(cc_syms__open(getpid(), &sy, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cc_syms__func(sy, "tu_main", &f, &err), 0);
	ck_assert_uint_eq(f.addr, (uint64_t)&tu_main);
	ck_assert_uint_gt(f.size, 16);
	ck_assert_int_eq(cc_syms__func(sy, "no_such_function_here", &f, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "has no function named no_such_function_here"), "%s", err.msg);
	/* libc's own, also an IFUNC and a data object */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	ck_assert_ptr_nonnull(libc);
	static const char *const names[] = { "strlen", "memcpy", "snprintf", "qsort" };
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(cc_syms__resolve(sy, names[i], &a), 0);
		ck_assert_msg(a == (uint64_t)dlsym(libc, names[i]), "%s", names[i]);
	}
	ck_assert_int_eq(cc_syms__resolve(sy, "environ", &a), 0);
	ck_assert_ptr_eq(*(char ***)a, environ);
	dlclose(libc);
	cc_syms__free(sy);
}
END_TEST

START_TEST(replacement_code_linked_against_the_process_symbols)
{
	struct cc_func f = corpus_func("tests/codecache/corpus-cc-O2.so", "cc_switch");
	struct cc_cache *c = open_here();
	struct cc_image *im = image("tests/codecache/repl/libc_user.o", "cc_describe");
	struct cc_syms *sy;
	struct cc_error err;
	struct cc_loaded l;
	char buf[32];

	ck_assert_int_eq(cc_syms__open(getpid(), &sy, &err), 0);
	ck_assert_msg(cc_cache__load(c, im, f.addr, cc_syms__resolve, sy, &l) == 0, "%s",
		      cc_cache__errmsg(c));
	int (*d)(char *, size_t, const char *, int) = (void *)l.entry;
	ck_assert_int_eq(d(buf, sizeof buf, "xy", 1), 1 + 5 + 6 + 1000 + 10000 + 200000);
	ck_assert_str_eq(buf, "xy=1:2");
	cc_cache__unload(c, &l);
	cc_syms__free(sy);
	cc_image__free(im);
	cc_cache__close(c);
}
END_TEST

/* What a gate calls: it writes rcx, r11 and xmm5, as code following the
 * ABI may, and returns a + 2b + g + 2h, g and h from the stack. */
__asm__(".text\n"
	".globl gate_callee\n"
	".type gate_callee, @function\n"
	"gate_callee:\n"
	"	xor %ecx, %ecx\n"
	"	xor %r11d, %r11d\n"
	"	pxor %xmm5, %xmm5\n"
	"	lea (%rdi,%rsi,2), %rax\n"
	"	add 8(%rsp), %rax\n"
	"	add 16(%rsp), %rax\n"
	"	add 16(%rsp), %rax\n"
	"	ret\n"
	".size gate_callee, .-gate_callee\n");
void gate_callee(void);

/* Call gate as an -fipa-ra caller would: values in rcx, r11 and xmm5
 * across the call, 8 arguments (2 on the stack, rsp 16-aligned). */
static long call_gate(uint64_t gate, uint64_t *rcx, uint64_t *r11, uint64_t *x5)
{
	long ret;
	uint64_t a, b, c;

	__asm__ volatile("mov %%rsp, %%rbx\n\t"
			 "sub $256, %%rsp\n\t"	/* below our red zone */
			 "and $-16, %%rsp\n\t"
			 "movabs $0x1111111111111111, %%rcx\n\t"
			 "movabs $0x2222222222222222, %%r11\n\t"
			 "movabs $0x3333333333333333, %%rax\n\t"
			 "movq %%rax, %%xmm5\n\t"
			 "pushq $8\n\t"
			 "pushq $7\n\t"
			 "mov $1, %%edi\n\t"
			 "mov $2, %%esi\n\t"
			 "call *%[g]\n\t"
			 "mov %%rcx, %%rdx\n\t"
			 "mov %%r11, %%rsi\n\t"
			 "movq %%xmm5, %%rdi\n\t"
			 "mov %%rbx, %%rsp"
			 : "=&a"(ret), "=&d"(a), "=&S"(b), "=&D"(c)
			 : [g] "r"(gate)
			 : "rbx", "rcx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3",
			   "xmm4", "xmm5", "memory", "cc");
	*rcx = a;
	*r11 = b;
	*x5 = c;
	return ret;
}

START_TEST(a_gate_keeps_the_registers_callers_rely_on_and_passes_stack_arguments)
{
	struct cc_cache *c = open_here();
	uint32_t need = 1u << 1 | 1u << 11 | CC_REG_VEC(5);	/* rcx, r11, xmm5 */
	size_t n = cc__gate_encode(need, 0, 0, NULL);
	uint8_t buf[512];
	uint64_t gate, rcx, r11, x5;

	ck_assert_uint_le(n, sizeof buf);
	ck_assert_int_eq(cc_cache__alloc(c, CC_CODE, n, 16, (uint64_t)gate_callee, &gate), 0);
	ck_assert_uint_eq(cc__gate_encode(need, gate, (uint64_t)gate_callee, buf), n);
	ck_assert_int_eq(cc_cache__write(c, gate, buf, n), 0);
	/* directly, the callee destroys them */
	ck_assert_int_eq(call_gate((uint64_t)gate_callee, &rcx, &r11, &x5), 1 + 4 + 7 + 16);
	ck_assert_uint_eq(rcx, 0);
	ck_assert_uint_eq(r11, 0);
	ck_assert_uint_eq(x5, 0);
	/* through the gate, they survive, and g, h still reach it */
	ck_assert_int_eq(call_gate(gate, &rcx, &r11, &x5), 1 + 4 + 7 + 16);
	ck_assert_uint_eq(rcx, 0x1111111111111111ULL);
	ck_assert_uint_eq(r11, 0x2222222222222222ULL);
	ck_assert_uint_eq(x5, 0x3333333333333333ULL);
	cc_cache__close(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("cache");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, areas_are_near_and_never_writable_and_executable);
	tcase_add_test(tc, the_cache_grows_and_reuses_freed_blocks);
	tcase_add_test(tc, the_directory_is_found_with_a_mapping_right_below_it);
	tcase_add_loop_test(tc, replace_and_restore_a_function, 0, 5);
	tcase_add_test(tc, a_later_session_finds_and_undoes_a_replacement);
	tcase_add_test(tc, twice_and_bad_functions_are_refused_clearly);
	tcase_add_test(tc, without_a_symbol_size_the_extent_comes_from_the_cfg);
	tcase_add_test(tc, a_dry_run_reports_and_changes_nothing);
	tcase_add_test(tc, patch_options_from_a_newer_caller);
	tcase_add_test(tc, calls_in_a_hot_caller_are_retargeted);
	tcase_add_test(tc, measure_times_every_call_including_recursion);
	tcase_add_test(tc, measure_stops_timing_after_n_calls);
	tcase_add_test(tc, symbols_of_a_process_by_name);
	tcase_add_test(tc, replacement_code_linked_against_the_process_symbols);
	tcase_add_test(tc, a_gate_keeps_the_registers_callers_rely_on_and_passes_stack_arguments);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
