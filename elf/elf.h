/* elf/: what a target's ELF files say about its functions and names.
 *
 * One reader for every room above it (profile/, cfg/, codecache/): the
 * file a mapping maps, opened through the process; its functions (symbol
 * tables, the PLT, .eh_frame FDEs, and the separate debug file that
 * /usr/lib/debug holds for it); and one resolver from a name to the
 * definitions of that name in a process's modules.
 *
 * Addresses in an elf_file are link-time virtual addresses; a module adds
 * the bias where it is mapped. Functions return 0 or a negative errno and
 * say why in the caller's buffer; nothing here prints or exits.
 */
#ifndef PADRONE_ELF_ELF_H
#define PADRONE_ELF_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------ files */

/* Where a function's bounds came from, most trusted first. */
enum elf_bounds {
	ELF_BOUNDS_NONE = 0,
	ELF_BOUNDS_SYMTAB,	/* .symtab, the file's own or its debug file's */
	ELF_BOUNDS_DYNSYM,	/* .dynsym, and PLT entries named from it */
	ELF_BOUNDS_EH_FRAME,	/* an FDE no symbol names: sub_<addr> */
};

struct elf_fn {
	uint64_t start, end;	/* link-time virtual addresses */
	const char *name;	/* NULL for an FDE without a symbol */
	enum elf_bounds bounds;
};

struct elf_seg {
	uint64_t vaddr, offset, filesz, memsz;
	bool exec;
};

enum elf_sym_kind {
	ELF_SYM_FUNC,
	ELF_SYM_IFUNC,
	ELF_SYM_DATA,
	/* A PLT entry, named NAME@plt after the symbol its GOT slot is
	 * relocated with (as elf_fn names it): no symbol of the file's, but a
	 * name profile/ prints, so one the resolver takes from a user. */
	ELF_SYM_PLT,
};

/* A defined symbol, kept by name for the resolver: every alias of a
 * function is here, where elf_fn keeps one name per address. */
struct elf_sym {
	const char *name;
	uint64_t value, size;
	enum elf_sym_kind kind;
	bool local;		/* STB_LOCAL (a static), else global or weak */
	bool dynamic;		/* in .dynsym: what the dynamic linker binds */
	uint64_t got;		/* ELF_SYM_PLT: the GOT slot it jumps through */
};

/* What one ELF file knows about its functions. */
struct elf_file {
	struct elf_fn *fns;	/* sorted by start, one per start */
	size_t nfns;
	struct elf_sym *syms;	/* sorted by name, then value (opts.names) */
	size_t nsyms;
	struct elf_seg *segs;	/* PT_LOAD */
	size_t nsegs;
	char build_id[41];	/* hex, "" if none */
	char debug_path[3 * 4096];	/* the separate debug file read, "" if none */
	char *strings;		/* names, back to back */
	size_t strings_len, strings_cap;
	bool dyn;		/* ET_DYN */
	size_t nsymtab, ndynsym, nplt, nfde;	/* how many of each were found */
};

struct elf_load_opts {
	size_t sz;		/* sizeof(struct elf_load_opts) */
	/* The file's path as the process sees it: finds its .gnu_debuglink
	 * file next to it and under /usr/lib/debug. */
	const char *path;
	/* Where that path lives ("/proc/PID/root"); NULL: here. Debug files
	 * are looked for under it first, then here. */
	const char *root;
	/* Read no separate debug file (as for the vdso). */
	bool no_debug_file;
	/* Keep every defined symbol by name, aliases and data too, for
	 * elf_file__syms_named (the resolver asks; naming addresses does not). */
	bool names;
	/* Look for debug files under this directory instead of
	 * /usr/lib/debug (tests). */
	const char *debug_dir;
};

/* Loads from an open fd, or from memory (e.g. the vdso read from the
 * target) when fd < 0. opts may be NULL. */
int elf_file__load(int fd, const void *image, size_t len, const struct elf_load_opts *opts,
		   struct elf_file **out, char *why, size_t whylen);
void elf_file__free(struct elf_file *e);
/* The function whose range holds the link-time address v, or NULL. */
const struct elf_fn *elf_file__find(const struct elf_file *e, uint64_t v);
/* The first function starting above v, or NULL. */
const struct elf_fn *elf_file__next(const struct elf_file *e, uint64_t v);
/* Link-time address of file offset off, or -ENOENT. */
int elf_file__offset_to_vaddr(const struct elf_file *e, uint64_t off, uint64_t *v);
/* The symbols named name: *n of them from the returned one on (or NULL). */
const struct elf_sym *elf_file__syms_named(const struct elf_file *e, const char *name, size_t *n);
/* Where the file is linked to start (its first PT_LOAD, page aligned). */
uint64_t elf_file__base(const struct elf_file *e);

/* ------------------------------------------------------------ .eh_frame */

/* Walks .eh_frame (as found at link address sec_addr) with libdw and calls
 * fn for each FDE's [start, end) and the FDE's own address. Returns FDEs
 * found or -EINVAL. */
typedef void (*elf_fde_at_fn)(uint64_t start, uint64_t end, uint64_t fde, void *arg);
int elf_eh_frame__each_fde(const uint8_t *data, size_t len, uint64_t sec_addr, elf_fde_at_fn fn,
			   void *arg);

