/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reps: finding each pooled VF's representor, the netdev that is its port
 * on the PF's eswitch (switchdev mode): the netdev with the PF's switch ID
 * (phys_switch_id) and port name pfNvfM (phys_port_name), found in sysfs.
 * A VDUSE PF's VFs have none: their OVS port is their own device.
 */
#ifndef VPD_REPS_H
#define VPD_REPS_H

#include "pool.h"

/*
 * Each pooled VF of pf gets its representor's name in e->rep, set up.
 * Waits (at most VPD_OVS_TIMEOUT_MS) for the driver to make them.
 */
bool vpd_find_reps(struct vpd_pools *pools, const struct vpd_pf *pf, GError **error);

#endif
