/* lackey.c: reading and writing `valgrind --tool=lackey --trace-mem=yes`
 * address traces as struct rep_ref streams. */
#include "pipeline/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define LACKEY_BUF (1u << 20)

struct csim_lackey {
	FILE *in;
	char name[256];
	char *buf;
	uint64_t lines, bad;
	char errmsg[512];
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int csim_lackey_parse_line(const char *line, size_t len, uint64_t last_pc, struct rep_ref *ref,
			   const char **why)
{
	const char *p = line, *end = line + len;
	uint64_t addr = 0, size = 0;
	uint8_t type;
	int ndig = 0;

	while (end > p && (end[-1] == '\n' || end[-1] == '\r'))
		end--;
	len = (size_t)(end - p);
	/* lackey prints "I  %08lx,%lu" and " L %08lx,%lu" (L, S, M). */
	if (len >= 3 && p[0] == 'I' && p[1] == ' ' && p[2] == ' ')
		type = REP_REF_INSTR;
	else if (len >= 3 && p[0] == ' ' && p[2] == ' ' && p[1] == 'L')
		type = REP_REF_READ;
	else if (len >= 3 && p[0] == ' ' && p[2] == ' ' && p[1] == 'S')
		type = REP_REF_WRITE;
	else if (len >= 3 && p[0] == ' ' && p[2] == ' ' && p[1] == 'M')
		type = REP_REF_MODIFY;
	else
		return 0;
	p += 3;
	for (; p < end && hexval(*p) >= 0; p++, ndig++) {
		if (ndig == 16) {
			*why = "address longer than 64 bits";
			return -EBADMSG;
		}
		addr = addr << 4 | (uint64_t)hexval(*p);
	}
	if (!ndig) {
		*why = "no hexadecimal address";
		return -EBADMSG;
	}
	if (p == end || *p != ',') {
		*why = "expected ',' after the address";
		return -EBADMSG;
	}
	p++;
	if (p == end || *p < '0' || *p > '9') {
		*why = "no size after the address";
		return -EBADMSG;
	}
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		size = size * 10 + (uint64_t)(*p - '0');
		if (size > UINT32_MAX) {
			*why = "size too large";
			return -EBADMSG;
		}
	}
	if (p != end) {
		*why = "unexpected text after the size";
		return -EBADMSG;
	}
	if (!size) {
		*why = "size zero";
		return -EBADMSG;
	}
	memset(ref, 0, sizeof(*ref));
	ref->pc = type == REP_REF_INSTR ? addr : last_pc;
	ref->addr = addr;
	ref->size = (uint32_t)size;
	ref->type = type;
	return 1;
}

int csim_lackey__open(FILE *in, const char *name, struct csim_lackey **out)
{
	struct csim_lackey *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->buf = malloc(LACKEY_BUF);
	if (!lk->buf) {
		free(lk);
		return -ENOMEM;
	}
	lk->in = in;
	snprintf(lk->name, sizeof lk->name, "%s", name ? name : "-");
	*out = lk;
	return 0;
}

void csim_lackey__close(struct csim_lackey *lk)
{
	if (!lk)
		return;
	free(lk->buf);
	free(lk);
}

const char *csim_lackey__errmsg(const struct csim_lackey *lk)
{
	return lk->errmsg;
}

uint64_t csim_lackey__lines(const struct csim_lackey *lk)
{
	return lk->lines;
}

uint64_t csim_lackey__bad_lines(const struct csim_lackey *lk)
{
	return lk->bad;
}

/* Remember the first bad line; count them all. */
static void bad_line(struct csim_lackey *lk, const char *why, const char *line, size_t len)
{
	if (!lk->bad++) {
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		snprintf(lk->errmsg, sizeof lk->errmsg, "%s:%" PRIu64 ": malformed lackey line (%s): '%.*s'",
			 lk->name, lk->lines, why, (int)(len > 80 ? 80 : len), line);
	}
}

static bool looks_like_trace(const char *p)
{
	return (p[0] == 'I' && p[1] == ' ' && p[2] == ' ') ||
	       (p[0] == ' ' && p[2] == ' ' && (p[1] == 'L' || p[1] == 'S' || p[1] == 'M'));
}

struct lk_state {
	struct rep_ref *batch;
	size_t n, cap;
	uint64_t last_pc;
	csim_ref_sink sink;
	void *arg;
};

static int emit(struct lk_state *st, const struct rep_ref *r)
{
	st->batch[st->n++] = *r;
	if (st->n == st->cap) {
		int rc = st->sink(st->arg, st->batch, st->n);
		st->n = 0;
		return rc;
	}
	return 0;
}

static int one_line(struct csim_lackey *lk, struct lk_state *st, const char *line, size_t len)
{
	struct rep_ref r;
	const char *why = NULL;

	lk->lines++;
	int rc = csim_lackey_parse_line(line, len, st->last_pc, &r, &why);
	if (rc < 0) {
		bad_line(lk, why, line, len);
		return 0;
	}
	if (rc == 0)
		return 0;
	if (r.type == REP_REF_INSTR)
		st->last_pc = r.pc;
	return emit(st, &r);
}

