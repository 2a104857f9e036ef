/* elf/ without a live target: function tables checked against readelf,
 * nm and objdump on real binaries; .eh_frame; separate debug files. */
#include "elf/elf.h"
#include "tests/lib/tu.h"

#include <dwarf.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ ELF */

/* The file's own tables, as without a -dbg package. */
static const struct elf_load_opts no_debug = { .sz = sizeof no_debug, .no_debug_file = true };

static struct elf_file *load_file(const char *path)
{
	char why[256] = "";
	struct elf_file *e = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open %s", path);
	ck_assert_msg(elf_file__load(fd, NULL, 0, &no_debug, &e, why, sizeof(why)) == 0, "%s: %s", path, why);
	close(fd);
	return e;
}

/* Every sized FUNC symbol of readelf -sW is found with its exact bounds. */
static int check_against_readelf(struct elf_file *e, const char *path, const char *table)
{
	char cmd[512];
	int st, checked = 0;

	snprintf(cmd, sizeof(cmd),
		 "readelf -sW --dyn-syms '%s' | awk '/^Symbol table/ { t = ($3 == \"'\\''.dynsym'\\''\") ? \"dyn\" : \"sym\" } "
		 "$4 == \"FUNC\" && $7 != \"UND\" && $3 > 0 && t == \"%s\" { print $2, $3, $8 }'",
		 path, table);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long value, size;
		char name[256];
		if (sscanf(line, "%llx %lli %255s", &value, &size, name) != 3)
			continue;
		char *at = strchr(name, '@');
		if (at)
			*at = 0;	/* versioned dynsym names */
		const struct elf_fn *fn = elf_file__find(e, value);
		ck_assert_msg(fn, "%s: %s at %llx not found", path, name, value);
		ck_assert_msg(fn->start == value, "%s: %s starts at %llx, not %llx", path, name,
			      (unsigned long long)fn->start, value);
		/* aliases may be bigger ones at the same address */
		ck_assert_msg(fn->end >= value + size, "%s: %s ends at %llx, not %llx", path, name,
			      (unsigned long long)fn->end, value + size);
		checked++;
	}
	free(out);
	return checked;
}

START_TEST(elf_symtab_matches_readelf)
{
	const char *path = tu_path("tests/targets/prof_hot");
	struct elf_file *e = load_file(path);

	ck_assert_int_ge(check_against_readelf(e, path, "sym"), 5);
	ck_assert_uint_ge(e->nsymtab, 5);
	/* and a big one: this test program, sanitizers and all */
	char self[256];
	ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert_int_gt(l, 0);
	self[l] = 0;
	struct elf_file *me = load_file(self);
	ck_assert_int_gt(check_against_readelf(me, self, "sym"), 100);
	elf_file__free(me);
	/* the known function, named from .symtab */
	int st;
	char *v = tu_run("readelf -sW tests/targets/prof_hot | awk '$8 == \"prof_spin\" { print $2, $3 }'",
			 &st);
	unsigned long long value, size;
	ck_assert_int_eq(sscanf(v, "%llx %lli", &value, &size), 2);
	free(v);
	const struct elf_fn *fn = elf_file__find(e, value + size / 2);
	ck_assert_ptr_nonnull(fn);
	ck_assert_str_eq(fn->name, "prof_spin");
	ck_assert_int_eq(fn->bounds, ELF_BOUNDS_SYMTAB);
	ck_assert_uint_eq(fn->end - fn->start, size);
	elf_file__free(e);
}
END_TEST

START_TEST(elf_libc_dynsym_matches_readelf)
{
	char *libc = tu_run("ldd tests/targets/prof_hot | awk '/libc.so/ { print $3 }'", &(int){ 0 });
	ck_assert_ptr_nonnull(libc);
	libc[strcspn(libc, "\n")] = 0;
	struct elf_file *e = load_file(libc);

	ck_assert_int_gt(check_against_readelf(e, libc, "dyn"), 1000);
	/* libc has no .symtab on Debian: dynsym names, FDEs for the rest */
	ck_assert_uint_gt(e->ndynsym, 1000);
	ck_assert_uint_gt(e->nfde, 100);
	free(libc);
	elf_file__free(e);
}
END_TEST

