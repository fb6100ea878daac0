// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of provisioning's netlink message builders: each request is
 * parsed back with libnl's own attribute parser and checked field by field;
 * and of the number of VFs a PF gets, on a folder that stands in for the
 * PF's sysfs folder (provisioning itself runs against the real kernel in
 * tests/nested/test_l1_daemon.py).
 */
#include "provision.h"

#include <glib/gstdio.h>
#include <linux/devlink.h>
#include <linux/vdpa.h>
#include <netlink/genl/genl.h>

#define FAMILY 0x1234

static struct genlmsghdr *parse(struct nl_msg *msg, struct nlattr **tb, int max)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);

	g_assert_cmpint(nlh->nlmsg_type, ==, FAMILY);
	g_assert_true(nlh->nlmsg_flags & NLM_F_REQUEST);
	g_assert_cmpint(genlmsg_parse(nlh, 0, tb, max, NULL), ==, 0);
	return genlmsg_hdr(nlh);
}

static void test_eswitch_get(void)
{
	struct nl_msg *msg = vpd_msg_eswitch(FAMILY, DEVLINK_CMD_ESWITCH_GET, "pci",
					     "0000:03:00.0", -1);
	struct nlattr *tb[DEVLINK_ATTR_MAX + 1];
	struct genlmsghdr *g = parse(msg, tb, DEVLINK_ATTR_MAX);

	g_assert_cmpint(g->cmd, ==, DEVLINK_CMD_ESWITCH_GET);
	g_assert_cmpint(g->version, ==, DEVLINK_GENL_VERSION);
	g_assert_cmpstr(nla_get_string(tb[DEVLINK_ATTR_BUS_NAME]), ==, "pci");
	g_assert_cmpstr(nla_get_string(tb[DEVLINK_ATTR_DEV_NAME]), ==, "0000:03:00.0");
	g_assert_null(tb[DEVLINK_ATTR_ESWITCH_MODE]);
	g_assert_false(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_ACK);
	nlmsg_free(msg);
}

static void test_eswitch_set(void)
{
	struct nl_msg *msg = vpd_msg_eswitch(FAMILY, DEVLINK_CMD_ESWITCH_SET, "netdevsim",
					     "netdevsim7", DEVLINK_ESWITCH_MODE_SWITCHDEV);
	struct nlattr *tb[DEVLINK_ATTR_MAX + 1];
	struct genlmsghdr *g = parse(msg, tb, DEVLINK_ATTR_MAX);

	g_assert_cmpint(g->cmd, ==, DEVLINK_CMD_ESWITCH_SET);
	g_assert_cmpstr(nla_get_string(tb[DEVLINK_ATTR_BUS_NAME]), ==, "netdevsim");
	g_assert_cmpstr(nla_get_string(tb[DEVLINK_ATTR_DEV_NAME]), ==, "netdevsim7");
	g_assert_cmpint(nla_get_u16(tb[DEVLINK_ATTR_ESWITCH_MODE]), ==,
			DEVLINK_ESWITCH_MODE_SWITCHDEV);
	g_assert_true(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_ACK);
	nlmsg_free(msg);
}

static void test_vdpa_dev_new(void)
{
	static const uint8_t mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
	struct nlattr *tb[VDPA_ATTR_MAX + 1];
	struct nl_msg *msg;
	struct genlmsghdr *g;

	/* A real NIC's VF: the management device has a bus. */
	msg = vpd_msg_vdpa_dev_new(FAMILY, "pci/0000:03:00.2", "vpd-ens1f0-0", mac);
	g = parse(msg, tb, VDPA_ATTR_MAX);
	g_assert_cmpint(g->cmd, ==, VDPA_CMD_DEV_NEW);
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_MGMTDEV_BUS_NAME]), ==, "pci");
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_MGMTDEV_DEV_NAME]), ==, "0000:03:00.2");
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_DEV_NAME]), ==, "vpd-ens1f0-0");
	g_assert_cmpint(nla_len(tb[VDPA_ATTR_DEV_NET_CFG_MACADDR]), ==, 6);
	g_assert_cmpmem(nla_data(tb[VDPA_ATTR_DEV_NET_CFG_MACADDR]), 6, mac, 6);
	g_assert_true(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_ACK);
	nlmsg_free(msg);

	/* A simulator: a bare management device name, no bus attribute. */
	msg = vpd_msg_vdpa_dev_new(FAMILY, "vdpasim_net", "vpd-eni0np1-3", mac);
	parse(msg, tb, VDPA_ATTR_MAX);
	g_assert_null(tb[VDPA_ATTR_MGMTDEV_BUS_NAME]);
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_MGMTDEV_DEV_NAME]), ==, "vdpasim_net");
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_DEV_NAME]), ==, "vpd-eni0np1-3");
	nlmsg_free(msg);

	/* VDUSE takes no device attribute: the MAC is left out. */
	msg = vpd_msg_vdpa_dev_new(FAMILY, "vduse", "vpd-sw0-1", NULL);
	parse(msg, tb, VDPA_ATTR_MAX);
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_MGMTDEV_DEV_NAME]), ==, "vduse");
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_DEV_NAME]), ==, "vpd-sw0-1");
	g_assert_null(tb[VDPA_ATTR_DEV_NET_CFG_MACADDR]);
	nlmsg_free(msg);
}

