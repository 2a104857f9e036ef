/* export-pprof.c: a profile as pprof's profile.proto, gzipped.
 *
 * What pprof, Parca and Pyroscope need to show and merge it: one Mapping
 * per executable mapping a sample fell in (file offset, path, GNU
 * build-id; the main program first), one Location per sampled address (the
 * IP, then return addresses, leaf first in each Sample), one Function per
 * function of the ranking, and the values samples/count and cpu/nanoseconds
 * (a sample is 1/hz s of CPU). Functions are named already (has_functions),
 * so readers need not symbolize.
 */
#include "src/export.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "attach/attach.h"
#include "profile/profile.h"
#include "src/pprof/profile.pb-c.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;
typedef Perftools__Profiles__ValueType PbValueType;

/* ----------------------------------------------------------- hash maps */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ull;
	k ^= k >> 29;
	return k;
}

/* uint64 key -> nonzero uint64 value, open addressing. */
struct u64map {
	uint64_t *keys, *vals;
	size_t slots, n;
};

static uint64_t *u64map_slot(struct u64map *m, uint64_t key)
{
	if ((m->n + 1) * 2 > m->slots) {
		size_t ns = m->slots ? m->slots * 2 : 1024;
		uint64_t *k = calloc(ns, sizeof(*k)), *v = calloc(ns, sizeof(*v));
		if (!k || !v) {
			free(k);
			free(v);
			return NULL;
		}
		for (size_t i = 0; i < m->slots; i++) {
			if (!m->vals[i])
				continue;
			size_t j = mix(m->keys[i]) & (ns - 1);
			while (v[j])
				j = (j + 1) & (ns - 1);
			k[j] = m->keys[i];
			v[j] = m->vals[i];
		}
		free(m->keys);
		free(m->vals);
		m->keys = k;
		m->vals = v;
		m->slots = ns;
	}
	size_t j = mix(key) & (m->slots - 1);
	while (m->vals[j] && m->keys[j] != key)
		j = (j + 1) & (m->slots - 1);
	m->keys[j] = key;
	return &m->vals[j];
}

static void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
}