START_TEST(elf_plt_entries_match_objdump)
{
	const char *path = tu_path("tests/targets/prof_hot");
	struct elf_file *e = load_file(path);
	char cmd[512];
	int st, checked = 0;

	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.sec -j .plt.got '%s' | "
		 "sed -n 's/^\\([0-9a-f]*\\) <\\(.*@plt\\)>:$/\\1 \\2/p'", path);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long a;
		char name[256];
		if (sscanf(line, "%llx %255s", &a, name) != 2)
			continue;
		const struct elf_fn *fn = elf_file__find(e, a);
		ck_assert_msg(fn && fn->start == a, "%s not found at %llx", name, a);
		ck_assert_str_eq(fn->name, name);
		checked++;
	}
	free(out);
	ck_assert_int_ge(checked, 3);	/* printf/puts, clock_gettime, ... */
	ck_assert_uint_eq(e->nplt, (size_t)checked);
	elf_file__free(e);
}
END_TEST

/* Where the PLT stub at addr jumps: its `jmp *disp32(%rip)`'s slot
 * (after endbr64 and a bnd prefix, if any), or 0. */
static uint64_t stub_slot(const uint8_t *p, uint64_t addr)
{
	for (int i = 0; i < 10; i++)
		if (p[i] == 0xff && p[i + 1] == 0x25) {
			int32_t disp;
			memcpy(&disp, p + i + 2, 4);
			return addr + (uint64_t)i + 6 + (uint64_t)(int64_t)disp;
		}
	return 0;
}

/* A PLT stub's NAME@plt, as profile/ names it, is a name users may give
 * (MODULE:NAME@plt too): this process's own close@plt, whose GOT slot
 * holds close as bound. No replacement object links to it. */
START_TEST(resolver_takes_plt_names_from_users_only)
{
	struct elf_modules *ms;
	const struct elf_module *exe = NULL;
	struct elf_def d;
	char why[1024], name[512];

	close(-1);	/* its slot bound, however lazily */
	ck_assert_int_eq(elf_modules__open(getpid(), &ms, why, sizeof why), 0);
	for (size_t i = 0; i < elf_modules__count(ms); i++)
		if (elf_modules__at(ms, i)->exe)
			exe = elf_modules__at(ms, i);
	ck_assert_ptr_nonnull(exe);
	snprintf(name, sizeof name, "%s:close@plt", exe->base_name);
	ck_assert_msg(elf_modules__resolve(ms, name, ELF_RESOLVE_USER, &d, why, sizeof why) == 0,
		      "%s", why);
	ck_assert_ptr_eq(d.module, exe);
	ck_assert_int_eq(d.sym->kind, ELF_SYM_PLT);
	ck_assert_str_eq(d.sym->name, "close@plt");
	ck_assert_ptr_eq(elf_module__plt_entry(exe, d.addr), d.sym);
	ck_assert_ptr_null(elf_module__plt_entry(exe, d.addr + 1));
	uint64_t slot = d.sym->got + exe->bias;
	ck_assert_uint_eq(stub_slot((const uint8_t *)(uintptr_t)d.addr, d.addr), slot);
	int (*bound)(int) = close;
	ck_assert_uint_eq(*(const uint64_t *)(uintptr_t)slot, (uint64_t)(uintptr_t)bound);
	ck_assert_int_eq(elf_modules__resolve(ms, name, ELF_RESOLVE_LINK, &d, why, sizeof why),
			 -ENOENT);
	ck_assert_int_eq(elf_modules__resolve(ms, "close@plt", ELF_RESOLVE_LINK, &d, why,
					      sizeof why), -ENOENT);
	elf_modules__free(ms);
}
END_TEST

