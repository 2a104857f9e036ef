/* attach/proc.c: what /proc says about a process, and the checks made
 * before padrone touches it: each failure gets a sentence naming the cause. */
#include "attach/internal.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PF_KTHREAD_FLAG 0x00200000ul	/* include/linux/sched.h */
#define CAP_SYS_PTRACE_BIT 19

static int read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (int)len;
}

int attach_thread_sched_ns(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns)
{
	char path[64], buf[96];
	unsigned long long run, wait;

	snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	int n = read_text(path, buf, sizeof buf);
	if (n < 0)
		return n;
	if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
		return -EINVAL;
	*run_ns = run;
	if (wait_ns)
		*wait_ns = wait;
	return 0;
}

/* "Key:\tv1\tv2..." of a status file: the first up to n numbers. */
static int status_ids(const char *status, const char *key, unsigned long *v, int n)
{
	size_t klen = strlen(key);
	for (const char *line = status; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *p = line + klen + 1;
			int i;
			for (i = 0; i < n; i++) {
				char *end;
				v[i] = strtoul(p, &end, 10);
				if (end == p)
					break;
				p = end;
			}
			return i;
		}
	}
	return 0;
}

int attach__proc_read(pid_t pid, struct attach__proc *p)
{
	char dir[32];
	snprintf(dir, sizeof dir, "%d", (int)pid);
	return attach__proc_read_path(dir, p);
}

