// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reps: VF representors found in a devlink port dump of the PF's devlink
 * instance, and set up (see reps.h).
 */
#include "reps.h"
#include "conn.h"

#include <errno.h>
#include <limits.h>
#include <linux/devlink.h>
#include <net/if.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * The devlink instance of pf (bus and device name, as "devlink dev"
 * shows it): its PCI function's, or its netdev's parent device's.
 */
static bool pf_devlink(const struct vpd_pf *pf, char **bus, char **dev, GError **error)
{
	g_autofree char *link = g_str_has_prefix(pf->name, "pci/")
		? g_strdup_printf("/sys/bus/pci/devices/%s", pf->name + 4)
		: g_strdup_printf("/sys/class/net/%s/device", pf->name);
	g_autofree char *dir = realpath(link, NULL);
	g_autofree char *subsys_link = dir ? g_strdup_printf("%s/subsystem", dir) : NULL;
	g_autofree char *subsys = subsys_link ? realpath(subsys_link, NULL) : NULL;

	if (!subsys)
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
				    "PF %s: no device found at %s", pf->name, link);
	*bus = g_path_get_basename(subsys);
	*dev = g_path_get_basename(dir);
	return true;
}

struct port_dump {
	const char *bus, *dev;
	GPtrArray *rep;         /* by VF number: representor netdev */
	GArray *ifindex;        /* by VF number: its ifindex, 0 if not told */
	unsigned ports;         /* of the instance, of any flavour */
};

bool vpd_devlink_vf_port(struct nlattr **tb, const char *bus, const char *dev,
			 unsigned *vf, const char **netdev)
{
	if (!tb[DEVLINK_ATTR_BUS_NAME] || !tb[DEVLINK_ATTR_DEV_NAME] ||
	    strcmp(nla_get_string(tb[DEVLINK_ATTR_BUS_NAME]), bus) ||
	    strcmp(nla_get_string(tb[DEVLINK_ATTR_DEV_NAME]), dev))
		return false;
	/* A VF of this host's PF: not another host's (external) nor an SF. */
	if (!tb[DEVLINK_ATTR_PORT_FLAVOUR] ||
	    nla_get_u16(tb[DEVLINK_ATTR_PORT_FLAVOUR]) != DEVLINK_PORT_FLAVOUR_PCI_VF ||
	    (tb[DEVLINK_ATTR_PORT_EXTERNAL] && nla_get_u8(tb[DEVLINK_ATTR_PORT_EXTERNAL])) ||
	    !tb[DEVLINK_ATTR_PORT_PCI_VF_NUMBER] || !tb[DEVLINK_ATTR_PORT_NETDEV_NAME])
		return false;
	*vf = nla_get_u16(tb[DEVLINK_ATTR_PORT_PCI_VF_NUMBER]);
	*netdev = nla_get_string(tb[DEVLINK_ATTR_PORT_NETDEV_NAME]);
	return true;
}

/* One port of a dump: a VF's port of the PF's instance gives its netdev. */
static int port_cb(struct nl_msg *msg, void *arg)
{
	struct port_dump *d = arg;
	struct nlattr *tb[DEVLINK_ATTR_MAX + 1];
	const char *netdev;
	unsigned vf;

	if (vpd_devlink_port_parse(msg, tb) < 0)
		return NL_SKIP;
	if (tb[DEVLINK_ATTR_BUS_NAME] && tb[DEVLINK_ATTR_DEV_NAME] &&
	    !strcmp(nla_get_string(tb[DEVLINK_ATTR_BUS_NAME]), d->bus) &&
	    !strcmp(nla_get_string(tb[DEVLINK_ATTR_DEV_NAME]), d->dev))
		d->ports++;
	if (vpd_devlink_vf_port(tb, d->bus, d->dev, &vf, &netdev) && vf < d->rep->len) {
		g_free(d->rep->pdata[vf]);
		d->rep->pdata[vf] = g_strdup(netdev);
		g_array_index(d->ifindex, int, vf) = tb[DEVLINK_ATTR_PORT_NETDEV_IFINDEX]
			? (int)nla_get_u32(tb[DEVLINK_ATTR_PORT_NETDEV_IFINDEX]) : 0;
	}
	return NL_OK;
}

int vpd_devlink_port_parse(struct nl_msg *msg, struct nlattr **tb)
{
	static struct nla_policy policy[DEVLINK_ATTR_MAX + 1] = {
		[DEVLINK_ATTR_BUS_NAME] = { .type = NLA_NUL_STRING },
		[DEVLINK_ATTR_DEV_NAME] = { .type = NLA_NUL_STRING },
		[DEVLINK_ATTR_PORT_FLAVOUR] = { .type = NLA_U16 },
		[DEVLINK_ATTR_PORT_PCI_VF_NUMBER] = { .type = NLA_U16 },
		[DEVLINK_ATTR_PORT_EXTERNAL] = { .type = NLA_U8 },
		[DEVLINK_ATTR_PORT_NETDEV_NAME] = { .type = NLA_NUL_STRING },
		[DEVLINK_ATTR_PORT_NETDEV_IFINDEX] = { .type = NLA_U32 },
	};

	return genlmsg_parse(nlmsg_hdr(msg), 0, tb, DEVLINK_ATTR_MAX, policy);
}

