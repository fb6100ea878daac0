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

/* Group administration commands of an SR-IOV group's owner (a PF) */
#define VSRIOV_ADMIN_CMD_NET_MEMBER_CFG_GET     0x0012
#define VSRIOV_ADMIN_CMD_NET_MEMBER_CFG_SET     0x0013
#define VSRIOV_ADMIN_CMD_NET_MEMBER_STATS_GET   0x0014
#define VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE  0x0015

/* Statuses: VIRTIO's, and the proposed EPERM (a policy's refusal) */
#define VSRIOV_ADMIN_STATUS_EPERM               1
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

/* A member's net configuration: NET_MEMBER_CFG_GET's result */
struct vsriov_admin_net_member_cfg {
    uint8_t mac[6];         /* SET: all zero = back to the default */
    uint16_t vlan_id;       /* 0: none; 1..4094 */
    uint16_t vlan_proto;    /* 0x8100 or 0x88a8 */
    uint8_t vlan_qos;       /* 0..7 */
    uint8_t link_state;     /* VSRIOV_ADMIN_LINK_* */
    uint8_t flags;          /* VSRIOV_ADMIN_MEMBER_F_* */
    uint8_t reserved[3];
    uint32_t min_tx_rate;   /* Mbit/s, 0: no guarantee */
    uint32_t max_tx_rate;   /* Mbit/s, 0: no limit */
    uint8_t reserved2[8];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_admin_net_member_cfg) != 32);

#define VSRIOV_ADMIN_LINK_AUTO                  0
#define VSRIOV_ADMIN_LINK_UP                    1
#define VSRIOV_ADMIN_LINK_DOWN                  2

#define VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK       (1u << 0)
#define VSRIOV_ADMIN_MEMBER_F_TRUSTED           (1u << 1)
#define VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET     (1u << 2)   /* read-only */

/* NET_MEMBER_CFG_SET's data: the fields to change, and their values */
struct vsriov_admin_net_member_cfg_set {
    uint64_t fields;        /* VSRIOV_ADMIN_FIELD_* */
    struct vsriov_admin_net_member_cfg cfg;
};

#define VSRIOV_ADMIN_FIELD_MAC                  (1ull << 0)
#define VSRIOV_ADMIN_FIELD_VLAN                 (1ull << 1)
#define VSRIOV_ADMIN_FIELD_LINK_STATE           (1ull << 2)
#define VSRIOV_ADMIN_FIELD_SPOOF_CHECK          (1ull << 3)
#define VSRIOV_ADMIN_FIELD_TRUSTED              (1ull << 4)
#define VSRIOV_ADMIN_FIELD_TX_RATE              (1ull << 5)
#define VSRIOV_ADMIN_FIELD_ALL                  0x3full

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