/* The string table: strings[0] is "", as the format wants. */
struct strtab {
	char **s;
	size_t n, cap;
	struct u64map index;	/* hash of the string -> index + 1 (chained by probing) */
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The index of s in t, added if new; -1 when out of memory. */
static int64_t intern(struct strtab *t, const char *s)
{
	uint64_t h = hash_str(s);

	/* equal hashes of different strings: probe h+1, h+2... */
	for (uint64_t k = h;; k++) {
		uint64_t *v = u64map_slot(&t->index, k);
		if (!v)
			return -1;
		if (*v && strcmp(t->s[*v - 1], s) == 0)
			return (int64_t)*v - 1;
		if (*v)
			continue;
		if (t->n == t->cap) {
			size_t nc = t->cap ? t->cap * 2 : 256;
			char **p = realloc(t->s, nc * sizeof(*p));
			if (!p)
				return -1;
			t->s = p;
			t->cap = nc;
		}
		if (!(t->s[t->n] = strdup(s)))
			return -1;
		*v = ++t->n;
		t->index.n++;
		return (int64_t)t->n - 1;
	}
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	u64map_free(&t->index);
}

/* ------------------------------------------------------------- building */

struct pprof {
	const struct prof_hot *h;
	const struct padrone_export_meta *m;
	struct attach_maps *maps;	/* NULL: the process is gone */
	char exe[PATH_MAX];		/* the main program's path, "" if unknown */
	struct strtab strs;
	PbProfile p;
	PbValueType types[2], *type_ptrs[2], period_type;
	struct u64map loc_of_addr;	/* address -> location id */
	struct u64map map_of_key;	/* mapping key -> mapping id */
	PbMapping *mappings;
	size_t nmappings, mappings_cap;
	PbLocation *locations;
	PbLine *lines;
	size_t nlocations, locations_cap;
	PbFunction *functions;
	PbSample *samples;
	uint64_t *sample_locs;
	int64_t *sample_vals;
};

static int64_t S(struct pprof *pp, const char *s)
{
	return intern(&pp->strs, s ? s : "");
}

/* The [start, limit) and offset of the mapping holding addr, and its key:
 * the map's start in the process, or for the kernel and addresses no map
 * holds (the process gone), the module's name. */
static void mapping_of(struct pprof *pp, uint64_t addr, const struct prof_func *f,
		       uint64_t *start, uint64_t *limit, uint64_t *offset, const char **path,
		       uint64_t *key)
{
	const struct attach_map *am = addr < PROF_KERNEL_START && pp->maps ?
					      attach_maps__find(pp->maps, addr) : NULL;

	if (am && am->path[0] == '/') {
		*start = am->start;
		*limit = am->end;
		*offset = am->offset;
		*path = am->path;
		*key = am->start;
		return;
	}
	*start = *limit = *offset = 0;	/* grown to the addresses seen */
	*path = f->module;
	*key = hash_str(f->module) | 1ull << 63;	/* never a user address */
	(void)addr;
}

static int add_mapping(struct pprof *pp, uint64_t addr, const struct prof_func *f, uint64_t *id)
{
	uint64_t start, limit, offset, key;
	const char *path;

	mapping_of(pp, addr, f, &start, &limit, &offset, &path, &key);
	uint64_t *v = u64map_slot(&pp->map_of_key, key);
	if (!v)
		return -ENOMEM;
	if (!*v) {
		if (pp->nmappings == pp->mappings_cap) {
			size_t nc = pp->mappings_cap ? pp->mappings_cap * 2 : 32;
			PbMapping *p = realloc(pp->mappings, nc * sizeof(*p));
			if (!p)
				return -ENOMEM;
			pp->mappings = p;
			pp->mappings_cap = nc;
		}
		PbMapping *mp = &pp->mappings[pp->nmappings];
		perftools__profiles__mapping__init(mp);
		mp->id = pp->nmappings + 1;
		mp->memory_start = start ? start : addr;
		mp->memory_limit = limit ? limit : addr + 1;
		mp->file_offset = offset;
		/* a build-id names the file only if the function is from it */
		const char *bid = strcmp(f->module, path) == 0 && f->build_id ? f->build_id : "";
		int64_t fn = S(pp, path), b = S(pp, bid);
		if (fn < 0 || b < 0)
			return -ENOMEM;
		mp->filename = fn;
		mp->build_id = b;
		mp->has_functions = true;
		*v = mp->id;
		pp->map_of_key.n++;
		pp->nmappings++;
	}
	PbMapping *mp = &pp->mappings[*v - 1];
	if (addr < mp->memory_start)	/* a module known by its name only */
		mp->memory_start = addr;
	if (addr >= mp->memory_limit)
		mp->memory_limit = addr + 1;
	if (!mp->build_id && strcmp(f->module, pp->strs.s[mp->filename]) == 0 && f->build_id &&
	    *f->build_id) {
		int64_t b = S(pp, f->build_id);
		if (b < 0)
			return -ENOMEM;
		mp->build_id = b;
	}
	*id = mp->id;
	return 0;
}

/* The location of a sampled address (one per address), made on first
 * sight with its mapping and function. */
static int location_of(struct pprof *pp, const struct prof_hot_frame *fr, uint64_t *id)
{
	uint64_t *v = u64map_slot(&pp->loc_of_addr, fr->addr);

	if (!v)
		return -ENOMEM;
	if (*v) {
		*id = *v;
		return 0;
	}
	if (pp->nlocations == pp->locations_cap) {
		size_t nc = pp->locations_cap ? pp->locations_cap * 2 : 1024;
		PbLocation *l = realloc(pp->locations, nc * sizeof(*l));
		if (l)
			pp->locations = l;
		PbLine *ln = realloc(pp->lines, nc * sizeof(*ln));
		if (ln)
			pp->lines = ln;
		if (!l || !ln)
			return -ENOMEM;
		pp->locations_cap = nc;
	}
	const struct prof_func *f = prof_hot__at(pp->h, fr->func);
	PbLocation *loc = &pp->locations[pp->nlocations];
	perftools__profiles__location__init(loc);
	PbLine *line = &pp->lines[pp->nlocations];
	perftools__profiles__line__init(line);
	line->function_id = (uint64_t)fr->func + 1;
	loc->id = pp->nlocations + 1;
	loc->address = fr->addr;
	int r = add_mapping(pp, fr->addr, f, &loc->mapping_id);
	if (r < 0)
		return r;
	pp->nlocations++;
	pp->loc_of_addr.n++;
	*v = *id = loc->id;
	return 0;
}

static int build_functions(struct pprof *pp)
{
	size_t n = pp->h ? prof_hot__count(pp->h) : 0;

	pp->functions = calloc(n ? n : 1, sizeof(*pp->functions));
	pp->p.function = calloc(n ? n : 1, sizeof(*pp->p.function));
	if (!pp->functions || !pp->p.function)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct prof_func *f = prof_hot__at(pp->h, i);
		PbFunction *fn = &pp->functions[i];
		perftools__profiles__function__init(fn);
		fn->id = i + 1;
		if ((fn->name = S(pp, f->name)) < 0 || (fn->filename = S(pp, f->module)) < 0)
			return -ENOMEM;
		fn->system_name = fn->name;
		pp->p.function[i] = fn;
	}
	pp->p.n_function = n;
	return 0;
}

