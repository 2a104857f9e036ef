/* patch.h: what the files of live redirection share (patch.c: stopping,
 * applying and undoing; patch-plan.c: planning; patch-dir.c: the
 * directory's records of redirections). Not part of codecache.h. */
#ifndef PADRONE_CODECACHE_PATCH_H
#define PADRONE_CODECACHE_PATCH_H

#include "codecache/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENTRY_JMP 5

/* Lines said to the caller's report buffer (cc_patch_opts.report). */
struct report {
	char *buf;
	size_t size, len;
};

void cc__say(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Bytes written at one site, or the bytes a write replaces. */
struct write {
	uint64_t addr;
	uint8_t len;
	uint8_t bytes[CC_SITE_MAX];
};

/* One redirection being planned and applied (or one being undone). */
struct cc_job {
	struct cc_cache *c;
	struct cc_func fn;
	char name[96];
	unsigned kind;			/* cc_redir_kind */
	struct cc_patch_opts o;
	struct report rep;
	struct cc_patch_stats stats;
	/* the entry jmp */
	bool entry;
	uint64_t site;			/* after endbr64 */
	struct cc_reloc *prefix;	/* the instructions it displaces */
	uint64_t stub_end;		/* MEASURE: the stub's code ends here */
	/* an instrumented copy's state area and rings' range (its record) */
	uint64_t area, area_size, rings, rings_size;
	/* planned writes, and the record made of them (cc__job_record) */
	struct write *w;
	size_t nw;
	uint32_t rid;
	bool would_wait;		/* dry run: said it would wait */
	/* call sites in callers: their current bytes */
	struct write *calls;
	size_t ncalls;
	/* the bytes each write replaces, to roll back a partial write */
	struct write *undo;
};

/* ------------------------------------------------------------ directory */

struct cc_dir_redir *cc__redir_by_id(struct cc_cache *c, uint32_t id);
/* Another redirection's site overlapping [addr, addr+len), or NULL. */
const struct cc_dir_site *cc__site_overlap(struct cc_cache *c, uint64_t addr, size_t len);
size_t cc__free_sites(const struct cc_cache *c);
/* Records j's redirection (its writes w, what it owns) in the directory
 * and saves it; *id its id. */
int cc__redir_record(struct cc_job *j, const struct write *w, size_t nw, uint64_t dest,
		     uint64_t copy, const struct cc_dir_block *owned, size_t nowned, uint64_t state,
		     uint32_t *id);
void cc__redir_forget(struct cc_cache *c, uint32_t id);

#endif
