/* cfg-libc: CFG + loop forest of every FDE-delimited function of the
 * libc.so.6 mapped in a live target, read from the target's memory.
 * Goal: <= 1 s in total. Prints functions/s, the failures grouped by
 * reason, and the same work from the file on disk side by side. */
#include "attach/attach.h"
#include "cfg/cfg.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct tally {
	size_t funcs, blocks, insns, loops, irreducible, tables, unresolved, noreturn;
	size_t errors[CFG_ERR_LIMIT + 1];
	double seconds, cpu;
};

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Everything from opening the reader on: a cold start each time. */
static int run(struct cfg_reader *(*open_reader)(void *), void *arg, uint64_t in_libc,
	       struct tally *t)
{
	memset(t, 0, sizeof(*t));
	double t0 = now(), c0 = cpu_now();
	struct cfg_reader *r = open_reader(arg);
	if (!r)
		return -1;
	uint64_t *starts;
	size_t n;
	if (cfg_reader__function_starts(r, in_libc, &starts, &n) < 0) {
		fprintf(stderr, "cfg-libc: %s\n", cfg_reader__errmsg(r));
		cfg_reader__free(r);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct cfg_function *f;
		if (cfg_function__build(r, starts[i], NULL, &f) < 0) {
			t->errors[CFG_ERR_NONE]++;	/* counted apart below */
			continue;
		}
		t->funcs++;
		t->blocks += cfg_function__block_count(f);
		t->insns += cfg_function__insn_count(f);
		t->loops += cfg_function__loop_count(f);
		for (size_t l = 0; l < cfg_function__loop_count(f); l++)
			t->irreducible += cfg_function__loop(f, l)->irreducible;
		t->tables += cfg_function__jump_table_count(f);
		t->unresolved += cfg_function__unresolved_count(f) ? 1 : 0;
		t->noreturn += cfg_function__noreturn(f);
		enum cfg_error e = cfg_function__error(f, NULL, NULL);
		if (e != CFG_ERR_NONE)
			t->errors[e]++;
		cfg_function__free(f);
	}
	free(starts);
	cfg_reader__free(r);
	t->seconds = now() - t0;
	t->cpu = cpu_now() - c0;
	return 0;
}

static struct cfg_reader *open_live(void *arg)
{
	struct cfg_reader *r;
	return cfg_reader__open_live(arg, NULL, &r) == 0 ? r : NULL;
}

struct file_arg {
	const char *path;
	uint64_t bias;
};

static struct cfg_reader *open_file(void *arg)
{
	struct file_arg *a = arg;
	struct cfg_reader *r;
	return cfg_reader__open_elf(a->path, a->bias, NULL, &r) == 0 ? r : NULL;
}

static void print(const char *what, const struct tally *t)
{
	printf("%-5s %zu functions in %.3f s (%.3f s CPU): %.0f functions/s, %zu blocks, "
	       "%zu instructions, %zu loops (%zu irreducible), %zu jump tables, %zu noreturn\n",
	       what, t->funcs, t->seconds, t->cpu, (double)t->funcs / t->seconds, t->blocks, t->insns,
	       t->loops, t->irreducible, t->tables, t->noreturn);
	size_t failed = t->errors[CFG_ERR_NONE];
	for (int e = 1; e <= CFG_ERR_LIMIT; e++)
		failed += t->errors[e];
	printf("%-5s failures: %zu of %zu", what, failed, t->funcs + t->errors[CFG_ERR_NONE]);
	for (int e = 1; e <= CFG_ERR_LIMIT; e++)
		if (t->errors[e])
			printf(", %zu %s", t->errors[e], cfg_error_name(e));
	if (t->errors[CFG_ERR_NONE])
		printf(", %zu not built", t->errors[CFG_ERR_NONE]);
	printf("; %zu with indirect jumps left unresolved (not failures)\n", t->unresolved);
}

int main(void)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);

	pid_t pid = fork();
	if (pid == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	usleep(100000);	/* let it map libc */
	struct attach_target *t;
	struct attach_error aerr;
	int rc = 1;
	if (attach_seize(pid, NULL, &t, &aerr) < 0) {
		fprintf(stderr, "cfg-libc: %s\n", aerr.msg);
		goto out;
	}
	struct attach_maps *maps;
	if (attach_maps__read(pid, &maps) < 0)
		goto detach;
	const struct attach_map *libc = NULL;
	for (size_t i = 0; i < attach_maps__count(maps); i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		const char *slash = strrchr(m->path, '/');
		if (slash && !strcmp(slash, "/libc.so.6") && m->offset == 0) {
			libc = m;
			break;
		}
	}
	if (!libc) {
		fprintf(stderr, "cfg-libc: no libc.so.6 mapped in process %d\n", (int)pid);
		goto maps;
	}
	printf("target: sleep (pid %d), %s at %#lx\n", (int)pid, libc->path,
	       (unsigned long)libc->start);
	struct tally live, file;
	struct file_arg fa = { libc->path, libc->start };
	if (run(open_live, t, libc->start, &live) < 0 || run(open_file, &fa, libc->start, &file) < 0)
		goto maps;
	print("live", &live);
	print("file", &file);
	printf("live/file time ratio %.2f\n", live.seconds / file.seconds);
	printf("goal: CFG + loop forest of every libc function from the live target in <= 1 s: "
	       "%.3f s, %s\n", live.seconds, live.seconds <= 1.0 ? "met" : "MISSED");
	rc = 0;
maps:
	attach_maps__free(maps);
detach:
	attach_target__detach(t);
out:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}