static int build_samples(struct pprof *pp)
{
	size_t n = pp->h ? prof_hot__stack_count(pp->h) : 0, nframes = 0;
	int64_t period = pp->m->hz ? (int64_t)(1000000000ull / pp->m->hz) : 0;

	for (size_t i = 0; i < n; i++) {
		const struct prof_hot_frame *fr;
		size_t nf;
		uint64_t count;
		if (prof_hot__stack(pp->h, i, &fr, &nf, &count) == 0)
			nframes += nf;
	}
	pp->samples = calloc(n ? n : 1, sizeof(*pp->samples));
	pp->p.sample = calloc(n ? n : 1, sizeof(*pp->p.sample));
	pp->sample_locs = calloc(nframes ? nframes : 1, sizeof(*pp->sample_locs));
	pp->sample_vals = calloc(n ? 2 * n : 1, sizeof(*pp->sample_vals));
	if (!pp->samples || !pp->p.sample || !pp->sample_locs || !pp->sample_vals)
		return -ENOMEM;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const struct prof_hot_frame *fr;
		size_t nf;
		uint64_t count;
		if (prof_hot__stack(pp->h, i, &fr, &nf, &count) < 0 || !nf)
			continue;
		PbSample *smp = &pp->samples[pp->p.n_sample];
		perftools__profiles__sample__init(smp);
		smp->location_id = pp->sample_locs + used;
		for (size_t k = 0; k < nf; k++) {
			int r = location_of(pp, &fr[k], &smp->location_id[k]);
			if (r < 0)
				return r;
		}
		smp->n_location_id = nf;
		used += nf;
		smp->value = pp->sample_vals + 2 * pp->p.n_sample;
		smp->value[0] = (int64_t)count;
		smp->value[1] = (int64_t)count * period;
		smp->n_value = 2;
		pp->p.sample[pp->p.n_sample++] = smp;
	}
	return 0;
}

/* The main program's mapping first ("mapping[0] will be the main
 * binary"); ids follow the new order. */
static int order_mappings(struct pprof *pp)
{
	size_t main_at = pp->nmappings;

	for (size_t i = 0; i < pp->nmappings && main_at == pp->nmappings; i++)
		if (*pp->exe && strcmp(pp->strs.s[pp->mappings[i].filename], pp->exe) == 0)
			main_at = i;
	pp->p.mapping = calloc(pp->nmappings ? pp->nmappings : 1, sizeof(*pp->p.mapping));
	if (!pp->p.mapping)
		return -ENOMEM;
	uint64_t *new_id = calloc(pp->nmappings + 1, sizeof(*new_id));
	if (!new_id)
		return -ENOMEM;
	size_t k = 0;
	if (main_at < pp->nmappings)
		pp->p.mapping[k++] = &pp->mappings[main_at];
	for (size_t i = 0; i < pp->nmappings; i++)
		if (i != main_at)
			pp->p.mapping[k++] = &pp->mappings[i];
	for (size_t i = 0; i < pp->nmappings; i++) {
		new_id[pp->p.mapping[i]->id] = i + 1;
	}
	for (size_t i = 0; i < pp->nmappings; i++)
		pp->p.mapping[i]->id = i + 1;
	for (size_t i = 0; i < pp->nlocations; i++)
		pp->locations[i].mapping_id = new_id[pp->locations[i].mapping_id];
	free(new_id);
	pp->p.n_mapping = pp->nmappings;
	return 0;
}

static int build_locations(struct pprof *pp)
{
	pp->p.location = calloc(pp->nlocations ? pp->nlocations : 1, sizeof(*pp->p.location));
	if (!pp->p.location)
		return -ENOMEM;
	for (size_t i = 0; i < pp->nlocations; i++) {
		pp->locations[i].line = malloc(sizeof(PbLine *));
		if (!pp->locations[i].line)
			return -ENOMEM;
		pp->locations[i].line[0] = &pp->lines[i];
		pp->locations[i].n_line = 1;
		pp->p.location[i] = &pp->locations[i];
	}
	pp->p.n_location = pp->nlocations;
	return 0;
}