/* Hex digit values plus one; 0 for anything else. */
static const uint8_t hex1[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
	['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
	['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* The line lackey always prints ("I  %08lx,%lu\n", " L %08lx,%lu\n"), in
 * one pass over its bytes: parsing a trace is most of padrone-sim's work,
 * and a search for the newline followed by a parse reads every byte twice.
 * Returns the bytes of the line with its newline, or 0 for anything else
 * (another line, a line cut by the buffer's end, an odd one), which the
 * careful parser then judges. Accepts exactly what it accepts. */
static size_t fast_line(const char *p, const char *end, struct rep_ref *r)
{
	const char *s = p;
	uint64_t addr = 0, size = 0;
	uint8_t type;
	int ndig = 0;
	uint8_t d;

	if (end - p < 6)
		return 0;
	if (p[0] == 'I' && p[1] == ' ' && p[2] == ' ')
		type = REP_REF_INSTR;
	else if (p[0] == ' ' && p[2] == ' ' && p[1] == 'L')
		type = REP_REF_READ;
	else if (p[0] == ' ' && p[2] == ' ' && p[1] == 'S')
		type = REP_REF_WRITE;
	else if (p[0] == ' ' && p[2] == ' ' && p[1] == 'M')
		type = REP_REF_MODIFY;
	else
		return 0;
	for (p += 3; p < end && (d = hex1[(unsigned char)*p]) && ndig < 16; p++, ndig++)
		addr = addr << 4 | (uint64_t)(d - 1);
	if (!ndig || p == end || *p++ != ',')
		return 0;
	for (; p < end && *p >= '0' && *p <= '9' && size <= UINT32_MAX; p++)
		size = size * 10 + (uint64_t)(*p - '0');
	if (p == end || *p != '\n' || !size || size > UINT32_MAX)
		return 0;
	r->addr = addr;
	r->size = (uint32_t)size;
	r->type = type;
	return (size_t)(p + 1 - s);
}

/* The lines of buf[*start, len) that are complete: the common ones through
 * fast_line, the others through one_line. Returns 0, or what the sink
 * returned to stop. */
static int buffer_lines(struct csim_lackey *lk, struct lk_state *st, const char *buf,
			size_t len, size_t *start, bool *skipping)
{
	size_t pos = *start;
	int rc = 0;

	while (pos < len) {
		/* parsed straight into the batch: no copy per reference */
		struct rep_ref *r = &st->batch[st->n];
		size_t n = *skipping ? 0 : fast_line(buf + pos, buf + len, r);
		if (n) {
			lk->lines++;
			if (r->type == REP_REF_INSTR)
				st->last_pc = r->addr;
			r->pc = st->last_pc;
			memset(r->pad, 0, sizeof r->pad);
			pos += n;
			if (++st->n == st->cap) {
				st->n = 0;
				if ((rc = st->sink(st->arg, st->batch, st->cap)))
					break;
			}
			continue;
		}
		const char *nl = memchr(buf + pos, '\n', len - pos);
		if (!nl)
			break;
		size_t l = (size_t)(nl - (buf + pos));
		if (*skipping)
			*skipping = false;
		else if ((rc = one_line(lk, st, buf + pos, l)))
			break;
		pos += l + 1;
	}
	*start = pos;
	return rc;
}

int csim_lackey__run(struct csim_lackey *lk, size_t batch, csim_ref_sink sink, void *arg)
{
	struct lk_state st = { .cap = batch ? batch : 4096, .sink = sink, .arg = arg };
	size_t have = 0;	/* bytes of an unfinished line at the buffer's start */
	bool skipping = false;	/* inside an over-long line */
	int rc = 0;

	st.batch = malloc(st.cap * sizeof(*st.batch));
	if (!st.batch)
		return -ENOMEM;
	for (;;) {
		size_t got = fread(lk->buf + have, 1, LACKEY_BUF - have, lk->in);
		size_t len = have + got, start = 0;
		if (got == 0) {
			if (ferror(lk->in)) {
				snprintf(lk->errmsg, sizeof lk->errmsg, "%s: read error after line %" PRIu64
					 ": %s", lk->name, lk->lines, strerror(errno));
				rc = -EIO;
				break;
			}
			if (have && !skipping)
				rc = one_line(lk, &st, lk->buf, have);
			break;
		}
		if ((rc = buffer_lines(lk, &st, lk->buf, len, &start, &skipping)))
			goto out;
		have = len - start;
		if (have == LACKEY_BUF) {
			/* A line of a megabyte is no trace line: judge it by
			 * its start and skip the rest (already counted). */
			lk->lines++;
			if (looks_like_trace(lk->buf))
				bad_line(lk, "line too long", lk->buf, 40);
			skipping = true;
			have = 0;
		} else {
			memmove(lk->buf, lk->buf + start, have);
		}
	}
out:
	if (!rc && st.n)
		rc = sink(arg, st.batch, st.n);
	free(st.batch);
	if (!rc && lk->bad)
		rc = -EBADMSG;
	return rc;
}

int csim_lackey_write(FILE *out, const struct rep_ref *refs, size_t n)
{
	static const char tag[] = { '?', 'L', 'S', 'M' };
	for (size_t i = 0; i < n; i++) {
		const struct rep_ref *r = &refs[i];
		if (r->type == REP_REF_INSTR)
			fprintf(out, "I  %08" PRIx64 ",%" PRIu32 "\n", r->addr, r->size);
		else if (r->type >= REP_REF_READ && r->type <= REP_REF_MODIFY)
			fprintf(out, " %c %08" PRIx64 ",%" PRIu32 "\n", tag[r->type], r->addr, r->size);
		else
			return -EINVAL;
	}
	return ferror(out) ? -EIO : 0;
}
