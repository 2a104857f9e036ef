/* Oracles for cfg/'s tests: what readelf, callgrind and clang say about a
 * program, parsed from their output. */
#ifndef PADRONE_TESTS_CFG_ORACLE_H
#define PADRONE_TESTS_CFG_ORACLE_H

#include "cfg/cfg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct or_sym {
	uint64_t addr, size;
	char type[12];		/* FUNC, NOTYPE, OBJECT... */
	char name[96];
	char file[48];		/* the FILE symbol it follows (locals) */
};

struct or_syms {
	struct or_sym *v;
	size_t n;
};

/* readelf -sW PATH (.symtab, in order). 0 or -1. */
int or_read_syms(const char *path, struct or_syms *out);
void or_syms_free(struct or_syms *s);
const struct or_sym *or_sym_named(const struct or_syms *s, const char *name);
/* A local label (file-scoped) by file and name. */
const struct or_sym *or_label(const struct or_syms *s, const char *file, const char *name);

struct or_reloc {
	uint64_t offset;	/* where */
	uint64_t sym_value;
	int64_t addend;
	char type[24];
	char sym[96];
};
/* readelf -rW PATH, the relocations of one section (e.g. ".rela.rodata"). */
int or_read_relocs(const char *path, const char *section, struct or_reloc **out, size_t *n);

/* [lo, hi) of a section by name (readelf -SW). */
int or_section(const char *path, const char *name, uint64_t *lo, uint64_t *hi);

struct or_jump {
	uint64_t from, to;
	bool call;		/* recorded as a call (a jump into another function) */
	bool cond_not_taken;	/* a jcnd executed more often than taken: its
				 * fallthrough was observed (to is 0) */
};
/* Jumps callgrind (--dump-instr=yes --collect-jumps=yes) saw in object obj. */
int or_callgrind_jumps(const char *out_file, const char *obj, struct or_jump **out, size_t *n);

struct or_loop_header {
	char file[48];
	char label[48];
	int depth;
};
/* clang -S comments "# =>This Loop Header: Depth=N" in an assembly file. */
int or_clang_loops(const char *s_path, const char *file, struct or_loop_header **v, size_t *n,
		   size_t *cap);

/* All functions of an ELF image: built from every FDE function start. */
struct or_program {
	struct cfg_reader *r;
	struct cfg_function **f;
	size_t n;
};
int or_program_build(const char *path, struct or_program *p);
/* The same over any reader (a live process): the functions of the module
 * holding in_module, and those they call or jump to within [lo, hi). p
 * takes r (or_program_free frees it). */
int or_program_build_at(struct cfg_reader *r, uint64_t in_module, uint64_t lo, uint64_t hi,
			struct or_program *p);
void or_program_free(struct or_program *p);
/* The function whose ranges cover addr. */
const struct cfg_function *or_function_at(const struct or_program *p, uint64_t addr);

/* ------------------------------------------- the checks (oracle_check.c)
 * Addresses of p are the oracle's link-time ones plus bias. Each mismatch
 * is a line on log (if not NULL) after prefix. */

/* Function bounds: FUNC symbols with a size against p's ranges (ranges
 * starting at a sizeless FUNC symbol left out: no truth for them). */
struct or_bounds {
	size_t exact, wrong, missed, truth;
};
void or_check_bounds(const struct or_syms *syms, const struct or_program *p, uint64_t bias,
		     FILE *log, const char *prefix, struct or_bounds *out);
double or_f1(size_t exact, size_t wrong, size_t missed);

/* Jump-table slots of .rela.rodata (kept by -Wl,--emit-relocs) that lead
 * into .text: each must be an entry of a table found, with the same
 * target. Relative entries need the table's label (-Wa,-L); without one
 * only the slot's place is checked (unchecked counts those). */
struct or_tables {
	size_t relocs, slots, found, unchecked, extra, tables;
	bool emit_relocs;	/* linked with --emit-relocs */
};
int or_check_tables(const char *unstripped, const struct or_syms *syms,
		    const struct or_program *p, uint64_t bias, FILE *log, const char *prefix,
		    struct or_tables *out);

/* Every jump callgrind observed in object obj must be an edge of the CFG
 * (or, from a call= line, a call or a tail call out). on_edge (optional)
 * is told each observed edge found in a block. */
typedef void (*or_edge_fn)(void *arg, const struct cfg_function *f, size_t blk, uint64_t to);
struct or_edges {
	size_t observed, missing;
};
int or_check_edges(const char *callgrind_out, const char *obj, const struct or_program *p,
		   uint64_t bias, FILE *log, const char *prefix, or_edge_fn on_edge, void *arg,
		   struct or_edges *out);

#endif