int attach__proc_read_path(const char *dir, struct attach__proc *p)
{
	char path[128], buf[4096];
	int n;

	memset(p, 0, sizeof(*p));
	p->pid = (pid_t)atoi(strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
	snprintf(path, sizeof path, "/proc/%s/stat", dir);
	n = read_text(path, buf, sizeof buf);
	if (n < 0)
		return n;
	/* "pid (comm) S ppid pgrp session tty tpgid flags ...": comm may hold
	 * anything, so look for the last ')'. */
	char *open_paren = strchr(buf, '(');
	char *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EINVAL;
	size_t clen = (size_t)(close_paren - open_paren - 1);
	if (clen >= sizeof p->comm)
		clen = sizeof p->comm - 1;
	memcpy(p->comm, open_paren + 1, clen);
	p->comm[clen] = '\0';
	int ppid, pgrp, session, tty, tpgid;
	if (sscanf(close_paren + 1, " %c %d %d %d %d %d %lu", &p->state, &ppid, &pgrp, &session,
		   &tty, &tpgid, &p->flags) != 7)
		return -EINVAL;
	p->ppid = ppid;

	snprintf(path, sizeof path, "/proc/%s/status", dir);
	n = read_text(path, buf, sizeof buf);
	if (n < 0)
		return n;
	unsigned long v[4] = { 0 };
	if (status_ids(buf, "Tgid", v, 1) == 1)
		p->tgid = (pid_t)v[0];
	unsigned long ns[8];
	int levels = status_ids(buf, "NSpid", ns, 8);
	p->nspid = levels > 0 ? (pid_t)ns[levels - 1] : p->pid;
	if (status_ids(buf, "Threads", v, 1) == 1)
		p->threads = (int)v[0];
	if (status_ids(buf, "TracerPid", v, 1) == 1)
		p->tracer = (pid_t)v[0];
	if (status_ids(buf, "Uid", v, 4) == 4)
		for (int i = 0; i < 4; i++)
			p->uid[i] = (uid_t)v[i];
	if (status_ids(buf, "Gid", v, 4) == 4)
		for (int i = 0; i < 4; i++)
			p->gid[i] = (gid_t)v[i];
	/* TracerPid is the tracing thread; name its process
	 * (this reads the tracer's status into buf: keep it last). */
	if (p->tracer > 0) {
		snprintf(path, sizeof path, "/proc/%d/status", (int)p->tracer);
		if (read_text(path, buf, sizeof buf) > 0 && status_ids(buf, "Tgid", v, 1) == 1)
			p->tracer = (pid_t)v[0];
	}
	return 0;
}

pid_t attach__live_task(pid_t pid)
{
	char path[64];
	struct attach__proc p;

	if (attach__proc_read(pid, &p) == 0 && p.state != 'Z' && p.state != 'X')
		return pid;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return pid;
	pid_t found = pid;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		char st[64], buf[512];
		if (tid <= 0 || tid == pid)
			continue;
		snprintf(st, sizeof st, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
		if (read_text(st, buf, sizeof buf) <= 0)
			continue;
		const char *cp = strrchr(buf, ')');
		if (cp && cp[1] == ' ' && cp[2] != 'Z' && cp[2] != 'X') {
			found = tid;
			break;
		}
	}
	closedir(d);
	return found;
}

void attach__live_path(pid_t pid, const char *leaf, char *buf, size_t size)
{
	pid_t live = attach__live_task(pid);

	if (live == pid)
		snprintf(buf, size, "/proc/%d/%s", (int)pid, leaf);
	else
		snprintf(buf, size, "/proc/%d/task/%d/%s", (int)pid, (int)live, leaf);
}

const char *attach__comm(pid_t pid, char *buf, size_t size)
{
	char path[64];

	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	if (pid <= 0 || read_text(path, buf, size) <= 0) {
		snprintf(buf, size, "?");
		return buf;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

const char *attach__state_words(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "uninterruptible sleep, e.g. waiting for a vfork child or I/O";
	case 'T': return "stopped by job control";
	case 't': return "stopped by a tracer";
	case 'Z': return "zombie";
	case 'X': return "dead";
	case 'I': return "idle kernel thread";
	default: return "unknown state";
	}
}

/* ------------------------------------------------------------ permission */

/* A capability set ("CapEff", "CapPrm") from a status file; 0 if unknown. */
static uint64_t caps_of(const char *status_path, const char *which)
{
	char buf[4096], key[16];
	if (read_text(status_path, buf, sizeof buf) < 0)
		return 0;
	snprintf(key, sizeof key, "\n%s:", which);
	const char *p = strstr(buf, key);
	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

static uint64_t my_caps(const char *which)
{
	uint64_t caps = caps_of("/proc/thread-self/status", which);
	return caps ? caps : caps_of("/proc/self/status", which);
}

static bool have_cap_sys_ptrace(void)
{
	return (my_caps("CapEff") >> CAP_SYS_PTRACE_BIT) & 1;
}

static int yama_scope(void)
{
	char buf[32];
	if (read_text("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) <= 0)
		return -1;
	return atoi(buf);
}

static bool descends_from(pid_t pid, pid_t ancestor)
{
	for (int depth = 0; pid > 1 && depth < 4096; depth++) {
		struct attach__proc p;
		if (pid == ancestor)
			return true;
		if (attach__proc_read(pid, &p) < 0)
			return false;
		pid = p.ppid;
	}
	return pid == ancestor;
}

/* Is padrone in a user namespace other than the initial one, and pid in
 * another than padrone's? Its /proc/PID/ns/user would tell, but reading
 * that needs the very access the kernel refused; uid_map is open to all
 * and reads the same for two processes of one namespace. */
static bool foreign_userns(pid_t pid)
{
	char mine[256], theirs[256], path[64];

	if (read_text("/proc/self/uid_map", mine, sizeof mine) < 0)
		return false;
	unsigned long inside, outside, count;
	int end = 0;
	/* the initial namespace maps every id to itself, in one line */
	if (sscanf(mine, "%lu %lu %lu %n", &inside, &outside, &count, &end) == 3 &&
	    inside == 0 && outside == 0 && count == 4294967295ul && !mine[end])
		return false;
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	return read_text(path, theirs, sizeof theirs) >= 0 && strcmp(mine, theirs) != 0;
}

int attach__perm_facts(pid_t pid, const struct attach__proc *p, struct attach__perm_facts *f)
{
	char path[64];
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->pid = pid;
	f->comm = p->comm;
	f->my_uid = getuid();
	f->my_gid = getgid();
	f->cap_sys_ptrace = have_cap_sys_ptrace();
	for (int i = 0; i < 3; i++) {
		f->uid[i] = p->uid[i];
		f->gid[i] = p->gid[i];
	}
	/* The kernel makes the files of /proc/PID of a non-dumpable process
	 * belong to root whatever its uids (task_dump_owner): that is how its
	 * dumpability shows from outside. */
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f->dumpable = true;
	if (stat(path, &st) == 0 && st.st_uid == 0 && p->uid[1] != 0)
		f->dumpable = false;
	f->yama_scope = yama_scope();
	f->descendant = descends_from(pid, getpid());
	f->foreign_userns = foreign_userns(pid);
	f->my_caps = my_caps("CapPrm");
	f->caps = caps_of(path, "CapPrm");	/* path: /proc/PID/status */
	if (read_text("/sys/kernel/security/lsm", f->lsms, sizeof f->lsms) < 0)
		f->lsms[0] = '\0';
	f->lsms[strcspn(f->lsms, "\n")] = '\0';
	return 0;
}

/* "cap_net_raw, cap_sys_nice": the names of the capabilities in mask
 * (capabilities(7); "cap_N" for one newer than this list). */
static void cap_names(uint64_t mask, char *buf, size_t size)
{
	static const char *const names[] = {
		"cap_chown", "cap_dac_override", "cap_dac_read_search", "cap_fowner",
		"cap_fsetid", "cap_kill", "cap_setgid", "cap_setuid", "cap_setpcap",
		"cap_linux_immutable", "cap_net_bind_service", "cap_net_broadcast",
		"cap_net_admin", "cap_net_raw", "cap_ipc_lock", "cap_ipc_owner",
		"cap_sys_module", "cap_sys_rawio", "cap_sys_chroot", "cap_sys_ptrace",
		"cap_sys_pacct", "cap_sys_admin", "cap_sys_boot", "cap_sys_nice",
		"cap_sys_resource", "cap_sys_time", "cap_sys_tty_config", "cap_mknod",
		"cap_lease", "cap_audit_write", "cap_audit_control", "cap_setfcap",
		"cap_mac_override", "cap_mac_admin", "cap_syslog", "cap_wake_alarm",
		"cap_block_suspend", "cap_audit_read", "cap_perfmon", "cap_bpf",
		"cap_checkpoint_restore",
	};
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 64 && len < size; i++) {
		if (!(mask >> i & 1))
			continue;
		char other[16];
		snprintf(other, sizeof other, "cap_%u", i);
		len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
					i < sizeof names / sizeof names[0] ? names[i] : other);
	}
}

/* Say who runs as what: "uid 1000 (gid 1000)", or every id when they differ
 * among themselves (a setuid program). */
static void describe_ids(const struct attach__perm_facts *f, char *who, size_t size)
{
	if (f->uid[0] == f->uid[1] && f->uid[1] == f->uid[2] && f->gid[0] == f->gid[1] &&
	    f->gid[1] == f->gid[2])
		snprintf(who, size, "uid %u (gid %u)", (unsigned)f->uid[0], (unsigned)f->gid[0]);
	else
		snprintf(who, size, "uids %u/%u/%u and gids %u/%u/%u (real/effective/saved)",
			 (unsigned)f->uid[0], (unsigned)f->uid[1], (unsigned)f->uid[2],
			 (unsigned)f->gid[0], (unsigned)f->gid[1], (unsigned)f->gid[2]);
}

int attach__perm_explain(const struct attach__perm_facts *f, char *buf, size_t size)
{
	/* Yama scope 3 refuses everyone, root included. */
	if (f->yama_scope >= 3) {
		snprintf(buf, size,
			 "permission denied: kernel.yama.ptrace_scope is %d, so no process may be "
			 "traced, not even by root (only a reboot lowers it)", f->yama_scope);
		return 1;
	}
	bool uids = f->uid[0] == f->my_uid && f->uid[1] == f->my_uid && f->uid[2] == f->my_uid;
	bool gids = f->gid[0] == f->my_gid && f->gid[1] == f->my_gid && f->gid[2] == f->my_gid;
	if (!f->cap_sys_ptrace) {
		if (!uids || !gids) {
			char who[128];
			describe_ids(f, who, sizeof who);
			snprintf(buf, size,
				 "permission denied: process %d (%s) runs as %s and padrone as uid %u "
				 "(gid %u), without CAP_SYS_PTRACE; run padrone as the same user or as root",
				 (int)f->pid, f->comm, who, (unsigned)f->my_uid, (unsigned)f->my_gid);
			return 1;
		}
		/* The capability module: a process may trace only processes
		 * whose permitted capabilities it holds too. */
		if (f->caps & ~f->my_caps && !f->foreign_userns) {
			char names[160];
			cap_names(f->caps & ~f->my_caps, names, sizeof names);
			snprintf(buf, size,
				 "permission denied: process %d (%s) holds capabilities padrone "
				 "lacks (%s) and padrone runs without CAP_SYS_PTRACE; a process may "
				 "trace only processes whose capabilities it has: run padrone as root",
				 (int)f->pid, f->comm, names);
			return 1;
		}
		if (!f->dumpable) {
			snprintf(buf, size,
				 "permission denied: process %d (%s) is not dumpable (a setuid or "
				 "setgid program, or prctl(PR_SET_DUMPABLE, 0)) and padrone runs "
				 "without CAP_SYS_PTRACE; run padrone as root",
				 (int)f->pid, f->comm);
			return 1;
		}
		if (f->yama_scope == 2 || (f->yama_scope == 1 && !f->descendant)) {
			snprintf(buf, size,
				 "permission denied: kernel.yama.ptrace_scope is %d (%s) and padrone "
				 "runs without CAP_SYS_PTRACE; run padrone as root or set "
				 "kernel.yama.ptrace_scope=0",
				 f->yama_scope,
				 f->yama_scope == 1 ? "only a process's ancestors may trace it"
						    : "only CAP_SYS_PTRACE may trace");
			return 1;
		}
	}
	return 0;
}

void attach__perm_unexplained(const struct attach__perm_facts *f, pid_t tid, char *buf,
			      size_t size)
{
	char who[96];

	if (tid && tid != f->pid)
		snprintf(who, sizeof who, "thread %d of process %d (%s)", (int)tid, (int)f->pid,
			 f->comm);
	else
		snprintf(who, sizeof who, "process %d (%s)", (int)f->pid, f->comm);
	snprintf(buf, size,
		 "permission denied: the kernel refused padrone access to %s although uids and "
		 "capabilities allow it; %s%s%s%s", who,
		 f->foreign_userns ? "padrone runs in a user namespace of its own that the "
				     "process is not in, where its capabilities may not count, "
				     "or a security module forbids it" :
				     "a security module forbids it",
		 *f->lsms ? " (active: " : " (SELinux, AppArmor, Yama...)",
		 f->lsms, *f->lsms ? ")" : "");
}

/* ----------------------------------------------------------------- ELF */

int attach__elf_check(const char *path, pid_t pid, const char *comm, struct attach_error *e)
{
	unsigned char h[EI_NIDENT + 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;
		return attach__seterr(e, err, err == -EACCES || err == -EPERM ? ATTACH_PERMISSION
									       : ATTACH_SYSTEM,
				      "cannot read the program of process %d (%s) at %s: %s",
				      (int)pid, comm, path, strerror(-err));
	}
	ssize_t n = pread(fd, h, sizeof h, 0);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (n < (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0)
		return attach__seterr(e, err ? err : -ENOEXEC, ATTACH_NOT_X86_64,
				      "process %d (%s) does not run an ELF program (%s); padrone "
				      "attaches to x86-64 ELF programs only", (int)pid, comm, path);
	/* e_machine sits at the same offset in both classes (bytes 18-19). */
	unsigned machine = (unsigned)h[18] | (unsigned)h[19] << 8;
	if (h[EI_DATA] != ELFDATA2LSB)
		machine = (unsigned)h[19] | (unsigned)h[18] << 8;
	if (h[EI_CLASS] == ELFCLASS64 && machine == EM_X86_64)
		return 0;
	if (h[EI_CLASS] == ELFCLASS32 && machine == EM_386)
		return attach__seterr(e, -ENOEXEC, ATTACH_NOT_X86_64,
				      "process %d (%s) is a 32-bit x86 (i386) program; padrone "
				      "attaches to x86-64 programs only", (int)pid, comm);
	if (h[EI_CLASS] == ELFCLASS32 && machine == EM_X86_64)
		return attach__seterr(e, -ENOEXEC, ATTACH_NOT_X86_64,
				      "process %d (%s) is an x32 program (32-bit pointers on x86-64); "
				      "padrone attaches to x86-64 programs only", (int)pid, comm);
	return attach__seterr(e, -ENOEXEC, ATTACH_NOT_X86_64,
			      "process %d (%s) is a %d-bit program for ELF machine %u, not x86-64; "
			      "padrone attaches to x86-64 programs only", (int)pid, comm,
			      h[EI_CLASS] == ELFCLASS64 ? 64 : 32, machine);
}
