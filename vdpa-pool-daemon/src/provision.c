// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * provision: devlink and vdpa over generic netlink (libnl-genl-3), and the
 * sysfs files the kernel offers for the rest (see provision.h).
 */
#include "provision.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <gio/gio.h>
#include <linux/devlink.h>
#include <linux/vdpa.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <string.h>
#include <unistd.h>

struct vpd_provision {
	const struct vpd_config *cfg;
	struct nl_sock *sk;
	int vdpa_family;
	int devlink_family;
};

static bool fail(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static bool fail(GError **error, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, msg);
	return false;
}

struct vpd_provision *vpd_provision_new(const struct vpd_config *cfg, GError **error)
{
	struct vpd_provision *p = g_new0(struct vpd_provision, 1);
	int err = 0;

	p->cfg = cfg;
	p->sk = nl_socket_alloc();
	if (!p->sk || (err = genl_connect(p->sk)) < 0) {
		fail(error, "generic netlink: %s", p->sk ? nl_geterror(err) : "out of memory");
		vpd_provision_free(p);
		return NULL;
	}
	p->vdpa_family = genl_ctrl_resolve(p->sk, "vdpa");
	p->devlink_family = genl_ctrl_resolve(p->sk, DEVLINK_GENL_NAME);
	if (p->vdpa_family < 0) {
		fail(error, "the kernel has no vdpa netlink family (modprobe vdpa)");
		vpd_provision_free(p);
		return NULL;
	}
	return p;
}

void vpd_provision_free(struct vpd_provision *p)
{
	if (!p)
		return;
	if (p->sk)
		nl_socket_free(p->sk);
	g_free(p);
}

/* Send msg and wait for the kernel's ack; a negative libnl error on failure. */
static int transact(struct vpd_provision *p, struct nl_msg *msg)
{
	int err = nl_send_auto(p->sk, msg);

	nlmsg_free(msg);
	if (err < 0)
		return err;
	return nl_wait_for_ack(p->sk);
}

/* ---- sysfs -------------------------------------------------------------- */

static char *read_line(const char *path)
{
	char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return NULL;
	g_strchomp(text);
	return text;
}

static bool write_str(const char *path, const char *value, GError **error)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(value, f) < 0 || fclose(f) != 0) {
		int e = errno;

		return fail(error, "writing %s to %s: %s", value, path, g_strerror(e));
	}
	return true;
}

/* The PF's device folder in sysfs (resolved), for a netdev or pci/ADDR. */
static char *pf_device_dir(const struct vpd_pf *pf, GError **error)
{
	g_autofree char *link = g_str_has_prefix(pf->name, "pci/")
		? g_strdup_printf("/sys/bus/pci/devices/%s", pf->name + 4)
		: g_strdup_printf("/sys/class/net/%s/device", pf->name);
	char *dir = realpath(link, NULL);

	if (!dir)
		fail(error, "PF %s: %s not found (no such netdev or PCI function)", pf->name,
		     link);
	return dir;
}

/* ---- message builders (also unit-tested) -------------------------------- */

struct nl_msg *vpd_msg_eswitch(int family, uint8_t cmd, const char *bus, const char *dev,
			       int mode)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0,
			 NLM_F_REQUEST | (mode >= 0 ? NLM_F_ACK : 0), cmd,
			 DEVLINK_GENL_VERSION) ||
	    nla_put_string(msg, DEVLINK_ATTR_BUS_NAME, bus) < 0 ||
	    nla_put_string(msg, DEVLINK_ATTR_DEV_NAME, dev) < 0 ||
	    (mode >= 0 && nla_put_u16(msg, DEVLINK_ATTR_ESWITCH_MODE, mode) < 0)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

struct nl_msg *vpd_msg_vdpa_dev_new(int family, const char *mgmtdev, const char *name,
				    const uint8_t mac[6])
{
	struct nl_msg *msg = nlmsg_alloc();
	const char *slash = strchr(mgmtdev, '/');
	bool ok;

	if (!msg)
		return NULL;
	ok = genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, NLM_F_REQUEST | NLM_F_ACK,
			 VDPA_CMD_DEV_NEW, 0) != NULL;
	if (ok && slash) {
		g_autofree char *bus = g_strndup(mgmtdev, slash - mgmtdev);

		ok = nla_put_string(msg, VDPA_ATTR_MGMTDEV_BUS_NAME, bus) >= 0 &&
		     nla_put_string(msg, VDPA_ATTR_MGMTDEV_DEV_NAME, slash + 1) >= 0;
	} else if (ok) {
		ok = nla_put_string(msg, VDPA_ATTR_MGMTDEV_DEV_NAME, mgmtdev) >= 0;
	}
	ok = ok && nla_put_string(msg, VDPA_ATTR_DEV_NAME, name) >= 0 &&
	     (!mac || nla_put(msg, VDPA_ATTR_DEV_NET_CFG_MACADDR, 6, mac) >= 0);
	if (!ok) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* Linux 6.12's VDPA_CMD_DEV_ATTR_SET, which older headers lack. */
