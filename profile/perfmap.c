/* perfmap.c: the perf map files JITs write, as perf report reads them.
 *
 * A JIT (V8, LuaJIT, the JVM's perf-map-agent, CPython's perf trampoline)
 * appends one line per function it generates to /tmp/perf-PID.map:
 * "START SIZE NAME", hex numbers with or without 0x, NAME the rest of the
 * line. JITs re-emit code at addresses they freed, so a later line wins
 * over an earlier one where their ranges overlap. The file keeps growing
 * while the target runs: it is read incrementally, whole lines only (the
 * JIT may be half-way through writing the last one).
 *
 * padrone runs as root and the file lies in a directory the target can
 * write: it is opened without following symlinks, inside the target's root,
 * and used only if it is a regular file of the target's user or root.
 */
#include "profile/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_CHUNK 65536	/* also the longest line kept */

void prof_perfmap__init(struct prof_perfmap *m)
{
	memset(m, 0, sizeof(*m));
}

void prof_perfmap__fini(struct prof_perfmap *m)
{
	free(m->ents);
	free(m->strings);
	free(m->segs);
	prof_perfmap__init(m);
}

/* Forgets every entry (the file was replaced or truncated). */
static void perfmap_reset(struct prof_perfmap *m)
{
	m->n = 0;
	m->nsegs = 0;
	m->strings_len = 0;
	m->malformed = 0;
	m->dropped = 0;
	m->consumed = 0;
	m->skipping = false;
}

/* ------------------------------------------------------------ parsing */

/* A hex number with an optional 0x, up to 16 digits; advances *p. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++, digits++) {
		int d = *s >= '0' && *s <= '9' ? *s - '0' :
			*s >= 'a' && *s <= 'f' ? *s - 'a' + 10 :
			*s >= 'A' && *s <= 'F' ? *s - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (digits == 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*p = s;
	*out = v;
	return digits > 0;
}

/* Skips blanks; false when there were none (fields must be separated). */
static bool skip_blanks(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	bool any = s != *p;
	*p = s;
	return any;
}

static int add_entry(struct prof_perfmap *m, uint64_t start, uint64_t end, const char *name,
		     size_t len)
{
	if (m->n >= PROF_PERFMAP_MAX_ENTRIES ||
	    m->strings_len + len + 1 > PROF_PERFMAP_MAX_NAME_BYTES) {
		m->dropped++;
		return 0;
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 256;
		void *p = realloc(m->ents, nc * sizeof(*m->ents));
		if (!p)
			return -ENOMEM;
		m->ents = p;
		m->cap = nc;
	}
	if (m->strings_len + len + 1 > m->strings_cap) {
		size_t nc = m->strings_cap ? m->strings_cap : 4096;
		while (nc < m->strings_len + len + 1)
			nc *= 2;
		char *p = realloc(m->strings, nc);
		if (!p)
			return -ENOMEM;
		m->strings = p;
		m->strings_cap = nc;
	}
	memcpy(m->strings + m->strings_len, name, len);
	m->strings[m->strings_len + len] = 0;
	m->ents[m->n++] = (struct prof_perfmap_ent){ start, end, m->strings_len };
	m->strings_len += len + 1;
	return 0;
}

/* One line without its newline. A line that is not START SIZE NAME, with
 * a nonzero SIZE that does not wrap around, is counted and skipped. */
static int parse_line(struct prof_perfmap *m, const char *s, size_t len)
{
	const char *end = s + len;
	uint64_t start, size;

	while (end > s && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == s)
		return 0;	/* blank lines are not worth a complaint */
	skip_blanks(&s, end);
	if (!parse_hex(&s, end, &start) || !skip_blanks(&s, end) ||
	    !parse_hex(&s, end, &size) || !skip_blanks(&s, end) || s == end ||
	    !size || start + size < start || memchr(s, 0, (size_t)(end - s))) {
		m->malformed++;
		return 0;
	}
	return add_entry(m, start, start + size, s, (size_t)(end - s));
}

int prof_perfmap__feed(struct prof_perfmap *m, const char *buf, size_t len)
{
	size_t used = 0;
	const char *nl;
	int r;

	while ((nl = memchr(buf + used, '\n', len - used))) {
		size_t l = (size_t)(nl - (buf + used));
		if (m->skipping)
			m->skipping = false;	/* the end of an over-long line */
		else if ((r = parse_line(m, buf + used, l)) < 0)
			return r;
		used += l + 1;
	}
	return (int)used;
}

