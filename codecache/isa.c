/* Which instructions this CPU can run: an instruction's ISA set (Zydis)
 * against cpuid and, for vector state, against what the kernel enabled in
 * XCR0 (xgetbv). A replacement built with -mavx512fp16 on a CPU without it
 * dies of SIGILL at its first call; checked before anything is written.
 * padrone runs on the target's machine, so its own cpuid is the target's.
 */
#include "codecache/internal.h"

#include <cpuid.h>
#include <sys/auxv.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { R_EAX, R_EBX, R_ECX, R_EDX };

struct feature {
	const char *set;	/* Zydis ISA set, width suffix taken off */
	const char *name;	/* as the CPU manuals and /proc/cpuinfo say */
	uint32_t leaf, subleaf;
	uint8_t reg, bit;
	uint8_t state;		/* vector state the OS must enable: 0, AVX, AVX512, AMX */
	const char *also;	/* another set it needs (VAES under AVX-512 needs AVX512F) */
};

enum { ST_NONE, ST_AVX, ST_AVX512, ST_AMX };

static const struct feature features[] = {
	{ "SSE3", "SSE3", 1, 0, R_ECX, 0, 0, NULL },
	{ "SSE3X87", "SSE3", 1, 0, R_ECX, 0, 0, NULL },
	{ "PCLMULQDQ", "PCLMULQDQ", 1, 0, R_ECX, 1, 0, NULL },
	{ "MONITOR", "MONITOR", 1, 0, R_ECX, 3, 0, NULL },
	{ "SSSE3", "SSSE3", 1, 0, R_ECX, 9, 0, NULL },
	{ "SSSE3MMX", "SSSE3", 1, 0, R_ECX, 9, 0, NULL },
	{ "FMA", "FMA", 1, 0, R_ECX, 12, ST_AVX, NULL },
	{ "CMPXCHG16B", "CX16", 1, 0, R_ECX, 13, 0, NULL },
	{ "SSE4", "SSE4.1", 1, 0, R_ECX, 19, 0, NULL },
	{ "SSE42", "SSE4.2", 1, 0, R_ECX, 20, 0, NULL },
	{ "MOVBE", "MOVBE", 1, 0, R_ECX, 22, 0, NULL },
	{ "POPCNT", "POPCNT", 1, 0, R_ECX, 23, 0, NULL },
	{ "AES", "AES", 1, 0, R_ECX, 25, 0, NULL },
	{ "XSAVE", "XSAVE", 1, 0, R_ECX, 27, 0, NULL },	/* OSXSAVE: usable */
	{ "AVX", "AVX", 1, 0, R_ECX, 28, ST_AVX, NULL },
	{ "AVXAES", "AES", 1, 0, R_ECX, 25, ST_AVX, "AVX" },
	{ "F16C", "F16C", 1, 0, R_ECX, 29, ST_AVX, NULL },
	{ "RDRAND", "RDRAND", 1, 0, R_ECX, 30, 0, NULL },
	{ "RDWRFSGS", "FSGSBASE", 7, 0, R_EBX, 0, 0, NULL },
	{ "BMI1", "BMI1", 7, 0, R_EBX, 3, 0, NULL },
	{ "AVX2", "AVX2", 7, 0, R_EBX, 5, ST_AVX, NULL },
	{ "AVX2GATHER", "AVX2", 7, 0, R_EBX, 5, ST_AVX, NULL },
	{ "BMI2", "BMI2", 7, 0, R_EBX, 8, 0, NULL },
	{ "INVPCID", "INVPCID", 7, 0, R_EBX, 10, 0, NULL },
	{ "RTM", "RTM", 7, 0, R_EBX, 11, 0, NULL },
	{ "MPX", "MPX", 7, 0, R_EBX, 14, 0, NULL },
	{ "AVX512F", "AVX512F", 7, 0, R_EBX, 16, ST_AVX512, NULL },
	{ "AVX512DQ", "AVX512DQ", 7, 0, R_EBX, 17, ST_AVX512, NULL },
	{ "RDSEED", "RDSEED", 7, 0, R_EBX, 18, 0, NULL },
	{ "ADOX_ADCX", "ADX", 7, 0, R_EBX, 19, 0, NULL },
	{ "AVX512_IFMA", "AVX512_IFMA", 7, 0, R_EBX, 21, ST_AVX512, NULL },
	{ "CLFLUSHOPT", "CLFLUSHOPT", 7, 0, R_EBX, 23, 0, NULL },
	{ "CLWB", "CLWB", 7, 0, R_EBX, 24, 0, NULL },
	{ "AVX512PF", "AVX512PF", 7, 0, R_EBX, 26, ST_AVX512, NULL },
	{ "AVX512ER", "AVX512ER", 7, 0, R_EBX, 27, ST_AVX512, NULL },
	{ "AVX512CD", "AVX512CD", 7, 0, R_EBX, 28, ST_AVX512, NULL },
	{ "SHA", "SHA", 7, 0, R_EBX, 29, 0, NULL },
	{ "AVX512BW", "AVX512BW", 7, 0, R_EBX, 30, ST_AVX512, NULL },
	{ "AVX512VL", "AVX512VL", 7, 0, R_EBX, 31, ST_AVX512, NULL },
	{ "PREFETCHWT1", "PREFETCHWT1", 7, 0, R_ECX, 0, 0, NULL },
	{ "AVX512_VBMI", "AVX512_VBMI", 7, 0, R_ECX, 1, ST_AVX512, NULL },
	{ "PKU", "OSPKE", 7, 0, R_ECX, 4, 0, NULL },
	{ "WAITPKG", "WAITPKG", 7, 0, R_ECX, 5, 0, NULL },
	{ "AVX512_VBMI2", "AVX512_VBMI2", 7, 0, R_ECX, 6, ST_AVX512, NULL },
	{ "GFNI", "GFNI", 7, 0, R_ECX, 8, 0, NULL },
	{ "AVX_GFNI", "GFNI", 7, 0, R_ECX, 8, ST_AVX, "AVX" },
	{ "AVX512_GFNI", "GFNI", 7, 0, R_ECX, 8, ST_AVX512, "AVX512F" },
	{ "VAES", "VAES", 7, 0, R_ECX, 9, ST_AVX, "AVX" },
	{ "AVX512_VAES", "VAES", 7, 0, R_ECX, 9, ST_AVX512, "AVX512F" },
	{ "VPCLMULQDQ", "VPCLMULQDQ", 7, 0, R_ECX, 10, ST_AVX, "AVX" },
	{ "AVX512_VPCLMULQDQ", "VPCLMULQDQ", 7, 0, R_ECX, 10, ST_AVX512, "AVX512F" },
	{ "AVX512_VNNI", "AVX512_VNNI", 7, 0, R_ECX, 11, ST_AVX512, NULL },
	{ "AVX512_BITALG", "AVX512_BITALG", 7, 0, R_ECX, 12, ST_AVX512, NULL },
	{ "AVX512_VPOPCNTDQ", "AVX512_VPOPCNTDQ", 7, 0, R_ECX, 14, ST_AVX512, NULL },
	{ "RDPID", "RDPID", 7, 0, R_ECX, 22, 0, NULL },
	{ "KEYLOCKER", "KL", 7, 0, R_ECX, 23, 0, NULL },
	{ "KEYLOCKER_WIDE", "KL", 7, 0, R_ECX, 23, 0, NULL },
	{ "CLDEMOTE", "CLDEMOTE", 7, 0, R_ECX, 25, 0, NULL },
	{ "MOVDIR", "MOVDIRI", 7, 0, R_ECX, 27, 0, NULL },
	{ "ENQCMD", "ENQCMD", 7, 0, R_ECX, 29, 0, NULL },
	{ "AVX512_4VNNIW", "AVX512_4VNNIW", 7, 0, R_EDX, 2, ST_AVX512, NULL },
	{ "AVX512_4FMAPS", "AVX512_4FMAPS", 7, 0, R_EDX, 3, ST_AVX512, NULL },
	{ "UINTR", "UINTR", 7, 0, R_EDX, 5, 0, NULL },
	{ "AVX512_VP2INTERSECT", "AVX512_VP2INTERSECT", 7, 0, R_EDX, 8, ST_AVX512, NULL },
	{ "SERIALIZE", "SERIALIZE", 7, 0, R_EDX, 14, 0, NULL },
	{ "TSX_LDTRK", "TSXLDTRK", 7, 0, R_EDX, 16, 0, NULL },
	{ "AMX_BF16", "AMX_BF16", 7, 0, R_EDX, 22, ST_AMX, NULL },
	{ "AVX512_FP16", "AVX512_FP16", 7, 0, R_EDX, 23, ST_AVX512, NULL },
	{ "AMX_TILE", "AMX_TILE", 7, 0, R_EDX, 24, ST_AMX, NULL },
	{ "AMX_INT8", "AMX_INT8", 7, 0, R_EDX, 25, ST_AMX, NULL },
	{ "CET", "CET_SS", 7, 0, R_ECX, 7, 0, NULL },
	{ "AVX_VNNI", "AVX_VNNI", 7, 1, R_EAX, 4, ST_AVX, NULL },
	{ "AVX512_BF16", "AVX512_BF16", 7, 1, R_EAX, 5, ST_AVX512, NULL },
	{ "HRESET", "HRESET", 7, 1, R_EAX, 22, 0, NULL },
	{ "XSAVEOPT", "XSAVEOPT", 0xd, 1, R_EAX, 0, 0, NULL },
	{ "XSAVEC", "XSAVEC", 0xd, 1, R_EAX, 1, 0, NULL },
	{ "XSAVES", "XSAVES", 0xd, 1, R_EAX, 3, 0, NULL },
	{ "LAHF", "LAHF_LM", 0x80000001, 0, R_ECX, 0, 0, NULL },
	{ "LZCNT", "LZCNT", 0x80000001, 0, R_ECX, 5, 0, NULL },
	{ "SSE4A", "SSE4A", 0x80000001, 0, R_ECX, 6, 0, NULL },
	{ "XOP", "XOP", 0x80000001, 0, R_ECX, 11, ST_AVX, NULL },
	{ "FMA4", "FMA4", 0x80000001, 0, R_ECX, 16, ST_AVX, NULL },
	{ "TBM", "TBM", 0x80000001, 0, R_ECX, 21, 0, NULL },
	{ "MONITORX", "MONITORX", 0x80000001, 0, R_ECX, 29, 0, NULL },
	{ "RDTSCP", "RDTSCP", 0x80000001, 0, R_EDX, 27, 0, NULL },
	{ "CLZERO", "CLZERO", 0x80000008, 0, R_EBX, 0, 0, NULL },
	{ "RDPRU", "RDPRU", 0x80000008, 0, R_EBX, 4, 0, NULL },
};