#define VPD_VDPA_CMD_DEV_ATTR_SET (VDPA_CMD_DEV_VSTATS_GET + 1)

struct nl_msg *vpd_msg_vdpa_dev_mac(int family, const char *name, const uint8_t mac[6])
{
	struct nl_msg *msg = nlmsg_alloc();

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, NLM_F_REQUEST | NLM_F_ACK,
			 VPD_VDPA_CMD_DEV_ATTR_SET, 0) ||
	    nla_put_string(msg, VDPA_ATTR_DEV_NAME, name) < 0 ||
	    nla_put(msg, VDPA_ATTR_DEV_NET_CFG_MACADDR, 6, mac) < 0) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

bool vpd_vdpa_set_mac(const char *name, const uint8_t mac[6], GError **error)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg;
	struct pollfd pfd;
	int family, err;

	if (!sk)
		return fail(error, "out of memory");
	err = genl_connect(sk);
	if (err < 0)
		goto nl_failed;
	family = genl_ctrl_resolve(sk, "vdpa");
	if (family < 0) {
		nl_socket_free(sk);
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
			    "the kernel has no vdpa netlink family");
		return false;
	}
	msg = vpd_msg_vdpa_dev_mac(family, name, mac);
	if (!msg) {
		nl_socket_free(sk);
		return fail(error, "out of memory");
	}
	err = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (err < 0)
		goto nl_failed;
	/* The answer within the deadline, or none: never a blocked thread. */
	pfd = (struct pollfd){ .fd = nl_socket_get_fd(sk), .events = POLLIN };
	err = poll(&pfd, 1, VPD_VDPA_MAC_TIMEOUT_MS);
	if (err <= 0) {
		nl_socket_free(sk);
		return fail(error, "vDPA device %s: no answer from the kernel within %d ms", name,
			    VPD_VDPA_MAC_TIMEOUT_MS);
	}
	err = nl_wait_for_ack(sk);
	if (err < 0)
		goto nl_failed;
	nl_socket_free(sk);
	return true;

nl_failed:
	nl_socket_free(sk);
	if (err == -NLE_OPNOTSUPP) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
			    "vDPA device %s: its MAC cannot be set through the vdpa API", name);
		return false;
	}
	return fail(error, "vDPA device %s: setting its MAC: %s", name, nl_geterror(err));
}

/* ---- devlink: switchdev ------------------------------------------------- */

static int eswitch_mode_cb(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[DEVLINK_ATTR_MAX + 1];

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, DEVLINK_ATTR_MAX, NULL) == 0 &&
	    tb[DEVLINK_ATTR_ESWITCH_MODE])
		*(int *)arg = nla_get_u16(tb[DEVLINK_ATTR_ESWITCH_MODE]);
	return NL_OK;
}

