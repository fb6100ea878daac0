// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reps: VF representors found by their switch ID and port name in sysfs,
 * and set up (see reps.h).
 */
#include "reps.h"
#include "conn.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static char *sysfs_line(const char *dir, const char *name)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return NULL;
	return g_strchomp(text);
}

/* The switch ID of pf (its netdev, or the first netdev of pci/ADDR). */
static char *pf_switch_id(const struct vpd_pf *pf, GError **error)
{
	g_autofree char *dir = NULL;
	char *id;

	if (g_str_has_prefix(pf->name, "pci/")) {
		g_autofree char *nets = g_strdup_printf("/sys/bus/pci/devices/%s/net", pf->name + 4);
		g_autoptr(GDir) d = g_dir_open(nets, 0, NULL);
		const char *n = d ? g_dir_read_name(d) : NULL;

		if (!n) {
			vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
				     "PF %s has no netdev (its driver is not bound?)", pf->name);
			return NULL;
		}
		dir = g_build_filename(nets, n, NULL);
	} else {
		dir = g_strdup_printf("/sys/class/net/%s", pf->name);
	}
	id = sysfs_line(dir, "phys_switch_id");
	if (!id || !*id) {
		g_free(id);
		vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
			     "PF %s has no switch ID: is its eswitch in switchdev mode?", pf->name);
		return NULL;
	}
	return id;
}

/*
 * Fill rep (by VF index) with the representors of switch switch_id.  (PFs
 * that share one switch, as with a multiport eswitch, are not told apart:
 * their representors' pfM is not reliably the PF's own port name.)
 */
static void scan_reps(const char *switch_id, GPtrArray *rep)
{
	g_autoptr(GDir) d = g_dir_open("/sys/class/net", 0, NULL);
	const char *n;

	while (d && (n = g_dir_read_name(d))) {
		g_autofree char *dir = g_build_filename("/sys/class/net", n, NULL);
		g_autofree char *id = sysfs_line(dir, "phys_switch_id");
		g_autofree char *port = NULL;
		unsigned pfn, vf;
		char tail;

		if (!id || strcmp(id, switch_id))
			continue;
		port = sysfs_line(dir, "phys_port_name");
		if (!port || sscanf(port, "pf%uvf%u%c", &pfn, &vf, &tail) != 2 || vf >= rep->len)
			continue;
		g_free(rep->pdata[vf]);
		rep->pdata[vf] = g_strdup(n);
	}
}

static bool set_up(const char *ifname, GError **error)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;

	g_strlcpy(ifr.ifr_name, ifname, sizeof(ifr.ifr_name));
	ok = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
	if (ok && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	}
	if (!ok) {
		int e = errno;

		vpd_ovs_fail(error, g_io_error_from_errno(e),
			     "representor %s: cannot set it up: %s", ifname, g_strerror(e));
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

bool vpd_find_reps(struct vpd_pools *pools, const struct vpd_pf *pf, GError **error)
{
	g_autofree char *sw = NULL;
	g_autoptr(GPtrArray) rep = g_ptr_array_new_with_free_func(g_free);
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	unsigned missing;

	if (pf->vduse) {
		/* The OVS port is the VF's own switch port, named as its device. */
		for (unsigned i = 0; i < pools->entries->len; i++) {
			struct vpd_entry *e = pools->entries->pdata[i];

			if (e->pool->pf == pf) {
				g_free(e->rep);
				e->rep = vpd_vdpa_dev_name(pf, e->vf);
			}
		}
		return true;
	}
	sw = pf_switch_id(pf, error);
	if (!sw)
		return false;
	g_ptr_array_set_size(rep, pf->num_vfs);
	/* The driver creates representors as the VFs come; wait for them. */
	for (;;) {
		scan_reps(sw, rep);
		missing = G_MAXUINT;
		for (unsigned i = 0; i < pools->entries->len && missing == G_MAXUINT; i++) {
			struct vpd_entry *e = pools->entries->pdata[i];

			if (e->pool->pf == pf && !rep->pdata[e->vf])
				missing = e->vf;
		}
		if (missing == G_MAXUINT)
			break;
		if (g_get_monotonic_time() > deadline)
			return vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
					    "PF %s: VF %u has no representor (no netdev with "
					    "switch ID %s and port name pfNvf%u)", pf->name,
					    missing, sw, missing);
		g_usleep(10000);
	}
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->pool->pf != pf)
			continue;
		g_free(e->rep);
		e->rep = g_strdup(rep->pdata[e->vf]);
		if (!set_up(e->rep, error))
			return false;
	}
	return true;
}
