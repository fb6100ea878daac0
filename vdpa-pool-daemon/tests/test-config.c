// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the configuration parser: a good file with every key, and
 * bad files each refused with an error naming the line.
 */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

static const char *good =
	"# vdpa-pool-daemon configuration\n"
	"[daemon]\n"
	"socket = /run/vpd/api.sock   # comment after a value\n"
	"state = /var/lib/vpd/state\n"
	"ovs-bridge = br-test\n"
	"io-timeout = 7\n"
	"\n"
	"[pf ens1f0]\n"
	"num-vfs = 8\n"
	"eswitch = switchdev\n"
	"\n"
	"[pf pci/0000:03:00.1]\n"
	"num-vfs = 4\n"
	"eswitch = legacy\n"
	"vdpa-mgmtdev = vdpasim_net\n"
	"\n"
	"[pool tenant-a]\n"
	"pf = ens1f0\n"
	"vfs = 0-3\n"
	"allow-uids = 64055, 1000\n"
	"allow-gids = 64055\n"
	"vlans = 100-199\n"
	"mac-policy = prefix 02:00:00\n"
	"max-tx-rate = 10000\n"
	"\n"
	"[pool tenant-b]\n"
	"pf = ens1f0\n"
	"vfs = 4-7\n"
	"mac-policy = locked\n"
	"spoof-check = no\n"
	"switchdev = yes\n"
	"\n"
	"[pool    lab]   \n"
	"pf = pci/0000:03:00.1\n"
	"vlans = 300-399    # tenant-b has untagged on the bridge\n";

static void test_good_file(void)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = vpd_config_parse(good, "good.conf", &err);
	struct vpd_pool *a, *b, *lab;

	g_assert_no_error(err);
	g_assert_nonnull(cfg);
	g_assert_cmpstr(cfg->socket_path, ==, "/run/vpd/api.sock");
	g_assert_cmpstr(cfg->state_path, ==, "/var/lib/vpd/state");
	g_assert_cmpstr(cfg->ovs_bridge, ==, "br-test");
	g_assert_cmpstr(cfg->ovsdb, ==, "unix:/run/openvswitch/db.sock");
	/* The limits on API connections, as documented (good sets io-timeout). */
	g_assert_cmpuint(cfg->socket_mode, ==, 0660);
	g_assert_null(cfg->socket_group);
	g_assert_cmpuint(cfg->max_clients, ==, 256);
	g_assert_cmpuint(cfg->max_clients_per_uid, ==, 16);
	g_assert_cmpuint(cfg->idle_timeout, ==, 300);
	g_assert_cmpuint(cfg->io_timeout, ==, 7);
	g_assert_cmpuint(cfg->pfs->len, ==, 2);
	g_assert_cmpuint(cfg->pools->len, ==, 3);

	a = vpd_config_find_pool(cfg, "tenant-a");
	g_assert_nonnull(a);
	g_assert_cmpstr(a->pf->name, ==, "ens1f0");
	g_assert_true(a->pf->switchdev);
	g_assert_cmpuint(a->first_vf, ==, 0);
	g_assert_cmpuint(a->last_vf, ==, 3);
	g_assert_cmpuint(a->vlan_min, ==, 100);
	g_assert_cmpuint(a->vlan_max, ==, 199);
	g_assert_cmpint(a->mac_policy, ==, VPD_MAC_PREFIX);
	g_assert_cmpuint(a->mac_prefix_len, ==, 3);
	g_assert_cmphex(a->mac_prefix[0], ==, 0x02);
	g_assert_cmpuint(a->max_tx_rate_mbps, ==, 10000);
	g_assert_true(a->spoof_check);
	g_assert_true(vpd_pool_allows(a, 1000, 1000));
	g_assert_true(vpd_pool_allows(a, 4242, 64055));
	g_assert_true(vpd_pool_allows(a, 0, 0));
	g_assert_false(vpd_pool_allows(a, 4242, 4242));

	b = vpd_config_find_pool(cfg, "tenant-b");
	g_assert_cmpuint(b->first_vf, ==, 4);
	g_assert_cmpint(b->mac_policy, ==, VPD_MAC_LOCKED);
	g_assert_false(b->spoof_check);
	g_assert_true(b->switchdev);
	g_assert_false(a->switchdev);   /* the default: no */
	g_assert_false(vpd_pool_allows(b, 1000, 1000));

	/* A pool without vfs= takes every VF of its PF; without mac-policy,
	 * its VFs keep the daemon's MACs. */
	lab = vpd_config_find_pool(cfg, "lab");
	g_assert_cmpint(lab->mac_policy, ==, VPD_MAC_LOCKED);
	g_assert_cmpuint(lab->vlan_min, ==, 300);
	g_assert_cmpuint(b->vlan_max, ==, 0);
	g_assert_cmpuint(lab->first_vf, ==, 0);
	g_assert_cmpuint(lab->last_vf, ==, 3);
	g_assert_false(lab->pf->switchdev);
	g_assert_cmpstr(lab->pf->vdpa_mgmtdev, ==, "vdpasim_net");
	g_assert_null(vpd_config_find_pool(cfg, "nope"));
}

