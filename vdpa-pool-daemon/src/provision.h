/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * provision: make the kernel hold what the configuration asks for.
 *
 * Per [pf]: the eswitch in switchdev mode (devlink generic netlink), the
 * number of VFs (sriov_numvfs, the kernel's only interface for it), and per
 * pooled VF one vDPA device (vdpa generic netlink) named vpd-PF-VF, bound
 * to vhost_vdpa, whose /dev/vhost-vdpa-N becomes the entry's backend.
 * Idempotent: what is already there is kept (a restart does not touch VFs
 * in use); what differs is changed; what cannot be done is an error that
 * names the PF or VF and the step.
 */
#ifndef VPD_PROVISION_H
#define VPD_PROVISION_H

#include "config.h"
#include "pool.h"

struct vpd_provision;

struct vpd_provision *vpd_provision_new(const struct vpd_config *cfg, GError **error);

/*
 * in_use: PF name -> how many of its VFs the state's claims may hold
 * (GUINT_TO_POINTER; NULL: none), as vpd_state_open() reports.  A PF with
 * VFs in use keeps its number of VFs (see vpd_provision_num_vfs); a
 * pooled VF that therefore does not exist is quarantined.
 */
bool vpd_provision_run(struct vpd_provision *p, struct vpd_pools *pools, GHashTable *in_use,
		       GError **error);
void vpd_provision_free(struct vpd_provision *p);

/*
 * The number of VFs of a PF: keep it when it is what the configuration
 * wants; change it (through 0, destroying every VF) when no VF is in use;
 * hold it, with a warning, when it differs but in_use VFs may be in use
 * by running VMs: an operator changes num-vfs with the VMs stopped, not
 * by having their VFs pulled away.
 */
enum vpd_num_vfs_step { VPD_NUM_VFS_KEEP, VPD_NUM_VFS_SET, VPD_NUM_VFS_HOLD };
enum vpd_num_vfs_step vpd_num_vfs_step(unsigned now, unsigned want, unsigned in_use);

/*
 * That step on the PF's sysfs device folder devdir (its sriov_numvfs):
 * before the VFs are destroyed, the vhost-vdpa devices of the daemon's
 * vDPA devices on them are opened, and one held open by someone (EBUSY:
 * a VM the state does not know of) counts as in use too.  *have is how
 * many VFs the PF has after it.  Also unit-tested on a folder that stands
 * in for sysfs.
 */
bool vpd_provision_num_vfs(const struct vpd_pf *pf, const char *devdir, unsigned in_use,
			   unsigned *have, GError **error);

/*
 * VDUSE PFs (vdpa-mgmtdev = vduse), once OVS holds their ports (OVS-DPDK
 * then has made each /dev/vduse/NAME): one vDPA device per pooled VF on
 * the VDUSE device of the same name, bound to vhost_vdpa.  Idempotent.
 * vpd_provision_run() leaves these PFs alone.
 */
bool vpd_provision_vduse(struct vpd_provision *p, struct vpd_pools *pools, GError **error);

/*
 * The generic netlink requests provisioning sends (NULL when out of
 * memory).  eswitch: DEVLINK_CMD_ESWITCH_GET (mode < 0) or _SET to mode.
 * vdpa_dev_new: mgmtdev is "bus/dev" (pci/0000:03:00.2) or a bare name
 * (vdpasim_net); mac NULL sends none (VDUSE devices take no attribute).
 */
struct nl_msg;
struct nl_msg *vpd_msg_eswitch(int family, uint8_t cmd, const char *bus, const char *dev,
			       int mode);
struct nl_msg *vpd_msg_vdpa_dev_new(int family, const char *mgmtdev, const char *name,
				    const uint8_t mac[6]);
struct nl_msg *vpd_msg_vdpa_dev_mac(int family, const char *name, const uint8_t mac[6]);

/*
 * Set the MAC of vDPA device @name through the vdpa management API
 * (VDPA_CMD_DEV_ATTR_SET, Linux 6.12): the one its config space and
 * datapath use, which a vhost-vdpa user's set_config cannot guarantee.
 * Blocks for one netlink round trip, at most VPD_VDPA_MAC_TIMEOUT_MS: call
 * it from a thread.  G_IO_ERROR_NOT_SUPPORTED when the kernel or the
 * device (VDUSE's) cannot set it.
 */
#define VPD_VDPA_MAC_TIMEOUT_MS 2000
bool vpd_vdpa_set_mac(const char *name, const uint8_t mac[6], GError **error);

#endif
