/* profile/ without a live target: the mmap ring reader on synthetic data
 * (records that wrap, a corrupt header), the stack table; perf
 * map files (parsing, overrides, growth, refusals). */
#include "profile/internal.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ ring */

#define RING_DATA 256

struct fake_ring {
	void *base;
	struct prof_ring r;
	uint64_t head;		/* where the "kernel" writes next */
};

static void fake_init(struct fake_ring *f)
{
	f->base = aligned_alloc(4096, 2 * 4096);
	ck_assert_ptr_nonnull(f->base);
	memset(f->base, 0, 2 * 4096);
	((struct perf_event_mmap_page *)f->base)->data_offset = 4096;
	ck_assert_int_eq(prof_ring__init(&f->r, f->base, RING_DATA), 0);
	f->head = 0;
}

static void fake_fini(struct fake_ring *f)
{
	prof_ring__fini(&f->r);
	free(f->base);
}

/* Writes a record of size bytes (type, then bytes seq, seq+1, ...) at the
 * head, wrapping like the kernel does, without publishing it. */
static void fake_write(struct fake_ring *f, uint32_t type, uint16_t size, uint8_t seq)
{
	uint8_t rec[1024];
	struct perf_event_header h = { .type = type, .misc = 0, .size = size };

	memcpy(rec, &h, sizeof(h));
	for (size_t i = sizeof(h); i < size; i++)
		rec[i] = (uint8_t)(seq + i);
	for (size_t i = 0; i < size; i++)
		f->r.data[(f->head + i) & (RING_DATA - 1)] = rec[i];
	f->head += size;
}

static void fake_publish(struct fake_ring *f)
{
	__atomic_store_n(&f->r.meta->data_head, f->head, __ATOMIC_RELEASE);
}

struct seen {
	int n;
	uint32_t types[64];
	uint16_t sizes[64];
	bool intact[64];
	uint8_t seq[64];
};

static int record_cb(const struct perf_event_header *h, void *arg)
{
	struct seen *s = arg;
	const uint8_t *p = (const uint8_t *)h;
	bool ok = true;

	for (size_t i = sizeof(*h); i < h->size; i++)
		ok &= p[i] == (uint8_t)(s->seq[s->n] + i);
	s->types[s->n] = h->type;
	s->sizes[s->n] = h->size;
	s->intact[s->n] = ok;
	s->n++;
	return 0;
}

START_TEST(ring_reads_records_and_frees_them)
{
	struct fake_ring f;
	struct seen s = { 0 };

	fake_init(&f);
	s.seq[0] = 1, s.seq[1] = 2, s.seq[2] = 3;
	fake_write(&f, PERF_RECORD_SAMPLE, 64, 1);
	fake_write(&f, PERF_RECORD_LOST, 24, 2);
	fake_write(&f, PERF_RECORD_SAMPLE, 40, 3);
	/* nothing is read before data_head moves */
	ck_assert_int_eq(prof_ring__drain(&f.r, record_cb, &s), 0);
	fake_publish(&f);
	ck_assert_int_eq(prof_ring__drain(&f.r, record_cb, &s), 3);
	ck_assert_int_eq(s.types[0], PERF_RECORD_SAMPLE);
	ck_assert_int_eq(s.types[1], PERF_RECORD_LOST);
	ck_assert_int_eq(s.sizes[2], 40);
	ck_assert(s.intact[0] && s.intact[1] && s.intact[2]);
	ck_assert_uint_eq(f.r.meta->data_tail, 128);
	fake_fini(&f);
}
END_TEST

