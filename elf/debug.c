/* debug.c: a file's separate debug information, found as perf and gdb
 * find it (by build-id, then by .gnu_debuglink), so that installing a
 * -dbg package names the functions a stripped library keeps as sub_ADDR.
 */
#include "elf/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

void elf__build_id(Elf *elf, uint64_t at, uint64_t size, char out[41])
{
	Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)at, size, ELF_T_NHDR);
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;

	if (!d)
		return;
	while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)d->d_buf + noff, "GNU", 4) || nh.n_descsz > 20)
			continue;
		const uint8_t *id = (const uint8_t *)d->d_buf + doff;
		for (size_t i = 0; i < nh.n_descsz; i++)
			snprintf(out + 2 * i, 3, "%02x", id[i]);
		return;
	}
}

/* ------------------------------------------------------------ debug files */

/* The build-id of a loaded Elf, hex; "" if none. */
static void build_id_of(Elf *elf, char out[41])
{
	size_t n;

	out[0] = '\0';
	if (elf_getphdrnum(elf, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE && !out[0])
			elf__build_id(elf, ph.p_offset, ph.p_filesz, out);
	}
	if (!out[0]) {	/* a debug file's notes are in sections */
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;
		while (!out[0] && (scn = elf_nextscn(elf, scn)))
			if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE)
				elf__build_id(elf, sh.sh_offset, sh.sh_size, out);
	}
}

/* The file name .gnu_debuglink gives, or NULL. */
static const char *debuglink_of(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *sn;
		if (!gelf_getshdr(scn, &sh) || !(sn = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(sn, ".gnu_debuglink"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size > 4 && memchr(d->d_buf, 0, d->d_size))
			return d->d_buf;
	}
	return NULL;
}

/* Opens path if it is an ELF file whose build-id is want (when both have
 * one); fills *elf. */
static int open_debug(const char *path, const char *want, Elf **elf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char id[41];

	if (fd < 0)
		return -errno;
	*elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (*elf && elf_kind(*elf) == ELF_K_ELF) {
		build_id_of(*elf, id);
		if (!want[0] || !id[0] || !strcmp(id, want))
			return fd;
	}
	if (*elf)
		elf_end(*elf);
	*elf = NULL;
	close(fd);
	return -ENOENT;
}

/* Where perf and gdb look: /usr/lib/debug/.build-id/xx/rest.debug, then
 * the .gnu_debuglink name next to the file, in its .debug/, and under
 * /usr/lib/debug; in the process's root first, then here. */
int elf__find_debug(struct elf_file *e, Elf *elf, const struct elf_load_opts *o, Elf **out)
{
	const char *roots[2] = { o->root ? o->root : "", "" };
	const char *dbg = o->debug_dir ? o->debug_dir : "/usr/lib/debug";
	const char *link = debuglink_of(elf);
	const char *slash = o->path ? strrchr(o->path, '/') : NULL;
	int dirlen = slash ? (int)(slash - o->path) : 0;
	char p[3 * 4096];
	int fd = -ENOENT;

	for (int r = 0; r < (roots[0][0] ? 2 : 1) && fd < 0; r++) {
		if (e->build_id[0]) {
			snprintf(p, sizeof p, "%s%s/.build-id/%.2s/%s.debug", roots[r], dbg,
				 e->build_id, e->build_id + 2);
			fd = open_debug(p, e->build_id, out);
		}
		if (!link || !slash)
			continue;
		const char *subdirs[3] = { "", "/.debug", "" };
		for (int k = 0; k < 3 && fd < 0; k++) {
			snprintf(p, sizeof p, "%s%s%.*s%s/%s", roots[r], k == 2 ? dbg : "", dirlen,
				 o->path, subdirs[k], link);
			/* the file itself may carry the link's name */
			if (o->path && !strcmp(p + strlen(roots[r]), o->path))
				continue;
			fd = open_debug(p, e->build_id, out);
		}
	}
	if (fd >= 0)
		snprintf(e->debug_path, sizeof e->debug_path, "%s", p);
	return fd;
}

