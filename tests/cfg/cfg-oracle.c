/* cfg-oracle: cfg/ on any program against the oracles the tests use (run
 * through scripts/cfg-oracle, which strips the copy and runs callgrind).
 *
 *   cfg-oracle [-v] [--callgrind OUT] PROG STRIPPED
 *   cfg-oracle [-v] [--callgrind OUT] --pid PID [--module SUBSTRING] PROG
 *
 * PROG, unstripped, is the oracle: function bounds from its .symtab (F1
 * over [start, end) spans), jump-table targets from the .rela.rodata that
 * -Wl,--emit-relocs keeps (relative entries need -Wa,-L for their table's
 * label), and the jumps callgrind observed running it (OUT, made with
 * --dump-instr=yes --collect-jumps=yes). What is analysed is STRIPPED, or
 * the code of process PID read from its memory (PROG's code, mapped
 * anywhere: the oracles' addresses are shifted by the load bias): its
 * executable, or with --module the first mapped file whose path holds
 * SUBSTRING (PROG then is that library unstripped, or its separate debug
 * file, e.g. libc6-dbg's /usr/lib/debug/.build-id/xx/yyyy.debug). The
 * process is seized, read and let go; it keeps running.
 *
 * Prints the figures; with -v every mismatch. Exit status: 0 if the goals
 * (F1 >= 0.99, every jump-table target, no observed edge missing) are met,
 * 1 if not, 2 on a usage or setup error. */
#include "attach/attach.h"
#include "cfg/cfg.h"
#include "tests/cfg/oracle.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts {
	const char *prog, *stripped, *callgrind, *module;
	pid_t pid;
	bool verbose;
};

static int usage(void)
{
	fprintf(stderr, "usage: cfg-oracle [-v] [--callgrind OUT] PROG STRIPPED\n"
			"       cfg-oracle [-v] [--callgrind OUT] --pid PID [--module SUBSTRING] "
			"PROG\n");
	return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v")) {
			o->verbose = true;
		} else if (!strcmp(argv[i], "--callgrind") && i + 1 < argc) {
			o->callgrind = argv[++i];
		} else if (!strcmp(argv[i], "--module") && i + 1 < argc) {
			o->module = argv[++i];
		} else if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			char *end;
			long p = strtol(argv[++i], &end, 10);
			if (*end || p <= 0)
				return usage();
			o->pid = (pid_t)p;
		} else {
			return usage();
		}
	}
	if (i >= argc)
		return usage();
	o->prog = argv[i++];
	if (!o->pid && i < argc)
		o->stripped = argv[i++];
	if (i != argc || (!o->pid && !o->stripped) || (o->module && !o->pid))
		return usage();
	return 0;
}

/* The process's executable as mapped: the oracle's code must be the same. */
struct live {
	struct attach_target *t;
	uint64_t base, lo, hi, bias;
};