START_TEST(ring_copies_out_records_that_wrap)
{
	struct fake_ring f;
	struct seen s = { 0 };
	uint8_t seq = 0;

	fake_init(&f);
	/* go round the 256-byte ring several times with sizes that put record
	 * ends, and even headers, across the end */
	for (int round = 0; round < 12; round++) {
		uint16_t sizes[3] = { 72, 48, (uint16_t)(36 + 4 * (round % 3)) };
		int before = s.n;
		for (int k = 0; k < 3; k++) {
			s.seq[before + k] = ++seq;
			fake_write(&f, PERF_RECORD_SAMPLE + (uint32_t)k, sizes[k], seq);
		}
		fake_publish(&f);
		ck_assert_int_eq(prof_ring__drain(&f.r, record_cb, &s), 3);
		for (int k = 0; k < 3; k++) {
			ck_assert_int_eq(s.sizes[before + k], sizes[k]);
			ck_assert_int_eq(s.types[before + k], PERF_RECORD_SAMPLE + (uint32_t)k);
			ck_assert_msg(s.intact[before + k], "record %d of round %d damaged", k, round);
		}
		ck_assert_uint_eq(f.r.meta->data_tail, f.head);
		if (s.n > 50)
			s.n = 0;
	}
	ck_assert_uint_gt(f.head, 3 * RING_DATA);
	fake_fini(&f);
}
END_TEST

START_TEST(ring_skips_a_corrupt_header)
{
	struct fake_ring f;
	struct seen s = { 0 };

	fake_init(&f);
	fake_write(&f, PERF_RECORD_SAMPLE, 32, 0);
	fake_write(&f, PERF_RECORD_SAMPLE, 32, 0);
	((struct perf_event_header *)(f.r.data + 32))->size = 4;	/* < header */
	fake_publish(&f);
	ck_assert_int_eq(prof_ring__drain(&f.r, record_cb, &s), -EIO);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(f.r.meta->data_tail, f.head);
	fake_fini(&f);
}
END_TEST

/* ------------------------------------------------------------ stacks */

START_TEST(stacks_count_distinct_chains)
{
	struct prof_stacks t;
	uint64_t a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 }, c[2] = { 1, 2 };

	prof_stacks__init(&t);
	ck_assert_int_eq(prof_stacks__add(&t, a, 3, 1), 0);
	ck_assert_int_eq(prof_stacks__add(&t, b, 3, 1), 0);
	ck_assert_int_eq(prof_stacks__add(&t, a, 3, 5), 0);
	ck_assert_int_eq(prof_stacks__add(&t, c, 2, 1), 0);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.ents[0].count, 6);
	ck_assert_uint_eq(t.ents[2].len, 2);
	/* many chains: the table grows and still finds each one */
	for (uint64_t i = 0; i < 5000; i++) {
		uint64_t ch[2] = { i, i * 7 };
		ck_assert_int_eq(prof_stacks__add(&t, ch, 2, i), 0);
	}
	for (uint64_t i = 0; i < 5000; i++) {
		uint64_t ch[2] = { i, i * 7 };
		ck_assert_int_eq(prof_stacks__add(&t, ch, 2, 1), 0);
	}
	ck_assert_uint_eq(t.n, 5003);
	ck_assert_uint_eq(t.ents[3 + 4999].count, 5000);
	struct prof_stacks u;
	prof_stacks__init(&u);
	ck_assert_int_eq(prof_stacks__merge(&u, &t), 0);
	ck_assert_int_eq(prof_stacks__merge(&u, &t), 0);
	ck_assert_uint_eq(u.n, t.n);
	ck_assert_uint_eq(u.ents[0].count, 12);
	prof_stacks__fini(&u);
	prof_stacks__fini(&t);
}
END_TEST

/* ------------------------------------------------------------ records */

/* Side-band and sample records, as the kernel lays them out, counted into
 * the totals: LOST adds its count, THROTTLE/UNTHROTTLE count, FORK marks a
 * thread as new, a sample of another process is ignored, an executable
 * MMAP2 is remembered. */