/* What every x86-64 CPU runs (or, for the hint NOPs, treats as a NOP). */
static const char *const baseline[] = {
	"I86", "I186", "I286REAL", "I386", "I486REAL", "I486", "PENTIUMREAL", "PENTIUMMMX",
	"PPRO", "CMOV", "FCMOV", "X87", "SSE", "SSE2", "SSE2MMX", "SSEMXCSR", "SSE_PREFETCH",
	"FXSAVE", "FXSAVE64", "LONGMODE", "PAUSE", "FAT_NOP", "PREFETCH_NOP", "CLFSH",
};

static bool has_bit(uint32_t leaf, uint32_t subleaf, unsigned reg, unsigned bit)
{
	unsigned r[4];

	if (__get_cpuid_max(leaf & 0x80000000u, NULL) < leaf)
		return false;
	__cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
	return r[reg] >> bit & 1;
}

/* XCR0: the register state the kernel saves, without which vector
 * instructions fault even where cpuid lists them. */
static uint64_t xcr0(void)
{
	uint32_t lo, hi;

	if (!has_bit(1, 0, R_ECX, 27))	/* OSXSAVE */
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

static bool state_enabled(unsigned state)
{
	static const uint64_t need[] = {
		[ST_NONE] = 0, [ST_AVX] = 0x6, [ST_AVX512] = 0xe6, [ST_AMX] = 0x60006,
	};
	return (xcr0() & need[state]) == need[state];
}

static const struct feature *feature_named(const char *set)
{
	for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
		if (strcmp(features[i].set, set) == 0)
			return &features[i];
	return NULL;
}

/* "AVX512_FP16_128" -> "AVX512_FP16", and whether it is a 128/256-bit
 * form (AVX512VL). */
static void strip_width(const char *set, char *base, size_t size, bool *vl)
{
	static const char *const widths[] = { "_128N", "_128", "_256", "_512", "_SCALAR", "_KOP" };
	size_t n = strlen(set);

	*vl = false;
	snprintf(base, size, "%s", set);
	if (strncmp(set, "AVX512", 6) != 0)
		return;
	for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
		size_t w = strlen(widths[i]);
		if (n > w && strcmp(set + n - w, widths[i]) == 0 && n - w < size) {
			base[n - w] = '\0';
			*vl = strcmp(widths[i], "_128") == 0 || strcmp(widths[i], "_256") == 0;
			return;
		}
	}
}