static bool ensure_switchdev(struct vpd_provision *p, const struct vpd_pf *pf,
			     const char *devdir, GError **error)
{
	g_autofree char *subsys_link = g_strdup_printf("%s/subsystem", devdir);
	g_autofree char *subsys = realpath(subsys_link, NULL);
	g_autofree char *bus = subsys ? g_path_get_basename(subsys) : NULL;
	g_autofree char *dev = g_path_get_basename(devdir);
	struct nl_msg *msg;
	int mode = -1, err;

	if (!bus)
		return fail(error, "PF %s: no bus for %s", pf->name, devdir);
	if (p->devlink_family < 0)
		return fail(error, "PF %s: the kernel has no devlink netlink family", pf->name);
	msg = vpd_msg_eswitch(p->devlink_family, DEVLINK_CMD_ESWITCH_GET, bus, dev, -1);
	if (!msg)
		return fail(error, "out of memory");
	err = nl_send_auto(p->sk, msg);
	nlmsg_free(msg);
	if (err >= 0) {
		nl_socket_modify_cb(p->sk, NL_CB_VALID, NL_CB_CUSTOM, eswitch_mode_cb, &mode);
		err = nl_recvmsgs_default(p->sk);
		nl_socket_modify_cb(p->sk, NL_CB_VALID, NL_CB_DEFAULT, NULL, NULL);
	}
	if (err < 0)
		return fail(error, "PF %s: devlink eswitch show %s/%s: %s", pf->name, bus, dev,
			    nl_geterror(err));
	if (mode == DEVLINK_ESWITCH_MODE_SWITCHDEV)
		return true;
	msg = vpd_msg_eswitch(p->devlink_family, DEVLINK_CMD_ESWITCH_SET, bus, dev,
			      DEVLINK_ESWITCH_MODE_SWITCHDEV);
	if (!msg)
		return fail(error, "out of memory");
	err = transact(p, msg);
	if (err < 0)
		return fail(error, "PF %s: devlink eswitch set %s/%s mode switchdev: %s",
			    pf->name, bus, dev, nl_geterror(err));
	g_message("PF %s: eswitch in switchdev mode", pf->name);
	return true;
}

/* ---- sriov_numvfs ------------------------------------------------------- */

enum vpd_num_vfs_step vpd_num_vfs_step(unsigned now, unsigned want, unsigned in_use)
{
	if (now == want)
		return VPD_NUM_VFS_KEEP;
	return in_use ? VPD_NUM_VFS_HOLD : VPD_NUM_VFS_SET;
}

/*
 * How many of the PF's first n VFs have a vDPA device of the daemon whose
 * vhost-vdpa device someone holds open (vhost-vdpa allows one opener and
 * answers others EBUSY): VMs that the state file does not know of, when
 * it was lost or damaged.  Opening a free device resets it, which does
 * not matter to a VF that is about to be destroyed.
 */
static unsigned vfs_held_open(const struct vpd_pf *pf, unsigned n)
{
	unsigned held = 0;

	for (unsigned vf = 0; vf < n; vf++) {
		g_autofree char *name = vpd_vdpa_dev_name(pf, vf);
		g_autofree char *dir = g_strdup_printf("/sys/bus/vdpa/devices/%s", name);
		g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
		const char *f;

		while (d && (f = g_dir_read_name(d))) {
			g_autofree char *dev = NULL;
			int fd;

			if (!g_str_has_prefix(f, "vhost-vdpa-"))
				continue;
			dev = g_strdup_printf("/dev/%s", f);
			fd = open(dev, O_RDWR | O_CLOEXEC);
			if (fd >= 0)
				close(fd);
			else if (errno == EBUSY)
				held++;
		}
	}
	return held;
}

bool vpd_provision_num_vfs(const struct vpd_pf *pf, const char *devdir, unsigned in_use,
			   unsigned *have, GError **error)
{
	g_autofree char *path = g_strdup_printf("%s/sriov_numvfs", devdir);
	g_autofree char *now = read_line(path);
	g_autofree char *want = g_strdup_printf("%u", pf->num_vfs);
	enum vpd_num_vfs_step step;
	guint64 n;

	if (!now)
		return fail(error, "PF %s: %s missing: not an SR-IOV PF", pf->name, path);
	if (!g_ascii_string_to_unsigned(now, 10, 0, G_MAXUINT16, &n, NULL))
		return fail(error, "PF %s: %s holds '%s', not a number of VFs", pf->name, path,
			    now);
	*have = n;
	step = vpd_num_vfs_step(n, pf->num_vfs, in_use);
	/* The kernel has the last word: a device held open is a VF in use. */
	if (step == VPD_NUM_VFS_SET) {
		in_use = vfs_held_open(pf, n);
		step = vpd_num_vfs_step(n, pf->num_vfs, in_use);
	}
	switch (step) {
	case VPD_NUM_VFS_KEEP:
		return true;
	case VPD_NUM_VFS_HOLD:
		g_warning("PF %s: num-vfs is %u but the PF has %s VFs, and %u of them may be in "
			  "use by running VMs (claims in the state file, or vhost-vdpa devices "
			  "held open): setting sriov_numvfs would destroy their VFs, so it stays "
			  "%s until the daemon starts with none in use on this PF", pf->name,
			  pf->num_vfs, now, in_use, now);
		return true;
	case VPD_NUM_VFS_SET:
		break;
	}
	/* The kernel changes the number of VFs only from and to zero. */
	if (n && !write_str(path, "0", error))
		return false;
	if (!write_str(path, want, error))
		return false;
	*have = pf->num_vfs;
	g_message("PF %s: %u VFs", pf->name, pf->num_vfs);
	return true;
}