START_TEST(sampler_counts_lost_throttle_and_side_band_records)
{
	struct tu_proc p;
	char *argv[] = { "/bin/sleep", "30", NULL };
	struct prof_sampler *s;
	struct prof_error err;
	struct prof_totals t;
	uint64_t rec[64];
	struct perf_event_header *h = (void *)rec;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_msg(prof_sampler__open(p.pid, NULL, &s, &err) == 0, "%s", err.msg);
	for (int i = 0; i < 2; i++) {
		*h = (struct perf_event_header){ PERF_RECORD_LOST, 0, 8 + 16 + 8 };
		rec[1] = 99;	/* id */
		rec[2] = 7;	/* lost */
		prof_sampler__consume(s, h);
	}
	for (int i = 0; i < 5; i++) {
		*h = (struct perf_event_header){ i < 3 ? PERF_RECORD_THROTTLE : PERF_RECORD_UNTHROTTLE,
						 0, 8 + 24 + 8 };
		prof_sampler__consume(s, h);
	}
	/* FORK: pid, ppid, tid, ptid, time */
	*h = (struct perf_event_header){ PERF_RECORD_FORK, 0, 8 + 16 + 8 + 8 };
	uint32_t *u = (uint32_t *)(rec + 1);
	u[0] = (uint32_t)p.pid, u[1] = (uint32_t)p.pid, u[2] = 4000000, u[3] = (uint32_t)p.pid;
	prof_sampler__consume(s, h);
	/* SAMPLE: id, ip, pid|tid, time, period, nr, ips[nr] */
	uint64_t smp[] = { 0, 0x401000, 0, 1, 1000000, 3, PERF_CONTEXT_USER, 0x401000, 0x402000 };
	for (int k = 0; k < 2; k++) {
		*h = (struct perf_event_header){ PERF_RECORD_SAMPLE, 0, sizeof(smp) + 8 };
		memcpy(rec + 1, smp, sizeof(smp));
		rec[3] = (uint64_t)(uint32_t)(k ? 1 : p.pid) | (uint64_t)4000000 << 32;
		prof_sampler__consume(s, h);
	}
	/* MMAP2 of an executable file */
	memset(rec, 0, sizeof(rec));
	*h = (struct perf_event_header){ PERF_RECORD_MMAP2, 0, 8 + 64 + 16 };
	u = (uint32_t *)(rec + 1);
	u[0] = (uint32_t)p.pid, u[1] = (uint32_t)p.pid;
	rec[2] = 0x7f0000000000, rec[3] = 0x3000, rec[4] = 0x1000;
	rec[6] = 42;	/* ino (after maj, min) */
	u = (uint32_t *)(rec + 8);
	u[0] = 5;	/* PROT_READ | PROT_EXEC */
	strcpy((char *)(rec + 9), "/lib/x.so");
	prof_sampler__consume(s, h);

	prof_sampler__totals(s, &t);
	ck_assert_uint_eq(t.lost, 14);
	ck_assert_uint_eq(t.throttled, 3);
	ck_assert_uint_eq(t.unthrottled, 2);
	ck_assert_uint_eq(t.forks, 1);
	ck_assert_uint_eq(t.samples, 1);
	ck_assert_uint_eq(t.threads, 1);
	ck_assert_uint_eq(t.new_threads, 1);
	ck_assert_uint_eq(t.mmaps, 1);
	ck_assert_uint_eq(prof_sampler__stack_count(s), 1);
	const uint64_t *ips;
	size_t n;
	uint64_t count;
	ck_assert_int_eq(prof_sampler__stack(s, 0, &ips, &n, &count), 0);
	ck_assert_uint_eq(n, 2);	/* the context marker is dropped */
	ck_assert_uint_eq(ips[0], 0x401000);
	ck_assert_uint_eq(ips[1], 0x402000);
	const struct prof_mmap *mm;
	ck_assert_uint_eq(prof_sampler__mmaps(s, &mm), 1);
	ck_assert_str_eq(mm[0].path, "/lib/x.so");
	ck_assert_uint_eq(mm[0].end, 0x7f0000003000);
	prof_sampler__free(s);
	tu_kill(&p);
}
END_TEST

/* ------------------------------------------------------------ perf map */

static struct prof_perfmap *feed_str(const char *text)
{
	static struct prof_perfmap m;