struct bad_case {
	const char *name;
	const char *text;
	const char *error;   /* the whole message, "file:line: ..." */
};

static const struct bad_case bad_cases[] = {
	{ "outside-section", "num-vfs = 1\n",
	  "bad.conf:1: 'num-vfs' outside any section" },
	{ "unknown-section", "\n[vf x]\n",
	  "bad.conf:2: unknown section '[vf x]' (expected [daemon], [pf NAME] or [pool NAME])" },
	{ "unterminated-header", "[pf a\n", "bad.conf:1: a section header must end with ']'" },
	{ "no-equals", "[daemon]\nsocket /x\n",
	  "bad.conf:2: expected 'key = value' or a [section]" },
	{ "empty-value", "[daemon]\nsocket =\n", "bad.conf:2: missing value for 'socket'" },
	{ "relative-socket", "[daemon]\nsocket = run/x\n",
	  "bad.conf:2: 'socket' must be an absolute path" },
	{ "unknown-daemon-key", "[daemon]\nsockets = /x\n",
	  "bad.conf:2: unknown key 'sockets' in [daemon]" },
	{ "socket-mode-x", "[daemon]\nsocket-mode = 0777\n",
	  "bad.conf:2: socket-mode must be an octal mode such as 0660 (rw for the owner at "
	  "least, no x bits), not '0777'" },
	{ "socket-mode-not-octal", "[daemon]\nsocket-mode = 0668\n",
	  "bad.conf:2: socket-mode must be an octal mode such as 0660 (rw for the owner at "
	  "least, no x bits), not '0668'" },
	{ "socket-group-path", "[daemon]\nsocket-group = a/b\n",
	  "bad.conf:2: socket-group must be a group name or gid, not 'a/b'" },
	{ "max-clients-zero", "[daemon]\nmax-clients = 0\n",
	  "bad.conf:2: max-clients must be a number from 1 to 65536, not '0'" },
	{ "per-uid-not-number", "[daemon]\nmax-clients-per-uid = many\n",
	  "bad.conf:2: max-clients-per-uid must be a number from 1 to 65536, not 'many'" },
	{ "idle-too-long", "[daemon]\nidle-timeout = 86401\n",
	  "bad.conf:2: idle-timeout must be a number from 0 to 86400, not '86401'" },
	{ "io-timeout-zero", "[daemon]\nio-timeout = 0\n",
	  "bad.conf:2: io-timeout must be a number from 1 to 3600, not '0'" },
	{ "switchdev-maybe", "[daemon]\novs-bridge = br0\n[pf a]\n[pool p]\npf = a\n"
	  "switchdev = maybe\n", "bad.conf:6: switchdev must be yes or no, not 'maybe'" },
	{ "switchdev-no-ovs", "[pf a]\nnum-vfs = 2\n\n[pool p]\npf = a\nswitchdev = yes\n",
	  "bad.conf:4: pool 'p' has switchdev = yes, which needs ovs-bridge in [daemon]: "
	  "representor ports are ports of the OVS bridge" },
	{ "mac-handover-yes", "[pf a]\n[pool p]\npf = a\nmac-handover = yes\n",
	  "bad.conf:4: mac-handover must be no, token or same-owner, not 'yes'" },
	{ "numvfs-not-number", "[pf a]\nnum-vfs = eight\n",
	  "bad.conf:2: num-vfs must be a number from 0 to 256, not 'eight'" },
	{ "numvfs-too-big", "[pf a]\nnum-vfs = 257\n",
	  "bad.conf:2: num-vfs must be a number from 0 to 256, not '257'" },
	{ "numvfs-negative", "[pf a]\nnum-vfs = -1\n",
	  "bad.conf:2: num-vfs must be a number from 0 to 256, not '-1'" },
	{ "eswitch", "[pf a]\neswitch = offload\n",
	  "bad.conf:2: eswitch must be 'switchdev' or 'legacy', not 'offload'" },
	{ "duplicate-pf", "[pf a]\n[pf a]\n", "bad.conf:2: PF 'a' is already defined at line 1" },
	{ "bad-pf-name", "[pf a;b]\n", "bad.conf:1: invalid PF name 'a;b'" },
	{ "vlan-4095", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nvlans = 100-4095\n",
	  "bad.conf:5: vlans must be a VLAN id or range within 0-4094, not '100-4095'" },
	{ "vlan-reversed", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nvlans = 200-100\n",
	  "bad.conf:5: vlans must be a VLAN id or range within 0-4094, not '200-100'" },
	{ "multicast-prefix", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nmac-policy = prefix 01:00\n",
	  "bad.conf:5: mac-policy prefix 01:00 is multicast" },
	{ "bad-prefix", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nmac-policy = prefix 2:0\n",
	  "bad.conf:5: mac-policy prefix must be 1 to 6 bytes like 02:00:00, not '2:0'" },
	{ "bad-uid", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nallow-uids = root\n",
	  "bad.conf:5: allow-uids must be a list of numeric uids, not 'root'" },
	{ "pool-without-pf", "[pf a]\nnum-vfs = 2\n[pool p]\nvfs = 0\n",
	  "bad.conf:3: pool 'p' has no 'pf ='" },
	{ "pool-unknown-pf", "[pf a]\nnum-vfs = 2\n[pool p]\n\npf = b\n",
	  "bad.conf:5: pool 'p' names PF 'b', which no [pf] section defines" },
	{ "pool-vfs-beyond-pf", "[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nvfs = 1-2\n",
	  "bad.conf:3: pool 'p' takes VFs 1-2 but PF 'a' has 2" },
	{ "pools-overlap",
	  "[pf a]\nnum-vfs = 8\n[pool p]\npf = a\nvfs = 0-3\n[pool q]\npf = a\nvfs = 3-5\n",
	  "bad.conf:6: pool 'q' shares VFs of PF 'a' with pool 'p' (line 3)" },
	{ "vlans-overlap-on-bridge",
	  "[daemon]\novs-bridge = br0\n[pf a]\nnum-vfs = 4\n[pool p]\npf = a\nvfs = 0-1\n"
	  "vlans = 100-199\n[pool q]\npf = a\nvfs = 2-3\nvlans = 150-250\n",
	  "bad.conf:9: pool 'q' shares VLAN 150 with pool 'p' (line 5) on OVS bridge 'br0'" },
	/* Untagged is a segment too, whichever PF the pools are on. */
	{ "untagged-overlap-on-bridge",
	  "[daemon]\novs-bridge = br0\n[pf a]\nnum-vfs = 1\n[pf b]\nnum-vfs = 1\n"
	  "[pool p]\npf = a\n[pool q]\npf = b\nvlans = 0-10\n",
	  "bad.conf:9: pool 'q' shares VLAN 0 (untagged) with pool 'p' (line 7) on OVS "
	  "bridge 'br0'" },
	{ "pool-of-pf-without-vfs", "[pf a]\n[pool p]\npf = a\n",
	  "bad.conf:2: pool 'p': PF 'a' has no VFs" },
	{ "duplicate-pool", "[pf a]\nnum-vfs = 1\n[pool p]\npf = a\n[pool p]\n",
	  "bad.conf:5: pool 'p' is already defined at line 3" },
	{ "not-utf8", "[daemon]\nsocket = /\xff\n", "bad.conf:2: not valid UTF-8" },
	{ "vduse-without-ovs", "[pf sw0]\nnum-vfs = 2\nvdpa-mgmtdev = vduse\n",
	  "bad.conf:1: [pf sw0] with vdpa-mgmtdev = vduse needs ovs-bridge in [daemon]: "
	  "OVS-DPDK serves its VDUSE devices" },
	{ "vduse-pci-name",
	  "[daemon]\novs-bridge = br0\n[pf pci/0000:03:00.0]\nvdpa-mgmtdev = vduse\n",
	  "bad.conf:3: [pf pci/0000:03:00.0] with vdpa-mgmtdev = vduse: the name is a label "
	  "(A-Z a-z 0-9 . _ -), not a netdev or PCI address" },
	{ "vduse-timeout", "[pf sw0]\nvduse-msg-timeout = 0\n",
	  "bad.conf:2: vduse-msg-timeout must be 1 to 3600 seconds, not '0'" },
};