START_TEST(elf_stripped_functions_come_from_eh_frame)
{
	const char *unstripped = tu_path("tests/targets/prof_hot_pie");
	const char *stripped = tu_path("tests/targets/prof_hot_stripped");
	struct elf_file *e = load_file(stripped);
	char cmd[512];
	int st;

	ck_assert_uint_eq(e->nsymtab, 0);
	ck_assert(e->dyn);
	snprintf(cmd, sizeof(cmd), "readelf -sW '%s' | awk '$4 == \"FUNC\" && $3 > 0 && "
		 "$7 != \"UND\" && $8 ~ /^prof_/ { print $2, $3, $8 }'", unstripped);
	char *out = tu_run(cmd, &st);
	int n = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long value, size;
		char name[64];
		ck_assert_int_eq(sscanf(line, "%llx %lli %63s", &value, &size, name), 3);
		const struct elf_fn *fn = elf_file__find(e, value);
		ck_assert_msg(fn, "%s not covered", name);
		ck_assert_int_eq(fn->bounds, ELF_BOUNDS_EH_FRAME);
		ck_assert_ptr_null(fn->name);
		ck_assert_uint_eq(fn->start, value);
		ck_assert_uint_eq(fn->end, value + size);
		n++;
	}
	free(out);
	ck_assert_int_eq(n, 4);	/* prof_note, prof_spin, prof_mix, prof_unit */
	elf_file__free(e);
}
END_TEST

/* The FDE count of our parser equals readelf's on several binaries. */
START_TEST(eh_frame_fde_count_matches_readelf)
{
	const char *paths[] = { "tests/targets/prof_hot_stripped", "tests/targets/prof_churn",
				"tests/targets/prof_nofde_stripped" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++) {
		const char *p = tu_path(paths[i]);
		char cmd[512];
		int st;
		snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s' | grep -c ' FDE '", p);
		char *out = tu_run(cmd, &st);
		int want = atoi(out);
		free(out);
		struct elf_file *e = load_file(p);
		/* FDEs that coincide with a symbol are merged into it; count all
		 * functions whose bounds an FDE gives or confirms */
		size_t got = 0;
		snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s' | "
			 "sed -n 's/.* FDE .*pc=\\([0-9a-f]*\\)\\.\\.\\([0-9a-f]*\\)$/\\1 \\2/p'", p);
		out = tu_run(cmd, &st);
		for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
			unsigned long long lo, hi;
			if (sscanf(line, "%llx %llx", &lo, &hi) != 2)
				continue;
			const struct elf_fn *fn = elf_file__find(e, lo);
			ck_assert_msg(fn && fn->start <= lo && fn->end >= hi,
				      "%s: FDE %llx..%llx not covered", p, lo, hi);
			got++;
		}
		free(out);
		ck_assert_int_eq((int)got, want);
		ck_assert_int_gt(want, 0);
		elf_file__free(e);
	}
}
END_TEST

START_TEST(elf_build_id_matches_readelf)
{
	int st;
	char *out = tu_run("readelf -n tests/targets/prof_hot | sed -n 's/.*Build ID: *//p'", &st);
	ck_assert_ptr_nonnull(out);
	out[strcspn(out, "\n")] = 0;
	ck_assert_int_eq(strlen(out), 40);
	struct elf_file *e = load_file(tu_path("tests/targets/prof_hot"));
	ck_assert_str_eq(e->build_id, out);
	free(out);
	elf_file__free(e);
}
END_TEST

START_TEST(elf_rejects_what_is_not_x86_64_elf)
{
	char why[256] = "";
	struct elf_file *e = NULL;
	int fd = open(tu_srcpath("tests/targets/prof_hot.c"), O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elf_file__load(fd, NULL, 0, &no_debug, &e, why, sizeof(why)), -ENOEXEC);
	ck_assert_str_eq(why, "not an ELF file");
	ck_assert_ptr_null(e);
	close(fd);
}
END_TEST

struct fde_got {
	uint64_t s[4], e[4], at[4];
	int n;
};

