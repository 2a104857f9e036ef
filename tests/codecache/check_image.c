/* The loader of replacement code, in this process: objects and shared
 * objects built by the compiler are linked at buffers mapped here, against
 * this process's own libc, and called. */
#include "codecache/codecache.h"
#include "tests/lib/tu.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
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

static int resolve_nothing(void *arg, const char *name, uint64_t *addr)
{
	(void)arg, (void)name, (void)addr;
	return -ENOENT;
}

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

struct loaded {
	void *code, *data;
	size_t code_len, data_len;
	uint64_t entry;
};

static size_t pages(size_t n) { return n ? (n + 4095) & ~4095UL : 4096; }

/* Open, lay out, link near `near` and protect: the steps a code cache does
 * in a target, done here in buffers of our own. */
static int load(const char *rel, const char *symbol, bool raw, const void *near,
		cc_resolve_fn resolve, struct loaded *l, struct cc_error *err)
{
	struct cc_image_opts o = { .sz = sizeof o, .symbol = symbol, .raw = raw };
	struct cc_image *im;
	struct cc_image_layout lay;
	int rc;

	memset(l, 0, sizeof *l);
	if ((rc = cc_image__open(rel[0] == '/' ? rel : tu_path(rel), &o, &im, err)) < 0)
		return rc;
	cc_image__layout(im, &lay);
	l->code_len = pages(lay.code_size);
	l->data_len = pages(lay.data_size);
	l->code = map_near(near, l->code_len);
	l->data = map_near(near, l->data_len);
	ck_assert(l->code && l->data);
	rc = cc_image__link(im, (uint64_t)l->code, (uint64_t)l->data, resolve, NULL, l->code,
			    l->data, &l->entry, err);
	cc_image__free(im);
	if (rc < 0)
		return rc;
	if (lay.fixed) {
		for (size_t i = 0; i < lay.nsegs; i++) {
			int prot = PROT_READ | (lay.segs[i].prot & CC_PROT_W ? PROT_WRITE : 0) |
				   (lay.segs[i].prot & CC_PROT_X ? PROT_EXEC : 0);
			ck_assert_int_eq(mprotect((char *)l->code + lay.segs[i].off, lay.segs[i].size,
						  prot), 0);
		}
	} else {
		ck_assert_int_eq(mprotect(l->code, l->code_len, PROT_READ | PROT_EXEC), 0);
	}
	return 0;
}

static void unload(struct loaded *l)
{
	munmap(l->code, l->code_len);
	munmap(l->data, l->data_len);
}

typedef int describe_fn(char *buf, size_t size, const char *name, int n);

static void check_describe(describe_fn *f)
{
	char buf[64];

	/* twice/square + weights + strlen(buf) + environ + calls + COMMON */
	ck_assert_int_eq(f(buf, sizeof buf, "abc", 5), 25 + 5 + 7 + 1000 + 10000 + 200000);
	ck_assert_str_eq(buf, "abc=5:3");
	ck_assert_int_eq(f(buf, sizeof buf, "abc", 2), 4 + 7 + 7 + 1000 + 20000 + 400000);
	ck_assert_str_eq(buf, "abc=2:3");
}

START_TEST(an_object_calls_libc_and_uses_its_own_data)
{
	struct loaded l;
	struct cc_error err;

	/* far from libc: its calls go through stubs */
	ck_assert_msg(load("tests/codecache/repl/libc_user.o", "cc_describe", false,
			   (void *)&resolve_here, resolve_here, &l, &err) == 0, "%s", err.msg);
	check_describe((describe_fn *)l.entry);
	unload(&l);
	/* near libc: direct calls */
	ck_assert_msg(load("tests/codecache/repl/libc_user.o", "cc_describe", false,
			   dlsym(RTLD_DEFAULT, "snprintf"), resolve_here, &l, &err) == 0, "%s",
		      err.msg);
	check_describe((describe_fn *)l.entry);
	unload(&l);
}
END_TEST

START_TEST(a_shared_object_keeps_its_layout)
{
	struct loaded l;
	struct cc_error err;

	ck_assert_msg(load("tests/codecache/repl/libc_user.so", "cc_describe", false,
			   (void *)&resolve_here, resolve_here, &l, &err) == 0, "%s", err.msg);
	check_describe((describe_fn *)l.entry);
	unload(&l);
}
END_TEST

START_TEST(avx2_code_built_with_O3_runs)
{
	struct loaded l;
	struct cc_error err;
	float a[37], b[37], c[37];

	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "# no AVX2 on this CPU: the AVX2 object is only linked\n");
	}
	ck_assert_msg(load("tests/codecache/repl/vecadd_avx2.o", NULL, false, (void *)&resolve_here,
			   resolve_here, &l, &err) == 0, "%s", err.msg);
	if (__builtin_cpu_supports("avx2")) {
		for (int i = 0; i < 37; i++)
			a[i] = (float)i * 0.5f, b[i] = (float)(100 - i);
		((void (*)(float *, const float *, const float *, int))l.entry)(c, a, b, 37);
		for (int i = 0; i < 37; i++)
			ck_assert(c[i] == a[i] + b[i]);
	}
	unload(&l);
}
END_TEST