/* A later MAC: VDPA_CMD_DEV_ATTR_SET (8 in Linux 6.12's uapi), name and MAC. */
static void test_vdpa_dev_mac(void)
{
	static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x10 };
	struct nlattr *tb[VDPA_ATTR_MAX + 1];
	struct nl_msg *msg;
	struct genlmsghdr *g;

	msg = vpd_msg_vdpa_dev_mac(FAMILY, "vpd-eni0np1-3", mac);
	g = parse(msg, tb, VDPA_ATTR_MAX);
	g_assert_cmpint(g->cmd, ==, 8);
	g_assert_cmpstr(nla_get_string(tb[VDPA_ATTR_DEV_NAME]), ==, "vpd-eni0np1-3");
	g_assert_cmpint(nla_len(tb[VDPA_ATTR_DEV_NET_CFG_MACADDR]), ==, 6);
	g_assert_cmpmem(nla_data(tb[VDPA_ATTR_DEV_NET_CFG_MACADDR]), 6, mac, 6);
	g_assert_null(tb[VDPA_ATTR_MGMTDEV_DEV_NAME]);
	g_assert_true(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_ACK);
	nlmsg_free(msg);
}

static void test_dev_name(void)
{
	struct vpd_pf pf = { .name = (char *)"pci/0000:03:00.0" };
	g_autofree char *a = vpd_vdpa_dev_name(&pf, 7);
	g_autofree char *b = NULL;

	g_assert_cmpstr(a, ==, "vpd-pci-0000-03-00-0-7");
	pf.name = (char *)"ens1f0np0";
	b = vpd_vdpa_dev_name(&pf, 0);
	g_assert_cmpstr(b, ==, "vpd-ens1f0np0-0");
}

static void test_num_vfs_step(void)
{
	g_assert_cmpint(vpd_num_vfs_step(4, 4, 0), ==, VPD_NUM_VFS_KEEP);
	g_assert_cmpint(vpd_num_vfs_step(4, 4, 3), ==, VPD_NUM_VFS_KEEP);
	g_assert_cmpint(vpd_num_vfs_step(0, 8, 0), ==, VPD_NUM_VFS_SET);
	g_assert_cmpint(vpd_num_vfs_step(4, 8, 0), ==, VPD_NUM_VFS_SET);
	g_assert_cmpint(vpd_num_vfs_step(8, 4, 0), ==, VPD_NUM_VFS_SET);
	/* Claims on the PF: its VFs stay, more or fewer. */
	g_assert_cmpint(vpd_num_vfs_step(4, 8, 1), ==, VPD_NUM_VFS_HOLD);
	g_assert_cmpint(vpd_num_vfs_step(8, 4, 2), ==, VPD_NUM_VFS_HOLD);
}

static void test_num_vfs_sysfs(void)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *dir = g_dir_make_tmp("vpd-sysfs-XXXXXX", &err);
	g_autofree char *path = g_build_filename(dir, "sriov_numvfs", NULL);
	struct vpd_pf pf = { .name = (char *)"eni0np1", .num_vfs = 8 };
	g_autofree char *text = NULL;
	unsigned have = 0;

	g_assert_no_error(err);
	/* Not an SR-IOV PF. */
	g_assert_false(vpd_provision_num_vfs(&pf, dir, 0, &have, &err));
	g_assert_true(g_str_has_prefix(err->message, "PF eni0np1: "));
	g_assert_true(g_str_has_suffix(err->message, "/sriov_numvfs missing: not an SR-IOV PF"));
	g_clear_error(&err);

	/* Claims held on the PF: a warning, and the 4 VFs stay. */
	g_assert_true(g_file_set_contents(path, "4\n", -1, NULL));
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "PF eni0np1: num-vfs is 8 but the PF has 4 VFs, and 2 of them may "
			      "be in use by running VMs (claims in the state file, or vhost-vdpa "
			      "devices held open): setting sriov_numvfs would destroy their VFs, "
			      "so it stays 4 until the daemon starts with none in use on this "
			      "PF");
	g_assert_true(vpd_provision_num_vfs(&pf, dir, 2, &have, &err));
	g_test_assert_expected_messages();
	g_assert_cmpuint(have, ==, 4);
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	g_assert_cmpstr(text, ==, "4\n");
	g_clear_pointer(&text, g_free);

	/* No claims: set (through 0, which this file does not show). */
	g_assert_true(vpd_provision_num_vfs(&pf, dir, 0, &have, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(have, ==, 8);
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	g_assert_cmpstr(text, ==, "8");
	g_clear_pointer(&text, g_free);

	/* Already right: kept, claims or not. */
	g_assert_true(vpd_provision_num_vfs(&pf, dir, 5, &have, &err));
	g_assert_cmpuint(have, ==, 8);

	g_assert_true(g_file_set_contents(path, "lots\n", -1, NULL));
	g_assert_false(vpd_provision_num_vfs(&pf, dir, 0, &have, &err));
	g_assert_true(g_str_has_suffix(err->message, "holds 'lots', not a number of VFs"));
	g_assert_cmpint(g_unlink(path), ==, 0);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/provision/eswitch-get", test_eswitch_get);
	g_test_add_func("/provision/eswitch-set", test_eswitch_set);
	g_test_add_func("/provision/vdpa-dev-new", test_vdpa_dev_new);
	g_test_add_func("/provision/vdpa-dev-mac", test_vdpa_dev_mac);
	g_test_add_func("/provision/dev-name", test_dev_name);
	g_test_add_func("/provision/num-vfs-step", test_num_vfs_step);
	g_test_add_func("/provision/num-vfs-sysfs", test_num_vfs_sysfs);
	return g_test_run();
}
