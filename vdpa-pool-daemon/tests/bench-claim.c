// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-claim: claim and release round trips against a running
 * vdpa-pool-daemon (scripts/bench-daemon starts it).
 *
 *   bench-claim SOCKET POOL CALLS
 *
 * Prints one line per call: "claim_us release_us".  Uses the daemon's own
 * codec (src/protocol.c), so what is timed is the socket round trip and the
 * daemon's work, not a client's encoding.
 */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Send msg; read the answer; close any fds; return the first HANDLE in it. */
static int round_trip(int fd, GBytes *msg, uint32_t *handle)
{
	gsize len;
	const uint8_t *data = g_bytes_get_data(msg, &len);
	uint8_t buf[65536 + 16];
	union {
		char c[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	gsize got = 0;
	gssize total = -1;
	g_autoptr(GError) err = NULL;

	if (send(fd, data, len, 0) != (ssize_t)len)
		return -1;
	while (total < 0 || got < (gsize)total) {
		struct iovec iov = { .iov_base = buf + got, .iov_len = sizeof(buf) - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.c,
				     .msg_controllen = sizeof(u.c) };
		ssize_t n = recvmsg(fd, &mh, 0);

		if (n <= 0)
			return -1;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (int i = 0; i < k; i++) {
				int f;

				memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				close(f);
			}
		}
		got += n;
		if (total < 0 && got >= VPD_HEADER_SIZE &&
		    (total = vpd_msg_total_len(buf, got, &err)) < 0)
			return -1;
	}
	if (handle) {
		g_autoptr(GBytes) b = g_bytes_new(buf, got);
		g_autoptr(vpd_msg) m = vpd_msg_parse(b, &err);
		const struct vpd_attr_view *vf;
		g_autoptr(GArray) inner = NULL;

		if (!m || m->type != VPD_MSG_REPLY || !(vf = vpd_msg_get(m, VPD_A_VF)))
			return -1;
		inner = vpd_attr_nested(vf);
		for (guint i = 0; i < inner->len; i++) {
			struct vpd_attr_view *a = &g_array_index(inner, struct vpd_attr_view, i);

			if (a->type == VPD_A_HANDLE)
				return vpd_attr_u32(a, handle) ? 0 : -1;
		}
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, calls;

	if (argc != 4) {
		fprintf(stderr, "usage: bench-claim SOCKET POOL CALLS\n");
		return 2;
	}
	calls = atoi(argv[3]);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror(argv[1]);
		return 1;
	}
	for (int i = 0; i < calls; i++) {
		struct vpd_builder b;
		g_autoptr(GBytes) claim = NULL;
		g_autoptr(GBytes) release = NULL;
		uint32_t handle;
		double t0, t1, t2;

		vpd_builder_init(&b, VPD_MSG_CLAIM, 2 * i + 1);
		vpd_put_str(&b, VPD_A_POOL, argv[2]);
		vpd_put_str(&b, VPD_A_OWNER, "bench");
		vpd_put_u32(&b, VPD_A_COUNT, 1);
		claim = vpd_builder_finish(&b);
		t0 = now_us();
		if (round_trip(fd, claim, &handle) < 0) {
			fprintf(stderr, "bench-claim: claim %d failed\n", i);
			return 1;
		}
		t1 = now_us();
		vpd_builder_init(&b, VPD_MSG_RELEASE, 2 * i + 2);
		vpd_put_u32(&b, VPD_A_HANDLE, handle);
		release = vpd_builder_finish(&b);
		if (round_trip(fd, release, NULL) < 0) {
			fprintf(stderr, "bench-claim: release %d failed\n", i);
			return 1;
		}
		t2 = now_us();
		printf("%.1f %.1f\n", t1 - t0, t2 - t1);
	}
	close(fd);
	return 0;
}
