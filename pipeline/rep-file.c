/* rep-file.c: saved REP files (block table + stream sections), the format
 * described in rep.h. The reader maps the file and never trusts a length:
 * every error names the byte offset of what is wrong. */
#include "pipeline/rep-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR_SIZE 32
#define SEC_SIZE 16
#define BLK_SIZE 24
#define INS_SIZE 16
#define REF_SIZE 40		/* version 2 */
#define REF_SIZE_V1 32

/* --------------------------------------------------------------- writer */

struct rep_writer {
	FILE *f;
	int err;
	char path[256];
};

static void put(struct rep_writer *w, const void *p, size_t n)
{
	if (!w->err && fwrite(p, 1, n, w->f) != n)
		w->err = -errno ? -errno : -EIO;
}

static void put_u16(struct rep_writer *w, uint16_t v) { put(w, &v, 2); }
static void put_u32(struct rep_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(struct rep_writer *w, uint64_t v) { put(w, &v, 8); }

static void put_section(struct rep_writer *w, uint32_t tag, uint64_t len)
{
	put_u32(w, tag);
	put_u32(w, 0);
	put_u64(w, len);
}

static void put_block(struct rep_writer *w, const struct rep_block *b)
{
	put_u32(w, b->id);
	put_u16(w, b->nslots);
	put_u16(w, b->flags);
	put_u64(w, b->pc);
	put_u32(w, b->ninstrs);
	put_u32(w, b->nrefs);
	for (uint32_t i = 0; i < b->ninstrs; i++) {
		put_u64(w, b->instrs[i].pc);
		put_u32(w, b->instrs[i].len);
		put_u32(w, 0);
	}
	for (uint32_t j = 0; j < b->nrefs; j++) {
		const struct rep_mref *m = &b->refs[j];
		put_u64(w, m->pc);
		put_u64(w, (uint64_t)m->disp);
		put_u32(w, m->size);
		put(w, &m->type, 1);
		put(w, &m->scale, 1);
		put_u16(w, m->base);
		put_u16(w, m->index);
		put_u16(w, m->seg);
		put_u16(w, m->count);
		put_u16(w, m->flags);
		put_u16(w, m->count_end);
		put_u16(w, m->rflags);
		put_u32(w, 0);
	}
}

int rep_writer__open(const char *path, const struct rep_table *t, struct rep_writer **out)
{
	struct rep_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return rep__fail(-ENOMEM, "out of memory");
	snprintf(w->path, sizeof w->path, "%s", path);
	w->f = fopen(path, "wb");
	if (!w->f) {
		int rc = rep__fail(-errno, "%s: %s", path, strerror(errno));
		free(w);
		return rc;
	}
	put(w, REP_FILE_MAGIC, 8);
	put_u32(w, REP_VERSION);
	put_u32(w, HDR_SIZE);
	put_u64(w, 0);
	put_u64(w, 0);
	uint64_t len = 8;
	for (size_t i = 0; i < t->n; i++)
		len += BLK_SIZE + (uint64_t)t->blks[i].b.ninstrs * INS_SIZE +
		       (uint64_t)t->blks[i].b.nrefs * REF_SIZE;
	put_section(w, REP_SEC_TABLE, len);
	put_u32(w, (uint32_t)t->n);
	put_u32(w, 0);
	for (size_t i = 0; i < t->n; i++)
		put_block(w, &t->blks[i].b);
	if (w->err) {
		int rc = rep__fail(w->err, "%s: writing the block table: %s", path, strerror(-w->err));
		fclose(w->f);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int rep_writer__stream(struct rep_writer *w, uint64_t tid, const uint64_t *words, size_t n)
{
	put_section(w, REP_SEC_STREAM, 8 + (uint64_t)n * 8);
	put_u64(w, tid);
	put(w, words, n * 8);
	return w->err ? rep__fail(w->err, "%s: %s", w->path, strerror(-w->err)) : 0;
}

int rep_writer__close(struct rep_writer *w)
{
	int rc;

	put_section(w, REP_SEC_END, 0);
	if (fclose(w->f) != 0 && !w->err)
		w->err = -errno;
	rc = w->err ? rep__fail(w->err, "%s: %s", w->path, strerror(-w->err)) : 0;
	free(w);
	return rc;
}

/* --------------------------------------------------------------- reader */

struct rep_reader {
	const uint8_t *p;
	size_t size;
	uint32_t version;
	uint32_t ref_size;	/* of this version */
	uint64_t pos;		/* next section header */
	bool ended;
	struct rep_table *t;
	char path[256];
};

static uint16_t get_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int bad(const struct rep_reader *r, uint64_t off, const char *what)
{
	return rep__fail(-EBADMSG, "%s: %s at offset %llu", r->path, what, (unsigned long long)off);
}

/* A section header at r->pos: its tag, body offset and length. */
static int section(struct rep_reader *r, uint32_t *tag, uint64_t *body, uint64_t *len)
{
	uint64_t at = r->pos;

	if (at == r->size)
		return bad(r, at, "truncated file: no end section");
	if (r->size - at < SEC_SIZE)
		return bad(r, at, "truncated section header");
	*tag = get_u32(r->p + at);
	*len = get_u64(r->p + at + 8);
	*body = at + SEC_SIZE;
	if (*tag < REP_SEC_TABLE || *tag > REP_SEC_END || get_u32(r->p + at + 4))
		return rep__fail(-EBADMSG, "%s: unknown section tag %u at offset %llu", r->path,
				 *tag, (unsigned long long)at);
	if (*len % 8)
		return rep__fail(-EBADMSG, "%s: section at offset %llu: length %llu is not a multiple of 8",
				 r->path, (unsigned long long)at, (unsigned long long)*len);
	if (*len > r->size - *body)
		return rep__fail(-EBADMSG,
				 "%s: truncated section at offset %llu: %llu bytes announced, %llu present",
				 r->path, (unsigned long long)at, (unsigned long long)*len,
				 (unsigned long long)(r->size - *body));
	r->pos = *body + *len;
	return 0;
}

static int read_block(struct rep_reader *r, uint64_t *at, uint64_t end)
{
	const uint8_t *p = r->p;
	uint64_t o = *at;

	if (end - o < BLK_SIZE)
		return bad(r, o, "truncated block table entry");
	struct rep_block b = {
		.id = get_u32(p + o), .nslots = get_u16(p + o + 4), .flags = get_u16(p + o + 6),
		.pc = get_u64(p + o + 8), .ninstrs = get_u32(p + o + 16), .nrefs = get_u32(p + o + 20),
	};
	uint64_t need = (uint64_t)b.ninstrs * INS_SIZE + (uint64_t)b.nrefs * r->ref_size;
	if (end - o - BLK_SIZE < need)
		return bad(r, o, "truncated block table entry");
	struct rep_instr *in = calloc(b.ninstrs + 1, sizeof(*in));
	struct rep_mref *rf = calloc(b.nrefs + 1, sizeof(*rf));
	int rc = 0;
	if (!in || !rf) {
		rc = rep__fail(-ENOMEM, "out of memory");
		goto out;
	}
	uint64_t q = o + BLK_SIZE;
	for (uint32_t i = 0; i < b.ninstrs; i++, q += INS_SIZE)
		in[i] = (struct rep_instr){ .pc = get_u64(p + q), .len = get_u32(p + q + 8) };
	for (uint32_t j = 0; j < b.nrefs; j++, q += r->ref_size) {
		rf[j] = (struct rep_mref){
			.pc = get_u64(p + q), .disp = (int64_t)get_u64(p + q + 8),
			.size = get_u32(p + q + 16), .type = p[q + 20], .scale = p[q + 21],
			.base = get_u16(p + q + 22), .index = get_u16(p + q + 24),
			.seg = get_u16(p + q + 26), .count = get_u16(p + q + 28),
			.count_end = REP_NO_SLOT, .rflags = REP_NO_SLOT,
		};
		if (r->version >= 2) {
			rf[j].flags = get_u16(p + q + 30);
			rf[j].count_end = get_u16(p + q + 32);
			rf[j].rflags = get_u16(p + q + 34);
		}
	}
	b.instrs = in;
	b.refs = rf;
	if ((rc = rep_table__add(r->t, &b))) {
		char why[320];
		snprintf(why, sizeof why, "%s", rep_errmsg());
		rc = rep__fail(-EBADMSG, "%s: bad block table entry at offset %llu: %s", r->path,
			       (unsigned long long)o, why);
	}
	*at = q;
out:
	free(in);
	free(rf);
	return rc;
}

static int read_table(struct rep_reader *r)
{
	uint32_t tag;
	uint64_t body, len;
	int rc;

	if ((rc = section(r, &tag, &body, &len)))
		return rc;
	if (tag != REP_SEC_TABLE)
		return bad(r, body - SEC_SIZE, "expected the block table section");
	if (len < 8)
		return bad(r, body, "truncated block table");
	uint32_t n = get_u32(r->p + body);
	uint64_t at = body + 8, end = body + len;
	for (uint32_t i = 0; i < n; i++)
		if ((rc = read_block(r, &at, end)))
			return rc;
	if (at != end)
		return bad(r, at, "block table longer than its blocks");
	return 0;
}

int rep_reader__open(const char *path, struct rep_reader **out)
{
	struct rep_reader *r = calloc(1, sizeof(*r));
	struct stat st;
	int fd = -1, rc;

	*out = NULL;
	if (!r)
		return rep__fail(-ENOMEM, "out of memory");
	snprintf(r->path, sizeof r->path, "%s", path);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
		rc = rep__fail(-errno, "%s: %s", path, strerror(errno));
		goto err;
	}
	r->size = (size_t)st.st_size;
	if (r->size < HDR_SIZE) {
		rc = rep__fail(-EBADMSG, "%s: truncated header at offset 0 (file has %zu bytes)", path,
			       r->size);
		goto err;
	}
	r->p = mmap(NULL, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (r->p == MAP_FAILED) {
		r->p = NULL;
		rc = rep__fail(-errno, "%s: mmap: %s", path, strerror(errno));
		goto err;
	}
	close(fd);
	fd = -1;
	if (memcmp(r->p, REP_FILE_MAGIC, 8)) {
		rc = bad(r, 0, "not a REP file: bad magic");
		goto err;
	}
	r->version = get_u32(r->p + 8);
	if (r->version < 1 || r->version > REP_VERSION) {
		rc = rep__fail(-EBADMSG, "%s: REP version %u at offset 8, this reads versions 1 to %u",
			       path, r->version, REP_VERSION);
		goto err;
	}
	r->ref_size = r->version == 1 ? REF_SIZE_V1 : REF_SIZE;
	if (get_u32(r->p + 12) != HDR_SIZE) {
		rc = bad(r, 12, "bad header size");
		goto err;
	}
	r->pos = HDR_SIZE;
	if ((rc = rep_table__new(&r->t)) || (rc = read_table(r)))
		goto err;
	*out = r;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	rep_reader__close(r);
	return rc;
}

const struct rep_table *rep_reader__table(const struct rep_reader *r)
{
	return r->t;
}

int rep_reader__next(struct rep_reader *r, uint64_t *tid, const uint64_t **words, size_t *n,
		     uint64_t *offset)
{
	uint32_t tag;
	uint64_t body, len;
	int rc;

	if (r->ended)
		return 0;
	if ((rc = section(r, &tag, &body, &len)))
		return rc;
	if (tag == REP_SEC_END) {
		if (r->pos != r->size)
			return bad(r, r->pos, "data after the end section");
		r->ended = true;
		return 0;
	}
	if (tag != REP_SEC_STREAM)
		return bad(r, body - SEC_SIZE, "a second block table section");
	if (len < 8)
		return bad(r, body, "stream section without a thread id");
	*tid = get_u64(r->p + body);
	/* Sections start at multiples of 8 in a page-aligned mapping. */
	*words = (const uint64_t *)(const void *)(r->p + body + 8);
	*n = (len - 8) / 8;
	*offset = body + 8;
	return 1;
}

int rep_reader__replay(struct rep_reader *r, struct rep_recover *rec)
{
	uint64_t tid, prev_tid = 0, off;
	const uint64_t *w;
	size_t n;
	bool first = true;
	int rc, first_err = 0;
	char first_msg[384] = "";

	while ((rc = rep_reader__next(r, &tid, &w, &n, &off)) == 1) {
		if (first || tid != prev_tid)
			rep_recover__gap(rec);
		first = false;
		prev_tid = tid;
		if ((rc = rep_recover__feed(rec, w, n, off)) ||
		    (rc = rep__recover_section_end(rec, off + n * 8))) {
			/* The section's units are chained by their lengths: after bad
			 * data nothing of it can be trusted, but the next section
			 * starts where its header says. */
			if (!first_err) {
				first_err = rc;
				snprintf(first_msg, sizeof first_msg, "%s: %s", r->path, rep_errmsg());
			}
			rep_recover__gap(rec);
		}
	}
	rep_recover__flush(rec);
	if (first_err)
		return rep__fail(first_err, "%s", first_msg);
	return rc;
}

void rep_reader__close(struct rep_reader *r)
{
	if (!r)
		return;
	if (r->p)
		munmap((void *)r->p, r->size);
	rep_table__free(r->t);
	free(r);
}