START_TEST(a_raw_blob_is_code_from_its_first_byte)
{
	/* mov eax, edi; imul eax, eax; ret */
	const unsigned char blob[] = { 0x89, 0xf8, 0x0f, 0xaf, 0xc0, 0xc3 };
	char path[] = "/tmp/padrone-blob-XXXXXX";
	int fd = mkstemp(path);
	struct loaded l;
	struct cc_error err;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, blob, sizeof blob), (int)sizeof blob);
	close(fd);
	ck_assert_msg(load(path, NULL, true, (void *)&resolve_here, resolve_here, &l, &err) == 0,
		      "%s", err.msg);
	unlink(path);
	ck_assert_int_eq(((int (*)(int))l.entry)(12), 144);
	unload(&l);
}
END_TEST

/* vecadd_avx2.o with one field of the section header named sect changed
 * by fix, written to a file of this test; opened: its status. */
static int open_corrupted(const char *sect, void (*fix)(Elf64_Shdr *), struct cc_error *err)
{
	FILE *f = fopen(tu_path("tests/codecache/repl/vecadd_avx2.o"), "rb");
	static unsigned char buf[1 << 16];
	char path[] = "/tmp/padrone-corrupt.XXXXXX";
	struct cc_image *im = NULL;

	ck_assert(f);
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh->e_shoff);
	const char *names = (const char *)buf + sh[eh->e_shstrndx].sh_offset;
	bool found = false;
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (strcmp(names + sh[i].sh_name, sect) == 0) {
			fix(&sh[i]);
			found = true;
		}
	ck_assert_msg(found, "no section %s", sect);
	int fd = mkstemp(path);
	ck_assert(fd >= 0 && write(fd, buf, n) == (ssize_t)n);
	close(fd);
	int rc = cc_image__open(path, NULL, &im, err);
	cc_image__free(im);
	unlink(path);
	return rc;
}

static void huge(Elf64_Shdr *sh) { sh->sh_size = 1ULL << 31; }
static void no_entsize(Elf64_Shdr *sh) { sh->sh_entsize = 0; }
static void far_info(Elf64_Shdr *sh) { sh->sh_info = 9999; }
static void page_align(Elf64_Shdr *sh) { sh->sh_addralign = 4096; }

START_TEST(corrupt_objects_are_refused_at_open)
{
	struct cc_error err;

	/* before, 2 GiB were allocated and filled, in a dry run too */
	ck_assert_int_eq(open_corrupted(".text", huge, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "is corrupt: section .text (2147483648 bytes at offset 0x40) "
			     "ends past the end of the file"), "%s", err.msg);
	/* before, a division by zero */
	ck_assert_int_eq(open_corrupted(".symtab", no_entsize, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "is corrupt: section .symtab is not a table of 24-byte "
			     "entries"), "%s", err.msg);
	ck_assert_int_eq(open_corrupted(".rela.eh_frame", far_info, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "is corrupt: section .rela.eh_frame is not a table of 24-byte "
			     "entries linked to a section of the file"), "%s", err.msg);
	/* the cache aligns blocks to 64 */
	ck_assert_int_eq(open_corrupted(".text", page_align, &err), -ENOTSUP);
	ck_assert_msg(strstr(err.msg, "section .text needs 4096-byte alignment; the code cache "
			     "aligns to 64"), "%s", err.msg);
}
END_TEST

START_TEST(bad_inputs_get_clear_errors)
{
	struct loaded l;
	struct cc_error err;
	void *near = (void *)&resolve_here;

	ck_assert_int_eq(load("tests/codecache/repl/libc_user.o", NULL, false, near, resolve_here,
			      &l, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "several functions (cc_describe, cc_other)"), "%s", err.msg);

	ck_assert_int_eq(load("tests/codecache/repl/libc_user.o", "nope", false, near, resolve_here,
			      &l, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no function named nope; it defines cc_describe, cc_other"),
		      "%s", err.msg);

	ck_assert_int_eq(load("tests/codecache/repl/libc_user.o", "cc_describe", false, near,
			      resolve_nothing, &l, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "which the target does not define"), "%s", err.msg);
	unload(&l);

	ck_assert_int_eq(load("tests/codecache/repl/tls_user.o", NULL, false, near, resolve_here,
			      &l, &err), -ENOTSUP);
	ck_assert_msg(strstr(err.msg, "thread-local"), "%s", err.msg);

	ck_assert_int_eq(load("tests/codecache/repl/nopic.o", NULL, false, near, resolve_here,
			      &l, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "R_X86_64_32") && strstr(err.msg, "-fPIC"), "%s", err.msg);
	unload(&l);

	ck_assert_int_eq(load(tu_srcpath("tests/codecache/repl/nopic.c"), NULL, false, near,
			      resolve_here, &l, &err), -ENOEXEC);
	ck_assert_msg(strstr(err.msg, "not an ELF file"), "%s", err.msg);

	ck_assert_int_eq(load("/nonexistent/x.o", NULL, false, near, resolve_here, &l, &err),
			 -ENOENT);
	ck_assert_msg(strstr(err.msg, "cannot open /nonexistent/x.o"), "%s", err.msg);

	ck_assert_int_eq(load("/bin/true", NULL, false, near, resolve_here, &l,
			      &err), -ENOEXEC);
	ck_assert_msg(strstr(err.msg, "executable"), "%s", err.msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("image");
	TCase *tc = tcase_create("image");
	tcase_add_test(tc, an_object_calls_libc_and_uses_its_own_data);
	tcase_add_test(tc, a_shared_object_keeps_its_layout);
	tcase_add_test(tc, avx2_code_built_with_O3_runs);
	tcase_add_test(tc, a_raw_blob_is_code_from_its_first_byte);
	tcase_add_test(tc, bad_inputs_get_clear_errors);
	tcase_add_test(tc, corrupt_objects_are_refused_at_open);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
