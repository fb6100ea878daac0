// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tap: representor ports' tap devices (see tap.h).
 */
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

char *vpd_rep_port_name(const char *vf_port)
{
	uint32_t h = 2166136261u;

	if (strlen(vf_port) <= IFNAMSIZ - 1 - 2)
		return g_strdup_printf("vr%s", vf_port);
	for (const char *p = vf_port; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return g_strdup_printf("vr%.5s%08x", vf_port, h);
}

static int fail(GError **error, int errnum, const char *fmt, const char *name)
{
	g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errnum), fmt, name,
		    g_strerror(errnum));
	return -1;
}

/*
 * The host says nothing on a representor port (no IPv6 link-local
 * address, router or neighbour solicitations to the client).  Best effort:
 * a sandbox may keep /proc/sys read-only.
 */
static void no_ipv6(const char *name)
{
	g_autofree char *path = g_strdup_printf("/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "1", 1) != 1)
		g_debug("%s: %s", path, g_strerror(errno));
	close(fd);
}

int vpd_tap_open(const char *name, int *ifindex, GError **error)
{
	struct ifreq ifr = { 0 };
	int fd, sock, errnum;

	if (strlen(name) >= IFNAMSIZ)
		return fail(error, ENAMETOOLONG, "tap %s: %s", name);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail(error, errno, "tap %s: cannot open /dev/net/tun: %s", name);
	/* a name the kernel picks: a new device, never one that exists */
	snprintf(ifr.ifr_name, IFNAMSIZ, "vpdtap%%d");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	/* (any socket takes the interface ioctls; the unit allows AF_UNIX) */
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
		errnum = errno;
		goto err;
	}
	strncpy(ifr.ifr_newname, name, IFNAMSIZ - 1);
	if (ioctl(sock, SIOCSIFNAME, &ifr) < 0) {
		errnum = errno;
		goto err;
	}
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(sock, SIOCGIFINDEX, &ifr) < 0) {
		errnum = errno;
		goto err;
	}
	*ifindex = ifr.ifr_ifindex;
	no_ipv6(name);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0) {
		errnum = errno;
		goto err;
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0) {
		errnum = errno;
		goto err;
	}
	close(sock);
	return fd;
err:
	if (sock >= 0)
		close(sock);
	close(fd);      /* (not persistent: the device goes with it) */
	if (errnum == EEXIST)
		return fail(error, errnum, "tap %s: a netdev of that name exists (%s)", name);
	return fail(error, errnum, "tap %s: %s", name);
}

bool vpd_tap_remove(const char *name, int ifindex, GError **error)
{
	char now[IFNAMSIZ];
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {
		.nh = {
			.nlmsg_len = sizeof(req), .nlmsg_type = RTM_DELLINK,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1,
		},
		.ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex },
	};
	union {
		char buf[512];
		struct nlmsghdr nh;
	} ans;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	ssize_t n;
	int sock, errnum = 0;

	/* gone (its client closed it), or another device's index now */
	if (ifindex <= 0 || !if_indextoname(ifindex, now) || strcmp(now, name))
		return true;
	sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (sock < 0 || sendto(sock, &req, sizeof(req), 0, (struct sockaddr *)&kernel,
			       sizeof(kernel)) < 0) {
		errnum = errno;
	} else {
		n = recv(sock, &ans, sizeof(ans), 0);
		if (n < 0)
			errnum = errno;
		else if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) &&
			 ans.nh.nlmsg_type == NLMSG_ERROR)
			errnum = -((struct nlmsgerr *)NLMSG_DATA(&ans.nh))->error;
	}
	if (sock >= 0)
		close(sock);
	if (errnum && errnum != ENODEV) {
		fail(error, errnum, "tap %s: cannot remove it: %s", name);
		return false;
	}
	return true;
}

bool vpd_tap_held_by(const char *name, pid_t pid, int *ifindex)
{
	g_autofree char *dir = g_strdup_printf("/proc/%d/fd", (int)pid);
	g_autofree char *want = g_strdup_printf("\niff:\t%s\n", name);
	g_autoptr(GDir) d = NULL;
	const char *fd;
	unsigned index = if_nametoindex(name);

	g_autofree char *tun = g_strdup_printf("/sys/class/net/%s/tun_flags", name);

	if (!index || pid <= 0 || !g_file_test(tun, G_FILE_TEST_EXISTS))
		return false;
	/*
	 * Without CAP_SYS_PTRACE (the systemd unit's daemon) another uid's
	 * fds cannot be looked at: the tap's existence says it then (it is
	 * not persistent, and only the VF's client had an fd of it).
	 */
	if (!(d = g_dir_open(dir, 0, NULL))) {
		*ifindex = index;
		return true;
	}
	while ((fd = g_dir_read_name(d))) {
		g_autofree char *link = g_strdup_printf("%s/%s", dir, fd);
		g_autofree char *target = g_file_read_link(link, NULL);
		g_autofree char *info_path = NULL;
		g_autofree char *info = NULL;

		if (g_strcmp0(target, "/dev/net/tun"))
			continue;
		info_path = g_strdup_printf("/proc/%d/fdinfo/%s", (int)pid, fd);
		if (g_file_get_contents(info_path, &info, NULL, NULL) && strstr(info, want)) {
			*ifindex = index;
			return true;
		}
	}
	return false;
}
