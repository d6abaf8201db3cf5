/*
 * A hostile local client of the rtlab daemon, speaking rtlab.rpc/1 by hand over $RTLAB_SOCKET.
 * The tests in hostile_users.rs compile it with cc and run it as nobody (setpriv). Each mode
 * prints what the daemon answered; the test judges it.
 *
 *   constraints N ESTIMATE_MS WINDOW_MS  N back-to-back Time Constraints for its own thread
 *                                        (each ended when admitted); prints every answer and
 *                                        "admitted A of N"
 *   requests N                           N pings, one at a time; prints "ok X rate_limited Y"
 *                                        and the first refusal
 *   list                                 one list; prints the answer
 *   connect-then-exit REQUEST            connects, pings, forks and exits; the child keeps the
 *                                        socket, waits for a line on stdin, sends REQUEST and
 *                                        prints "answer: ..." (the peer the daemon saw is gone)
 *   hold N                               opens N connections that send nothing; prints
 *                                        "open O busy B", then holds them until stdin closes
 *   constraint-hold START_NS ESTIMATE_MS WINDOW_MS
 *                                        one Time Constraint for its own thread with the
 *                                        given start (0: now), ESTIMATE_MS by WINDOW_MS from
 *                                        now; prints the answer, "tid T" and "deadline D",
 *                                        then holds connection and thread until stdin closes
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int connect_daemon(void)
{
	const char *path = getenv("RTLAB_SOCKET");
	if (path == NULL || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "hostile_client: RTLAB_SOCKET is not set or too long\n");
		exit(2);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	strcpy(address.sun_path, path);
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_line(int fd, const char *line)
{
	size_t length = strlen(line);
	while (length > 0) {
		ssize_t written = write(fd, line, length);
		if (written <= 0) {
			if (written < 0 && errno == EINTR)
				continue;
			/* The daemon may refuse a connection with an error line and close it before the
			 * request is written (a uid whose budget is spent is refused at accept): the
			 * caller reads that line. */
			if (written < 0 && (errno == EPIPE || errno == ECONNRESET))
				return;
			perror("hostile_client: write");
			exit(3);
		}
		line += written;
		length -= (size_t)written;
	}
}