	prof_perfmap__init(&m);
	ck_assert_int_eq(prof_perfmap__feed(&m, text, strlen(text)), (int)strlen(text));
	ck_assert_int_eq(prof_perfmap__index(&m), 0);
	return &m;
}

/* The name of the entry that owns addr, "-" for none. */
static const char *owner(const struct prof_perfmap *m, uint64_t addr)
{
	const struct prof_perfmap_ent *e = prof_perfmap__find(m, addr);
	return e ? prof_perfmap__name(m, e) : "-";
}

START_TEST(perfmap_parses_lines_and_skips_malformed_ones)
{
	struct prof_perfmap *m = feed_str(
		"1000 10 plain\n"
		"0x2000 0X20 LazyCompile:*add file.js:12  with  spaces \n"
		"  3000\t40\ttab separated\r\n"
		"\n"
		"garbage\n"
		"4000\n"
		"5000 10\n"
		"6000 0 zero sized\n"
		"ffffffffffffff00 1000 wraps around\n"
		"0x 10 no digits\n"
		"7000 -10 negative\n"
		"12345678901234567 10 seventeen digits\n"
		"8000 10x glued\n"
		"9000 10 last\n");
	ck_assert_uint_eq(m->n, 4);
	ck_assert_uint_eq(m->malformed, 9);
	ck_assert_str_eq(owner(m, 0x1000), "plain");
	ck_assert_str_eq(owner(m, 0x100f), "plain");
	ck_assert_str_eq(owner(m, 0x1010), "-");
	ck_assert_str_eq(owner(m, 0x201f), "LazyCompile:*add file.js:12  with  spaces");
	ck_assert_str_eq(owner(m, 0x3000), "tab separated");
	ck_assert_str_eq(owner(m, 0x9000), "last");
	ck_assert_str_eq(owner(m, 0x8000), "-");
	const struct prof_perfmap_ent *e = prof_perfmap__find(m, 0x2005);
	ck_assert_uint_eq(e->start, 0x2000);
	ck_assert_uint_eq(e->end, 0x2020);
	/* an unfinished last line waits for the rest of it */
	const char *tail = "a000 10 half";
	ck_assert_int_eq(prof_perfmap__feed(m, tail, strlen(tail)), 0);
	ck_assert_uint_eq(m->n, 4);
	prof_perfmap__fini(m);
	ck_assert_str_eq(prof_bounds_name(PROF_BOUNDS_PERFMAP), "perfmap");
}
END_TEST

START_TEST(perfmap_later_lines_override_earlier_ones)
{
	struct prof_perfmap *m = feed_str(
		"1000 1000 A\n"		/* [0x1000, 0x2000) */
		"1800 100 B\n"		/* inside A */
		"1000 100 C\n"		/* A's start */
		"1f00 200 D\n"		/* across A's end */
		"1800 100 E\n");	/* B again, re-emitted */
	ck_assert_str_eq(owner(m, 0xfff), "-");
	ck_assert_str_eq(owner(m, 0x1000), "C");
	ck_assert_str_eq(owner(m, 0x10ff), "C");
	ck_assert_str_eq(owner(m, 0x1100), "A");
	ck_assert_str_eq(owner(m, 0x1850), "E");
	ck_assert_str_eq(owner(m, 0x1900), "A");
	ck_assert_str_eq(owner(m, 0x1eff), "A");
	ck_assert_str_eq(owner(m, 0x1f00), "D");
	ck_assert_str_eq(owner(m, 0x20ff), "D");
	ck_assert_str_eq(owner(m, 0x2100), "-");
	/* a function keeps its own bounds where it still shows */
	const struct prof_perfmap_ent *e = prof_perfmap__find(m, 0x1900);
	ck_assert_uint_eq(e->start, 0x1000);
	ck_assert_uint_eq(e->end, 0x2000);
	prof_perfmap__fini(m);
}
END_TEST

/* Many random overlapping entries against the obvious answer: the last
 * line covering the address. */
