/* cc_reader: a function whose first bytes are a system call that blocks.
 *
 * cc_reader FIFO [SIGFIFO]
 *  - reader(fd, buf, n) is read(2) by hand, "xor eax,eax; nop; syscall;
 *    ret": its syscall ends exactly where a 5-byte entry jump ends. Blocked
 *    in it, the thread's pc is the first byte after the jump; but when the
 *    kernel restarts the call after a stop it rewinds the pc by 2, onto the
 *    syscall, inside the jump's bytes. The main thread reads FIFO one byte
 *    at a time through it and prints "reader: got C ret N".
 *  - with SIGFIFO, SIGUSR2 (a handler with SA_RESTART) makes the thread read
 *    one byte from SIGFIFO inside its handler: meanwhile the pc it was
 *    interrupted at -- rewound onto reader's syscall, inside the first
 *    bytes -- waits in the signal frame on its stack. The handler writes
 *    "handler: waiting" before it blocks and "handler: got C" after.
 * "ready" is printed just before the first read. Both FIFOs are opened
 * read-write, so that opening blocks nobody and no end of file comes.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

long reader(int fd, void *buf, unsigned long n);
__asm__(".text\n"
	".globl reader\n"
	".type reader, @function\n"
	"reader:\n"
	"	xor %eax, %eax\n"
	"	nop\n"
	"	syscall\n"
	"	ret\n"
	".size reader, .-reader\n");

static int sig_fd = -1;

static void say(const char *s, size_t n)
{
	if (write(1, s, n) < 0) {
		/* the test reads stdout: nothing to do if it is gone */
	}
}

static void on_usr2(int sig)
{
	char c = '?', line[32] = "handler: got ?\n";

	(void)sig;
	say("handler: waiting\n", 17);
	if (read(sig_fd, &c, 1) == 1)
		line[13] = c;
	say(line, 15);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cc_reader FIFO [SIGFIFO]\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR);
	if (fd < 0 || (argc > 2 && (sig_fd = open(argv[2], O_RDWR)) < 0)) {
		perror("cc_reader: open");
		return 1;
	}
	if (sig_fd >= 0) {
		struct sigaction sa = { .sa_handler = on_usr2, .sa_flags = SA_RESTART };
		sigaction(SIGUSR2, &sa, NULL);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (;;) {
		char c = '?';
		long r = reader(fd, &c, 1);
		printf("reader: got %c ret %ld\n", c, r);
	}
}
