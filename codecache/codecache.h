/* codecache.h: a code cache inside a live x86-64 process, instruction
 * relocation, replacement code loading, redirection and measurement.
 *
 * Conventions: functions return 0 or a negative errno. Functions that work
 * on a handle keep the reason in words in it (cc_cache__errmsg); the others
 * fill a struct cc_error. Operations on a target are split in phases, as in
 * CRIU's compel, and an error names its phase: "allocate: ...", "write: ...",
 * "redirect: ...", "restore: ...". No function prints or exits.
 */
#ifndef PADRONE_CODECACHE_H
#define PADRONE_CODECACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cc_error {
	int err;		/* negative errno */
	char msg[512];		/* a full sentence naming the cause */
};

/* ------------------------------------------------------------ relocation */

/* A sequence of instructions decoded at one address, laid out to run at
 * another. Relative branches are widened to rel32 (jcc, jmp, call),
 * jrcxz/jecxz/loop/loope/loopne become a short test over a rel32 jump,
 * rip-relative operands are re-targeted; branches between the relocated
 * instructions stay between the copies. The layout does not depend on where
 * the copy goes; only cc_reloc__encode needs the destination, which must be
 * within +-2 GiB of every outside target. */
struct cc_reloc;

struct cc_reloc_opts {
	size_t sz;		/* sizeof(struct cc_reloc_opts) */
	/* 0: relocate exactly the len bytes given (a whole function).
	 * N: relocate the fewest whole instructions covering N bytes (a
	 *    function's prefix, displaced by a patch). */
	size_t min_len;
	/* Append a jmp back to the first byte after the relocated ones when
	 * the last instruction can fall through. */
	bool jump_back;
};

int cc_reloc__new(const void *code, size_t len, uint64_t src, const struct cc_reloc_opts *opts,
		  struct cc_reloc **out, struct cc_error *err);
void cc_reloc__free(struct cc_reloc *r);

/* Number of instructions, original bytes covered, size of the copy. */
size_t cc_reloc__count(const struct cc_reloc *r);
size_t cc_reloc__src_len(const struct cc_reloc *r);
size_t cc_reloc__size(const struct cc_reloc *r);

/* Write the copy, made to run at dst, into buf (size >= cc_reloc__size). */
int cc_reloc__encode(const struct cc_reloc *r, uint64_t dst, void *buf, size_t size,
		     struct cc_error *err);

/* Offset in the copy of the instruction at original address pc, or -ENOENT
 * when pc is not the start of a relocated instruction. */
int cc_reloc__map(const struct cc_reloc *r, uint64_t pc, size_t *off);
/* The original address of the instruction at offset off of the copy, or
 * -ENOENT when off is not the start of one (e.g. inside a rewritten
 * sequence, or the trailing jump). */
int cc_reloc__unmap(const struct cc_reloc *r, size_t off, uint64_t *pc);

/* Whether a call among the relocated instructions pushes a return address
 * that lies strictly inside the relocated bytes (such a return address on
 * a stack would land inside a patch). */
bool cc_reloc__has_inner_return(const struct cc_reloc *r);

/* ------------------------------------------------------ replacement code */

/* Code to put in a code cache, from a file: a relocatable object (e.g. built
 * with -O3 -mavx2 -fPIC -c), a shared object, or a raw blob of
 * position-independent code (entry at its first byte). Relocations are
 * applied against where the code and data go and against the target's own
 * symbols; outside functions out of rel32 reach are called through stubs,
 * GOT entries are synthesized in the data block. Thread-local storage,
 * constructors and unwinding information are not carried over. */
struct cc_image;

struct cc_image_opts {
	size_t sz;		/* sizeof(struct cc_image_opts) */
	const char *symbol;	/* the function to load; NULL: the only global one */
	bool raw;		/* the file is a raw blob, not ELF */
};

/* Resolve a symbol the code needs in the target: 0 and *addr, or -ENOENT. */
typedef int (*cc_resolve_fn)(void *arg, const char *name, uint64_t *addr);

int cc_image__open(const char *path, const struct cc_image_opts *opts, struct cc_image **out,
		   struct cc_error *err);
void cc_image__free(struct cc_image *im);
const char *cc_image__symbol(const struct cc_image *im);
const char *cc_image__path(const struct cc_image *im);

#define CC_PROT_R 1u
#define CC_PROT_W 2u
#define CC_PROT_X 4u
#define CC_IMAGE_MAX_SEGS 8

struct cc_image_seg {
	uint64_t off, size;	/* page-aligned, within the code block */
	unsigned prot;		/* CC_PROT_* */
};

/* What an image needs. Relocatable objects and raw blobs: a code block
 * (r-x) and a data block (rw-), placed independently. Shared objects
 * (fixed): one block of code_size whose pages take each segment's
 * protection, and no data block. */
struct cc_image_layout {
	size_t code_size, data_size;
	bool fixed;
	size_t nsegs;
	struct cc_image_seg segs[CC_IMAGE_MAX_SEGS];
};
void cc_image__layout(const struct cc_image *im, struct cc_image_layout *l);

/* Produce the blocks to run at code and data (buffers of the layout's
 * sizes) and the entry address of the function. */
int cc_image__link(const struct cc_image *im, uint64_t code, uint64_t data, cc_resolve_fn resolve,
		   void *arg, void *code_buf, void *data_buf, uint64_t *entry, struct cc_error *err);

#ifdef __cplusplus
}
#endif
#endif
