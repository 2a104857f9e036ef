/* Parsers of readelf, callgrind and clang output for cfg/'s tests. */
#include "tests/cfg/oracle.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run "TOOL OPTS 'path'" and read its output. */
static FILE *run(const char *tool, const char *path)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s '%s' 2>/dev/null", tool, path);
	return popen(cmd, "r");
}

int or_read_syms(const char *path, struct or_syms *out)
{
	memset(out, 0, sizeof(*out));
	FILE *p = run("readelf -sW", path);
	if (!p)
		return -1;
	char line[1024], file[48] = "", section[32] = "";
	size_t cap = 0;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "Symbol table '")) {
			sscanf(strstr(line, "'") + 1, "%31[^']", section);
			continue;
		}
		if (strcmp(section, ".symtab") != 0)
			continue;
		unsigned long long v;
		char size[32], type[12], bind[12], vis[12], ndx[12], name[256] = "";
		if (sscanf(line, " %*u: %llx %31s %11s %11s %11s %11s %255s", &v, size, type, bind, vis,
			   ndx, name) < 6)
			continue;
		if (!strcmp(type, "FILE")) {
			snprintf(file, sizeof(file), "%s", name);
			continue;
		}
		if (!strcmp(ndx, "UND") || !name[0])
			continue;
		if (out->n == cap) {
			cap = cap ? cap * 2 : 256;
			out->v = realloc(out->v, cap * sizeof(*out->v));
		}
		struct or_sym *s = &out->v[out->n++];
		s->addr = v;
		s->size = strtoull(size, NULL, 0);
		snprintf(s->type, sizeof(s->type), "%s", type);
		snprintf(s->name, sizeof(s->name), "%s", name);
		snprintf(s->file, sizeof(s->file), "%s", strcmp(bind, "LOCAL") ? "" : file);
	}
	return pclose(p) == 0 && out->n ? 0 : -1;
}

void or_syms_free(struct or_syms *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

const struct or_sym *or_sym_named(const struct or_syms *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].name, name) && !strcmp(s->v[i].type, "FUNC"))
			return &s->v[i];
	return NULL;
}

const struct or_sym *or_label(const struct or_syms *s, const char *file, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].name, name) && !strcmp(s->v[i].file, file))
			return &s->v[i];
	return NULL;
}

int or_read_relocs(const char *path, const char *section, struct or_reloc **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	FILE *p = run("readelf -rW", path);
	if (!p)
		return -1;
	char line[1024];
	bool in = false;
	size_t cap = 0;
	while (fgets(line, sizeof(line), p)) {
		if (!strncmp(line, "Relocation section '", 20)) {
			char name[64];
			sscanf(line + 20, "%63[^']", name);
			in = !strcmp(name, section);
			continue;
		}
		unsigned long long off, info, sv = 0;
		char type[24], rest[256] = "";
		if (!in || sscanf(line, "%llx %llx %23s %llx %255[^\n]", &off, &info, type, &sv, rest) < 3)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*out = realloc(*out, cap * sizeof(**out));
		}
		struct or_reloc *r = &(*out)[(*n)++];
		memset(r, 0, sizeof(*r));
		r->offset = off;
		r->sym_value = sv;
		snprintf(r->type, sizeof(r->type), "%s", type);
		/* "name + addend" or "name - addend" */
		char nm[96] = "", sign = '+';
		unsigned long long a = 0;
		if (sscanf(rest, "%95s %c %llx", nm, &sign, &a) >= 1) {
			snprintf(r->sym, sizeof(r->sym), "%s", nm);
			r->addend = sign == '-' ? -(int64_t)a : (int64_t)a;
		}
	}
	pclose(p);
	return 0;
}

int or_section(const char *path, const char *name, uint64_t *lo, uint64_t *hi)
{
	FILE *p = run("readelf -SW", path);
	if (!p)
		return -1;
	char line[1024];
	int found = -1;
	while (fgets(line, sizeof(line), p)) {
		char *b = strchr(line, ']');
		char nm[64], type[32];
		unsigned long long addr, off, size;
		if (!b || sscanf(b + 1, "%63s %31s %llx %llx %llx", nm, type, &addr, &off, &size) < 5)
			continue;
		if (!strcmp(nm, name)) {
			*lo = addr;
			*hi = addr + size;
			found = 0;
		}
	}
	pclose(p);
	return found;
}

/* A callgrind position: absolute hex, +N/-N relative to last, or *. */
static uint64_t pos(const char *tok, uint64_t last)
{
	if (tok[0] == '*')
		return last;
	if (tok[0] == '+' || tok[0] == '-')
		return last + (uint64_t)strtoll(tok, NULL, 0);
	return strtoull(tok, NULL, 0);
}