static void test_bad_file(gconstpointer data)
{
	const struct bad_case *c = data;
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = vpd_config_parse(c->text, "bad.conf", &err);

	g_assert_null(cfg);
	g_assert_error(err, VPD_CONFIG_ERROR, 0);
	g_assert_cmpstr(err->message, ==, c->error);
}

/* A software PF: VDUSE devices that OVS-DPDK serves. */
static void test_vduse_pf(void)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = vpd_config_parse(
		"[daemon]\novs-bridge = br0\n"
		"[pf sw0]\nnum-vfs = 4\nvdpa-mgmtdev = vduse\nvduse-msg-timeout = 120\n"
		"[pf eni0]\nnum-vfs = 1\n"
		"[pool a]\npf = sw0\n", "v.conf", &err);
	const struct vpd_pf *sw, *eni;
	g_autofree char *name = NULL;

	g_assert_no_error(err);
	sw = cfg->pfs->pdata[0];
	eni = cfg->pfs->pdata[1];
	g_assert_true(sw->vduse);
	g_assert_cmpuint(sw->vduse_msg_timeout, ==, 120);
	g_assert_false(eni->vduse);
	g_assert_cmpuint(eni->vduse_msg_timeout, ==, 30);
	name = vpd_vdpa_dev_name(sw, 3);
	g_assert_cmpstr(name, ==, "vpd-sw0-3");
}