/* ---- vdpa devices ------------------------------------------------------- */

static bool bind_vhost_vdpa(const char *name, GError **error)
{
	g_autofree char *drv_link = g_strdup_printf("/sys/bus/vdpa/devices/%s/driver", name);
	g_autofree char *drv = realpath(drv_link, NULL);
	g_autofree char *unbind = NULL;

	if (drv && g_str_has_suffix(drv, "/vhost_vdpa"))
		return true;
	if (!g_file_test("/sys/bus/vdpa/drivers/vhost_vdpa", G_FILE_TEST_IS_DIR))
		return fail(error, "vDPA device %s: the vhost_vdpa driver is not loaded "
			    "(modprobe vhost_vdpa)", name);
	if (drv) {
		unbind = g_strdup_printf("%s/unbind", drv);
		if (!write_str(unbind, name, error))
			return false;
	}
	return write_str("/sys/bus/vdpa/drivers/vhost_vdpa/bind", name, error);
}

/* /dev/vhost-vdpa-N of a vDPA device bound to vhost_vdpa. */
static char *vhost_path(const char *name, GError **error)
{
	g_autofree char *dir = g_strdup_printf("/sys/bus/vdpa/devices/%s", name);
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *f;

	while (d && (f = g_dir_read_name(d))) {
		if (g_str_has_prefix(f, "vhost-vdpa-")) {
			char *path = g_strdup_printf("/dev/%s", f);

			/* devtmpfs creates the node with the device; wait a little. */
			for (int i = 0; i < 200 && access(path, F_OK); i++)
				g_usleep(10000);
			if (access(path, F_OK) == 0)
				return path;
			fail(error, "vDPA device %s: %s did not appear", name, path);
			g_free(path);
			return NULL;
		}
	}
	fail(error, "vDPA device %s has no vhost-vdpa char device", name);
	return NULL;
}

/* Bind vDPA device @name (taken) to vhost_vdpa; it becomes e's backend. */
static bool use_vdpa_dev(struct vpd_entry *e, char *name, GError **error)
{
	g_autofree char *owned = name;

	if (!bind_vhost_vdpa(owned, error))
		return false;
	g_free(e->vhost_path);
	e->vhost_path = vhost_path(owned, error);
	if (!e->vhost_path)
		return false;
	g_free(e->vdpa_dev);
	e->vdpa_dev = g_steal_pointer(&owned);
	return true;
}

static bool ensure_vdpa_dev(struct vpd_provision *p, const struct vpd_pf *pf,
			    const char *devdir, struct vpd_entry *e, GError **error)
{
	g_autofree char *name = vpd_vdpa_dev_name(pf, e->vf);
	g_autofree char *sys = g_strdup_printf("/sys/bus/vdpa/devices/%s", name);
	g_autofree char *mgmt = NULL;
	struct nl_msg *msg;
	int err;

	if (!g_file_test(sys, G_FILE_TEST_EXISTS)) {
		if (!strcmp(pf->vdpa_mgmtdev, "auto")) {
			g_autofree char *vfl = g_strdup_printf("%s/virtfn%u", devdir, e->vf);
			g_autofree char *vf = realpath(vfl, NULL);
			g_autofree char *addr = vf ? g_path_get_basename(vf) : NULL;

			if (!addr)
				return fail(error, "PF %s: VF %u has no PCI function (%s)",
					    pf->name, e->vf, vfl);
			mgmt = g_strdup_printf("pci/%s", addr);
		} else {
			mgmt = g_strdup(pf->vdpa_mgmtdev);
		}
		msg = vpd_msg_vdpa_dev_new(p->vdpa_family, mgmt, name, e->default_mac);
		if (!msg)
			return fail(error, "out of memory");
		err = transact(p, msg);
		if (err < 0)
			return fail(error, "PF %s VF %u: vdpa dev add name %s mgmtdev %s: %s",
				    pf->name, e->vf, name, mgmt, nl_geterror(err));
	}
	return use_vdpa_dev(e, g_steal_pointer(&name), error);
}

