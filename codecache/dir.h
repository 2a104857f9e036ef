/* dir.h: the code cache's directory, kept inside the target.
 *
 * It lives at the start of the first data area, so a later padrone session
 * (restore after replace, a second measure) finds what an earlier one left:
 * the areas, the free blocks, and every redirection with the original bytes
 * of each site it patched and the padrone process that made it. Found again by scanning the target's private
 * anonymous read-write mappings for the magic and the mapping's own address.
 * Plain fixed-size arrays: the target never reads it, padrone rewrites the
 * parts it changes.
 */
#ifndef PADRONE_CODECACHE_DIR_H
#define PADRONE_CODECACHE_DIR_H

#include <stdint.h>

#define CC_DIR_MAGIC "padrone-ccache-1"	/* 16 bytes, no NUL */
#define CC_DIR_VERSION 3
#define CC_MAX_AREAS 64
#define CC_MAX_FREE 256
#define CC_MAX_REDIRS 64
#define CC_MAX_SITES 512
#define CC_MAX_OWNED 4
#define CC_SITE_MAX 16		/* bytes a site may patch */

enum cc_area_kind { CC_AREA_CODE = 1, CC_AREA_DATA = 2, CC_AREA_IMAGE = 3 };

struct cc_dir_area {
	uint64_t addr, size, used;	/* used: bump pointer (IMAGE: all) */
	uint32_t kind, pad;
};

struct cc_dir_block {
	uint64_t addr, size;
	uint32_t kind, pad;
};

enum cc_redir_kind { CC_REDIR_REPLACE = 1, CC_REDIR_MEASURE = 2 };
enum cc_site_kind { CC_SITE_ENTRY = 1, CC_SITE_CALL = 2 };

/* One function redirected: where calls go, what was written where, and the
 * cache blocks it owns (freed when it is undone, if no thread is in them). */
struct cc_dir_redir {
	uint32_t id;			/* 0: free slot */
	uint32_t kind;			/* cc_redir_kind */
	uint64_t func, func_size;
	uint64_t dest;
	uint64_t detour, detour_size;	/* relocated prefix: where a thread inside the
					 * patched bytes is moved */
	uint64_t state;			/* MEASURE: its data block */
	uint64_t stop_ns;		/* stop-the-world time of the patch */
	uint64_t stub_end;		/* MEASURE: the stub's code is [dest, stub_end)
					 * (a thread there is stepped out on undo) */
	/* the padrone process that made it: a measuring stub whose owner is
	 * gone (killed while measuring) is stale, and restore takes it out */
	uint64_t owner_start;		/* its start time (/proc/PID/stat field 22) */
	int32_t owner_pid;
	uint32_t nowned;
	/* an instrumented copy: the threads' state area their gs_base points
	 * into, and the range its rings are mapped in (reserved, then filled).
	 * Recorded before either is made or pointed at, so that whatever a
	 * padrone killed inside the install leaves, a later session's restore
	 * takes out (gs_base back to 0, the range unmapped) */
	uint64_t area, area_size;
	uint64_t rings, rings_size;
	struct cc_dir_block owned[CC_MAX_OWNED];
	char name[96];			/* the function */
	char source[160];		/* FILE[:SYMBOL] it was replaced by */
};

struct cc_dir_site {
	uint64_t addr;
	uint32_t redir;			/* owner's id; 0: free slot */
	uint8_t kind, len, pad[2];
	uint8_t orig[CC_SITE_MAX];	/* the bytes before */
	uint8_t now[CC_SITE_MAX];	/* the bytes padrone wrote */
};

struct cc_dir {
	char magic[16];
	uint64_t self;			/* its own address in the target */
	uint32_t version, size;
	uint32_t next_id;
	uint32_t nareas, nfree, pad;
	struct cc_dir_area areas[CC_MAX_AREAS];
	struct cc_dir_block free[CC_MAX_FREE];
	struct cc_dir_redir redirs[CC_MAX_REDIRS];
	struct cc_dir_site sites[CC_MAX_SITES];
};

#endif
