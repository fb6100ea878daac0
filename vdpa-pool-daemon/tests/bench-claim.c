// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-claim: claim and release round trips against a running
 * vdpa-pool-daemon (scripts/bench-daemon starts it), or attribute changes
 * (scripts/bench-flows).
 *
 *   bench-claim SOCKET POOL CALLS
 *   bench-claim SOCKET POOL CALLS attrs [COMMAND]
 *
 * Prints one line per call: "claim_us release_us"; with attrs, claims 8 VFs,
 * sets VLAN 100 on each, then makes CALLS changes round robin, each VF's
 * a new MAC and a new VLAN (100-199) in turn, and prints "mac|vlan us" per
 * change, then "last VF_INDEX MAC" per VF, then runs COMMAND (if given)
 * while it still holds the VFs.  Uses the daemon's own
 * codec (src/protocol.c), so what is timed is the socket round trip and the
 * daemon's work, not a client's encoding.
 */
#include "protocol.h"

#include <stdbool.h>
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

/*
 * Send msg; read the answer; close any fds; return the first HANDLE (and
 * VF_INDEX) in it.
 */
static int round_trip_vf(int fd, GBytes *msg, uint32_t *handle, uint32_t *vf_index)
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

			if (a->type == VPD_A_VF_INDEX && vf_index && !vpd_attr_u32(a, vf_index))
				return -1;
		}
		for (guint i = 0; i < inner->len; i++) {
			struct vpd_attr_view *a = &g_array_index(inner, struct vpd_attr_view, i);

			if (a->type == VPD_A_HANDLE)
				return vpd_attr_u32(a, handle) ? 0 : -1;
		}
		return -1;
	}
	return 0;
}

static int round_trip(int fd, GBytes *msg, uint32_t *handle)
{
	return round_trip_vf(fd, msg, handle, NULL);
}

/* SET_ATTRS of handle h: the MAC (mac != NULL) or the VLAN. */
static int set_attrs(int fd, uint32_t seq, uint32_t h, const uint8_t *mac, uint16_t vlan)
{
	struct vpd_builder b;
	g_autoptr(GBytes) msg = NULL;
	uint32_t got;

	vpd_builder_init(&b, VPD_MSG_SET_ATTRS, seq);
	vpd_put_u32(&b, VPD_A_HANDLE, h);
	if (mac)
		vpd_put_bytes(&b, VPD_A_MAC, mac, 6);
	else
		vpd_put_u16(&b, VPD_A_VLAN, vlan);
	msg = vpd_builder_finish(&b);
	return round_trip(fd, msg, &got) < 0 || got != h ? -1 : 0;
}

static int attrs(int fd, const char *pool, int calls, const char *then)
{
	uint32_t h[8], vf[8];
	uint8_t last[8][6];
	uint32_t seq = 1;

	for (int i = 0; i < 8; i++) {
		struct vpd_builder b;
		g_autoptr(GBytes) claim = NULL;

		vpd_builder_init(&b, VPD_MSG_CLAIM, seq++);
		vpd_put_str(&b, VPD_A_POOL, pool);
		vpd_put_str(&b, VPD_A_OWNER, "bench");
		vpd_put_u32(&b, VPD_A_COUNT, 1);
		claim = vpd_builder_finish(&b);
		if (round_trip_vf(fd, claim, &h[i], &vf[i]) < 0 ||
		    set_attrs(fd, seq++, h[i], NULL, 100) < 0) {
			fprintf(stderr, "bench-claim: claiming VF %d failed\n", i);
			return 1;
		}
	}
	for (int k = 0; k < calls; k++) {
		uint8_t mac[6] = { 2, 0, 0, 1, k >> 8, k };
		bool is_mac = (k / 8) % 2 == 0;  /* each VF: MAC, VLAN, MAC... */
		double t0 = now_us();

		if (set_attrs(fd, seq++, h[k % 8], is_mac ? mac : NULL, 100 + k % 100) < 0) {
			fprintf(stderr, "bench-claim: change %d failed\n", k);
			return 1;
		}
		printf("%s %.1f\n", is_mac ? "mac" : "vlan", now_us() - t0);
		if (is_mac)
			memcpy(last[k % 8], mac, 6);
	}
	for (int i = 0; i < 8 && i < calls; i++)  /* calls >= 8: each got a MAC */
		printf("last %u %02x:%02x:%02x:%02x:%02x:%02x\n", vf[i], last[i][0], last[i][1],
		       last[i][2], last[i][3], last[i][4], last[i][5]);
	fflush(stdout);
	if (then && system(then) != 0)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, calls;

	if (argc < 4 || argc > 6 || (argc >= 5 && strcmp(argv[4], "attrs"))) {
		fprintf(stderr, "usage: bench-claim SOCKET POOL CALLS [attrs [COMMAND]]\n");
		return 2;
	}
	calls = atoi(argv[3]);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror(argv[1]);
		return 1;
	}
	if (argc >= 5)
		return attrs(fd, argv[2], calls, argc == 6 ? argv[5] : NULL);
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