static int open_live(const struct opts *o, struct live *lv, struct cfg_reader **r)
{
	struct attach_error aerr;
	if (attach_seize(o->pid, NULL, &lv->t, &aerr) < 0) {
		fprintf(stderr, "cfg-oracle: %s\n", aerr.msg);
		return -1;
	}
	char link[64], exe[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)o->pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	struct attach_maps *maps = NULL;
	if (n <= 0 || attach_maps__read(o->pid, &maps) < 0) {
		fprintf(stderr, "cfg-oracle: cannot read the maps of process %d\n", (int)o->pid);
		return -1;
	}
	exe[n] = 0;
	for (size_t i = 0; o->module && i < attach_maps__count(maps); i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		if (m->offset == 0 && m->path[0] == '/' && strstr(m->path, o->module)) {
			snprintf(exe, sizeof(exe), "%s", m->path);
			break;
		}
	}
	if (o->module && !strstr(exe, o->module)) {
		fprintf(stderr, "cfg-oracle: nothing mapped from a path with %s in process %d\n",
			o->module, (int)o->pid);
		attach_maps__free(maps);
		return -1;
	}
	const struct attach_map *first = attach_maps__first_of(maps, exe);
	if (!first || first->offset != 0) {
		fprintf(stderr, "cfg-oracle: %s not mapped from its start in process %d\n", exe,
			(int)o->pid);
		attach_maps__free(maps);
		return -1;
	}
	lv->base = lv->lo = first->start;
	lv->hi = first->end;
	for (size_t i = 0; i < attach_maps__count(maps); i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		if (!strcmp(m->path, exe) && m->end > lv->hi)
			lv->hi = m->end;
	}
	attach_maps__free(maps);
	if (cfg_elf_load_bias(o->prog, lv->base, &lv->bias) < 0) {
		fprintf(stderr, "cfg-oracle: %s is not an ELF file\n", o->prog);
		return -1;
	}
	int err = cfg_reader__open_live(lv->t, NULL, r);
	if (err < 0) {
		fprintf(stderr, "cfg-oracle: cannot read process %d: %s\n", (int)o->pid,
			strerror(-err));
		return -1;
	}
	printf("cfg-oracle: %s against process %d (%s at %#lx, bias %#lx)\n", o->prog, (int)o->pid,
	       exe, (unsigned long)lv->base, (unsigned long)lv->bias);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	struct or_syms syms;
	if (or_read_syms(o.prog, &syms) < 0) {
		fprintf(stderr, "cfg-oracle: no .symtab in %s (readelf -s): the oracle needs the "
				"unstripped program\n", o.prog);
		return 2;
	}
	struct or_program p;
	struct live lv = { 0 };
	struct cfg_reader *r;
	if (o.pid) {
		bool ok = open_live(&o, &lv, &r) == 0;
		if (ok && or_program_build_at(r, lv.base, lv.lo, lv.hi, &p) < 0) {
			fprintf(stderr, "cfg-oracle: no FDEs in process %d's %s\n", (int)o.pid,
				o.prog);
			or_program_free(&p);
			ok = false;
		}
		if (!ok) {
			if (lv.t)
				attach_target__detach(lv.t);
			or_syms_free(&syms);
			return 2;
		}
	} else {
		printf("cfg-oracle: %s against %s\n", o.prog, o.stripped);
		if (or_program_build(o.stripped, &p) < 0) {
			fprintf(stderr, "cfg-oracle: cannot analyse %s\n", o.stripped);
			or_syms_free(&syms);
			return 2;
		}
	}
	FILE *log = o.verbose ? stdout : NULL;
	bool met = true;

	struct or_bounds bd;
	or_check_bounds(&syms, &p, lv.bias, log, "  ", &bd);
	double f1 = or_f1(bd.exact, bd.wrong, bd.missed);
	met &= f1 >= 0.99;
	printf("function bounds: F1 %.4f (%zu of %zu exact, %zu wrong, %zu missed; %zu functions "
	       "analysed)\n", f1, bd.exact, bd.truth, bd.wrong, bd.missed, p.n);

	struct or_tables t;
	if (or_check_tables(o.prog, &syms, &p, lv.bias, log, "  ", &t) < 0) {
		printf("jump tables: cannot read %s's sections\n", o.prog);
		met = false;
	} else if (!t.relocs && t.emit_relocs) {
		printf("jump tables: %zu found; none in the relocations of .rodata\n", t.tables);
		met &= t.tables == 0;
	} else if (!t.relocs) {
		printf("jump tables: %zu found; no .rela.rodata to check them (link with "
		       "-Wl,--emit-relocs)\n", t.tables);
	} else {
		printf("jump tables: %zu tables, %zu of %zu relocated targets found", t.tables,
		       t.found, t.slots);
		if (t.unchecked)
			printf(" (%zu slots without their table's label: place checked, not target; "
			       "assemble with -Wa,-L)", t.unchecked);
		printf(", %zu extra\n", t.extra);
		met &= t.found == t.slots;
	}

	if (o.callgrind) {
		struct or_edges e;
		char real[PATH_MAX];
		const char *obj = realpath(o.prog, real) ? real : o.prog;
		if (or_check_edges(o.callgrind, obj, &p, lv.bias, log, "  ", NULL, NULL, &e) < 0) {
			printf("callgrind: cannot read %s\n", o.callgrind);
			met = false;
		} else {
			printf("callgrind: %zu observed edges, %zu missing from the CFG\n", e.observed,
			       e.missing);
			met &= e.missing == 0 && e.observed > 0;
			if (!e.observed)
				printf("callgrind: nothing observed in %s: was it the program run?\n",
				       obj);
		}
	} else {
		printf("callgrind: not run\n");
	}
	printf("goals (F1 >= 0.99, every jump-table target, no observed edge missing): %s\n",
	       met ? "met" : "MISSED");
	or_program_free(&p);
	or_syms_free(&syms);
	if (lv.t)
		attach_target__detach(lv.t);
	return met ? 0 : 1;
}
