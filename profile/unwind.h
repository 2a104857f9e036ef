/* unwind.h: what the stack walker (unwind.c) and its unwind tables
 * (unwind-tables.c) share. Not part of profile.h. */
#ifndef PADRONE_PROFILE_UNWIND_H
#define PADRONE_PROFILE_UNWIND_H

#include "profile/internal.h"

#include "attach/attach.h"

#include <libunwind.h>
#include <stdbool.h>
#include <stdint.h>

/* libunwind's binary search over an .eh_frame_hdr-style table (exported,
 * not declared in its headers; perf uses it the same way). */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* Tables built here are served at these addresses: not canonical, so no
 * mapping of any process is ever there. Module k's is at SYNTH + k<<32. */
#define SYNTH_BASE 0x4000000000000000ull
#define SYNTH_SPAN (1ull << 32)

#define PAGE 4096u
#define NPAGES 64		/* pages of read-only mappings, one stop */
#define NCFI 1024		/* pc -> has unwind information */
#define NSIGRET 256		/* pc -> is the signal return trampoline */

struct uw_module {
	uint64_t base;		/* its first mapping, holding the ELF header */
	uint64_t lo, hi;	/* its executable mappings span this */
	uint64_t inode;
	unsigned dev_major, dev_minor;
	char *path;
	struct attach_map exec;	/* one executable mapping, to open the file */
	bool live;		/* in the current maps */
	bool tried;
	int info;		/* 0: di usable; -errno: no tables (why says) */
	char why[160];
	unw_dyn_info_t di;
	int32_t *table;		/* built here: start, fde pairs off segbase */
	size_t table_bytes;
	uint64_t synth;		/* where it is served */
	uint64_t new_lo, new_hi;	/* while the maps are read again */
};

struct uw_page {
	uint64_t addr;		/* 0: empty */
	uint8_t data[PAGE];
};

struct prof_unwinder {
	struct attach_target *t;
	pid_t pid;
	unw_addr_space_t as;
	struct attach_maps *maps;
	uint64_t maps_sig;
	struct uw_module *mods;
	size_t nmods, cap;
	uint64_t next_synth;
	struct {
		uint64_t pc;
		int8_t yes;	/* -1: unknown */
	} cfi[NCFI], sigret[NSIGRET];
	struct uw_page *pages;	/* NPAGES, direct-mapped */
};

/* One walk: the accessors' argument. */
struct walk {
	struct prof_unwinder *u;
	struct user_regs_struct regs;
	uint64_t unreadable;	/* the last address that could not be read */
};

/* unwind.c's memory accessor: reads the target, read-only pages cached for
 * the time of one stop. 0 or -errno. */
int prof__uw_read_mem(struct prof_unwinder *u, uint64_t addr, void *buf, size_t len);

/* unwind-tables.c */
void prof__uw_module_free(struct uw_module *m);
/* Finds m's tables once (its .eh_frame_hdr, else its file's .eh_frame):
 * 0, or -errno with m->why saying why. */
int prof__uw_module_tables(struct prof_unwinder *u, struct uw_module *m);
/* The modules brought in step with the target's executable mappings. */
int prof__uw_modules_update(struct prof_unwinder *u);
/* The module whose executable mappings span pc, or NULL. */
struct uw_module *prof__uw_module_at(struct prof_unwinder *u, uint64_t pc);
/* libunwind's find_proc_info accessor, searching the module's table. */
int prof__uw_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			    int need_unwind_info, void *arg);

#endif
