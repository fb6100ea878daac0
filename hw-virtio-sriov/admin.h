/*
 * vsriov administration virtqueue: the commands and structures proposed
 * for the VIRTIO specification in docs/virtio-spec/ (its README has the
 * table this header must match) that the standard headers do not have
 * yet.  All fields are little-endian.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_ADMIN_H
#define HW_VIRTIO_SRIOV_ADMIN_H

/* VIRTIO's resource object commands (self and SR-IOV group types) */
#define VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE    0x000a
#define VSRIOV_ADMIN_CMD_RESOURCE_OBJ_MODIFY    0x000b
#define VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY     0x000c
#define VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY   0x000d

/* Group administration commands of an SR-IOV group's owner (a PF) */
#define VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE  0x0012

/* Statuses: VIRTIO's, and the proposed EPERM (a policy's refusal) */
#define VSRIOV_ADMIN_STATUS_EPERM               1
#define VSRIOV_ADMIN_STATUS_ENXIO               6
#define VSRIOV_ADMIN_STATUS_EAGAIN              11
#define VSRIOV_ADMIN_STATUS_ENOMEM              12
#define VSRIOV_ADMIN_STATUS_EINVAL              22

#define VSRIOV_ADMIN_Q_INVALID_COMMAND          0x01
#define VSRIOV_ADMIN_Q_INVALID_OPCODE           0x02
#define VSRIOV_ADMIN_Q_INVALID_FIELD            0x03
#define VSRIOV_ADMIN_Q_INVALID_GROUP            0x04
#define VSRIOV_ADMIN_Q_INVALID_MEMBER           0x05
#define VSRIOV_ADMIN_Q_NORESOURCE               0x06
#define VSRIOV_ADMIN_Q_TRYAGAIN                 0x07

/*
 * A member's net configuration: the member configuration object, one per
 * VF (id 0), which the device creates with the VF; the driver reads it
 * with RESOURCE_OBJ_QUERY and changes it with RESOURCE_OBJ_MODIFY of the
 * SR-IOV group type.
 */
#define VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG      0x0207

struct vsriov_admin_net_member_cfg {
    uint8_t mac[6];         /* MODIFY: all zero = back to the default */
    uint16_t vlan_id;       /* 0: none; 1..4094 */
    uint16_t vlan_proto;    /* 0x8100 or 0x88a8 */
    uint8_t link_state;     /* VSRIOV_ADMIN_LINK_* */
    uint8_t flags;          /* VSRIOV_ADMIN_MEMBER_F_* */
    uint32_t max_tx_rate;   /* Mbit/s, 0: no limit */
    uint8_t reserved[8];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_admin_net_member_cfg) != 24);

#define VSRIOV_ADMIN_LINK_AUTO                  0
#define VSRIOV_ADMIN_LINK_UP                    1
#define VSRIOV_ADMIN_LINK_DOWN                  2

#define VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK       (1u << 0)
#define VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET     (1u << 1)   /* read-only */

/* MODIFY's flags: the fields of the configuration to change */
#define VSRIOV_ADMIN_FIELD_MAC                  (1ull << 0)
#define VSRIOV_ADMIN_FIELD_VLAN                 (1ull << 1)
#define VSRIOV_ADMIN_FIELD_LINK_STATE           (1ull << 2)
#define VSRIOV_ADMIN_FIELD_SPOOF_CHECK          (1ull << 3)
#define VSRIOV_ADMIN_FIELD_TX_RATE              (1ull << 4)
#define VSRIOV_ADMIN_FIELD_ALL                  0x1full

/* QUERY's flags: the counters after the configuration */
#define VSRIOV_ADMIN_MEMBER_QUERY_F_STATS       (1ull << 0)

/* The net device capability describing the above (DEVICE_CAP_GET) */
#define VSRIOV_NET_MEMBER_CFG_CAP               0x0805
struct vsriov_net_member_cfg_cap {
    uint64_t supported_fields;
    uint32_t max_tx_rate;   /* highest accepted, Mbit/s; 0: none */
    uint16_t vlan_protos;   /* bit 0: 802.1Q, bit 1: 802.1ad */
    uint8_t reserved[2];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_member_cfg_cap) != 16);

/* SRIOV_MEMBERS_PREPARE's data */
struct vsriov_admin_members_prepare {
    uint16_t num_vfs;
    uint8_t reserved[6];
};

#endif /* HW_VIRTIO_SRIOV_ADMIN_H */