START_TEST(perfmap_index_matches_brute_force)
{
	enum { N = 3000, SPACE = 1 << 14 };
	static uint64_t st[N], en[N];
	struct prof_perfmap m;
	char line[64];
	unsigned seed = 7;

	prof_perfmap__init(&m);
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		st[i] = (seed >> 8) % SPACE;
		seed = seed * 1103515245u + 12345u;
		en[i] = st[i] + 1 + (seed >> 8) % (i % 10 ? 16 : 2000);
		int l = snprintf(line, sizeof(line), "%llx %llx f%d\n", (unsigned long long)st[i],
				 (unsigned long long)(en[i] - st[i]), i);
		ck_assert_int_eq(prof_perfmap__feed(&m, line, (size_t)l), l);
	}
	ck_assert_int_eq(prof_perfmap__index(&m), 0);
	for (uint64_t a = 0; a < SPACE + 2100; a++) {
		int want = -1;
		for (int i = N - 1; i >= 0 && want < 0; i--)
			if (a >= st[i] && a < en[i])
				want = i;
		const struct prof_perfmap_ent *e = prof_perfmap__find(&m, a);
		ck_assert_msg((e ? (int)(e - m.ents) : -1) == want, "at %llx: entry %d, want %d",
			      (unsigned long long)a, e ? (int)(e - m.ents) : -1, want);
	}
	prof_perfmap__fini(&m);
}
END_TEST

START_TEST(perfmap_caps_its_entries)
{
	struct prof_perfmap m;
	size_t n = PROF_PERFMAP_MAX_ENTRIES + 3, len = 0;
	char *buf = malloc(n * 16);

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "%zx 1 f\n", i);
	prof_perfmap__init(&m);
	ck_assert_int_eq(prof_perfmap__feed(&m, buf, len), (int)len);
	ck_assert_uint_eq(m.n, PROF_PERFMAP_MAX_ENTRIES);
	ck_assert_uint_eq(m.dropped, 3);
	free(buf);
	prof_perfmap__fini(&m);
}
END_TEST

static void write_file(const char *path, const char *mode, const char *text)
{
	FILE *f = fopen(path, mode);
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* A function of ours with a symbol (a START_TEST name is a variable). */
__attribute__((noinline)) static int perfmap_elf_probe(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* Through a symbolizer of this very process: addresses no mapping holds
 * (below mmap_min_addr) named from /tmp/perf-<our pid>.map, the file read
 * again as it grows, an ELF symbol preferred where both cover. */
START_TEST(perfmap_file_read_as_it_grows)
{
	char path[64], module[64], big[70000];
	struct prof_symbolizer *s;
	struct prof_error err;
	struct prof_sym sym;
	struct prof_perfmap_stats st;
	uint64_t self = (uint64_t)(uintptr_t)&perfmap_elf_probe;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	snprintf(module, sizeof(module), "[perf-%d.map]", (int)getpid());
	unlink(path);
	snprintf(big, sizeof(big), "0x1000 0x100 first jit function\nbogus line\n"
		 "%llx 10 covers an ELF symbol\n", (unsigned long long)self);
	write_file(path, "w", big);
	ck_assert_int_eq(prof_symbolizer__new(getpid(), &s, &err), 0);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x1080, &sym), 0);
	ck_assert_str_eq(sym.name, "first jit function");
	ck_assert_str_eq(sym.module, module);
	ck_assert_int_eq(sym.bounds, PROF_BOUNDS_PERFMAP);
	ck_assert_uint_eq(sym.start, 0x1000);
	ck_assert_uint_eq(sym.end, 0x1100);
	ck_assert_int_eq(prof_symbolizer__lookup(s, self, &sym), 0);
	ck_assert_str_eq(sym.name, "perfmap_elf_probe");
	ck_assert_int_eq(sym.bounds, PROF_BOUNDS_SYMTAB);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x2000, &sym), -ENOENT);
	/* a line too long to be a name, then a half-written one */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, "2000 10 ", 8);
	write_file(path, "a", big);
	write_file(path, "a", "\n1000 10 re-emitted\n2000 10 second");
	ck_assert_int_eq(prof_symbolizer__refresh(s), 0);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x1008, &sym), 0);
	ck_assert_str_eq(sym.name, "re-emitted");
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x2000, &sym), -ENOENT);
	write_file(path, "a", " function\n");
	ck_assert_int_eq(prof_symbolizer__refresh(s), 0);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x2000, &sym), 0);
	ck_assert_str_eq(sym.name, "second function");
	prof_symbolizer__perfmap_stats(s, &st);
	ck_assert_uint_eq(st.entries, 4);
	ck_assert_uint_eq(st.malformed, 2);
	ck_assert_int_eq(st.err, 0);
	ck_assert_ptr_nonnull(strstr(st.path, path + 5));
	/* the JIT started over: a shorter file replaces what was read */
	write_file(path, "w", "3000 10 anew\n");
	ck_assert_int_eq(prof_symbolizer__refresh(s), 0);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x1008, &sym), -ENOENT);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x3008, &sym), 0);
	ck_assert_str_eq(sym.name, "anew");
	prof_symbolizer__free(s);
	unlink(path);
}
END_TEST

