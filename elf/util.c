/* util.c: opening the files a process maps; reasons in words. */
#include "elf/internal.h"
#include "attach/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

void elf__fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

int elf__open_mapped(pid_t pid, const struct attach_map *m)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	size_t l = strlen(m->path);
	const char *del = " (deleted)";
	if (l > strlen(del) && !strcmp(m->path + l - strlen(del), del))
		l -= strlen(del);
	snprintf(path, sizeof(path), "/proc/%d/root%.*s", pid, (int)l, m->path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	/* the process is gone (its /proc entries with it): the same path here,
	 * if it is still the same file */
	snprintf(path, sizeof(path), "%.*s", (int)l, m->path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_ino != m->inode ||
			major(st.st_dev) != m->dev_major || minor(st.st_dev) != m->dev_minor)) {
		close(fd);
		return -ENOENT;
	}
	return fd >= 0 ? fd : -errno;
}