static void fde_at_cb(uint64_t s, uint64_t e, uint64_t at, void *arg)
{
	struct fde_got *g = arg;

	if (g->n < 4) {
		g->s[g->n] = s;
		g->e[g->n] = e;
		g->at[g->n] = at;
	}
	g->n++;
}

/* A hand-made .eh_frame: one CIE (zR, pcrel|sdata4), two FDEs. */
START_TEST(eh_frame_parser_decodes_pcrel_fdes)
{
	uint8_t buf[128] = { 0 };
	size_t o = 0;
	/* CIE */
	uint8_t cie[] = { 0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
			  0x0c, 7, 8, 0x90, 1, 0, 0 };
	memcpy(buf, cie, sizeof(cie));
	o = sizeof(cie);
	uint64_t sec = 0x10000;
	for (int k = 0; k < 2; k++) {
		uint32_t len = 16, back = (uint32_t)(o + 4);
		int32_t pc = (int32_t)(0x2000 + 0x100 * k - (int64_t)(o + 8));
		uint32_t range = 0x40 + (uint32_t)k;
		memcpy(buf + o, &len, 4);
		memcpy(buf + o + 4, &back, 4);
		memcpy(buf + o + 8, &pc, 4);
		memcpy(buf + o + 12, &range, 4);
		o += 20;
	}
	struct fde_got got = { .n = 0 };
	ck_assert_int_eq(elf_eh_frame__each_fde(buf, o + 4, sec, fde_at_cb, &got), 2);
	ck_assert_uint_eq(got.s[0], sec + 0x2000);
	ck_assert_uint_eq(got.e[0], sec + 0x2040);
	ck_assert_uint_eq(got.s[1], sec + 0x2100);
	ck_assert_uint_eq(got.e[1], sec + 0x2141);
	/* each FDE's own address, where the unwinder's table points */
	struct fde_got at = { .n = 0 };
	ck_assert_int_eq(elf_eh_frame__each_fde(buf, o + 4, sec, fde_at_cb, &at), 2);
	ck_assert_uint_eq(at.s[1], sec + 0x2100);
	ck_assert_uint_eq(at.at[0], sec + sizeof(cie));
	ck_assert_uint_eq(at.at[1], sec + sizeof(cie) + 20);
}
END_TEST


/* Hand-made .eh_frame_hdr headers: the encodings linkers write (pcrel
 * sdata4, udata4), an absolute pointer, no table, and what is no header. */
START_TEST(eh_frame_hdr_header_and_table)
{
	const uint64_t at = 0x5000;
	struct elf_eh_frame_hdr eh;
	uint8_t h[24] = { 1, DW_EH_PE_pcrel | DW_EH_PE_sdata4, DW_EH_PE_udata4,
			  DW_EH_PE_datarel | DW_EH_PE_sdata4 };
	int32_t rel = 0x100;
	uint32_t count = 7;
	memcpy(h + 4, &rel, 4);
	memcpy(h + 8, &count, 4);
	ck_assert_int_eq(elf_eh_frame_hdr__read(h, 12, at, &eh), 0);
	ck_assert_uint_eq(eh.eh_frame, at + 4 + 0x100);
	ck_assert_uint_eq(eh.table, at + 12);
	ck_assert_uint_eq(eh.count, 7);

	uint64_t abs = 0x123456789;
	h[1] = DW_EH_PE_udata8;
	memcpy(h + 4, &abs, 8);
	memcpy(h + 12, &count, 4);
	ck_assert_int_eq(elf_eh_frame_hdr__read(h, 16, at, &eh), 0);
	ck_assert_uint_eq(eh.eh_frame, abs);
	ck_assert_uint_eq(eh.table, at + 16);

	h[3] = DW_EH_PE_omit;	/* .eh_frame found, nothing to search */
	ck_assert_int_eq(elf_eh_frame_hdr__read(h, 16, at, &eh), 0);
	ck_assert_uint_eq(eh.eh_frame, abs);
	ck_assert_uint_eq(eh.table, 0);
	ck_assert_uint_eq(eh.count, 0);

	ck_assert_int_eq(elf_eh_frame_hdr__read(h, 8, at, &eh), -EINVAL);	/* cut short */
	h[0] = 2;
	ck_assert_int_eq(elf_eh_frame_hdr__read(h, 16, at, &eh), -EINVAL);
}
END_TEST


