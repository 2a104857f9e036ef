/* A real service: Debian's redis-server, on a free loopback port with its own
 * directory and no persistence, under redis-benchmark load. padroned
 * attaches, profiles 3 s and detaches while it serves; the benchmark sees no
 * error and a key written before is intact after. */
#include "tests/lib/tu.h"

#include <json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static struct tu_proc redis = { .pid = -1, .out_fd = -1 }, bench = { .pid = -1, .out_fd = -1 };

/* Also when an assertion ends the test early: redis does not die with its
 * pipe. */
static void kill_all(void)
{
	tu_kill(&bench);
	tu_kill(&redis);
}

/* A TCP port on 127.0.0.1 nobody uses right now. */
static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static char *cli(int port, const char *args, int *status)
{
	char cmd[256];
	int st;

	snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d %s 2>&1", port, args);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

static char *slurp(const char *path)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "cat '%s'", path);
	char *s = tu_run(cmd, NULL);
	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(redis_under_load_is_profiled_unharmed)
{
	char log[128], cmd[1024];
	int port = free_port(), st;

	/* Its log goes to a file: nobody reads a pipe that could fill up. */
	snprintf(cmd, sizeof(cmd), "exec redis-server --port %d --bind 127.0.0.1 --save '' "
		 "--appendonly no --dir '%s' --daemonize no --protected-mode yes >'%s/redis.log' 2>&1",
		 port, dir, dir);
	char *rargv[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(tu_spawn(&redis, rargv, false), 0);
	for (int i = 0; i < 100; i++) {	/* its log line varies by version: ask it */
		char *pong = cli(port, "PING", &st);
		bool up = strcmp(pong, "PONG\n") == 0;
		free(pong);
		if (up)
			break;
		usleep(100000);
	}
	char *out = cli(port, "SET padrone:canary still-here-7f3a", &st);
	ck_assert_str_eq(out, "OK\n");
	free(out);

	/* Load for the whole profile: rounds of 10000 requests (one finishes within
	 * the test even at the 10k requests/s of a busy 2-CPU machine), looped
	 * until killed, output kept in a file. */
	snprintf(log, sizeof(log), "%s/bench.out", dir);
	snprintf(cmd, sizeof(cmd), "exec redis-benchmark -h 127.0.0.1 -p %d -q -l -n 10000 -c 16 "
		 "-t set,get,incr,lpush -r 100000 >'%s' 2>&1", port, log);
	char *bargv[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(tu_spawn(&bench, bargv, false), 0);
	sleep(1);

	snprintf(cmd, sizeof(cmd), "%s --pid %d --profile 3 --json", tu_path("src/padroned"),
		 redis.pid);
	out = tu_run(cmd, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "padroned: %s", out);
	struct json_object *o = json_tokener_parse(out), *v, *fns;
	ck_assert_msg(o != NULL, "not JSON: %s", out);
	ck_assert(json_object_object_get_ex(o, "samples", &v));
	ck_assert_int_ge(json_object_get_int64(v), 10);
	ck_assert(json_object_object_get_ex(o, "functions", &fns));
	bool redis_code = false;	/* some hot function is redis-server's own */
	for (size_t i = 0; i < json_object_array_length(fns) && i < 30; i++) {
		struct json_object *m;
		json_object_object_get_ex(json_object_array_get_idx(fns, i), "module", &m);
		redis_code |= strstr(json_object_get_string(m), "redis") != NULL;
	}
	ck_assert_msg(redis_code, "no redis-server function among the hottest: %s", out);
	json_object_put(o);
	free(out);

	sleep(1);	/* the load goes on after the detach */
	ck_assert_int_eq(kill(bench.pid, 0), 0);
	tu_kill(&bench);
	char *b = slurp(log);
	ck_assert_msg(strstr(b, "requests per second"), "benchmark output: %s", b);
	ck_assert_msg(!strstr(b, "rror") && !strstr(b, "ERR"), "benchmark saw errors: %s", b);
	free(b);

	/* A fresh benchmark completes cleanly, and the key is intact. */
	snprintf(cmd, sizeof(cmd), "redis-benchmark -h 127.0.0.1 -p %d -q -n 20000 -c 8 -t set,get 2>&1",
		 port);
	b = tu_run(cmd, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(b, "GET: "), "%s", b);
	ck_assert_msg(!strstr(b, "rror"), "%s", b);
	free(b);
	out = cli(port, "GET padrone:canary", &st);
	ck_assert_str_eq(out, "still-here-7f3a\n");
	free(out);
	ck_assert_int_eq(kill(redis.pid, 0), 0);
	tu_kill(&redis);
}
END_TEST

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/padrone-redis-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	free(tu_run(cmd, NULL));
}

int main(void)
{
	atexit(kill_all);
	Suite *s = suite_create("redis");
	TCase *tc = tcase_create("redis");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, redis_under_load_is_profiled_unharmed);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
