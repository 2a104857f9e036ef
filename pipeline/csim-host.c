/* csim-host.c: the host's caches as valgrind 3.19's cachegrind finds them.
 *
 * Cachegrind never reads sysfs: it asks cpuid, vendor by vendor, keeps the
 * level-1 instruction and data caches and the unified cache of the deepest
 * level as LL, and falls back to a fixed geometry when any is missing or the
 * answer does not make sense. Reading cpuid the same way is what makes
 * padrone-sim's default geometry cachegrind's on every host, including VMs
 * whose kernel shows no cache directory in sysfs, and AMD processors whose
 * legacy leaves (0x80000005/6) describe odd LLs that cachegrind uses as is.
 */
#include "pipeline/csim-internal.h"

#include <cpuid.h>
#include <errno.h>
#include <string.h>

enum kind { INSTR, DATA, UNIFIED };

struct cache {
	unsigned level;
	enum kind kind;
	uint32_t kib, assoc, line;
	bool trace;		/* Pentium 4's micro-op trace cache */
};

struct caches {
	struct cache c[32];
	unsigned n, levels;
};

static void add(struct caches *cs, unsigned level, enum kind kind, uint32_t kib, uint32_t assoc,
		uint32_t line)
{
	if (cs->n == sizeof cs->c / sizeof cs->c[0])
		return;
	cs->c[cs->n++] = (struct cache){ level, kind, kib, assoc, line, false };
	if (level > cs->levels)
		cs->levels = level;
}

static void query(csim_cpuid_fn fn, void *arg, uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	memset(r, 0, 4 * sizeof *r);
	fn(leaf, sub, r, arg);
}

/* Intel's leaf-2 cache descriptors (Intel's application note 485), the ones
 * cachegrind knows; others (TLBs, prefetch) say nothing about caches. */
static const struct {
	uint8_t code;
	uint8_t level;
	uint8_t kind;
	uint8_t assoc;
	uint16_t kib;
	uint8_t line;
} intel_descriptors[] = {
	{ 0x06, 1, INSTR, 4, 8, 32 },	  { 0x08, 1, INSTR, 4, 16, 32 },
	{ 0x09, 1, INSTR, 4, 32, 64 },	  { 0x30, 1, INSTR, 8, 32, 64 },
	{ 0x0a, 1, DATA, 2, 8, 32 },	  { 0x0c, 1, DATA, 4, 16, 32 },
	{ 0x0d, 1, DATA, 4, 16, 64 },	  { 0x0e, 1, DATA, 6, 24, 64 },
	{ 0x2c, 1, DATA, 8, 32, 64 },	  { 0x60, 1, DATA, 8, 16, 64 },
	{ 0x66, 1, DATA, 4, 8, 64 },	  { 0x67, 1, DATA, 4, 16, 64 },
	{ 0x68, 1, DATA, 4, 32, 64 },	  { 0x21, 2, UNIFIED, 8, 256, 64 },
	{ 0x39, 2, UNIFIED, 4, 128, 64 }, { 0x3c, 2, UNIFIED, 4, 256, 64 },
	{ 0x41, 2, UNIFIED, 4, 128, 32 }, { 0x42, 2, UNIFIED, 4, 256, 32 },
	{ 0x43, 2, UNIFIED, 4, 512, 32 }, { 0x44, 2, UNIFIED, 4, 1024, 32 },
	{ 0x45, 2, UNIFIED, 4, 2048, 32 }, { 0x48, 2, UNIFIED, 12, 3072, 64 },
	{ 0x4e, 2, UNIFIED, 24, 6144, 64 }, { 0x78, 2, UNIFIED, 4, 1024, 64 },
	{ 0x79, 2, UNIFIED, 8, 128, 64 }, { 0x7a, 2, UNIFIED, 8, 256, 64 },
	{ 0x7b, 2, UNIFIED, 8, 512, 64 }, { 0x7c, 2, UNIFIED, 8, 1024, 64 },
	{ 0x7d, 2, UNIFIED, 8, 2048, 64 }, { 0x7e, 2, UNIFIED, 8, 256, 128 },
	{ 0x7f, 2, UNIFIED, 2, 512, 64 }, { 0x80, 2, UNIFIED, 8, 512, 64 },
	{ 0x81, 2, UNIFIED, 8, 128, 32 }, { 0x82, 2, UNIFIED, 8, 256, 32 },
	{ 0x83, 2, UNIFIED, 8, 512, 32 }, { 0x84, 2, UNIFIED, 8, 1024, 32 },
	{ 0x85, 2, UNIFIED, 8, 2048, 32 }, { 0x86, 2, UNIFIED, 4, 512, 64 },
	{ 0x87, 2, UNIFIED, 8, 1024, 64 }, { 0x22, 3, UNIFIED, 4, 512, 64 },
	{ 0x23, 3, UNIFIED, 8, 1024, 64 }, { 0x25, 3, UNIFIED, 8, 2048, 64 },
	{ 0x29, 3, UNIFIED, 8, 4096, 64 }, { 0x46, 3, UNIFIED, 4, 4096, 64 },
	{ 0x47, 3, UNIFIED, 8, 8192, 64 }, { 0x4a, 3, UNIFIED, 12, 6144, 64 },
	{ 0x4b, 3, UNIFIED, 16, 8192, 64 }, { 0x4c, 3, UNIFIED, 12, 12288, 64 },
	{ 0x4d, 3, UNIFIED, 16, 16384, 64 }, { 0xd0, 3, UNIFIED, 4, 512, 64 },
	{ 0xd1, 3, UNIFIED, 4, 1024, 64 }, { 0xd2, 3, UNIFIED, 4, 2048, 64 },
	{ 0xd6, 3, UNIFIED, 8, 1024, 64 }, { 0xd7, 3, UNIFIED, 8, 2048, 64 },
	{ 0xd8, 3, UNIFIED, 8, 4096, 64 }, { 0xdc, 3, UNIFIED, 12, 1536, 64 },
	{ 0xdd, 3, UNIFIED, 12, 3072, 64 }, { 0xde, 3, UNIFIED, 12, 6144, 64 },
	{ 0xe2, 3, UNIFIED, 16, 2048, 64 }, { 0xe3, 3, UNIFIED, 16, 4096, 64 },
	{ 0xe4, 3, UNIFIED, 16, 8192, 64 }, { 0xea, 3, UNIFIED, 24, 12288, 64 },
	{ 0xeb, 3, UNIFIED, 24, 18432, 64 }, { 0xec, 3, UNIFIED, 24, 24576, 64 },
};

