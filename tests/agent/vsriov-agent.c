// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vsriov-agent: the test agent that runs inside every guest of the test
 * harness (Level 0, 1 and 2), and the client that reaches a Level 2 guest's
 * agent from inside Level 1.
 *
 *   vsriov-agent serve [--port-name NAME]
 *       Find the virtio-serial port NAME (default org.vsriov.agent), announce
 *       READY on it and run the commands the host sends, one at a time.  Meant
 *       to be PID 1 of a test guest, so it also reaps orphans.
 *
 *   vsriov-agent power-button
 *       Wait for the ACPI power button's input device and power the guest
 *       off (ACPI S5) when it is pressed: QEMU's system_powerdown, which is
 *       what `virsh shutdown` and `virsh reboot` send to a domain without a
 *       guest agent.  Started in the background by the test guests' /init;
 *       exits quietly if the guest has no such button.
 *
 *   vsriov-agent run --connect SOCKET [--wait SECONDS] [--pid PID]
 *                    [--timeout SECONDS] -- CMD
 *       Connect to a QEMU chardev socket behind which an agent serves (the
 *       Level 2 guest, seen from Level 1), wait up to --wait seconds for it to
 *       answer (and give up at once if process PID, its QEMU, exits), run CMD
 *       there, copy its output to ours and exit with its status.
 *
 * The wire format is in tests/agent/PROTOCOL.md; tests/harness/agent.py is
 * the host end.  Every frame starts with a magic so that a reader that
 * connects in the middle of a stream can find the next frame.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_MAGIC       0x47415356u /* "VSAG" little endian */
#define AGENT_MAX_PAYLOAD (16u << 20)
#define AGENT_MAX_OUTPUT  (7u << 20)

enum frame_type {
	FRAME_READY = 1,
	FRAME_PING = 2,
	FRAME_PONG = 3,
	FRAME_EXEC = 4,
	FRAME_RESULT = 5,
};

/* Status reported when a command ran past its timeout and was killed. */
#define STATUS_TIMEOUT (-1)
#define STATUS_EXEC_FAILED (-2)

struct frame_header {
	uint32_t magic;
	uint8_t type;
	uint8_t pad[3];
	uint32_t id;
	uint32_t len;
} __attribute__((packed));

