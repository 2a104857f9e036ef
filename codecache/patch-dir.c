/* The directory's records of redirections (dir.h): finding, recording and
 * forgetting them, telling a stale measuring stub, checking the relocated
 * first bytes a record names, and naming code-cache addresses. */
#include "codecache/patch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cc_dir_redir *cc__redir_find(struct cc_cache *c, uint64_t func, unsigned kind)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		struct cc_dir_redir *r = &c->dir.redirs[i];
		if (r->id && r->func == func && (!kind || r->kind == kind))
			return r;
	}
	return NULL;
}

/* A process's start time (field 22 of /proc/PID/stat, clock ticks since
 * boot), which tells it from a later process given the same pid; -ESRCH
 * when it is gone or a zombie. */
static int proc_start(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -ESRCH;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after "pid (comm)", which may hold spaces and parentheses: the
	 * state, then fields 4 to 21, then the start time */
	char *p = strrchr(buf, ')'), state;
	unsigned long long st;
	if (!p || sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			 "%*s %*s %*s %*s %llu", &state, &st) != 2 || state == 'Z' || state == 'X')
		return -ESRCH;
	*start = st;
	return 0;
}

bool cc__redir_stale(const struct cc_dir_redir *r)
{
	uint64_t start;

	if (r->kind != CC_REDIR_MEASURE)
		return false;
	return r->owner_pid <= 0 || proc_start(r->owner_pid, &start) < 0 || start != r->owner_start;
}

struct cc_dir_redir *cc__redir_by_id(struct cc_cache *c, uint32_t id)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++)
		if (c->dir.redirs[i].id == id)
			return &c->dir.redirs[i];
	return NULL;
}

int cc__redir_prefix(struct cc_cache *c, const struct cc_dir_redir *r, struct cc_reloc **out)
{
	const struct cc_dir_site *s = NULL;
	uint8_t code[256], want[256], have[256];
	struct cc_error err;
	int rc;

	*out = NULL;
	for (size_t i = 0; i < CC_MAX_SITES && !s; i++)
		if (c->dir.sites[i].redir == r->id && c->dir.sites[i].kind == CC_SITE_ENTRY)
			s = &c->dir.sites[i];
	uint64_t end = r->func + r->func_size;
	size_t len = s && end > s->addr ? (size_t)(end - s->addr) : 0;
	if (len > sizeof code)
		len = sizeof code;
	if (!s || len < s->len || r->detour_size > sizeof want)
		return cc__fail(c, CC_PHASE_RESTORE, -ESTALE, "the directory's record of the "
				"redirection of %s is inconsistent; not touching it", r->name);
	if ((rc = cc__read(c, s->addr, code, len)) < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot read %s at 0x%" PRIx64 ": %s",
				r->name, s->addr, strerror(-rc));
	memcpy(code, s->orig, s->len);
	struct cc_reloc_opts ro = { .sz = sizeof ro, .min_len = s->len, .jump_back = true };
	if ((rc = cc_reloc__new(code, len, s->addr, &ro, out, &err)) < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "the first bytes of %s: %s", r->name, err.msg);
	size_t size = cc_reloc__size(*out);
	if (size != r->detour_size ||
	    cc_reloc__encode(*out, r->detour, want, sizeof want, &err) < 0 ||
	    cc__read(c, r->detour, have, size) < 0 || memcmp(want, have, size) != 0) {
		cc_reloc__free(*out);
		*out = NULL;
		return cc__fail(c, CC_PHASE_RESTORE, -ESTALE, "the relocated first bytes of %s at "
				"0x%" PRIx64 " are not what padrone wrote there; not touching them",
				r->name, r->detour);
	}
	return 0;
}

static bool holds(uint64_t lo, uint64_t size, uint64_t addr)
{
	return addr >= lo && addr - lo < size;
}