/* Leaf 4: one subleaf per cache, until a null type. */
static void intel_leaf4(struct caches *cs, csim_cpuid_fn fn, void *arg)
{
	uint32_t r[4];

	for (uint32_t i = 0; i < 64; i++) {
		query(fn, arg, 4, i, r);
		unsigned type = r[0] & 0x1f, level = (r[0] >> 5) & 7;
		if (!type)
			break;
		uint32_t assoc = ((r[1] >> 22) & 0x3ff) + 1, parts = ((r[1] >> 12) & 0x3ff) + 1;
		uint32_t line = (r[1] & 0xfff) + 1, sets = r[2] + 1;
		uint32_t kib = (uint32_t)((uint64_t)assoc * parts * line * sets / 1024);
		if (level < 1 || level > 3 || type > 3)
			continue;	/* cachegrind ignores these too */
		add(cs, level, type == 1 ? DATA : type == 2 ? INSTR : UNIFIED, kib, assoc, line);
	}
}

static int intel_caches(struct caches *cs, uint32_t max_leaf, csim_cpuid_fn fn, void *arg)
{
	uint32_t r[4], id[4];
	uint8_t b[16];

	if (max_leaf < 2)
		return -ENOTSUP;
	query(fn, arg, 1, 0, id);
	unsigned family = ((id[0] >> 20) & 0xff) * 16 + ((id[0] >> 8) & 0xf);
	unsigned model = ((id[0] >> 16) & 0xf) * 16 + ((id[0] >> 4) & 0xf);
	query(fn, arg, 2, 0, r);
	memcpy(b, r, sizeof b);
	if (b[0] != 1)		/* leaf 2 must be asked more than once: unsupported */
		return -ENOTSUP;
	b[0] = 0;
	for (int i = 0; i < 16; i++) {
		switch (b[i]) {
		case 0x49:	/* L3 on the Xeon MP (family 15, model 6), L2 elsewhere */
			add(cs, family == 15 && model == 6 ? 3 : 2, UNIFIED, 4096, 16, 64);
			continue;
		case 0x70: case 0x71: case 0x72:
			add(cs, 1, INSTR, b[i] == 0x70 ? 12 : b[i] == 0x71 ? 16 : 32, 8, 0);
			cs->c[cs->n - 1].trace = true;
			continue;
		case 0xff:
			intel_leaf4(cs, fn, arg);
			continue;
		case 0x10: case 0x15: case 0x1a: case 0x88: case 0x89: case 0x8a: case 0x8d:
		case 0x90: case 0x96: case 0x9b:
			return -ENOTSUP;	/* Itanium's caches: cachegrind gives up */
		}
		for (size_t k = 0; k < sizeof intel_descriptors / sizeof *intel_descriptors; k++)
			if (intel_descriptors[k].code == b[i]) {
				add(cs, intel_descriptors[k].level, intel_descriptors[k].kind,
				    intel_descriptors[k].kib, intel_descriptors[k].assoc,
				    intel_descriptors[k].line);
				break;
			}
	}
	return 0;
}

/* AMD's encoding of L2/L3 associativity; unknown ones (and "full") count as
 * direct mapped, as in cachegrind. */
static uint32_t amd_assoc(unsigned bits)
{
	static const uint8_t ways[16] = { [1] = 1, [2] = 2, [4] = 4, [6] = 8, [8] = 16,
					  [0xa] = 32, [0xb] = 48, [0xc] = 64, [0xd] = 96,
					  [0xe] = 128 };
	return ways[bits & 0xf] ? ways[bits & 0xf] : 1;
}