/* Reads one answer line (byte by byte: the answers are short) into buffer. */
static void read_line(int fd, char *buffer, size_t size)
{
	size_t used = 0;
	while (used + 1 < size) {
		char byte;
		ssize_t got = read(fd, &byte, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (byte == '\n')
			break;
		buffer[used++] = byte;
	}
	buffer[used] = '\0';
}

static uint64_t monotonic_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int constraints(int count, uint64_t estimate_ms, uint64_t window_ms)
{
	int fd = connect_daemon();
	if (fd < 0) {
		perror("hostile_client: connect");
		return 3;
	}
	long tid = syscall(SYS_gettid);
	int admitted = 0;
	char request[512], answer[65536];
	for (int i = 0; i < count; i++) {
		uint64_t now = monotonic_ns();
		snprintf(request, sizeof(request),
			 "{\"rpc\":\"rtlab.rpc/1\",\"id\":%d,\"method\":\"begin_constraint\",\"params\":"
			 "{\"tid\":%ld,\"start_ns\":%llu,\"estimate_ns\":%llu,\"deadline_ns\":%llu}}\n",
			 i + 1, tid, (unsigned long long)now,
			 (unsigned long long)(estimate_ms * 1000000u),
			 (unsigned long long)(now + window_ms * 1000000u));
		send_line(fd, request);
		read_line(fd, answer, sizeof(answer));
		printf("%s\n", answer);
		const char *id = strstr(answer, "\"constraint_id\":");
		if (id != NULL) {
			admitted++;
			snprintf(request, sizeof(request),
				 "{\"rpc\":\"rtlab.rpc/1\",\"id\":%d,\"method\":\"end_constraint\",\"params\":"
				 "{\"constraint_id\":%llu}}\n",
				 i + 1, strtoull(id + strlen("\"constraint_id\":"), NULL, 10));
			send_line(fd, request);
			read_line(fd, answer, sizeof(answer));
		}
	}
	printf("admitted %d of %d\n", admitted, count);
	return 0;
}

static int requests(int count)
{
	int fd = connect_daemon();
	if (fd < 0) {
		perror("hostile_client: connect");
		return 3;
	}
	int ok = 0, limited = 0;
	char request[256], answer[65536], first_refusal[65536] = "";
	for (int i = 0; i < count; i++) {
		snprintf(request, sizeof(request),
			 "{\"rpc\":\"rtlab.rpc/1\",\"id\":%d,\"method\":\"ping\"}\n", i + 1);
		send_line(fd, request);
		read_line(fd, answer, sizeof(answer));
		if (strstr(answer, "\"result\"") != NULL) {
			ok++;
		} else if (strstr(answer, "\"rate_limited\"") != NULL) {
			if (limited++ == 0)
				strcpy(first_refusal, answer);
		} else {
			printf("unexpected: %s\n", answer);
			return 1;
		}
	}
	printf("ok %d rate_limited %d\n%s\n", ok, limited, first_refusal);
	return 0;
}

static int list(void)
{
	int fd = connect_daemon();
	if (fd < 0) {
		perror("hostile_client: connect");
		return 3;
	}
	static char answer[1 << 20];
	send_line(fd, "{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"list\"}\n");
	read_line(fd, answer, sizeof(answer));
	printf("%s\n", answer);
	return 0;
}

static int connect_then_exit(const char *request)
{
	int fd = connect_daemon();
	if (fd < 0) {
		perror("hostile_client: connect");
		return 3;
	}
	/* One ping first: the daemon has accepted and decided who this is while it still ran. */
	char answer[65536];
	send_line(fd, "{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"ping\"}\n");
	read_line(fd, answer, sizeof(answer));
	if (strstr(answer, "\"result\"") == NULL) {
		printf("unexpected: %s\n", answer);
		return 1;
	}
	printf("peer %ld\n", (long)getpid());
	fflush(stdout);
	pid_t child = fork();
	if (child < 0) {
		perror("hostile_client: fork");
		return 3;
	}
	if (child > 0)
		_exit(0); /* the peer the daemon recorded exits; its socket lives on in the child */
	char go[16];
	if (fgets(go, sizeof(go), stdin) == NULL)
		return 3;
	char line[4096];
	snprintf(line, sizeof(line), "%s\n", request);
	send_line(fd, line);
	read_line(fd, answer, sizeof(answer));
	printf("answer: %s\n", answer);
	char rest[64];
	ssize_t got = read(fd, rest, sizeof(rest));
	printf("closed after: %s\n", got == 0 || (got < 0 && errno == ECONNRESET) ? "yes" : "no");
	return 0;
}

static int hold(int count)
{
	int *fds = calloc((size_t)count, sizeof(int));
	int open_count = 0;
	for (int i = 0; i < count; i++) {
		fds[i] = connect_daemon();
		if (fds[i] >= 0)
			open_count++;
	}
	/*
	 * A refused connection gets one `busy` line and is closed at once; an admitted one gets
	 * nothing. Count the lines until none came for 2 s.
	 */
	struct pollfd *entries = calloc((size_t)count, sizeof(struct pollfd));
	for (int i = 0; i < count; i++)
		entries[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	int busy = 0;
	while (poll(entries, (nfds_t)count, 2000) > 0) {
		for (int i = 0; i < count; i++) {
			if (entries[i].fd < 0 || entries[i].revents == 0)
				continue;
			char answer[4096];
			read_line(entries[i].fd, answer, sizeof(answer));
			if (strstr(answer, "\"busy\"") != NULL)
				busy++;
			entries[i].fd = -1;
		}
	}
	printf("open %d busy %d\n", open_count, busy);
	fflush(stdout);
	char rest[16];
	while (read(0, rest, sizeof(rest)) > 0) {
	}
	return 0;
}

static int constraint_hold(uint64_t start_ns, uint64_t estimate_ms, uint64_t window_ms)
{
	int fd = connect_daemon();
	if (fd < 0) {
		perror("hostile_client: connect");
		return 3;
	}
	long tid = syscall(SYS_gettid);
	uint64_t now = monotonic_ns();
	uint64_t deadline = now + window_ms * 1000000u;
	char request[512], answer[65536];
	snprintf(request, sizeof(request),
		 "{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"begin_constraint\",\"params\":"
		 "{\"tid\":%ld,\"start_ns\":%llu,\"estimate_ns\":%llu,\"deadline_ns\":%llu}}\n",
		 tid, (unsigned long long)(start_ns == 0 ? now : start_ns),
		 (unsigned long long)(estimate_ms * 1000000u), (unsigned long long)deadline);
	send_line(fd, request);
	read_line(fd, answer, sizeof(answer));
	printf("%s\ntid %ld\ndeadline %llu\n", answer, tid, (unsigned long long)deadline);
	fflush(stdout);
	char rest[16];
	while (read(0, rest, sizeof(rest)) > 0) {
	}
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && strcmp(argv[1], "constraints") == 0)
		return constraints(atoi(argv[2]), strtoull(argv[3], NULL, 10),
				   strtoull(argv[4], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "requests") == 0)
		return requests(atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "list") == 0)
		return list();
	if (argc == 3 && strcmp(argv[1], "connect-then-exit") == 0)
		return connect_then_exit(argv[2]);
	if (argc == 3 && strcmp(argv[1], "hold") == 0)
		return hold(atoi(argv[2]));
	if (argc == 5 && strcmp(argv[1], "constraint-hold") == 0)
		return constraint_hold(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
				       strtoull(argv[4], NULL, 10));
	fprintf(stderr, "usage: hostile_client constraints N ESTIMATE_MS WINDOW_MS | requests N | "
			"list | connect-then-exit REQUEST | hold N | "
			"constraint-hold START_NS ESTIMATE_MS WINDOW_MS\n");
	return 2;
}
