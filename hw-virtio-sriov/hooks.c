/*
 * vsriov: the hooks virtio-net-pci calls to make and remove a virtual PF
 *
 * The one place that knows every part of a virtual PF and puts them
 * together in order, as QEMU's igb.c does for its core: the PF core (its
 * VFs, their backends and configuration: vpf.c, vf-config.c), its
 * migration (migration.c), its switchdev mode (eswitch.c), and its
 * channel, the administration virtqueue (admin.c).  The parts call only
 * down, never up: what a lower part has to say comes back through a
 * callback it was given.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "vsriov.h"
#include "eswitch.h"
#include "flow.h"

bool vsriov_pf_realize(VsriovPF *vpf, PCIDevice *pf, uint16_t cap_offset,
                       Error **errp)
{
    if (!vsriov_pf_core_realize(vpf, pf, cap_offset, errp)) {
        return false;
    }
    if (!vpf->pf) {
        if (vpf->eswitch) {
            error_setg(errp, "sriov-eswitch=on needs sriov-pool");
            return false;
        }
        return true;    /* not a virtual PF (no sriov-pool) */
    }
    if (vpf->eswitch) {
        /* (its queues come right after virtio-net's) */
        vpf->esw = vsriov_eswitch_init(vpf, errp);
        if (!vpf->esw) {
            vsriov_pf_core_exit(vpf, pf);
            return false;
        }
        vpf->flows = vsriov_flow_init(vpf);
    }
    vsriov_pf_migration_init(vpf);
    vsriov_admin_init(vpf);
    return true;
}

void vsriov_pf_exit(VsriovPF *vpf, PCIDevice *pf)
{
    if (!vpf->pf) {
        return;
    }
    vsriov_admin_exit(vpf);
    vsriov_flow_exit(vpf->flows);
    vpf->flows = NULL;
    vsriov_eswitch_exit(vpf->esw);
    vpf->esw = NULL;
    vsriov_pf_migration_exit(vpf);
    vsriov_pf_core_exit(vpf, pf);
}