struct buf {
	char *data;
	size_t len;
	size_t cap;
	bool truncated;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("vsriov-agent: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(125);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void buf_append(struct buf *b, const void *p, size_t n, size_t limit)
{
	if (b->len + n > limit) {
		n = limit > b->len ? limit - b->len : 0;
		b->truncated = true;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->data = realloc(b->data, cap);
		if (!b->data)
			die("out of memory");
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t r = write(fd, c, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = { .fd = fd, .events = POLLOUT };

				poll(&pfd, 1, 1000);
				continue;
			}
			return -1;
		}
		c += r;
		n -= r;
	}
	return 0;
}

/*
 * Read exactly n bytes.  deadline < 0 waits forever.  Returns 0, or -1 on
 * EOF, error or deadline.
 */
static int read_all(int fd, void *p, size_t n, double deadline)
{
	char *c = p;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms = -1;
		ssize_t r;

		if (deadline >= 0) {
			double left = deadline - now_s();

			if (left <= 0)
				return -1;
			ms = (int)(left * 1000) + 1;
		}
		r = poll(&pfd, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		r = read(fd, c, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= r;
	}
	return 0;
}

static int send_frame(int fd, uint8_t type, uint32_t id, const struct buf *parts,
		      int nparts)
{
	struct frame_header h = { .magic = AGENT_MAGIC, .type = type, .id = id };
	size_t len = 0;
	int i;

	for (i = 0; i < nparts; i++)
		len += parts[i].len;
	h.len = len;
	if (write_all(fd, &h, sizeof(h)) < 0)
		return -1;
	for (i = 0; i < nparts; i++)
		if (parts[i].len && write_all(fd, parts[i].data, parts[i].len) < 0)
			return -1;
	return 0;
}

/*
 * Read the next frame, skipping bytes until a magic is found.  The payload
 * is returned in *payload (malloc'd, NUL-terminated).  Returns 0 or -1.
 */
static int recv_frame(int fd, struct frame_header *h, char **payload, double deadline)
{
	uint32_t window = 0;
	uint8_t byte;

	for (;;) {
		if (read_all(fd, &byte, 1, deadline) < 0)
			return -1;
		window = (window >> 8) | ((uint32_t)byte << 24);
		if (window == AGENT_MAGIC)
			break;
	}
	h->magic = window;
	/* A frame that has started is given time to arrive whole. */
	if (deadline >= 0 && deadline < now_s() + 30)
		deadline = now_s() + 30;
	if (read_all(fd, (char *)h + 4, sizeof(*h) - 4, deadline) < 0)
		return -1;
	if (h->len > AGENT_MAX_PAYLOAD)
		return recv_frame(fd, h, payload, deadline); /* garbage: resync */
	*payload = malloc(h->len + 1);
	if (!*payload)
		die("out of memory");
	if (read_all(fd, *payload, h->len, deadline) < 0) {
		free(*payload);
		return -1;
	}
	(*payload)[h->len] = 0;
	return 0;
}

static void reap_orphans(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void drain(int fd, struct buf *b)
{
	char chunk[65536];
	ssize_t r;

	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(b, chunk, r, AGENT_MAX_OUTPUT);
}

/*
 * Run cmd under /bin/sh in a new session, collect stdout and stderr until the
 * shell exits (not until every background child closes its copies of the
 * pipes), kill the whole session on timeout.
 */
static int32_t run_command(const char *cmd, uint32_t timeout_ms, struct buf *out,
			   struct buf *err)
{
	int po[2], pe[2], status = 0, st;
	double deadline = now_s() + timeout_ms / 1000.0;
	pid_t pid;
	bool exited = false;

	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return STATUS_EXEC_FAILED;
	pid = fork();
	if (pid < 0)
		return STATUS_EXEC_FAILED;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		setsid();
		dup2(devnull, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	fcntl(po[0], F_SETFL, O_NONBLOCK);
	fcntl(pe[0], F_SETFL, O_NONBLOCK);

	while (!exited) {
		struct pollfd pfd[2] = {
			{ .fd = po[0], .events = POLLIN },
			{ .fd = pe[0], .events = POLLIN },
		};
		double left = deadline - now_s();
		pid_t r;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			drain(po[0], out);
			drain(pe[0], err);
			close(po[0]);
			close(pe[0]);
			return STATUS_TIMEOUT;
		}
		/* Short polls: the child's exit is noticed by waitpid below. */
		poll(pfd, 2, left > 0.05 ? 50 : (int)(left * 1000) + 1);
		drain(po[0], out);
		drain(pe[0], err);
		/*
		 * As PID 1 we also reap the orphans the command leaves, while it
		 * runs: a daemon's double-forked child (libvirtd's QEMU) is ours
		 * once it exits, and its parent daemon waits for it to be gone.
		 */
		while ((r = waitpid(-1, &st, WNOHANG)) > 0) {
			if (r == pid) {
				status = st;
				exited = true;
			}
		}
	}
	drain(po[0], out);
	drain(pe[0], err);
	close(po[0]);
	close(pe[0]);
	reap_orphans();
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* The first line of the file at @path, without its newline; false if none. */
static bool read_line(const char *path, char *line, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, len, f) != NULL;
	fclose(f);
	if (ok)
		line[strcspn(line, "\n")] = 0;
	return ok;
}

static int find_port(const char *name, char *path, size_t pathlen)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *e;
	int found = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char p[512], n[256];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name", e->d_name);
		if (read_line(p, n, sizeof(n)) && !strcmp(n, name)) {
			snprintf(path, pathlen, "/dev/%s", e->d_name);
			found = 0;
			break;
		}
	}
	closedir(d);
	return found;
}

static _Noreturn void serve(const char *port_name)
{
	char path[300];
	double deadline = now_s() + 60;
	int fd = -1;
	struct buf ready = { 0 };
	char hello[256], host[64] = "?", up[64];

	/* The port appears once virtio_console has probed: poll, bounded. */
	while (fd < 0) {
		if (find_port(port_name, path, sizeof(path)) == 0)
			fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			break;
		if (now_s() > deadline)
			die("virtio-serial port %s not found within 60 s", port_name);
		usleep(20000);
	}
	signal(SIGPIPE, SIG_IGN);
	gethostname(host, sizeof(host) - 1);
	if (!read_line("/proc/uptime", up, sizeof(up)))
		up[0] = 0;
	up[strcspn(up, " ")] = 0;
	snprintf(hello, sizeof(hello), "host=%s uptime=%s", host, up);
	ready.data = hello;
	ready.len = strlen(hello);
	send_frame(fd, FRAME_READY, 0, &ready, 1);

	for (;;) {
		struct frame_header h;
		char *payload = NULL;

		double t0 = now_s();

		reap_orphans();
		/*
		 * Wait for the next frame without a deadline.  With one (it was
		 * 1 s, to reap orphans while idle), a command that arrived as
		 * the wait timed out was, now and then, never seen: the guest
		 * idled on with the command unread and the host got no answer
		 * (CI of 86db72f; a command sent 1.0 s after the previous
		 * answer hung 3 times in 4, one sent 0.5 s or 2.5 s after
		 * never, and none with no deadline).  Orphans are reaped before
		 * each command instead.
		 */
		if (recv_frame(fd, &h, &payload, -1) < 0) {
			/*
			 * No host connected: virtio-serial then reports EOF at
			 * once, so do not spin.
			 */
			if (now_s() - t0 < 0.1)
				usleep(100000);
			continue;
		}
		if (h.type == FRAME_PING) {
			struct buf echo = { .data = payload, .len = h.len };

			send_frame(fd, FRAME_PONG, h.id, &echo, 1);
		} else if (h.type == FRAME_EXEC && h.len >= 4) {
			uint32_t timeout_ms;
			struct buf out = { 0 }, err = { 0 }, parts[4];
			uint32_t lens[2];
			int32_t status;

			memcpy(&timeout_ms, payload, 4);
			status = run_command(payload + 4, timeout_ms, &out, &err);
			if (out.truncated)
				buf_append(&err, "\n[vsriov-agent: stdout truncated]\n", 34,
					   AGENT_MAX_OUTPUT + 64);
			lens[0] = out.len;
			lens[1] = err.len;
			parts[0] = (struct buf){ .data = (char *)&status, .len = 4 };
			parts[1] = (struct buf){ .data = (char *)lens, .len = 8 };
			parts[2] = out;
			parts[3] = err;
			send_frame(fd, FRAME_RESULT, h.id, parts, 4);
			free(out.data);
			free(err.data);
		}
		free(payload);
	}
}

/* The /dev/input/eventN of the input device called @name, or -1. */
static int open_input(const char *name)
{
	DIR *d = opendir("/sys/class/input");
	struct dirent *e;
	int fd = -1;

	if (!d)
		return -1;
	while (fd < 0 && (e = readdir(d))) {
		char p[512], n[256];

		if (strncmp(e->d_name, "event", 5))
			continue;
		snprintf(p, sizeof(p), "/sys/class/input/%s/device/name", e->d_name);
		if (read_line(p, n, sizeof(n)) && !strcmp(n, name)) {
			snprintf(p, sizeof(p), "/dev/input/%s", e->d_name);
			fd = open(p, O_RDONLY | O_CLOEXEC);
		}
	}
	closedir(d);
	return fd;
}

static int power_button(void)
{
	double deadline = now_s() + 30;
	struct input_event ev;
	int fd;

	/* The button's driver is loaded by /init before we start: poll, bounded. */
	while ((fd = open_input("Power Button")) < 0) {
		if (now_s() > deadline)
			return 0;
		usleep(100000);
	}
	while (read(fd, &ev, sizeof(ev)) == (ssize_t)sizeof(ev)) {
		if (ev.type == EV_KEY && ev.code == KEY_POWER && ev.value == 1) {
			fputs("vsriov-agent: power button pressed, powering off\n", stderr);
			sync();
			reboot(RB_POWER_OFF);
			die("reboot(RB_POWER_OFF): %s", strerror(errno));
		}
	}
	die("reading the power button: %s", strerror(errno));
	return 1;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Connect and get a PONG for a fresh nonce, retrying until the deadline, or
 * until process qemu_pid (when not 0) has gone.
 */
static int client_connect(const char *path, double deadline, uint32_t *next_id,
			  pid_t qemu_pid)
{
	for (;;) {
		if (qemu_pid && kill(qemu_pid, 0) < 0 && errno == ESRCH)
			die("QEMU (pid %d) exited before its guest's agent answered on %s",
			    (int)qemu_pid, path);
		int fd = connect_unix(path);

		if (fd >= 0) {
			uint32_t id = (*next_id)++;
			struct buf nonce = { .data = "ping", .len = 4 };
			/* A busy nested guest may take seconds to answer. */
			double ping_deadline = now_s() + 10;

			if (send_frame(fd, FRAME_PING, id, &nonce, 1) == 0) {
				struct frame_header h;
				char *p;

				while (recv_frame(fd, &h, &p, ping_deadline) == 0) {
					free(p);
					if (h.type == FRAME_PONG && h.id == id)
						return fd;
				}
			}
			close(fd);
		}
		if (now_s() >= deadline)
			return -1;
		usleep(200000);
	}
}

static int client_run(const char *path, double wait_s, pid_t qemu_pid, double timeout_s,
		      const char *cmd)
{
	uint32_t next_id = (uint32_t)getpid() << 8;
	int fd = client_connect(path, now_s() + wait_s, &next_id, qemu_pid);
	uint32_t id = next_id++, timeout_ms = (uint32_t)(timeout_s * 1000);
	struct buf parts[2] = {
		{ .data = (char *)&timeout_ms, .len = 4 },
		{ .data = (char *)cmd, .len = strlen(cmd) },
	};
	struct frame_header h;
	char *p;

	if (fd < 0)
		die("no agent answered on %s within %.0f s", path, wait_s);
	if (send_frame(fd, FRAME_EXEC, id, parts, 2) < 0)
		die("lost the connection to %s", path);
	while (recv_frame(fd, &h, &p, now_s() + timeout_s + 30) == 0) {
		if (h.type == FRAME_RESULT && h.id == id && h.len >= 12) {
			int32_t status;
			uint32_t lens[2];

			memcpy(&status, p, 4);
			memcpy(lens, p + 4, 8);
			if (12ull + lens[0] + lens[1] > h.len)
				die("malformed result frame");
			write_all(1, p + 12, lens[0]);
			write_all(2, p + 12 + lens[0], lens[1]);
			free(p);
			if (status == STATUS_TIMEOUT) {
				fprintf(stderr, "vsriov-agent: command timed out after %.0f s\n", timeout_s);
				return 124;
			}
			return status < 0 ? 125 : status;
		}
		free(p);
	}
	die("no result from %s", path);
	return 125;
}

static void usage(void)
{
	fputs("usage: vsriov-agent serve [--port-name NAME]\n"
	      "       vsriov-agent power-button\n"
	      "       vsriov-agent run --connect SOCKET [--wait S] [--pid PID] [--timeout S] -- CMD\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *port = "org.vsriov.agent", *sock = NULL;
	double wait_s = 0, timeout_s = 600;
	pid_t qemu_pid = 0;
	int i;

	if (argc < 2)
		usage();
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--") && i + 1 < argc) {
			i++;
			break;
		} else if (!strcmp(argv[i], "--port-name") && i + 1 < argc) {
			port = argv[++i];
		} else if (!strcmp(argv[i], "--connect") && i + 1 < argc) {
			sock = argv[++i];
		} else if (!strcmp(argv[i], "--wait") && i + 1 < argc) {
			wait_s = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			qemu_pid = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout_s = atof(argv[++i]);
		} else {
			usage();
		}
	}
	if (!strcmp(argv[1], "serve"))
		serve(port);
	if (!strcmp(argv[1], "power-button"))
		return power_button();
	if (!strcmp(argv[1], "run") && sock && i < argc) {
		/* The command is the rest of the arguments, joined by spaces. */
		struct buf cmd = { 0 };

		for (; i < argc; i++) {
			buf_append(&cmd, argv[i], strlen(argv[i]), AGENT_MAX_PAYLOAD);
			if (i + 1 < argc)
				buf_append(&cmd, " ", 1, AGENT_MAX_PAYLOAD);
		}
		buf_append(&cmd, "", 1, AGENT_MAX_PAYLOAD);
		return client_run(sock, wait_s, qemu_pid, timeout_s, cmd.data);
	}
	usage();
	return 2;
}
