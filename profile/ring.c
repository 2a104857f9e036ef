/* ring.c: reading a perf_event mmap ring.
 *
 * The kernel writes records at data_head and we free them by moving
 * data_tail. data_head must be read with acquire semantics (the records
 * before it are then visible), data_tail written with release semantics
 * (we are done reading before the kernel may overwrite). A record that wraps
 * around the end of the data area is copied into a bounce buffer so that
 * callers always see it contiguous.
 */
#include "profile/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int prof_ring__init(struct prof_ring *r, void *base, uint64_t size)
{
	if (size == 0 || (size & (size - 1)))
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->meta = base;
	r->data = (uint8_t *)base + (r->meta->data_offset ? r->meta->data_offset : 4096);
	r->size = size;
	r->bounce_cap = 65536;	/* a record's size is a u16 */
	r->bounce = malloc(r->bounce_cap);
	return r->bounce ? 0 : -ENOMEM;
}

void prof_ring__fini(struct prof_ring *r)
{
	free(r->bounce);
	r->bounce = NULL;
}

/* Copy len bytes at ring offset pos (mod size) into dst. */
static void ring_copy(const struct prof_ring *r, uint64_t pos, void *dst, size_t len)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = len;

	if (off + len > r->size)
		first = r->size - off;
	memcpy(dst, r->data + off, first);
	if (first < len)
		memcpy((uint8_t *)dst + first, r->data, len - first);
}

uint64_t prof_ring__head(const struct prof_ring *r)
{
	return __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
}

int prof_ring__drain(struct prof_ring *r, prof_ring_fn fn, void *arg)
{
	return prof_ring__drain_to(r, prof_ring__head(r), fn, arg);
}

/* Calls fn on the records from tail to head, returns where it stopped
 * (head, or past the record whose fn returned nonzero) or, on a corrupt
 * header, -EIO in *ret. */
static uint64_t walk(struct prof_ring *r, uint64_t tail, uint64_t head, prof_ring_fn fn,
		     void *arg, int *n, int *ret)
{
	while (tail < head) {
		struct perf_event_header hdr;
		uint64_t off = tail & (r->size - 1);

		if (head - tail < sizeof(hdr)) {
			*ret = -EIO;
			break;
		}
		ring_copy(r, tail, &hdr, sizeof(hdr));
		if (hdr.size < sizeof(hdr) || hdr.size > head - tail) {
			*ret = -EIO;
			break;
		}
		const struct perf_event_header *rec = (const void *)(r->data + off);
		if (off + hdr.size > r->size) {
			ring_copy(r, tail, r->bounce, hdr.size);
			rec = (const void *)r->bounce;
		}
		tail += hdr.size;
		(*n)++;
		if (fn(rec, arg))
			break;
	}
	return tail;
}

int prof_ring__drain_to(struct prof_ring *r, uint64_t head, prof_ring_fn fn, void *arg)
{
	int n = 0, ret = 0;
	uint64_t tail = walk(r, r->meta->data_tail, head, fn, arg, &n, &ret);

	if (ret < 0)
		tail = head;	/* resynchronise: nothing sane remains */
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	return ret < 0 ? ret : n;
}

int prof_ring__peek(struct prof_ring *r, prof_ring_fn fn, void *arg)
{
	int n = 0, ret = 0;

	walk(r, r->meta->data_tail, prof_ring__head(r), fn, arg, &n, &ret);
	return ret < 0 ? ret : n;
}
