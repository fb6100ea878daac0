/*
 * vsriov flow: the guest's rules in its eswitch, offloaded to the pool's
 * provider (flow.c; the wire format is docs/virtio-spec/'s flow filter
 * objects in the eswitch domain, docs/switchdev.md)
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_FLOW_H
#define HW_VIRTIO_SRIOV_FLOW_H

#include "vsriov.h"

/* Capabilities (self group: DEVICE_CAP_GET, DRIVER_CAP_SET) */
#define VSRIOV_NET_FF_RESOURCE_CAP          0x0800
#define VSRIOV_NET_FF_SELECTOR_CAP          0x0801
#define VSRIOV_NET_FF_ACTION_CAP            0x0802
struct vsriov_net_ff_cap_data {
    uint32_t groups_limit;          /* le */
    uint32_t classifiers_limit;     /* le */
    uint32_t rules_limit;           /* le */
    uint32_t rules_per_group_limit; /* le */
    uint8_t last_rule_priority;
    uint8_t selectors_per_classifier_limit;
    uint8_t reserved[2];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_ff_cap_data) != 20);

/* A selector: its header, then @length bytes of mask (or key) */
struct vsriov_net_ff_selector {
    uint8_t type;
    uint8_t flags;
    uint8_t reserved[2];
    uint8_t length;
    uint8_t reserved1[3];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_ff_selector) != 8);
#define VSRIOV_NET_FF_MASK_F_PARTIAL_MASK   (1 << 0)
#define VSRIOV_NET_FF_MASK_TYPE_ETH         1
#define VSRIOV_NET_FF_MASK_TYPE_IPV4        2
#define VSRIOV_NET_FF_MASK_TYPE_IPV6        3
#define VSRIOV_NET_FF_MASK_TYPE_TCP         4
#define VSRIOV_NET_FF_MASK_TYPE_UDP         5
#define VSRIOV_NET_FF_MASK_TYPE_VLAN        7   /* TCI, encapsulated type */
#define VSRIOV_NET_FF_MASK_TYPE_PORT        8   /* le32 source port */

#define VSRIOV_NET_FF_ACTION_DROP           1
#define VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT 5

/* Flow filter objects (self group) */
#define VSRIOV_NET_RESOURCE_OBJ_FF_GROUP    0x0200
#define VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER 0x0201
#define VSRIOV_NET_RESOURCE_OBJ_FF_RULE     0x0202
#define VSRIOV_NET_FF_DOMAIN_ESWITCH        1
struct vsriov_net_resource_obj_ff_group {
    uint16_t group_priority;    /* le */
    uint8_t domain;
    uint8_t reserved[5];
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_resource_obj_ff_group) != 8);
struct vsriov_net_resource_obj_ff_rule {
    uint32_t group_id;          /* le */
    uint32_t classifier_id;     /* le */
    uint8_t rule_priority;
    uint8_t key_length;
    uint8_t action;
    uint8_t flags;              /* VSRIOV_NET_FF_RULE_F_* */
    uint16_t port;              /* le: FORWARD_TO_PORT's destination */
    uint16_t vlan_tci;          /* le: VLAN_PUSH's tag */
};
QEMU_BUILD_BUG_ON(sizeof(struct vsriov_net_resource_obj_ff_rule) != 16);
#define VSRIOV_NET_FF_RULE_F_VLAN_POP       (1 << 0)
#define VSRIOV_NET_FF_RULE_F_VLAN_PUSH      (1 << 1)
/* After a rule (and its keys) in a QUERY's result */
struct vsriov_net_ff_rule_counters {
    uint64_t packets;           /* le */
    uint64_t bytes;             /* le */
};

/* The largest object data and QUERY result this device takes */
#define VSRIOV_FLOW_OBJ_MAX     160

/*
 * The end of a command on a rule that waited for the pool's provider:
 * @ret 0 or a negative errno as below, @result (@len bytes, a QUERY's)
 * valid during the call.  The caller returns false if nobody waits any
 * more (the administration queue was reset, or the VM stopped).
 */
typedef bool VsriovFlowDone(void *opaque, int ret, const void *result,
                            size_t len);

/* The flow table of @vpf's eswitch (vpf->esw). */
VsriovFlowTable *vsriov_flow_init(VsriovPF *vpf);
void vsriov_flow_exit(VsriovFlowTable *ft);
/* Every object goes (a reset of the PF); the provider drops the rules. */
void vsriov_flow_reset(VsriovFlowTable *ft);
bool vsriov_flow_is_obj(uint16_t type);
/* The capabilities' ids the device offers, as CAP_ID_LIST_QUERY's bits. */
uint64_t vsriov_flow_cap_ids(void);
/* DEVICE_CAP_GET of @cap into @out (AVQ result room): its length, or 0. */
size_t vsriov_flow_cap_get(VsriovFlowTable *ft, uint16_t cap, void *out);
/* DRIVER_CAP_SET of @cap (@len bytes at @data): 0 or -EINVAL. */
int vsriov_flow_cap_set(VsriovFlowTable *ft, uint16_t cap, const void *data,
                        size_t len);
/*
 * RESOURCE_OBJ_CREATE of object @type @id with its data (@len bytes):
 * 0, or -EINVAL (a bad field: docs/switchdev.md lists them), -EOPNOTSUPP
 * (not switchdev mode, the uplink, a pool that offloads nothing),
 * -EEXIST, -EBUSY (a VF without a representor), -ENOSPC (a limit), or
 * the provider's refusal (-EPERM, -ENOSPC, -EAGAIN, -ETIMEDOUT) with
 * @errp set; or 1: @done says.  Nothing changes on error.
 */
int vsriov_flow_create(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                       const void *data, size_t len, VsriovFlowDone *done,
                       void *opaque, Error **errp);
/* RESOURCE_OBJ_DESTROY: 0, -ENOENT, -EBUSY (in use), or as create. */
int vsriov_flow_destroy(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                        VsriovFlowDone *done, void *opaque, Error **errp);
/*
 * RESOURCE_OBJ_QUERY: the object into @result (its length in @len), a
 * rule's with its counters, which the provider gives later (1).
 */
int vsriov_flow_query(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                      void *result, size_t *len, VsriovFlowDone *done,
                      void *opaque, Error **errp);
/* Whether objects exist (the eswitch cannot go); rules that name VF @vf. */
bool vsriov_flow_in_use(VsriovFlowTable *ft);
bool vsriov_flow_names_vf(VsriovFlowTable *ft, int vf);
/* Rules in the provider's switch now. */
unsigned vsriov_flow_rules(VsriovFlowTable *ft);

#endif
