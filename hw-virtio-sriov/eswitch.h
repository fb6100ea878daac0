/*
 * vsriov eswitch: switchdev mode of a virtual PF and its VF representors
 * (eswitch.c; the wire format is docs/virtio-spec/'s, docs/switchdev.md)
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_ESWITCH_H
#define HW_VIRTIO_SRIOV_ESWITCH_H

#include "vsriov.h"

/* The PF's feature: representor queues after the control queue */
#define VSRIOV_NET_F_ESWITCH                    72

/* Its capability (self group: DEVICE_CAP_GET, DRIVER_CAP_SET) */
#define VSRIOV_NET_ESWITCH_CAP                  0x0806
struct vsriov_net_eswitch_cap {
    uint32_t eswitch_limit;     /* le: 1 */
    uint32_t rep_limit;         /* le: representor objects (TotalVFs) */
    uint64_t reserved;
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_eswitch_cap) != 16);

/* Resource objects' common header (the commands are in admin.h) */
struct vsriov_resource_obj_cmd_hdr {
    uint16_t type;              /* le */
    uint8_t reserved[2];
    uint32_t id;                /* le */
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_resource_obj_cmd_hdr) != 8);

/* Switchdev mode while it exists; id 0 only; no specific data but zeros */
#define VSRIOV_NET_RESOURCE_OBJ_ESWITCH         0x0205
/* A VF's representor; its id is its queue pair */
#define VSRIOV_NET_RESOURCE_OBJ_REP             0x0206
struct vsriov_net_resource_obj_rep {
    uint16_t eswitch_id;        /* le: 0 */
    uint16_t reserved;
    uint32_t member_id;         /* le: the VF, 1..NumVFs */
    uint64_t reserved2;
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_resource_obj_rep) != 16);

/* A representor's counters, as its queues see them. */
typedef struct VsriovRepStats {
    uint64_t rx_packets, rx_bytes, rx_dropped;  /* to the driver */
    uint64_t tx_packets, tx_bytes, tx_dropped;  /* from the driver */
} VsriovRepStats;

/*
 * Add the representor queues (right after virtio-net's, which must be one
 * queue pair and the control queue) and offer VIRTIO_NET_F_ESWITCH.
 */
VsriovESwitch *vsriov_eswitch_init(VsriovPF *vpf, Error **errp);
void vsriov_eswitch_exit(VsriovESwitch *esw);
/* A reset of the PF: every object goes, legacy mode. */
void vsriov_eswitch_reset(VsriovESwitch *esw);
void vsriov_eswitch_cap(VsriovESwitch *esw, struct vsriov_net_eswitch_cap *c);
/*
 * The end of a representor's creation that did not complete at once: @ret
 * 0 or a negative errno as below.  The caller returns false if it no
 * longer wants the representor: it goes again.
 */
typedef bool VsriovESwitchDone(VsriovESwitch *esw, int ret, void *opaque);
/*
 * Create object @type @id with its specific @data (@len bytes): 0, or
 * -EOPNOTSUPP (the driver did not negotiate VIRTIO_NET_F_ESWITCH),
 * -EINVAL (a bad field), -EBUSY (VF Enable is clear), -ENODEV (no such
 * member), -EEXIST (exists already), or what the pool's rep_open says:
 * -EPERM (it gives the VF no representor), -ENOSPC (its backend is
 * missing or in use), -ETIMEDOUT..., with @errp set; or 1: the pool
 * answers later, and @done gets the outcome.  Nothing changes on error.
 */
int vsriov_eswitch_create(VsriovESwitch *esw, uint16_t type, uint32_t id,
                          const void *data, size_t len,
                          VsriovESwitchDone *done, void *opaque,
                          Error **errp);
/*
 * Destroy object @type @id: 0, or -ENOENT (none), -EBUSY (the eswitch
 * while representors exist), -EINVAL (a bad type or eswitch id).
 */
int vsriov_eswitch_destroy(VsriovESwitch *esw, uint16_t type, uint32_t id);
bool vsriov_eswitch_switchdev(VsriovESwitch *esw);
VsriovPF *vsriov_eswitch_pf(VsriovESwitch *esw);
/* VF @vf's representor: its id, its backend's netdev id, its counters. */
/* The VF (0-based) of representor object @id, if it exists. */
bool vsriov_eswitch_rep_vf(VsriovESwitch *esw, uint32_t id, uint16_t *vf);
bool vsriov_eswitch_vf_rep(VsriovESwitch *esw, uint16_t vf, uint16_t *id,
                           const char **netdev, VsriovRepStats *st);

#endif