int cc_cache__describe(struct cc_cache *c, uint64_t addr, char *name, size_t size,
		       uint64_t *start)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		const struct cc_dir_redir *r = &c->dir.redirs[i];
		if (!r->id)
			continue;
		if (r->detour && holds(r->detour, r->detour_size, addr)) {
			snprintf(name, size, "relocated first bytes of %s", r->name);
			*start = r->detour;
			return 0;
		}
		if (r->kind == CC_REDIR_MEASURE && addr >= r->dest && addr < r->stub_end) {
			snprintf(name, size, "measuring stub of %s", r->name);
			*start = r->dest;
			return 0;
		}
		for (size_t k = 0; r->kind == CC_REDIR_REPLACE && k < r->nowned; k++) {
			const struct cc_dir_block *b = &r->owned[k];
			if (b->kind != CC_CODE || !holds(b->addr, b->size, addr))
				continue;
			snprintf(name, size, "replacement of %s", r->name);
			*start = addr >= r->dest && holds(b->addr, b->size, r->dest) ? r->dest : b->addr;
			return 0;
		}
	}
	return -ENOENT;
}

/* Another redirection's site overlapping [addr, addr+len), or NULL. */
const struct cc_dir_site *cc__site_overlap(struct cc_cache *c, uint64_t addr, size_t len)
{
	for (size_t i = 0; i < CC_MAX_SITES; i++) {
		const struct cc_dir_site *s = &c->dir.sites[i];
		if (s->redir && s->addr < addr + len && addr < s->addr + s->len)
			return s;
	}
	return NULL;
}

size_t cc__free_sites(const struct cc_cache *c)
{
	size_t n = 0;
	for (size_t i = 0; i < CC_MAX_SITES; i++)
		n += !c->dir.sites[i].redir;
	return n;
}

int cc__redir_record(struct cc_job *j, const struct write *w, size_t nw, uint64_t dest, uint64_t copy,
		      const struct cc_dir_block *owned, size_t nowned, uint64_t state, uint32_t *id)
{
	struct cc_cache *c = j->c;
	struct cc_dir_redir *r = cc__redir_by_id(c, 0);

	r->id = c->dir.next_id++;
	if (!c->dir.next_id)
		c->dir.next_id = 1;
	r->kind = j->kind;
	r->func = j->fn.addr;
	r->func_size = j->fn.size;
	r->dest = dest;
	r->detour = copy;
	r->detour_size = j->prefix ? cc_reloc__size(j->prefix) : 0;
	r->state = state;
	r->stop_ns = j->stats.stop_ns;
	r->stub_end = j->stub_end;
	r->area = j->area;
	r->area_size = j->area_size;
	r->rings = j->rings;
	r->rings_size = j->rings_size;
	r->owner_pid = (int32_t)getpid();
	if (proc_start(getpid(), &r->owner_start) < 0)
		r->owner_start = 0;
	r->nowned = (uint32_t)nowned;
	memcpy(r->owned, owned, nowned * sizeof *owned);
	snprintf(r->name, sizeof r->name, "%s", j->name);
	snprintf(r->source, sizeof r->source, "%s", j->o.source ? j->o.source : "");
	size_t k = 0;
	for (size_t i = 0; i < nw; i++) {
		while (c->dir.sites[k].redir)
			k++;
		struct cc_dir_site *s = &c->dir.sites[k];
		s->addr = w[i].addr;
		s->redir = r->id;
		s->kind = j->entry && i == 0 ? CC_SITE_ENTRY : CC_SITE_CALL;
		s->len = w[i].len;
		memcpy(s->orig, j->undo[i].bytes, w[i].len);
		memcpy(s->now, w[i].bytes, w[i].len);
	}
	if (id)
		*id = r->id;
	return cc__dir_save(c);
}

void cc__redir_forget(struct cc_cache *c, uint32_t id)
{
	for (size_t i = 0; i < CC_MAX_SITES; i++)
		if (c->dir.sites[i].redir == id)
			memset(&c->dir.sites[i], 0, sizeof c->dir.sites[i]);
	struct cc_dir_redir *r = cc__redir_by_id(c, id);
	if (r)
		memset(r, 0, sizeof *r);
}
