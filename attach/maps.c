/* attach/maps.c: /proc/PID/maps as a sorted, queryable table. */
#include "attach/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct attach_maps {
	size_t n;
	struct attach_map *v;
	char *text;		/* the paths point into this copy */
};

/* The kernel pads every named line so the name starts at column 73
 * (fs/proc/task_mmu.c: seq_setwidth(25 + 6 * sizeof(void *) - 1), then
 * seq_pad(' ')), or one space after a longer prefix. Counting columns,
 * rather than skipping blanks, keeps names that begin with a space. */
#define MAPS_NAME_COLUMN 73

static int parse_line(char *line, size_t len, struct attach_map *m)
{
	unsigned long long start, end, off, inode;
	unsigned maj, min;
	char perms[5];
	int prefix = 0;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj,
		   &min, &inode, &prefix) != 7 || strlen(perms) != 4 || end < start)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->dev_major = maj;
	m->dev_minor = min;
	m->inode = inode;
	if (perms[0] == 'r')
		m->prot |= ATTACH_MAP_R;
	if (perms[1] == 'w')
		m->prot |= ATTACH_MAP_W;
	if (perms[2] == 'x')
		m->prot |= ATTACH_MAP_X;
	if (perms[3] == 's')
		m->prot |= ATTACH_MAP_SHARED;
	/* %n after " " swallowed every blank; find where the inode ended. */
	size_t after_inode = (size_t)prefix;
	while (after_inode > 0 && line[after_inode - 1] == ' ')
		after_inode--;
	size_t name_at = after_inode + 1 > MAPS_NAME_COLUMN - 1 ? after_inode + 2 : MAPS_NAME_COLUMN;
	m->path = name_at < len ? line + name_at : line + len;
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const struct attach_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int attach__maps_parse(const char *text, size_t len, struct attach_maps **out)
{
	struct attach_maps *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->text = malloc(len + 1);
	if (!m->text) {
		free(m);
		return -ENOMEM;
	}
	memcpy(m->text, text, len);
	m->text[len] = '\0';

	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += m->text[i] == '\n';
	m->v = calloc(lines + 1, sizeof(*m->v));
	if (!m->v) {
		attach_maps__free(m);
		return -ENOMEM;
	}
	char *p = m->text, *end = m->text + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		p[l] = '\0';
		if (l > 0) {
			if (parse_line(p, l, &m->v[m->n]) < 0) {
				attach_maps__free(m);
				return -EINVAL;
			}
			m->n++;
		}
		p += l + 1;
	}
	qsort(m->v, m->n, sizeof(*m->v), cmp_start);
	*out = m;
	return 0;
}

static int read_maps_file(const char *path, struct attach_maps **out);

int attach_maps__read(pid_t pid, struct attach_maps **out)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int r = read_maps_file(path, out);
	if (r < 0 || (*out)->n > 0)
		return r;
	/* Empty: a leader that exited while its threads run has no mm of
	 * its own any more; a live thread shows the process's maps. */
	pid_t live = attach__live_task(pid);
	if (live == pid)
		return 0;
	attach_maps__free(*out);
	*out = NULL;
	snprintf(path, sizeof path, "/proc/%d/task/%d/maps", (int)pid, (int)live);
	return read_maps_file(path, out);
}

static int read_maps_file(const char *path, struct attach_maps **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int err = 0;
	for (;;) {
		if (!buf) {
			err = -ENOMEM;
			break;
		}
		if (cap - len < 4096) {
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (!err)
		err = attach__maps_parse(buf, len, out);
	free(buf);
	return err;
}

void attach_maps__free(struct attach_maps *m)
{
	if (!m)
		return;
	free(m->v);
	free(m->text);
	free(m);
}

size_t attach_maps__count(const struct attach_maps *m)
{
	return m ? m->n : 0;
}

const struct attach_map *attach_maps__at(const struct attach_maps *m, size_t i)
{
	return m && i < m->n ? &m->v[i] : NULL;
}

const struct attach_map *attach_maps__find(const struct attach_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m ? m->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

uint64_t attach_maps__mapped_len(const struct attach_maps *m, uint64_t addr, uint64_t len)
{
	uint64_t done = 0;
	const struct attach_map *mp;

	while (done < len && (mp = attach_maps__find(m, addr + done)))
		done = mp->end - addr;
	return done < len ? done : len;
}

size_t attach_mapped_len(pid_t pid, uint64_t addr, size_t len)
{
	struct attach_maps *m;

	if (attach_maps__read(pid, &m) < 0)
		return 0;
	size_t n = (size_t)attach_maps__mapped_len(m, addr, len);
	attach_maps__free(m);
	return n;
}

const struct attach_map *attach_maps__first_of(const struct attach_maps *m, const char *path)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	return NULL;
}

/* The kernel keeps stack_guard_gap (256 pages by default) free below a
 * stack; a placement there would be refused. */
#define STACK_GUARD (256ull * 4096)
#define USER_TOP 0x7ffffffff000ull	/* end of the 47-bit user space */
#define USER_BOTTOM 0x10000ull		/* vm.mmap_min_addr's default */

static uint64_t align_down(uint64_t x, uint64_t a)
{
	return x / a * a;
}

/* Best aligned start for [a, a+size) inside [gs, ge) near `near`, or 0. */
static bool place_in_gap(uint64_t gs, uint64_t ge, uint64_t size, uint64_t align,
			 uint64_t near, uint64_t *at)
{
	if (ge <= gs || ge - gs < size)
		return false;
	uint64_t last = align_down(ge - size, align);	/* highest aligned start */
	uint64_t first = gs % align ? align_down(gs, align) + align : gs;
	if (first < gs || first > last)
		return false;
	uint64_t a = near <= first ? first : near >= last ? last : align_down(near, align);
	if (a < first)
		a = first;
	/* The aligned start just above may be closer. */
	if (a + align <= last && near > a && near - a > a + align - near)
		a += align;
	*at = a;
	return true;
}

static uint64_t distance(uint64_t a, uint64_t size, uint64_t near)
{
	if (near >= a && near < a + size)
		return 0;
	return near < a ? a - near : near - (a + size);
}

int attach_maps__find_gap(const struct attach_maps *m, uint64_t lo, uint64_t hi, uint64_t size,
			  uint64_t align, uint64_t near, uint64_t *addr)
{
	if (!align || (align & (align - 1)) || !size)
		return -EINVAL;
	if (lo < USER_BOTTOM)
		lo = USER_BOTTOM;
	if (hi > USER_TOP)
		hi = USER_TOP;
	bool found = false;
	uint64_t best = 0, best_d = 0;
	uint64_t prev_end = 0;
	size_t n = m ? m->n : 0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t gs = prev_end, ge = i < n ? m->v[i].start : USER_TOP;
		if (i < n && strcmp(m->v[i].path, "[stack]") == 0)
			ge = ge > STACK_GUARD ? ge - STACK_GUARD : 0;
		if (i < n && m->v[i].end > prev_end)
			prev_end = m->v[i].end;
		if (gs < lo)
			gs = lo;
		if (ge > hi)
			ge = hi;
		uint64_t at;
		if (!place_in_gap(gs, ge, size, align, near, &at))
			continue;
		uint64_t d = distance(at, size, near);
		if (!found || d < best_d) {
			found = true;
			best = at;
			best_d = d;
		}
	}
	if (!found)
		return -ENOSPC;
	*addr = best;
	return 0;
}