int or_callgrind_jumps(const char *out_file, const char *obj, struct or_jump **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	FILE *f = fopen(out_file, "r");
	if (!f)
		return -1;
	char line[4096];
	char *names[4096] = { 0 };	/* ob ids */
	int cur_ob = -1;
	uint64_t last = 0;
	size_t cap = 0;
	/* a pending jump: its target, waiting for the source line */
	bool pending = false, pcall = false;
	uint64_t pto = 0;
	long long exe = 0, cnt = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "ob=", 3) || !strncmp(line, "cob=", 4)) {
			char *p = strchr(line, '(');
			int id = p ? atoi(p + 1) : -1;
			char *nm = p ? strchr(p, ')') : NULL;
			if (id >= 0 && id < 4096 && nm && nm[1] == ' ') {
				free(names[id]);
				names[id] = strdup(nm + 2);
			}
			if (line[0] == 'o')
				cur_ob = id;
			continue;
		}
		if (!strncmp(line, "jump=", 5) || !strncmp(line, "jcnd=", 5) ||
		    !strncmp(line, "calls=", 6)) {
			char *sp = strchr(line, ' ');
			if (!sp)
				continue;
			pto = pos(sp + 1, last);
			pcall = line[0] == 'c';
			exe = cnt = 0;
			if (line[1] == 'c')	/* jcnd=EXE/COUNT */
				sscanf(line + 5, "%lld/%lld", &exe, &cnt);
			pending = true;
			continue;
		}
		if (!(isdigit((unsigned char)line[0]) || line[0] == '+' || line[0] == '-' ||
		      line[0] == '*'))
			continue;
		char tok[64];
		if (sscanf(line, "%63s", tok) != 1)
			continue;
		last = pos(tok, last);
		if (!pending)
			continue;
		pending = false;
		if (cur_ob < 0 || cur_ob >= 4096 || !names[cur_ob] || strcmp(names[cur_ob], obj) != 0)
			continue;
		if (*n + 2 > cap) {
			cap = cap ? cap * 2 : 256;
			*out = realloc(*out, cap * sizeof(**out));
		}
		(*out)[(*n)++] = (struct or_jump){ last, pto, pcall, false };
		if (exe > cnt)
			(*out)[(*n)++] = (struct or_jump){ last, 0, false, true };
	}
	for (int i = 0; i < 4096; i++)
		free(names[i]);
	fclose(f);
	return 0;
}

int or_clang_loops(const char *s_path, const char *file, struct or_loop_header **v, size_t *n,
		   size_t *cap)
{
	FILE *f = fopen(s_path, "r");
	if (!f)
		return -1;
	char line[1024], label[48] = "";
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '.' && strchr(line, ':')) {
			sscanf(line, "%47[^:]", label);
		} else if (line[0] != ' ' && line[0] != '\t' && line[0] != '#') {
			label[0] = 0;
		}
		char *h = strstr(line, "Loop Header: Depth=");
		if (!h || !label[0] || !strstr(line, "This "))
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 32;
			*v = realloc(*v, *cap * sizeof(**v));
		}
		struct or_loop_header *L = &(*v)[(*n)++];
		snprintf(L->file, sizeof(L->file), "%s", file);
		snprintf(L->label, sizeof(L->label), "%s", label);
		L->depth = atoi(h + strlen("Loop Header: Depth="));
	}
	fclose(f);
	return 0;
}

int or_program_build(const char *path, struct or_program *p)
{
	memset(p, 0, sizeof(*p));
	struct cfg_reader *r;
	if (cfg_reader__open_elf(path, 0, NULL, &r) < 0)
		return -1;
	/* a non-PIE executable starts at 0x400000, a PIE at 0 */
	uint64_t *starts, in = 0x401000;
	size_t n;
	if (cfg_reader__function_starts(r, in, &starts, &n) < 0)
		in = 0x1000;
	else
		free(starts);
	if (or_program_build_at(r, in, 0, UINT64_MAX, p) < 0) {
		cfg_reader__free(r);
		p->r = NULL;
		return -1;
	}
	return 0;
}

void or_program_free(struct or_program *p)
{
	for (size_t i = 0; i < p->n; i++)
		cfg_function__free(p->f[i]);
	free(p->f);
	cfg_reader__free(p->r);
	memset(p, 0, sizeof(*p));
}

const struct cfg_function *or_function_at(const struct or_program *p, uint64_t addr)
{
	for (size_t i = 0; i < p->n; i++)
		if (cfg_function__range_of(p->f[i], addr))
			return p->f[i];
	return NULL;
}