/* What cfg/ needs of an FDE: the function's range, its LSDA (landing
 * pads), and whether it starts in a function's entry state (CFA = rsp + 8,
 * the return address just pushed: not a cold part or a mid-function
 * fragment). */
struct elf_fde {
	uint64_t start, end;
	uint64_t lsda;		/* 0 when none */
	bool entry;
};

/* Every FDE of .eh_frame (data, as found at address sec_addr: a process's
 * memory or a file's), in section order: *out malloc'd, *n of them. The
 * CFA at each start is libdw's (dwarf_cfi_addrframe). 0 or -errno. */
int elf_eh_frame__fdes(const uint8_t *data, size_t len, uint64_t sec_addr, struct elf_fde **out,
		       size_t *n);

/* What the header of .eh_frame_hdr says. The search table, when there is
 * one, holds count pairs of int32 (function start, FDE address), each
 * relative to the header's own address, sorted by start. */
struct elf_eh_frame_hdr {
	uint64_t eh_frame;	/* .eh_frame's address */
	uint64_t table;		/* the search table's address; 0 when none */
	uint64_t count;		/* its pairs; 0 when none */
};

/* Reads the header in the len bytes h that stand at address addr (in a
 * file or a process). -EINVAL when it is not a version 1 header that says
 * where .eh_frame is; a header without a usable table gives table 0. */
int elf_eh_frame_hdr__read(const uint8_t *h, size_t len, uint64_t addr,
			   struct elf_eh_frame_hdr *out);

/* A cursor over little-endian bytes with DWARF's encodings; addr is the
 * address p stands for (pc-relative pointers are relative to it). Reading
 * past end sets bad and yields 0. */
struct elf_cursor {
	const uint8_t *p, *end;
	uint64_t addr;
	bool bad;
};

uint64_t elf_cursor__u(struct elf_cursor *c, size_t n);	/* n <= 8 bytes */
uint64_t elf_cursor__uleb(struct elf_cursor *c);
int64_t elf_cursor__sleb(struct elf_cursor *c);
/* A DW_EH_PE_* encoded pointer: 0 without reading for DW_EH_PE_omit;
 * datarel is the base of DW_EH_PE_datarel. */
uint64_t elf_cursor__ptr(struct elf_cursor *c, uint8_t enc, uint64_t datarel);

/* ------------------------------------------------------------ processes */

struct attach_map;
/* The file a mapping of process pid maps, opened read-only: through
 * /proc/PID/map_files (deleted files, other mount namespaces), else its
 * path under /proc/PID/root, else (the process gone) the same path here if
 * it is still the same file. An fd or -errno. */
int elf__open_mapped(pid_t pid, const struct attach_map *m);

/* ------------------------------------------------------------ names */

/* A process's modules, each file loaded once, and the names they define.
 * One per session: profile/, cfg/ and codecache/ share it. */
struct elf_modules;

struct elf_module {
	const char *path;	/* as mapped; "" for none */
	const char *base_name;	/* the part after the last '/' */
	uint64_t bias;		/* runtime address = link-time + bias */
	uint64_t lo, hi;	/* runtime extent of its mappings */
	dev_t dev;
	ino_t ino;
	bool exe;		/* the process's executable */
	const struct elf_file *file;	/* NULL when it could not be read */
};

/* Reads pid's file-backed executable mappings (the executable first, then
 * in address order, as the dynamic linker searches). */
int elf_modules__open(pid_t pid, struct elf_modules **out, char *why, size_t whylen);
void elf_modules__free(struct elf_modules *ms);
/* Do the process's executable mappings still match what ms read (no
 * dlopen, dlclose, exec since)? */
bool elf_modules__current(const struct elf_modules *ms);
size_t elf_modules__count(const struct elf_modules *ms);
const struct elf_module *elf_modules__at(const struct elf_modules *ms, size_t i);
/* The module whose mappings hold the runtime address a, or NULL. */
const struct elf_module *elf_modules__find(const struct elf_modules *ms, uint64_t a);

/* The PLT entry of m that starts at the runtime address a (an ELF_SYM_PLT
 * symbol, the file's loaded with opts.names), or NULL. */
const struct elf_sym *elf_module__plt_entry(const struct elf_module *m, uint64_t a);

/* One definition of a name. */
struct elf_def {
	const struct elf_module *module;
	const struct elf_sym *sym;
	uint64_t addr;		/* runtime */
};

enum elf_resolve_mode {
	/* A name a user typed (cfg, disas, replace, measure): functions only;
	 * every distinct definition is a candidate, statics too. */
	ELF_RESOLVE_USER,
	/* An undefined symbol of code loaded into the process: as the dynamic
	 * linker binds it (the first global in search order), else the one
	 * static of that name. Functions and data. */
	ELF_RESOLVE_LINK,
};

/* The definition of name, which may be MODULE:NAME (MODULE the base name
 * of a module's path, e.g. libc.so.6:strlen), or a PLT entry's NAME@plt
 * (ELF_RESOLVE_USER only). -ENOENT when none;
 * -ENOTUNIQ when several: why then lists them all. */
int elf_modules__resolve(const struct elf_modules *ms, const char *name,
			 enum elf_resolve_mode mode, struct elf_def *def, char *why,
			 size_t whylen);

/* ------------------------------------------------------------ helpers */

/* snprintf into a reason buffer that may be NULL. */
void elf__fmt(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
