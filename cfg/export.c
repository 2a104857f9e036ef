/* Exports: a readable listing, JSON (the shape padroned --cfg --json
 * prints), Graphviz dot with loops as nested clusters, disassembly. */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void insn_text(const struct cfg_function *f, const struct cfg_finsn *fi, char *buf,
		      size_t size)
{
	struct cfg_insn in;
	cfg__decode_bytes(&f->dec, fi->addr, fi->bytes, fi->len, &in);
	cfg__format_insn(&f->dec, &in, buf, size);
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void hex(FILE *out, uint64_t a)
{
	fprintf(out, "\"%#lx\"", (unsigned long)a);
}

static void write_json(const struct cfg_function *f, FILE *out)
{
	fprintf(out, "{\"entry\":");
	hex(out, f->entry);
	fprintf(out, ",\"name\":");
	json_str(out, f->name);
	/* an incomplete CFG says so, or readers would take it for whole */
	fprintf(out, ",\"error\":");
	if (f->err) {
		fprintf(out, "{\"at\":");
		hex(out, f->err_at);
		fprintf(out, ",\"kind\":");
		json_str(out, cfg_error_name(f->err));
		fprintf(out, ",\"msg\":");
		json_str(out, f->err_msg);
		fputc('}', out);
	} else {
		fprintf(out, "null");
	}
	fprintf(out, ",\"ranges\":[");
	for (size_t i = 0; i < f->nranges; i++) {
		fprintf(out, "%s[", i ? "," : "");
		hex(out, f->ranges[i].start);
		fputc(',', out);
		hex(out, f->ranges[i].end);
		fputc(']', out);
	}
	fprintf(out, "],\"blocks\":[");
	for (size_t i = 0; i < f->nblocks; i++) {
		const struct cfg_block *b = &f->blocks[i];
		fprintf(out, "%s{\"start\":", i ? "," : "");
		hex(out, b->start);
		fprintf(out, ",\"end\":");
		hex(out, b->end);
		fprintf(out, ",\"succs\":[");
		bool any = false;
		for (uint32_t e = b->first_succ; e < b->first_succ + b->succ_count; e++) {
			if (f->edges[e].to < 0)
				continue;
			fprintf(out, "%s", any ? "," : "");
			hex(out, f->blocks[f->edges[e].to].start);
			any = true;
		}
		fprintf(out, "]}");
	}
	fprintf(out, "],\"edges\":[");
	for (size_t e = 0; e < f->nedges; e++) {
		const struct cfg_edge *E = &f->edges[e];
		fprintf(out, "%s{\"from\":", e ? "," : "");
		hex(out, f->blocks[E->from].start);
		fprintf(out, ",\"to\":");
		hex(out, E->to_addr);
		fprintf(out, ",\"kind\":\"%s\"}", cfg_edge_kind_name(E->kind));
	}
	fprintf(out, "],\"jump_tables\":[");
	for (size_t t = 0; t < f->ntables; t++) {
		const struct cfg_jump_table *J = &f->tables[t];
		fprintf(out, "%s{\"at\":", t ? "," : "");
		hex(out, J->at);
		fprintf(out, ",\"targets\":[");
		for (uint32_t k = 0; k < J->target_count; k++) {
			fprintf(out, "%s", k ? "," : "");
			hex(out, J->targets[k]);
		}
		fprintf(out, "]}");
	}
	fprintf(out, "],\"calls\":[");
	for (size_t c = 0; c < f->ncalls; c++) {
		const struct cfg_call *C = &f->calls[c];
		fprintf(out, "%s{\"at\":", c ? "," : "");
		hex(out, C->at);
		fprintf(out, ",\"target\":");
		if (C->target)
			hex(out, C->target);
		else
			fprintf(out, "null");
		fprintf(out, ",\"name\":");
		json_str(out, C->name);
		fprintf(out, ",\"noreturn\":%s}", C->noreturn ? "true" : "false");
	}
	fprintf(out, "],\"loops\":[");
	for (size_t l = 0; l < f->nloops; l++) {
		const struct cfg_loop *L = &f->loops[l];
		fprintf(out, "%s{\"header\":", l ? "," : "");
		hex(out, f->blocks[L->header].start);
		fprintf(out, ",\"entries\":[");
		for (uint32_t k = 0; k < L->entry_count; k++) {
			fprintf(out, "%s", k ? "," : "");
			hex(out, f->blocks[L->entries[k]].start);
		}
		fprintf(out, "],\"blocks\":[");
		for (uint32_t k = 0; k < L->block_count; k++) {
			fprintf(out, "%s", k ? "," : "");
			hex(out, f->blocks[L->blocks[k]].start);
		}
		fprintf(out, "],\"depth\":%u,\"parent\":", L->depth);
		if (L->parent >= 0)
			hex(out, f->blocks[f->loops[L->parent].header].start);
		else
			fprintf(out, "null");
		fprintf(out, ",\"irreducible\":%s}", L->irreducible ? "true" : "false");
	}
	fprintf(out, "]}\n");
}

static void block_insns(const struct cfg_function *f, size_t k, FILE *out, const char *indent,
			const char *eol)
{
	const struct cfg_block *b = &f->blocks[k];
	char text[128];
	for (uint32_t i = 0; i < b->insn_count; i++) {
		const struct cfg_finsn *fi = &f->insns[f->block_insn[k] + i];
		insn_text(f, fi, text, sizeof(text));
		fprintf(out, "%s%#lx  ", indent, (unsigned long)fi->addr);
		if (eol[0] == '\\') {	/* dot label: escape */
			for (const char *c = text; *c; c++) {
				if (*c == '"' || *c == '\\' || *c == '{' || *c == '}' || *c == '<' ||
				    *c == '>' || *c == '|')
					fputc('\\', out);
				fputc(*c, out);
			}
		} else {
			fputs(text, out);
		}
		fputs(eol, out);
	}
}

static void write_text(const struct cfg_function *f, FILE *out, bool disas, bool only_disas)
{
	fprintf(out, "function %s at %#lx: %zu blocks, %zu edges, %zu instructions%s\n",
		f->name, (unsigned long)f->entry, f->nblocks, f->nedges,
		f->ninsns, f->noreturn ? ", does not return" : "");
	if (f->err)
		fprintf(out, "error: %s at %#lx: %s\n", cfg_error_name(f->err),
			(unsigned long)f->err_at, f->err_msg);
	if (!only_disas) {
		fprintf(out, "ranges:");
		for (size_t i = 0; i < f->nranges; i++)
			fprintf(out, " [%#lx, %#lx)", (unsigned long)f->ranges[i].start,
				(unsigned long)f->ranges[i].end);
		fputc('\n', out);
	}
	for (size_t k = 0; k < f->nblocks; k++) {
		const struct cfg_block *b = &f->blocks[k];
		if (only_disas) {
			fprintf(out, "%#lx:\n", (unsigned long)b->start);
		} else {
			fprintf(out, "\nblock %#lx-%#lx", (unsigned long)b->start,
				(unsigned long)b->end);
			if (b->loop >= 0)
				fprintf(out, " loop %#lx depth %u",
					(unsigned long)f->blocks[f->loops[b->loop].header].start,
					f->loops[b->loop].depth);
			if (b->idom >= 0)
				fprintf(out, " idom %#lx", (unsigned long)f->blocks[b->idom].start);
			if (b->samples)
				fprintf(out, " samples %lu", (unsigned long)b->samples);
			fputc('\n', out);
		}
		if (disas)
			block_insns(f, k, out, "  ", "\n");
		if (only_disas)
			continue;
		for (uint32_t e = b->first_succ; e < b->first_succ + b->succ_count; e++)
			fprintf(out, "  -> %#lx %s\n", (unsigned long)f->edges[e].to_addr,
				cfg_edge_kind_name(f->edges[e].kind));
	}
	if (only_disas)
		return;
	if (f->ntables)
		fputc('\n', out);
	for (size_t t = 0; t < f->ntables; t++)
		fprintf(out, "jump table at %#lx: %u entries of %u bytes at %#lx\n",
			(unsigned long)f->tables[t].at, f->tables[t].target_count,
			f->tables[t].entry_size, (unsigned long)f->tables[t].table);
	if (f->ncalls)
		fputc('\n', out);
	for (size_t c = 0; c < f->ncalls; c++) {
		const struct cfg_call *C = &f->calls[c];
		fprintf(out, "%s at %#lx -> ", C->tail ? "tail call" : "call", (unsigned long)C->at);
		if (C->target)
			fprintf(out, "%#lx", (unsigned long)C->target);
		else
			fprintf(out, "(indirect)");
		fprintf(out, "%s%s%s\n", C->name[0] ? " " : "", C->name,
			C->noreturn ? " (does not return)" : "");
	}
	if (f->nloops)
		fputc('\n', out);
	for (size_t l = 0; l < f->nloops; l++) {
		const struct cfg_loop *L = &f->loops[l];
		fprintf(out, "%*sloop %#lx depth %u: %u blocks, %u entries, %u back edges, %u exits%s",
			2 * (int)(L->depth - 1), "", (unsigned long)f->blocks[L->header].start,
			L->depth, L->block_count, L->entry_count, L->back_edge_count, L->exit_count,
			L->irreducible ? ", irreducible" : "");
		if (L->samples)
			fprintf(out, ", samples %lu", (unsigned long)L->samples);
		fputc('\n', out);
	}
}

static void write_loops(const struct cfg_function *f, FILE *out)
{
	fprintf(out, "function %s at %#lx: %zu loop%s\n", f->name,
		(unsigned long)f->entry, f->nloops, f->nloops == 1 ? "" : "s");
	for (size_t l = 0; l < f->nloops; l++) {
		const struct cfg_loop *L = &f->loops[l];
		fprintf(out, "%*sloop %#lx depth %u, %u block%s", 2 * (int)L->depth, "",
			(unsigned long)f->blocks[L->header].start, L->depth, L->block_count,
			L->block_count == 1 ? "" : "s");
		if (L->irreducible) {
			fprintf(out, ", irreducible, entries");
			for (uint32_t k = 0; k < L->entry_count; k++)
				fprintf(out, " %#lx", (unsigned long)f->blocks[L->entries[k]].start);
		}
		fprintf(out, ", %u back edge%s, %u exit%s", L->back_edge_count,
			L->back_edge_count == 1 ? "" : "s", L->exit_count, L->exit_count == 1 ? "" : "s");
		if (L->samples)
			fprintf(out, ", %lu samples", (unsigned long)L->samples);
		fputc('\n', out);
	}
}


static void dot_block(const struct cfg_function *f, FILE *out, size_t k, uint64_t maxs,
		      bool disas)
{
	const struct cfg_block *b = &f->blocks[k];
	fprintf(out, "  b%zu [label=\"%#lx", k, (unsigned long)b->start);
	if (b->samples)
		fprintf(out, " (%lu samples)", (unsigned long)b->samples);
	fprintf(out, "\\l");
	if (disas)
		block_insns(f, k, out, "", "\\l");
	fprintf(out, "\"");
	if (b->samples && maxs) {
		/* white to red by share of the hottest block */
		unsigned v = (unsigned)(255 - (200 * b->samples) / maxs);
		fprintf(out, ", style=filled, fillcolor=\"#ff%02x%02x\"", v, v);
	}
	if (k == f->entry_block)
		fprintf(out, ", penwidth=2");
	fprintf(out, "];\n");
}

static void dot_loop_open(const struct cfg_function *f, FILE *out, size_t l, uint64_t maxs,
			  bool disas)
{
	const struct cfg_loop *L = &f->loops[l];
	fprintf(out, "subgraph cluster_loop%zu {\n  label=\"loop %#lx depth %u%s\";\n", l,
		(unsigned long)f->blocks[L->header].start, L->depth,
		L->irreducible ? " irreducible" : "");
	for (uint32_t i = 0; i < L->block_count; i++)
		if (f->blocks[L->blocks[i]].loop == (int32_t)l)
			dot_block(f, out, L->blocks[i], maxs, disas);
}

/* Loops as nested clusters, walking the loop tree with a stack. */
static int dot_loops(const struct cfg_function *f, FILE *out, uint64_t maxs, bool disas)
{
	size_t n = f->nloops;
	int32_t *child = malloc((n + 1) * sizeof(int32_t)), *next = malloc((n + 1) * sizeof(int32_t));
	int64_t *stack = malloc((2 * n + 1) * sizeof(int64_t));	/* l: open, ~l: close */
	if (!child || !next || !stack) {
		free(child);
		free(next);
		free(stack);
		return -ENOMEM;
	}
	for (size_t l = 0; l < n; l++)
		child[l] = next[l] = -1;
	size_t sp = 0;
	for (size_t l = n; l-- > 0;) {	/* children lists in index order */
		int32_t p = f->loops[l].parent;
		if (p >= 0) {
			next[l] = child[p];
			child[p] = (int32_t)l;
		} else {
			stack[sp++] = (int64_t)l;
		}
	}
	/* roots were pushed last-first: pop order is index order */
	for (size_t i = 0, j = sp - (sp ? 1 : 0); sp && i < j; i++, j--) {
		int64_t x = stack[i];
		stack[i] = stack[j];
		stack[j] = x;
	}
	while (sp) {
		int64_t x = stack[--sp];
		if (x < 0) {
			fprintf(out, "}\n");
			continue;
		}
		dot_loop_open(f, out, (size_t)x, maxs, disas);
		stack[sp++] = ~x;
		size_t first = sp;
		for (int32_t c = child[x]; c >= 0; c = next[c])
			stack[sp++] = c;
		for (size_t i = first, j = sp - 1; sp > first && i < j; i++, j--) {
			int64_t t = stack[i];
			stack[i] = stack[j];
			stack[j] = t;
		}
	}
	free(child);
	free(next);
	free(stack);
	return 0;
}

/* An incomplete CFG: the reason as the graph's label, and a node for the
 * place, linked from the block that holds it if any. */
static void dot_error(const struct cfg_function *f, FILE *out)
{
	char text[256];
	snprintf(text, sizeof(text), "incomplete: %s at %#lx: %s", cfg_error_name(f->err),
		 (unsigned long)f->err_at, f->err_msg);
	for (char *c = text; *c; c++)	/* nothing to escape in a label */
		if (*c == '"' || *c == '\\')
			*c = '\'';
	fprintf(out, "  label=\"%s\";\n  labelloc=t;\n  fontcolor=red;\n", text);
	fprintf(out, "  error [label=\"%s at %#lx\", shape=octagon, color=red, fontcolor=red];\n",
		cfg_error_name(f->err), (unsigned long)f->err_at);
	ssize_t k = cfg_function__block_at(f, f->err_at);
	if (k >= 0)
		fprintf(out, "  b%zd -> error [style=dashed, color=red];\n", k);
}

static int write_dot(const struct cfg_function *f, FILE *out, bool disas)
{
	uint64_t maxs = 0;
	for (size_t k = 0; k < f->nblocks; k++)
		if (f->blocks[k].samples > maxs)
			maxs = f->blocks[k].samples;
	fprintf(out, "digraph \"%s\" {\n  node [shape=box, fontname=monospace];\n",
		f->name);
	for (size_t k = 0; k < f->nblocks; k++)
		if (f->blocks[k].loop < 0)
			dot_block(f, out, k, maxs, disas);
	if (dot_loops(f, out, maxs, disas) < 0)
		return -ENOMEM;
	for (size_t e = 0; e < f->nedges; e++) {
		const struct cfg_edge *E = &f->edges[e];
		if (E->to >= 0) {
			fprintf(out, "  b%u -> b%d [label=\"%s\"%s];\n", E->from, E->to,
				cfg_edge_kind_name(E->kind),
				E->kind == CFG_EDGE_CALL_RETURN ? ", style=dashed" : "");
		} else {
			fprintf(out, "  t%zu [label=\"%#lx\", shape=ellipse];\n  b%u -> t%zu "
				     "[label=\"tail_call\", style=dotted];\n",
				e, (unsigned long)E->to_addr, E->from, e);
		}
	}
	if (f->err)	/* last: loop clusters must not inherit the label */
		dot_error(f, out);
	fprintf(out, "}\n");
	return 0;
}

int cfg_function__write(const struct cfg_function *f, FILE *out, const struct cfg_write_opts *opts)
{
	struct cfg_write_opts o = { .sz = sizeof(o), .format = CFG_FORMAT_TEXT };
	if (!f || !out)
		return -EINVAL;
	if (!UTIL_OPTS_COPY(&o, opts))
		return -EINVAL;
	switch (o.format) {
	case CFG_FORMAT_JSON: write_json(f, out); break;
	case CFG_FORMAT_DOT:
		if (write_dot(f, out, !o.no_disas) < 0)
			return -ENOMEM;
		break;
	case CFG_FORMAT_DISAS: write_text(f, out, true, true); break;
	case CFG_FORMAT_LOOPS: write_loops(f, out); break;
	case CFG_FORMAT_TEXT: write_text(f, out, !o.no_disas, false); break;
	default: return -EINVAL;
	}
	return ferror(out) ? -EIO : 0;
}

ssize_t cfg_function__snprint(const struct cfg_function *f, char *buf, size_t size,
			      const struct cfg_write_opts *opts)
{
	char *mem = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&mem, &len);
	if (!out)
		return -errno;
	int err = cfg_function__write(f, out, opts);
	if (fclose(out) != 0 && !err)
		err = -EIO;
	if (err < 0) {
		free(mem);
		return err;
	}
	if (size) {
		size_t n = len < size - 1 ? len : size - 1;
		memcpy(buf, mem, n);
		buf[n] = '\0';
	}
	free(mem);
	return (ssize_t)len;
}