/* What the open refuses, and that a refused file names nothing. */
static void expect_refused(const char *path, int want)
{
	struct prof_symbolizer *s;
	struct prof_error err;
	struct prof_sym sym;
	struct prof_perfmap_stats st;
	uid_t uids[4] = { geteuid(), geteuid(), geteuid(), geteuid() };
	char opened[128];

	ck_assert_int_eq(prof_perfmap__open(getpid(), getpid(), uids, 4, opened, sizeof(opened)),
			 want);
	ck_assert_int_eq(prof_symbolizer__new(getpid(), &s, &err), 0);
	ck_assert_int_eq(prof_symbolizer__lookup(s, 0x1000, &sym), -ENOENT);
	prof_symbolizer__perfmap_stats(s, &st);
	ck_assert_int_eq(st.err, want);
	ck_assert_uint_eq(st.entries, 0);
	prof_symbolizer__free(s);
	unlink(path);
}

START_TEST(perfmap_refuses_symlinks_and_strangers_files)
{
	char path[64], other[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	snprintf(other, sizeof(other), "/tmp/prof-unit-%d.secret", (int)getpid());
	unlink(path);
	write_file(other, "w", "1000 10 secret\n");
	ck_assert_int_eq(symlink(other, path), 0);
	expect_refused(path, -ELOOP);
	ck_assert_int_eq(link(other, path), 0);	/* two names: whose file is it? */
	expect_refused(path, -EPERM);
	ck_assert_int_eq(mkfifo(path, 0600), 0);	/* and never block on a FIFO */
	expect_refused(path, -EPERM);
	expect_refused(path, -ENOENT);
	if (geteuid() == 0) {
		write_file(path, "w", "1000 10 not yours\n");
		ck_assert_int_eq(chown(path, 4242, 4242), 0);
		expect_refused(path, -EPERM);
	}
	unlink(other);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("profile-unit");
	TCase *tc = tcase_create("ring");
	tcase_add_test(tc, ring_reads_records_and_frees_them);
	tcase_add_test(tc, ring_copies_out_records_that_wrap);
	tcase_add_test(tc, ring_skips_a_corrupt_header);
	tcase_add_test(tc, stacks_count_distinct_chains);
	tcase_add_test(tc, sampler_counts_lost_throttle_and_side_band_records);
	suite_add_tcase(s, tc);
	tc = tcase_create("perfmap");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, perfmap_parses_lines_and_skips_malformed_ones);
	tcase_add_test(tc, perfmap_later_lines_override_earlier_ones);
	tcase_add_test(tc, perfmap_index_matches_brute_force);
	tcase_add_test(tc, perfmap_caps_its_entries);
	tcase_add_test(tc, perfmap_file_read_as_it_grows);
	tcase_add_test(tc, perfmap_refuses_symlinks_and_strangers_files);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
