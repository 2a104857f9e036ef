/* attach/mem.c: reading and writing the target's memory. Neither needs
 * the tracer thread nor a stopped world: process_vm_readv checks access
 * per call, and /proc/PID/mem was opened (with the access check) at seize. */
#include "attach/internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096ull
#define IOV_PAGES 256

bool attach__force_mem_fallback;

/* process_vm_readv with one remote iovec per page, so that a read that
 * runs into an unmapped page stops there with what it got. */
static ssize_t read_vm(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct iovec local = { (char *)buf + done, 0 };
		struct iovec remote[IOV_PAGES];
		int n = 0;
		uint64_t a = addr + done;
		size_t want = 0;
		while (n < IOV_PAGES && done + want < len) {
			size_t in_page = (size_t)(PAGE - (a % PAGE));
			size_t chunk = len - done - want < in_page ? len - done - want : in_page;
			remote[n].iov_base = (void *)(uintptr_t)a;
			remote[n].iov_len = chunk;
			a += chunk;
			want += chunk;
			n++;
		}
		local.iov_len = want;
		ssize_t got = process_vm_readv(pid, &local, 1, remote, (unsigned long)n, 0);
		if (got < 0)
			return done ? (ssize_t)done : -errno;
		done += (size_t)got;
		if ((size_t)got < want)
			break;
	}
	return (ssize_t)done;
}

static ssize_t read_mem(int fd, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t got = pread(fd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return done ? (ssize_t)done : -errno;
		if (got == 0)
			break;
		done += (size_t)got;
	}
	return done || !len ? (ssize_t)done : -EIO;
}

/* /proc/PID/mem, over what is mapped only: the kernel takes an address in
 * the gap below the stack for the stack growing down to it, and grows it.
 * r: what process_vm_readv said, kept if the maps cannot be read. */
static ssize_t read_mapped(struct attach_target *t, uint64_t addr, void *buf, size_t len,
			   ssize_t r)
{
	struct attach_maps *m;

	if (attach_maps__read(t->pid, &m) < 0)
		return r == -ENOSYS ? read_mem(t->mem_fd, addr, buf, len) : r;
	len = (size_t)attach_maps__mapped_len(m, addr, len);
	attach_maps__free(m);
	return len ? read_mem(t->mem_fd, addr, buf, len) : -EFAULT;
}

ssize_t attach_target__read(struct attach_target *t, uint64_t addr, void *buf, size_t len)
{
	if (addr > INT64_MAX || len > (size_t)INT64_MAX - addr)
		return attach__fail(t, -EFAULT, "read of %zu bytes at 0x%llx: outside the address "
				    "space", len, (unsigned long long)addr);
	if (len == 0)
		return 0;
	ssize_t r = -ENOSYS;
	if (!attach__force_mem_fallback)
		r = read_vm(t->pid, addr, buf, len);
	/* Fall back when process_vm_readv is unavailable or refused (a zombie
	 * leader has no mm; seccomp or old kernels lack the call; PROT_NONE
	 * pages) */
	if (r == -ENOSYS || r == -EPERM || r == -ESRCH || r == -EINVAL || r == -EFAULT)
		r = read_mapped(t, addr, buf, len, r);
	if (r == -EIO)
		r = -EFAULT;	/* what /proc/PID/mem says for an unmapped page */
	if (r < 0)
		return attach__fail(t, (int)r, "cannot read %zu bytes at 0x%llx in process %d (%s): "
				    "%s", len, (unsigned long long)addr, (int)t->pid, t->comm,
				    r == -EFAULT ? "not mapped" : strerror((int)-r));
	attach__clear_msg(t);
	return r;
}

int attach_target__write(struct attach_target *t, uint64_t addr, const void *buf, size_t len)
{
	size_t done = 0;
	if (addr > INT64_MAX || len > (size_t)INT64_MAX - addr)
		return attach__fail(t, -EFAULT, "write of %zu bytes at 0x%llx: outside the address "
				    "space", len, (unsigned long long)addr);
	while (done < len) {
		ssize_t n = pwrite(t->mem_fd, (const char *)buf + done, len - done,
				   (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n == 0 || errno == EIO ? -EFAULT : -errno;
			return attach__fail(t, err, "cannot write %zu bytes at 0x%llx in process %d "
					    "(%s): %s", len - done, (unsigned long long)(addr + done),
					    (int)t->pid, t->comm,
					    err == -EFAULT ? "not mapped" : strerror(-err));
		}
		done += (size_t)n;
	}
	attach__clear_msg(t);
	return 0;
}