bool vpd_provision_run(struct vpd_provision *p, struct vpd_pools *pools, GHashTable *in_use,
		       GError **error)
{
	for (unsigned i = 0; i < p->cfg->pfs->len; i++) {
		const struct vpd_pf *pf = p->cfg->pfs->pdata[i];
		g_autofree char *devdir = NULL;
		unsigned n = 0, have, held;

		if (pf->vduse)
			continue;   /* vpd_provision_vduse(), once OVS has the ports */
		devdir = pf_device_dir(pf, error);
		if (!devdir)
			return false;
		if (pf->switchdev && !ensure_switchdev(p, pf, devdir, error))
			return false;
		held = in_use ? GPOINTER_TO_UINT(g_hash_table_lookup(in_use, pf->name)) : 0;
		if (!vpd_provision_num_vfs(pf, devdir, held, &have, error))
			return false;
		for (unsigned j = 0; j < pools->entries->len; j++) {
			struct vpd_entry *e = pools->entries->pdata[j];

			if (e->pool->pf != pf)
				continue;
			if (e->vf >= have) {
				/* num-vfs held back: no such VF yet. */
				e->quarantined = true;
				g_warning("VF %u of pool '%s' does not exist (PF %s has %u VFs): "
					  "quarantined", e->vf, e->pool->name, pf->name, have);
				continue;
			}
			if (!ensure_vdpa_dev(p, pf, devdir, e, error))
				return false;
			n++;
		}
		g_message("PF %s: %u pooled VF(s) with vDPA devices", pf->name, n);
	}
	return true;
}

/* ---- VDUSE devices served by OVS-DPDK ------------------------------------ */

/*
 * The VDUSE device that OVS-DPDK made for e's port: wait for it (a port
 * that was just added takes ovs-vswitchd a moment), give it the PF's
 * message timeout, and add the vDPA device on it.  Until OVS-DPDK has set
 * up every virtqueue the kernel refuses the vDPA device with EINVAL: that
 * is retried until the deadline.
 */
static bool ensure_vduse_dev(struct vpd_provision *p, const struct vpd_pf *pf,
			     struct vpd_entry *e, GError **error)
{
	g_autofree char *name = vpd_vdpa_dev_name(pf, e->vf);
	g_autofree char *sys = g_strdup_printf("/sys/bus/vdpa/devices/%s", name);
	g_autofree char *ctl = g_strdup_printf("/sys/class/vduse/%s", name);
	g_autofree char *timeout = g_strdup_printf("%s/msg_timeout", ctl);
	g_autofree char *secs = g_strdup_printf("%u", pf->vduse_msg_timeout);
	gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
	int err = 0;

	while (!g_file_test(ctl, G_FILE_TEST_EXISTS)) {
		if (g_get_monotonic_time() > deadline)
			return fail(error, "PF %s VF %u: OVS did not make the VDUSE device %s "
				    "within 30 s (is ovs-vswitchd running with DPDK, and the "
				    "vduse module loaded? see the port's Interface error)",
				    pf->name, e->vf, ctl);
		g_usleep(10000);
	}
	if (!g_file_test(sys, G_FILE_TEST_EXISTS)) {
		/* A device in use keeps its timeout: it is set before the vDPA device. */
		if (!write_str(timeout, secs, error))
			return false;
		for (;;) {
			struct nl_msg *msg = vpd_msg_vdpa_dev_new(p->vdpa_family, "vduse", name,
								  NULL);

			if (!msg)
				return fail(error, "out of memory");
			err = transact(p, msg);
			if (err != -NLE_INVAL || g_get_monotonic_time() > deadline)
				break;
			g_usleep(10000);
		}
		if (err < 0)
			return fail(error, "PF %s VF %u: vdpa dev add name %s mgmtdev vduse: %s",
				    pf->name, e->vf, name, nl_geterror(err));
	}
	return use_vdpa_dev(e, g_steal_pointer(&name), error);
}

bool vpd_provision_vduse(struct vpd_provision *p, struct vpd_pools *pools, GError **error)
{
	for (unsigned i = 0; i < p->cfg->pfs->len; i++) {
		const struct vpd_pf *pf = p->cfg->pfs->pdata[i];
		unsigned n = 0;

		if (!pf->vduse)
			continue;
		for (unsigned j = 0; j < pools->entries->len; j++) {
			struct vpd_entry *e = pools->entries->pdata[j];

			if (e->pool->pf != pf)
				continue;
			if (!ensure_vduse_dev(p, pf, e, error))
				return false;
			n++;
		}
		g_message("PF %s: %u pooled VF(s) on VDUSE devices served by OVS-DPDK", pf->name,
			  n);
	}
	return true;
}