/* LEB128 as DWARF's own examples give it, sign extension, more than 64
 * bits, and a number cut short. */
START_TEST(cursor_reads_leb128)
{
	static const uint8_t u[] = { 0xe5, 0x8e, 0x26 }, s1[] = { 0xc0, 0xbb, 0x78 },
			     s2[] = { 0x3f, 0x40, 0x80, 0x7f }, cut[] = { 0x80, 0x80 },
			     big[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				       0xff, 0x01 };
	struct elf_cursor c = { u, u + sizeof u, 0, false };
	ck_assert_uint_eq(elf_cursor__uleb(&c), 624485);
	ck_assert(!c.bad && c.p == c.end);
	c = (struct elf_cursor){ s1, s1 + sizeof s1, 0, false };
	ck_assert_int_eq(elf_cursor__sleb(&c), -123456);
	c = (struct elf_cursor){ s2, s2 + sizeof s2, 0, false };
	ck_assert_int_eq(elf_cursor__sleb(&c), 63);
	ck_assert_int_eq(elf_cursor__sleb(&c), -64);
	ck_assert_int_eq(elf_cursor__sleb(&c), -128);
	ck_assert(!c.bad);
	c = (struct elf_cursor){ big, big + sizeof big, 0, false };
	ck_assert_uint_eq(elf_cursor__uleb(&c), UINT64_MAX);
	ck_assert(!c.bad && c.p == c.end);
	c = (struct elf_cursor){ cut, cut + sizeof cut, 0, false };
	elf_cursor__uleb(&c);
	ck_assert(c.bad);
	c = (struct elf_cursor){ cut, cut + sizeof cut, 0, false };
	elf_cursor__sleb(&c);
	ck_assert(c.bad);
}
END_TEST


/* ------------------------------------------------------------ debug files */

/* A scratch directory removed at exit (the test's fork ends with it). */
static char *scratch(void)
{
	static char dir[] = "/tmp/padrone-elf-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	free(tu_run(cmd, &st));
	ck_assert_msg(st == 0, "%s: status %d", cmd, st);
}

static struct elf_file *load_with(const char *path, const struct elf_load_opts *o)
{
	char why[256] = "";
	struct elf_file *e = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open %s", path);
	ck_assert_msg(elf_file__load(fd, NULL, 0, o, &e, why, sizeof(why)) == 0, "%s: %s", path,
		      why);
	close(fd);
	return e;
}

/* prof_spin of a stripped copy: sub_ADDR without its debug file, named
 * from the debug file's .symtab with it. */
static void check_named_by(struct elf_file *e, const char *debug)
{
	int st;
	char *v = tu_run("readelf -sW tests/targets/prof_hot_pie | "
			 "awk '$8 == \"prof_spin\" { print $2 }'", &st);
	unsigned long long value;
	ck_assert_int_eq(sscanf(v, "%llx", &value), 1);
	free(v);
	const struct elf_fn *fn = elf_file__find(e, value);
	ck_assert_ptr_nonnull(fn);
	ck_assert_uint_eq(fn->start, value);
	if (!debug) {
		ck_assert_ptr_null(fn->name);
		ck_assert_str_eq(e->debug_path, "");
		return;
	}
	ck_assert_ptr_nonnull(fn->name);
	ck_assert_str_eq(fn->name, "prof_spin");
	ck_assert_int_eq(fn->bounds, ELF_BOUNDS_SYMTAB);
	ck_assert_str_eq(e->debug_path, debug);
	size_t n;
	ck_assert_ptr_nonnull(elf_file__syms_named(e, "prof_spin", &n));
	ck_assert_uint_eq(n, 1);
}

static void put32(uint8_t *b, size_t o, uint32_t v)
{
	memcpy(b + o, &v, 4);
}