static int build_header(struct pprof *pp)
{
	static const char *const names[2][2] = { { "samples", "count" }, { "cpu", "nanoseconds" } };

	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&pp->types[i]);
		if ((pp->types[i].type = S(pp, names[i][0])) < 0 ||
		    (pp->types[i].unit = S(pp, names[i][1])) < 0)
			return -ENOMEM;
		pp->type_ptrs[i] = &pp->types[i];
	}
	pp->p.sample_type = pp->type_ptrs;
	pp->p.n_sample_type = 2;
	perftools__profiles__value_type__init(&pp->period_type);
	pp->period_type.type = pp->types[1].type;
	pp->period_type.unit = pp->types[1].unit;
	pp->p.period_type = &pp->period_type;
	pp->p.period = pp->m->hz ? (int64_t)(1000000000ull / pp->m->hz) : 0;
	pp->p.time_nanos = (int64_t)pp->m->start_ns;
	pp->p.duration_nanos = (int64_t)pp->m->duration_ns;
	pp->p.default_sample_type = pp->types[1].type;
	if (pp->m->comment && *pp->m->comment) {
		pp->p.comment = malloc(sizeof(*pp->p.comment));
		if (!pp->p.comment || (pp->p.comment[0] = S(pp, pp->m->comment)) < 0)
			return -ENOMEM;
		pp->p.n_comment = 1;
	}
	return 0;
}

static void pprof_free(struct pprof *pp)
{
	for (size_t i = 0; i < pp->nlocations; i++)
		free(pp->locations[i].line);
	free(pp->p.location);
	free(pp->locations);
	free(pp->lines);
	free(pp->p.mapping);
	free(pp->mappings);
	free(pp->p.function);
	free(pp->functions);
	free(pp->p.sample);
	free(pp->samples);
	free(pp->sample_locs);
	free(pp->sample_vals);
	free(pp->p.comment);
	u64map_free(&pp->loc_of_addr);
	u64map_free(&pp->map_of_key);
	strtab_free(&pp->strs);
	attach_maps__free(pp->maps);
}

/* gzip (RFC 1952, as pprof reads it) of buf onto out. */
static int write_gzip(const uint8_t *buf, size_t len, FILE *out)
{
	z_stream z = { 0 };
	uint8_t chunk[65536];
	int zr;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)buf;
	z.avail_in = (uInt)len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		size_t have = sizeof(chunk) - z.avail_out;
		if (zr == Z_STREAM_ERROR || (have && fwrite(chunk, 1, have, out) != have)) {
			deflateEnd(&z);
			return zr == Z_STREAM_ERROR ? -EINVAL : -EIO;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return 0;
}

static int pack_and_write(struct pprof *pp, FILE *out)
{
	pp->p.string_table = pp->strs.s;
	pp->p.n_string_table = pp->strs.n;
	size_t len = perftools__profiles__profile__get_packed_size(&pp->p);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	perftools__profiles__profile__pack(&pp->p, buf);
	int r = write_gzip(buf, len, out);
	free(buf);
	return r;
}

int padrone_export_pprof(const struct prof_hot *h, const struct padrone_export_meta *m,
			 FILE *out, char *err, size_t errlen)
{
	struct pprof pp = { .h = h, .m = m };
	char link[64];
	int r;

	perftools__profiles__profile__init(&pp.p);
	if (attach_maps__read(m->pid, &pp.maps) < 0)
		pp.maps = NULL;	/* gone: mappings from the modules' names */
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)m->pid);
	ssize_t n = readlink(link, pp.exe, sizeof(pp.exe) - 1);
	pp.exe[n > 0 ? n : 0] = '\0';
	r = S(&pp, "") == 0 ? 0 : -ENOMEM;	/* string 0 is "" */
	if (r == 0)
		r = build_header(&pp);
	if (r == 0)
		r = build_functions(&pp);
	if (r == 0)
		r = build_samples(&pp);
	if (r == 0)
		r = build_locations(&pp);
	if (r == 0)
		r = order_mappings(&pp);
	if (r == 0)
		r = pack_and_write(&pp, out);
	pprof_free(&pp);
	if (r < 0)
		snprintf(err, errlen, "writing the pprof profile: %s", strerror(-r));
	return r;
}
