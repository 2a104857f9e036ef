/* util.h: small helpers every room uses alike, below all of them: the
 * monotonic clock, a u64 -> u32 hash map, the first element above a key in
 * a sorted array, and the copy of a caller's options struct.
 *
 * Conventions as the rooms': 0 or a negative errno; nothing here prints.
 */
#ifndef PADRONE_UTIL_H
#define PADRONE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in ns. */
uint64_t util_now_ns(void);
struct timespec;
/* *t plus ns, normalised. */
void util_timespec_add_ns(struct timespec *t, uint64_t ns);
/* CLOCK_MONOTONIC now plus ns: a deadline for pthread_cond_timedwait on a
 * condition variable made with that clock. */
void util_deadline_ns(struct timespec *t, uint64_t ns);

/* Open addressing, u64 key (never UTIL_HMAP_EMPTY) to u32 value. A zeroed
 * map is empty and ready. */
struct util_hmap {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, len;	/* cap is a power of two */
};
#define UTIL_HMAP_EMPTY UINT64_MAX
/* Room for about hint keys before the map grows. 0 or -ENOMEM. */
int util_hmap__init(struct util_hmap *h, size_t hint);
void util_hmap__fini(struct util_hmap *h);
void util_hmap__clear(struct util_hmap *h);
/* Pointer to the value of key (valid until the next put), or NULL (also
 * for UTIL_HMAP_EMPTY). */
uint32_t *util_hmap__get(const struct util_hmap *h, uint64_t key);
/* Insert (or overwrite). 0, -ENOMEM, or -EINVAL for UTIL_HMAP_EMPTY. */
int util_hmap__put(struct util_hmap *h, uint64_t key, uint32_t val);

/* In an array of n elements of size bytes sorted by the u64 at offset off,
 * the index of the first element whose key is above key (n if none): the
 * element holding an address is the one before it. */
size_t util_upper_bound(const void *base, size_t n, size_t size, size_t off, uint64_t key);
/* The same over the array a of type T sorted by its field f. */
#define UTIL_UPPER_BOUND(a, n, f, key) ({ \
	_Static_assert(sizeof((a)->f) == sizeof(uint64_t), "UTIL_UPPER_BOUND: a u64 key"); \
	util_upper_bound((a), (n), sizeof *(a), offsetof(__typeof__(*(a)), f), (key)); \
})

/* Copies a caller's options struct into dst, this build's struct (zeroed
 * or holding defaults), as libbpf's OPTS_VALID does: the fields both
 * builds know are copied (an older caller's smaller struct leaves the rest
 * as they are); a newer caller's larger struct is accepted only when the
 * bytes this build does not know are all zero. opts NULL: nothing to copy.
 * false when opts has non-zero fields this build does not know. */
bool util_opts_copy(void *dst, size_t dst_size, const void *opts, size_t opts_size);
/* dst a pointer to this build's struct; opts the caller's (first field
 * sz, its size), or NULL. The copy is this build's struct whatever the
 * caller's size: its sz says so, so it can be handed on to another
 * function that copies it again. */
#define UTIL_OPTS_COPY(dst, opts) ({ \
	__typeof__(opts) util_opts_ = (opts); \
	bool util_ok_ = util_opts_copy((dst), sizeof *(dst), util_opts_, \
				       util_opts_ ? util_opts_->sz : 0); \
	if (util_ok_) \
		(dst)->sz = sizeof *(dst); \
	util_ok_; \
})
/* The words for that refusal. */
#define UTIL_OPTS_UNKNOWN "the options struct sets fields this build of padrone does not know " \
	"(built against a newer padrone?)"

#endif