struct nl_msg *vpd_msg_port_dump(int family)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (msg && !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0,
				NLM_F_REQUEST | NLM_F_DUMP, DEVLINK_CMD_PORT_GET,
				DEVLINK_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* Fill rep (by VF number) from a devlink port dump of pf's instance. */
static bool dump_reps(const struct vpd_pf *pf, const char *bus, const char *dev,
		      GPtrArray *rep, GArray *ifindex, GError **error)
{
	struct port_dump d = { .bus = bus, .dev = dev, .rep = rep, .ifindex = ifindex };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = NULL;
	int family, err = -NLE_NOMEM;

	if (sk && (err = genl_connect(sk)) >= 0 &&
	    (err = family = genl_ctrl_resolve(sk, DEVLINK_GENL_NAME)) >= 0) {
		msg = vpd_msg_port_dump(family);
		err = msg ? nl_send_auto(sk, msg) : -NLE_NOMEM;
	}
	if (err >= 0) {
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, port_cb, &d);
		err = nl_recvmsgs_default(sk);
	}
	nlmsg_free(msg);
	if (sk)
		nl_socket_free(sk);
	if (err < 0)
		return vpd_ovs_fail(error, G_IO_ERROR_FAILED, "PF %s: devlink port dump: %s",
				    pf->name, nl_geterror(err));
	if (!d.ports)
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
				    "PF %s: devlink instance %s/%s has no ports: is its eswitch "
				    "in switchdev mode?", pf->name, bus, dev);
	return true;
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

/*
 * Whether udev has done with netdev ifindex: its database entry is written
 * (udev writes it for every netdev once it has handled its "add" event,
 * the rename included: what sd_device_get_is_initialized() and so
 * systemd-networkd wait for) and no rename is in flight (systemd 255 and
 * later write ID_RENAMING=1 there before renaming, until the "move" event
 * is handled).  Never blocks.
 */
static bool udev_done(int ifindex)
{
	g_autofree char *path = g_strdup_printf("/run/udev/data/n%d", ifindex);
	g_autofree char *db = NULL;

	if (!g_file_get_contents(path, &db, NULL, NULL))
		return false;
	return !g_str_has_prefix(db, "E:ID_RENAMING=1\n") && !strstr(db, "\nE:ID_RENAMING=1\n");
}

/*
 * The current name of VF vf's representor, ifindex (dumped as name): on a
 * host where udev runs (/run/udev/control, as libudev tells), once udev
 * has done with it.  udev renames a new netdev (eth0 to eni5npf0vf0, by
 * its physical port name) a moment after the driver made it, so the name
 * in the dump that found it may be gone by the time OVS opens the port
 * ("got OpenFlow port -1").  Polls until deadline (monotonic time, us);
 * NULL and error then.
 */
static char *settled_name(const struct vpd_pf *pf, unsigned vf, const char *name, int ifindex,
			  gint64 deadline, GError **error)
{
	char now[IF_NAMESIZE];

	if (!ifindex)
		return g_strdup(name);  /* (a kernel that does not tell: its dump's name) */
	if (access("/run/udev/control", F_OK) == 0) {
		while (!udev_done(ifindex)) {
			if (g_get_monotonic_time() > deadline) {
				vpd_ovs_fail(error, G_IO_ERROR_TIMED_OUT,
					     "PF %s: VF %u's representor %s (ifindex %d): udev "
					     "has not handled it within %d s (no /run/udev/data/n%d "
					     "yet, or a rename in flight): is systemd-udevd stuck?",
					     pf->name, vf, name, ifindex, VPD_UDEV_TIMEOUT_MS / 1000,
					     ifindex);
				return NULL;
			}
			g_usleep(10000);
		}
	}
	if (!if_indextoname(ifindex, now)) {
		int e = errno;

		vpd_ovs_fail(error, g_io_error_from_errno(e), "PF %s: VF %u's representor %s "
			     "(ifindex %d) is gone: %s", pf->name, vf, name, ifindex, g_strerror(e));
		return NULL;
	}
	if (strcmp(now, name))
		g_message("PF %s: VF %u's representor %s is now %s (udev)", pf->name, vf, name,
			  now);
	return g_strdup(now);
}

bool vpd_find_reps(struct vpd_pools *pools, const struct vpd_pf *pf, GError **error)
{
	g_autofree char *bus = NULL;
	g_autofree char *dev = NULL;
	g_autoptr(GPtrArray) rep = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GArray) ifindex = g_array_new(FALSE, TRUE, sizeof(int));
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
	if (!pf_devlink(pf, &bus, &dev, error))
		return false;
	g_ptr_array_set_size(rep, pf->num_vfs);
	g_array_set_size(ifindex, pf->num_vfs);
	/* The driver makes representors as the VFs come: wait for them. */
	for (;;) {
		if (!dump_reps(pf, bus, dev, rep, ifindex, error))
			return false;
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
					    "PF %s: VF %u has no representor (devlink instance "
					    "%s/%s has no port of flavour pcivf with VF number %u "
					    "and a netdev)", pf->name, missing, bus, dev, missing);
		g_usleep(10000);
	}
	deadline = g_get_monotonic_time() + VPD_UDEV_TIMEOUT_MS * 1000ll;
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];
		char *name;

		if (e->pool->pf != pf)
			continue;
		name = settled_name(pf, e->vf, rep->pdata[e->vf],
				    g_array_index(ifindex, int, e->vf), deadline, error);
		if (!name)
			return false;
		g_free(e->rep);
		e->rep = name;
		if (!set_up(e->rep, error))
			return false;
	}
	return true;
}
