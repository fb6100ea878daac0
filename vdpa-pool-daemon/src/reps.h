/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reps: finding each pooled VF's representor, the netdev that is its port
 * on the PF's eswitch (switchdev mode), the way "devlink port show" does:
 * in a dump of the devlink ports of the PF's own devlink instance (its PCI
 * function's, pci/ADDR; or its netdev's parent device's), the port of
 * flavour pcivf with that VF number, not external, and its netdev.  Keyed
 * by the instance, two PFs sharing one switch ID (a multiport eswitch)
 * cannot be confused.  A VDUSE PF's VFs have none: their OVS port is their
 * own device.
 */
#ifndef VPD_REPS_H
#define VPD_REPS_H

#include "pool.h"

/* How long udev may take to handle (and rename) a new representor. */
#define VPD_UDEV_TIMEOUT_MS 30000

/*
 * Each pooled VF of pf gets its representor's name in e->rep, set up.
 * Waits (at most VPD_OVS_TIMEOUT_MS) for the driver to make them, then
 * where udev runs (at most VPD_UDEV_TIMEOUT_MS) for udev to have named
 * them: the name is the one OVS will find.  May block that long.
 */
bool vpd_find_reps(struct vpd_pools *pools, const struct vpd_pf *pf, GError **error);

/* For the unit tests: the dump request, and a port message's attributes. */
struct nl_msg;
struct nlattr;
struct nl_msg *vpd_msg_port_dump(int family);
int vpd_devlink_port_parse(struct nl_msg *msg, struct nlattr **tb);
/*
 * Whether the port of attributes tb is a VF representor of devlink
 * instance bus/dev (flavour pcivf, not external, with a netdev): then its
 * VF number and netdev (tb's).
 */
bool vpd_devlink_vf_port(struct nlattr **tb, const char *bus, const char *dev,
			 unsigned *vf, const char **netdev);

#endif
