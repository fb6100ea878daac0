/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config: the daemon's configuration file (docs/daemon-config.md).
 *
 * One file, INI-like: a [daemon] section, a [pf NAME] section per physical
 * function and a [pool NAME] section per pool.  Every error names the file
 * and the line it is about.
 */
#ifndef VPD_CONFIG_H
#define VPD_CONFIG_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define VPD_CONFIG_ERROR (vpd_config_error_quark())
GQuark vpd_config_error_quark(void);

/* Which claimed VF may take the MAC another has (a migration's hand-over). */
enum vpd_mac_handover {
	VPD_HANDOVER_NO,          /* none (the default) */
	VPD_HANDOVER_TOKEN,       /* one whose client shows the other's client's
				   * hand-over token (SET_ATTRS HANDOVER) */
	VPD_HANDOVER_SAME_OWNER,  /* one claimed by the same uid under the same
				   * owner name */
};

enum vpd_mac_policy {
	VPD_MAC_ANY,      /* the client may set any unicast MAC */
	VPD_MAC_LOCKED,   /* the daemon's MAC only (the default) */
	VPD_MAC_PREFIX,   /* unicast MACs starting with mac_prefix */
};

struct vpd_pf {
	char *name;          /* netdev name, or pci/<address>; a label when vduse */
	unsigned num_vfs;
	bool switchdev;
	char *vdpa_mgmtdev;  /* "auto": pci/<vf>; else a management device name */
	/*
	 * vdpa-mgmtdev = vduse: no NIC; each VF is a VDUSE device that
	 * OVS-DPDK serves (a dpdkvhostuserclient port on /dev/vduse/NAME,
	 * which is also the VF's switch port).
	 */
	bool vduse;
	unsigned vduse_msg_timeout;  /* seconds, /sys/class/vduse/NAME/msg_timeout */
	unsigned line;
};

struct vpd_pool {
	char *name;
	struct vpd_pf *pf;
	unsigned first_vf, last_vf;  /* VF indexes of pf, inclusive */
	GArray *allow_uids;          /* uid_t; empty: root only */
	GArray *allow_gids;          /* gid_t */
	uint16_t vlan_min, vlan_max; /* 0-0: untagged only */
	enum vpd_mac_policy mac_policy;
	uint8_t mac_prefix[6];
	unsigned mac_prefix_len;     /* bytes of mac_prefix that must match */
	uint64_t max_tx_rate_mbps;   /* 0: no limit a client may ask above */
	bool spoof_check;            /* default for claimed VFs (clients may not
				      * turn it off unless trusted) */
	enum vpd_mac_handover mac_handover;
	/*
	 * switchdev = yes: a client may give its claimed VFs representor
	 * ports (REP_OPEN): a tap on the OVS bridge that the VF's traffic
	 * goes to and comes from, instead of the VF's legacy flows.
	 */
	bool switchdev;
	/*
	 * A guest's offloaded rules (FLOW_ADD, switchdev pools): at most
	 * max_flows per connection whose source VF is of this pool, and at
	 * most max_flow_changes adds and deletes a second per connection.
	 */
	unsigned max_flows, max_flow_changes;
	unsigned line;
};

struct vpd_config {
	char *socket_path;
	char *state_path;
	char *ovs_bridge;            /* NULL: the daemon leaves OVS alone */
	char *ovsdb;                 /* OVSDB remote, e.g. unix:/run/openvswitch/db.sock */
	unsigned socket_mode;        /* of the API socket the daemon makes */
	char *socket_group;          /* its group (name or gid); NULL: root */
	/* API connections: see struct vpd_server_limits (server.h). */
	unsigned max_clients, max_clients_per_uid, idle_timeout, io_timeout;
	GPtrArray *pfs;              /* struct vpd_pf * */
	GPtrArray *pools;            /* struct vpd_pool * */
};

/*
 * The vDPA device name of VF vf of pf, vpd-PF-VF (also its VDUSE device's
 * and, for VDUSE PFs, its OVS port's name).
 */
char *vpd_vdpa_dev_name(const struct vpd_pf *pf, unsigned vf);

struct vpd_config *vpd_config_parse(const char *text, const char *filename,
				    GError **error);
struct vpd_config *vpd_config_load(const char *path, GError **error);
void vpd_config_free(struct vpd_config *cfg);
struct vpd_pool *vpd_config_find_pool(const struct vpd_config *cfg,
				      const char *name);
bool vpd_pool_allows(const struct vpd_pool *pool, uid_t uid, gid_t gid);

typedef struct vpd_config vpd_config;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vpd_config, vpd_config_free)

#endif