/*
 * Pools on the daemon's OVS bridge have disjoint VLANs (untagged, VLAN 0,
 * included); without the bridge the daemon programs no switch, and pools'
 * VLANs are not its to keep apart.
 */
static void test_vlans_disjoint(void)
{
	static const char *const good[] = {
		"[daemon]\novs-bridge = br0\n[pf a]\nnum-vfs = 3\n[pool p]\npf = a\nvfs = 0\n"
		"[pool q]\npf = a\nvfs = 1\nvlans = 1-99\n"
		"[pool r]\npf = a\nvfs = 2\nvlans = 100-4094\n",
		"[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nvfs = 0\n[pool q]\npf = a\nvfs = 1\n",
	};

	for (unsigned i = 0; i < G_N_ELEMENTS(good); i++) {
		g_autoptr(GError) err = NULL;
		g_autoptr(vpd_config) cfg = vpd_config_parse(good[i], "v.conf", &err);

		g_assert_no_error(err);
		g_assert_nonnull(cfg);
	}
}

/* mac-policy = any must be asked for: the default is locked. */
static void test_mac_policy_any(void)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = vpd_config_parse(
		"[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nmac-policy = any\n", "m.conf", &err);

	g_assert_no_error(err);
	g_assert_cmpint(vpd_config_find_pool(cfg, "p")->mac_policy, ==, VPD_MAC_ANY);
}

static void test_load_file(void)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *dir = g_dir_make_tmp("vpd-test-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "vpd.conf", NULL);
	g_autoptr(vpd_config) cfg = NULL;

	g_assert_true(g_file_set_contents(path, good, -1, NULL));
	cfg = vpd_config_load(path, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(cfg->pools->len, ==, 3);

	/* A NUL byte inside the file is refused, not silently cut. */
	g_assert_true(g_file_set_contents(path, "[daemon]\n\0[pf x]\n", 17, NULL));
	g_assert_null(vpd_config_load(path, &err));
	g_assert_nonnull(strstr(err->message, "contains a NUL byte"));
	g_clear_error(&err);

	g_assert_cmpint(g_unlink(path), ==, 0);
	g_assert_null(vpd_config_load(path, &err));
	g_assert_error(err, G_FILE_ERROR, G_FILE_ERROR_NOENT);
	g_rmdir(dir);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/config/good", test_good_file);
	g_test_add_func("/config/load", test_load_file);
	g_test_add_func("/config/vduse", test_vduse_pf);
	g_test_add_func("/config/mac-policy-any", test_mac_policy_any);
	g_test_add_func("/config/vlans-disjoint", test_vlans_disjoint);
	for (unsigned i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
		g_autofree char *path = g_strdup_printf("/config/bad/%s", bad_cases[i].name);

		g_test_add_data_func(path, &bad_cases[i], test_bad_file);
	}
	return g_test_run();
}