/* ------------------------------------------------------------ index */

/* Where each entry's range is not hidden by a later entry. A sweep over
 * the sorted boundaries with a max-heap of the entries open there (by file
 * order, the newest on top; closed ones are dropped when they surface). */
struct sweep {
	uint32_t *heap;		/* entry indices: a higher one is newer */
	size_t nheap;
};

static void heap_push(struct sweep *w, uint32_t i)
{
	size_t k = w->nheap++;

	for (; k && w->heap[(k - 1) / 2] < i; k = (k - 1) / 2)
		w->heap[k] = w->heap[(k - 1) / 2];
	w->heap[k] = i;
}

static void heap_pop(struct sweep *w)
{
	uint32_t last = w->heap[--w->nheap];
	size_t k = 0;

	for (;;) {
		size_t c = 2 * k + 1;
		if (c >= w->nheap)
			break;
		if (c + 1 < w->nheap && w->heap[c + 1] > w->heap[c])
			c++;
		if (w->heap[c] <= last)
			break;
		w->heap[k] = w->heap[c];
		k = c;
	}
	if (w->nheap)
		w->heap[k] = last;
}

static int cmp_by_start(const void *a, const void *b, void *ents)
{
	const struct prof_perfmap_ent *e = ents;
	uint64_t x = e[*(const uint32_t *)a].start, y = e[*(const uint32_t *)b].start;
	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Appends [start, end) -> ent, merged with the previous piece of ent. */
static void add_seg(struct prof_perfmap *m, uint64_t start, uint64_t end, uint32_t ent)
{
	struct prof_perfmap_seg *last = m->nsegs ? &m->segs[m->nsegs - 1] : NULL;

	if (last && last->ent == ent && last->end == start)
		last->end = end;
	else
		m->segs[m->nsegs++] = (struct prof_perfmap_seg){ start, end, ent };
}

/* Boundaries sorted, duplicates removed; returns how many. */
static size_t boundaries(const struct prof_perfmap *m, uint64_t *b)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n; i++) {
		b[2 * i] = m->ents[i].start;
		b[2 * i + 1] = m->ents[i].end;
	}
	qsort(b, 2 * m->n, sizeof(*b), cmp_u64);
	for (size_t i = 0; i < 2 * m->n; i++)
		if (!k || b[k - 1] != b[i])
			b[k++] = b[i];
	return k;
}

int prof_perfmap__index(struct prof_perfmap *m)
{
	uint32_t *order = malloc((m->n + 1) * sizeof(*order));
	uint32_t *heap = malloc((m->n + 1) * sizeof(*heap));
	uint64_t *b = malloc((2 * m->n + 1) * sizeof(*b));
	void *segs = realloc(m->segs, (2 * m->n + 1) * sizeof(*m->segs));
	int r = -ENOMEM;

	if (segs)
		m->segs = segs;
	m->nsegs = 0;
	if (!order || !heap || !b || !segs)
		goto out;
	for (size_t i = 0; i < m->n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, m->n, sizeof(*order), cmp_by_start, m->ents);
	struct sweep w = { heap, 0 };
	size_t nb = boundaries(m, b), next = 0;
	for (size_t i = 0; i + 1 < nb; i++) {
		while (next < m->n && m->ents[order[next]].start <= b[i])
			heap_push(&w, order[next++]);
		while (w.nheap && m->ents[w.heap[0]].end <= b[i])
			heap_pop(&w);
		if (w.nheap)
			add_seg(m, b[i], b[i + 1], w.heap[0]);
	}
	r = 0;
out:
	free(order);
	free(heap);
	free(b);
	return r;
}

const struct prof_perfmap_ent *prof_perfmap__find(const struct prof_perfmap *m, uint64_t addr)
{
	size_t lo = UTIL_UPPER_BOUND(m->segs, m->nsegs, start, addr);

	if (!lo || addr >= m->segs[lo - 1].end)
		return NULL;
	return &m->ents[m->segs[lo - 1].ent];
}

const char *prof_perfmap__name(const struct prof_perfmap *m, const struct prof_perfmap_ent *e)
{
	return m->strings + e->name;
}