static const char *feature_lacking(const struct feature *f)
{
	if (!has_bit(f->leaf, f->subleaf, f->reg, f->bit) || !state_enabled(f->state))
		return f->name;
	const struct feature *also = f->also ? feature_named(f->also) : NULL;
	return also ? feature_lacking(also) : NULL;
}

/* rdfsbase and its kin trap unless the kernel enabled them for user code
 * (Linux 5.9 and later, told in AT_HWCAP2); the CPU's bit is not enough. */
bool cc__user_fsgsbase(void)
{
	return getauxval(AT_HWCAP2) & 2;	/* HWCAP2_FSGSBASE */
}

const char *cc__isa_lacking(const char *set, bool endbr, char *buf, size_t size)
{
	char base[48];
	bool vl;

	if (endbr)	/* endbr32/64 are NOPs without CET */
		return NULL;
	for (size_t i = 0; i < sizeof baseline / sizeof baseline[0]; i++)
		if (strcmp(set, baseline[i]) == 0)
			return NULL;
	strip_width(set, base, sizeof base, &vl);
	const struct feature *f = feature_named(base);
	if (!f) {
		snprintf(buf, size, "%s (which padrone cannot check on this CPU)", set);
		return buf;
	}
	const char *lack = feature_lacking(f);
	if (!lack && strcmp(base, "RDWRFSGS") == 0 && !cc__user_fsgsbase())
		lack = "FSGSBASE (not enabled for user code by this kernel)";
	if (!lack && vl)
		lack = feature_lacking(feature_named("AVX512VL"));
	return lack;
}
