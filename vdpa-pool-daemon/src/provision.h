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
bool vpd_provision_run(struct vpd_provision *p, struct vpd_pools *pools, GError **error);
void vpd_provision_free(struct vpd_provision *p);

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

#endif