static int amd_caches(struct caches *cs, csim_cpuid_fn fn, void *arg)
{
	uint32_t r[4], l1[4], l2[4], id[4];

	query(fn, arg, 0x80000000u, 0, r);
	if (!(r[0] & 0x80000000u) || r[0] < 0x80000006u)
		return -ENOTSUP;
	query(fn, arg, 0x80000005u, 0, l1);
	query(fn, arg, 0x80000006u, 0, l2);
	query(fn, arg, 1, 0, id);
	uint32_t d1 = l1[2], i1 = l1[3], u2 = l2[2], u3 = l2[3];
	if (id[0] == 0x630)	/* Duron A0 reports 1 KiB of L2; it has 64 */
		u2 = (64u << 16) | (u2 & 0xffff);
	add(cs, 1, DATA, d1 >> 24, (d1 >> 16) & 0xff, d1 & 0xff);
	add(cs, 1, INSTR, i1 >> 24, (i1 >> 16) & 0xff, i1 & 0xff);
	add(cs, 2, UNIFIED, u2 >> 16, amd_assoc(u2 >> 12), u2 & 0xff);
	if ((u3 >> 18) & 0x3fff)
		add(cs, 3, UNIFIED, ((u3 >> 18) & 0x3fff) * 512, amd_assoc(u3 >> 12), u3 & 0xff);
	return 0;
}

static int vendor_caches(struct caches *cs, csim_cpuid_fn fn, void *arg)
{
	uint32_t r[4];
	char vendor[13];

	query(fn, arg, 0, 0, r);
	memcpy(vendor, &r[1], 4);
	memcpy(vendor + 4, &r[3], 4);
	memcpy(vendor + 8, &r[2], 4);
	vendor[12] = '\0';
	if (!r[0])
		return -ENOTSUP;
	if (!strcmp(vendor, "GenuineIntel"))
		return intel_caches(cs, r[0], fn, arg);
	if (!strcmp(vendor, "AuthenticAMD"))
		return amd_caches(cs, fn, arg);
	if (!strcmp(vendor, "CentaurHauls")) {	/* cachegrind's VIA Nehemiah */
		add(cs, 1, DATA, 64, 16, 16);
		add(cs, 1, INSTR, 64, 4, 16);
		add(cs, 2, UNIFIED, 64, 16, 16);
		return 0;
	}
	return -ENOTSUP;
}

/* At most one cache of a kind per level, no split cache beside a unified
 * one, and every level up to the deepest present. */
static bool sensible(const struct caches *cs)
{
	for (unsigned lv = 1; lv <= cs->levels; lv++) {
		unsigned n[3] = { 0, 0, 0 };
		for (unsigned i = 0; i < cs->n; i++)
			if (cs->c[i].level == lv)
				n[cs->c[i].kind]++;
		if (!n[INSTR] && !n[DATA] && !n[UNIFIED])
			return false;
		if (n[INSTR] > 1 || n[DATA] > 1 || n[UNIFIED] > 1)
			return false;
		if (n[UNIFIED] && (n[INSTR] || n[DATA]))
			return false;
	}
	return true;
}

static const struct cache *find(const struct caches *cs, enum kind kind, unsigned level)
{
	for (unsigned i = 0; i < cs->n; i++)
		if (cs->c[i].kind == kind && cs->c[i].level == level)
			return &cs->c[i];
	return NULL;
}

static struct csim_geom geom(const struct cache *c)
{
	return (struct csim_geom){ (uint64_t)c->kib * 1024, c->assoc, c->line };
}

int csim_config_cpuid(struct csim_config *cfg, csim_cpuid_fn fn, void *arg)
{
	struct caches cs = { .n = 0 };
	int rc = vendor_caches(&cs, fn, arg);

	csim_config_fallback(cfg);
	if (rc == 0 && !sensible(&cs))
		rc = -EINVAL;
	const struct cache *i1 = find(&cs, INSTR, 1), *d1 = find(&cs, DATA, 1);
	const struct cache *ll = find(&cs, UNIFIED, cs.levels);
	if (rc == 0 && (!i1 || !d1 || !ll))
		rc = -ENOENT;
	if (rc)
		return rc;
	cfg->level[CSIM_I1] = geom(i1);
	if (i1->trace)		/* micro-ops, not bytes: cachegrind's guess */
		cfg->level[CSIM_I1] = (struct csim_geom){
			i1->kib == 12 || i1->kib == 16 ? 16384 : 32768, i1->assoc, 32 };
	cfg->level[CSIM_D1] = geom(d1);
	cfg->level[CSIM_LL] = geom(ll);
	csim_geom_cachegrind_tweak(&cfg->level[CSIM_LL]);
	return 0;
}

static void host_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4], void *arg)
{
	(void)arg;
	__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

int csim_config_host(struct csim_config *cfg)
{
	return csim_config_cpuid(cfg, host_cpuid, NULL);
}