/* A hand-made .eh_frame with a CIE "zLR" (pcrel|sdata4 pointers): an FDE
 * with an LSDA that starts as a call leaves the stack (CFA = rsp + 8), and
 * one without that starts elsewhere (CFA = rsp + 48: a cold part). */
START_TEST(eh_frame_fdes_give_lsda_and_entry_state)
{
	uint8_t buf[72] = { 0 };
	const uint64_t sec = 0x10000;
	const uint8_t cie[] = { 20, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'L', 'R', 0, 1, 0x78, 16, 2,
				0x1b, 0x1b, 0x0c, 7, 8, 0x90, 1 };
	memcpy(buf, cie, sizeof cie);
	put32(buf, 24, 20);			/* FDE 1 */
	put32(buf, 28, 28);			/* back to the CIE */
	put32(buf, 32, 0x2000 - 32);		/* pc, relative to its field */
	put32(buf, 36, 0x40);
	buf[40] = 4;				/* augmentation: the LSDA */
	put32(buf, 41, 0x3000 - 41);
	put32(buf, 48, 16);			/* FDE 2 */
	put32(buf, 52, 52);
	put32(buf, 56, 0x2100 - 56);
	put32(buf, 60, 0x20);
	buf[64] = 0;				/* no augmentation data */
	buf[65] = 0x0e;				/* def_cfa_offset 48 */
	buf[66] = 48;
	struct elf_fde *f;
	size_t n;
	ck_assert_int_eq(elf_eh_frame__fdes(buf, sizeof buf, sec, &f, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(f[0].start, sec + 0x2000);
	ck_assert_uint_eq(f[0].end, sec + 0x2040);
	ck_assert_uint_eq(f[0].lsda, sec + 0x3000);
	ck_assert(f[0].entry);
	ck_assert_uint_eq(f[1].start, sec + 0x2100);
	ck_assert_uint_eq(f[1].end, sec + 0x2120);
	ck_assert_uint_eq(f[1].lsda, 0);
	ck_assert(!f[1].entry);
	free(f);
	/* cut inside the first FDE: a reason, not a crash */
	ck_assert_int_lt(elf_eh_frame__fdes(buf, 30, sec, &f, &n), 0);
}
END_TEST


START_TEST(elf_debug_file_found_by_build_id)
{
	const char *d = scratch();
	char bin[512], dbg[512], debug[600];
	struct elf_file *e = load_file(tu_path("tests/targets/prof_hot_pie"));
	char id[41];
	memcpy(id, e->build_id, sizeof id);
	elf_file__free(e);
	ck_assert_int_eq(strlen(id), 40);

	snprintf(bin, sizeof bin, "%s/bin/prof", d);
	snprintf(dbg, sizeof dbg, "%s/debug", d);
	snprintf(debug, sizeof debug, "%s/.build-id/%.2s/%s.debug", dbg, id, id + 2);
	sh("mkdir -p %s/bin %s/.build-id/%.2s && strip -o %s %s && objcopy --only-keep-debug %s %s",
	   d, dbg, id, bin, tu_path("tests/targets/prof_hot_pie"),
	   tu_path("tests/targets/prof_hot_pie"), debug);
	struct elf_load_opts o = { .sz = sizeof o, .path = bin, .debug_dir = dbg, .names = true };
	e = load_with(bin, &o);
	check_named_by(e, debug);
	elf_file__free(e);
	o.no_debug_file = true;
	e = load_with(bin, &o);
	check_named_by(e, NULL);
	elf_file__free(e);
	/* a debug file of another build is not taken */
	sh("objcopy --only-keep-debug %s %s", tu_path("tests/targets/prof_hot"), debug);
	o.no_debug_file = false;
	e = load_with(bin, &o);
	check_named_by(e, NULL);
	elf_file__free(e);
	sh("rm -rf %s", d);
}
END_TEST

START_TEST(elf_debug_file_found_by_debuglink)
{
	const char *d = scratch();
	char bin[512], debug[600];

	snprintf(bin, sizeof bin, "%s/prof", d);
	snprintf(debug, sizeof debug, "%s/.debug/prof.debug", d);
	/* no build-id, so only the link can find it */
	sh("mkdir -p %s/.debug && cd %s && objcopy -R .note.gnu.build-id %s full && "
	   "objcopy --only-keep-debug full .debug/prof.debug 2>/dev/null && strip -o prof full && "
	   "objcopy --add-gnu-debuglink=.debug/prof.debug prof && rm full 2>/dev/null",
	   d, d, tu_path("tests/targets/prof_hot_pie"));
	struct elf_load_opts o = { .sz = sizeof o, .path = bin, .debug_dir = d, .names = true };
	struct elf_file *e = load_with(bin, &o);
	ck_assert_str_eq(e->build_id, "");
	check_named_by(e, debug);
	elf_file__free(e);
	sh("rm -rf %s", d);
}
END_TEST

/* libc6-dbg's file names libc's statics, as perf and gdb show them. */
START_TEST(elf_libc6_dbg_names_libc_internals)
{
	int st;
	char *libc = tu_run("ldd tests/targets/prof_hot | awk '/libc.so/ { print $3 }'", &st);
	ck_assert_ptr_nonnull(libc);
	libc[strcspn(libc, "\n")] = 0;
	struct elf_file *e = load_file(libc);
	char path[256];
	snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", e->build_id,
		 e->build_id + 2);
	elf_file__free(e);
	/* installed by scripts/install-deps (before the suite: the names of a
	 * whole run then come from the same files) */
	ck_assert_msg(access(path, R_OK) == 0, "no %s: apt-get install libc6-dbg", path);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "readelf -sW %s | awk '$8 == \"_int_malloc\" { print $2, $3 }'",
		 path);
	char *v = tu_run(cmd, &st);
	unsigned long long value, size;
	ck_assert_int_eq(sscanf(v, "%llx %lli", &value, &size), 2);
	free(v);
	struct elf_load_opts o = { .sz = sizeof o, .path = libc };
	e = load_with(libc, &o);
	ck_assert_str_eq(e->debug_path, path);
	const struct elf_fn *fn = elf_file__find(e, value + size / 2);
	ck_assert_ptr_nonnull(fn);
	ck_assert_str_eq(fn->name, "_int_malloc");
	ck_assert_uint_eq(fn->start, value);
	ck_assert_uint_eq(fn->end, value + size);
	ck_assert_uint_gt(e->nsymtab, 1000);
	elf_file__free(e);
	e = load_file(libc);	/* without it: an FDE, no name */
	fn = elf_file__find(e, value + size / 2);
	ck_assert(!fn || !fn->name || strcmp(fn->name, "_int_malloc"));
	elf_file__free(e);
	free(libc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("elf");
	TCase *tc = tcase_create("file");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, elf_symtab_matches_readelf);
	tcase_add_test(tc, elf_libc_dynsym_matches_readelf);
	tcase_add_test(tc, elf_plt_entries_match_objdump);
	tcase_add_test(tc, resolver_takes_plt_names_from_users_only);
	tcase_add_test(tc, elf_stripped_functions_come_from_eh_frame);
	tcase_add_test(tc, eh_frame_fde_count_matches_readelf);
	tcase_add_test(tc, elf_build_id_matches_readelf);
	tcase_add_test(tc, elf_rejects_what_is_not_x86_64_elf);
	tcase_add_test(tc, eh_frame_parser_decodes_pcrel_fdes);
	tcase_add_test(tc, eh_frame_fdes_give_lsda_and_entry_state);
	tcase_add_test(tc, eh_frame_hdr_header_and_table);
	tcase_add_test(tc, cursor_reads_leb128);
	suite_add_tcase(s, tc);
	tc = tcase_create("debug");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, elf_debug_file_found_by_build_id);
	tcase_add_test(tc, elf_debug_file_found_by_debuglink);
	tcase_add_test(tc, elf_libc6_dbg_names_libc_internals);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
