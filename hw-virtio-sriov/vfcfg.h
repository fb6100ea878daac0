/*
 * vsriov VF-configuration channel: register layout
 *
 * A PCI Express Vendor-Specific Extended Capability (VSEC) on the virtual
 * PF through which the guest's PF driver configures its VFs (what Linux's
 * "ip link set <pf> vf N ..." asks).  The layout is specified in
 * docs/vf-config-channel.md; this header is its C form.  All fields are
 * little-endian.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_VFCFG_H
#define HW_VIRTIO_SRIOV_VFCFG_H

/* VSEC header: ID (in the PF's vendor's namespace, 0x1af4), revision */
#define VSRIOV_VFCFG_VSEC_ID            0x5646  /* "VF" */
#define VSRIOV_VFCFG_VSEC_REV           1

/* Offsets from the start of the extended capability */
#define VSRIOV_VFCFG_OPCODE             0x08    /* u16, RW: write runs it */
#define VSRIOV_VFCFG_STATUS             0x0a    /* u16, RO */
#define VSRIOV_VFCFG_MEMBER             0x0c    /* u32, RW: VF number + 1 */
#define VSRIOV_VFCFG_GROUP              0x10    /* u16, RW: group type */
#define VSRIOV_VFCFG_DATA               0x14    /* 64 bytes, RW */
#define VSRIOV_VFCFG_DATA_SIZE          64
#define VSRIOV_VFCFG_SIZEOF             (VSRIOV_VFCFG_DATA + \
                                         VSRIOV_VFCFG_DATA_SIZE)

/* Group type, as in VIRTIO's admin command set */
#define VSRIOV_VFCFG_GROUP_SRIOV        1

/* Opcodes */
#define VSRIOV_VFCFG_CMD_GET_CONFIG     0x8000
#define VSRIOV_VFCFG_CMD_SET_MAC        0x8001
#define VSRIOV_VFCFG_CMD_SET_VLAN       0x8002
#define VSRIOV_VFCFG_CMD_SET_SPOOFCHK   0x8003
#define VSRIOV_VFCFG_CMD_SET_TRUST      0x8004
#define VSRIOV_VFCFG_CMD_SET_LINK_STATE 0x8005
#define VSRIOV_VFCFG_CMD_SET_RATE       0x8006
#define VSRIOV_VFCFG_CMD_GET_STATS      0x8007
#define VSRIOV_VFCFG_CMD_PREPARE_VFS    0x8008  /* member 0; u16 NumVFs */

/* Status: 0 or an errno value of Linux's generic numbering */
#define VSRIOV_VFCFG_S_OK               0
#define VSRIOV_VFCFG_S_EPERM            1
#define VSRIOV_VFCFG_S_EIO              5
#define VSRIOV_VFCFG_S_EINVAL           22
#define VSRIOV_VFCFG_S_ENOSPC           28
#define VSRIOV_VFCFG_S_EOPNOTSUPP       95
#define VSRIOV_VFCFG_S_ETIMEDOUT        110
#define VSRIOV_VFCFG_S_EINPROGRESS      115     /* not done yet: poll */

/* GET_CONFIG result / SET_* arguments, offsets in DATA */
#define VSRIOV_VFCFG_CFG_MAC            0       /* 6 bytes */
#define VSRIOV_VFCFG_CFG_VLAN           6       /* u16 */
#define VSRIOV_VFCFG_CFG_QOS            8       /* u8 */
#define VSRIOV_VFCFG_CFG_SPOOFCHK       9       /* u8 */
#define VSRIOV_VFCFG_CFG_TRUST          10      /* u8 */
#define VSRIOV_VFCFG_CFG_LINK_STATE     11      /* u8 */
#define VSRIOV_VFCFG_CFG_VLAN_PROTO     12      /* u16: 0x8100 or 0x88a8 */
#define VSRIOV_VFCFG_CFG_MIN_RATE       16      /* u32, Mbit/s */
#define VSRIOV_VFCFG_CFG_MAX_RATE       20      /* u32, Mbit/s */

/* SET_VLAN: vlan u16 at 0, qos u8 at 2, proto u16 at 4 */
/* SET_RATE: min u32 at 0, max u32 at 4 */

/* Link states, as Linux's IFLA_VF_LINK_STATE_* */
#define VSRIOV_VFCFG_LINK_AUTO          0
#define VSRIOV_VFCFG_LINK_ENABLE        1
#define VSRIOV_VFCFG_LINK_DISABLE       2

/* GET_STATS result: eight u64 counters, as seen from the VF */
#define VSRIOV_VFCFG_STATS_RX_PACKETS   0
#define VSRIOV_VFCFG_STATS_TX_PACKETS   8
#define VSRIOV_VFCFG_STATS_RX_BYTES     16
#define VSRIOV_VFCFG_STATS_TX_BYTES     24
#define VSRIOV_VFCFG_STATS_BROADCAST    32
#define VSRIOV_VFCFG_STATS_MULTICAST    40
#define VSRIOV_VFCFG_STATS_RX_DROPPED   48
#define VSRIOV_VFCFG_STATS_TX_DROPPED   56

#endif /* HW_VIRTIO_SRIOV_VFCFG_H */