/* ------------------------------------------------------------ the file */

/* Reads the lines added since the last read. */
static int read_new(struct prof_perfmap *m, int fd)
{
	char *buf = malloc(READ_CHUNK);
	ssize_t got;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	do {
		got = pread(fd, buf, READ_CHUNK, (off_t)m->consumed);
		if (got < 0) {
			r = -errno;
			break;
		}
		r = prof_perfmap__feed(m, buf, (size_t)got);
		if (r < 0)
			break;
		if (r == 0 && got == READ_CHUNK) {
			/* no newline in a whole chunk: a line too long to be a
			 * name, skipped up to its end */
			if (!m->skipping)
				m->malformed++;
			m->skipping = true;
			r = READ_CHUNK;
		}
		m->consumed += (uint64_t)r;
		r = 0;
	} while (got == READ_CHUNK);
	free(buf);
	return r;
}

int prof_perfmap__update(struct prof_perfmap *m, int fd)
{
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_dev != m->dev || st.st_ino != m->ino || (uint64_t)st.st_size < m->consumed)
		perfmap_reset(m);	/* a new file, or the JIT started over */
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	if ((uint64_t)st.st_size == m->consumed)
		return 0;
	size_t before = m->n;
	r = read_new(m, fd);
	if (r < 0)
		return r;
	return m->n != before ? prof_perfmap__index(m) : 0;
}

/* Opens path relative to dirfd without leaving it (RESOLVE_IN_ROOT: an
 * absolute symlink inside the target's root stays inside it), and without
 * following a symlink as the last component. */
static int open_beneath(int dirfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)	/* before Linux 5.6 */
		fd = openat(dirfd, path, (int)how.flags);
	return fd < 0 ? -errno : (int)fd;
}

/* The file must be something the target itself (or root) wrote: not a
 * FIFO that would block us, not a hard link to another user's file. */
static int check_owner(int fd, const uid_t *uids, size_t nuids)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return -EPERM;
	for (size_t i = 0; i < nuids; i++)
		if (st.st_uid == uids[i])
			return 0;
	return st.st_uid == 0 ? 0 : -EPERM;
}

static int open_checked(int dirfd, const char *path, const uid_t *uids, size_t nuids)
{
	int fd = open_beneath(dirfd, path);

	if (fd < 0)
		return fd;
	int r = check_owner(fd, uids, nuids);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int prof_perfmap__open(pid_t pid, pid_t nspid, const uid_t *uids, size_t nuids, char *path,
		       size_t pathlen)
{
	char buf[64];
	int fd = -ENOENT, root;

	snprintf(buf, sizeof(buf), "/proc/%d/root", (int)pid);
	root = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0) {
		/* the target's own /tmp, under the pid it knows itself by */
		snprintf(buf, sizeof(buf), "tmp/perf-%d.map", (int)(nspid ? nspid : pid));
		fd = open_checked(root, buf, uids, nuids);
		close(root);
		if (fd >= 0) {
			snprintf(path, pathlen, "/proc/%d/root/%s", (int)pid, buf);
			return fd;
		}
	}
	/* the target is gone (its /proc with it), or we cannot enter its root */
	int r = fd;
	snprintf(buf, sizeof(buf), "/tmp/perf-%d.map", (int)pid);
	fd = open_checked(AT_FDCWD, buf, uids, nuids);
	if (fd >= 0) {
		snprintf(path, pathlen, "%s", buf);
		return fd;
	}
	/* say why the target's own file was refused rather than "not found" */
	return r != -ENOENT && r != -ESRCH ? r : fd;
}

/* The last number of a /proc/PID/status line's value (NSpid: the pid in
 * the target's own namespace), or the numbers of the Uid line. */
int prof_perfmap__ids(pid_t pid, pid_t *nspid, uid_t uids[4])
{
	char path[64], line[256];
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	*nspid = pid;
	while (fgets(line, sizeof(line), f)) {
		unsigned u[4];
		if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				uids[i] = u[i];
			found = 1;
		} else if (!strncmp(line, "NSpid:", 6)) {
			char *last = strrchr(line, '\t');
			if (last && atoi(last + 1) > 0)
				*nspid = atoi(last + 1);
		}
	}
	fclose(f);
	return found ? 0 : -EINVAL;
}
