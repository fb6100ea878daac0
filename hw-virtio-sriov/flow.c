/*
 * vsriov flow: the guest's rules in its eswitch, offloaded to the pool's
 * provider
 *
 * In switchdev mode the PF's driver may put rules into the eswitch: what
 * a frame one of its VFs sends must match (the source VF, Ethernet, VLAN,
 * IPv4/IPv6 and TCP/UDP fields) and what happens to it (dropped, or
 * forwarded to another of its VFs, with a VLAN tag popped or pushed).
 * They are VIRTIO's flow filter objects in the eswitch domain
 * (docs/virtio-spec/, docs/switchdev.md): groups (a priority each),
 * classifiers (which fields, with masks) and rules (a classifier's key,
 * a group, an action), made with RESOURCE_OBJ_CREATE, read with _QUERY
 * (a rule's counters) and gone with _DESTROY.
 *
 * QEMU checks every object against its capabilities and the PF's state
 * (the VFs a rule names exist and have representors) and keeps them; a
 * rule goes to the pool's provider (flow_add), whose switch runs it on
 * the VF's frames: QEMU never sees them.  Groups and classifiers are
 * QEMU's alone.  A pool that offloads nothing (a static pool) refuses
 * every rule; the guest's driver keeps it in software.  The provider
 * confines the rule to this VM's VFs again (the daemon's own checks).
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "migration/misc.h"
#include "migration/vmstate.h"
#include "net/eth.h"
#include "vsriov.h"
#include "eswitch.h"
#include "flow.h"
#include "trace.h"

#define FF_GROUPS       64
#define FF_CLASSIFIERS  1024
#define FF_RULES        1024
#define FF_SELECTORS    6

/*
 * While a migration runs, the rules' counters are read this often: the
 * destination's go on from the source's as last read, which is at most
 * this old when the source stops (a rule's counters never go back).
 */
#define FLOW_MIG_REFRESH_MS 100

/* A selector of a classifier: where its mask is in the object's data. */
typedef struct FlowSel {
    uint8_t type;
    uint8_t len;
    uint16_t off;
} FlowSel;

typedef struct FlowClassifier {
    unsigned refs;              /* rules that use it */
    uint8_t count;
    FlowSel sel[FF_SELECTORS];
    uint16_t key_len;           /* its rules' keys: the masks' lengths */
    size_t len;
    uint8_t raw[VSRIOV_FLOW_OBJ_MAX];
} FlowClassifier;

typedef struct FlowGroup {
    unsigned refs;
    uint16_t prio;
} FlowGroup;

typedef struct FlowCall FlowCall;

typedef struct FlowRule {
    uint32_t id;
    uint32_t group, cls;
    int src, dst;               /* VFs; dst -1: dropped */
    bool active;                /* in the provider's switch */
    FlowCall *call;             /* the provider call in flight */
    VsriovFlowSpec spec;        /* (spec.id: the provider's name of it) */
    uint64_t packets, bytes;    /* as last read (a migration's too) */
    uint64_t base_packets, base_bytes;  /* the source's, after one */
    size_t len;
    uint8_t raw[VSRIOV_FLOW_OBJ_MAX];
} FlowRule;

enum { CALL_ADD, CALL_DEL, CALL_STATS, CALL_RESTORE };

/* A provider call: its answer goes to the rule, unless orphaned. */
struct FlowCall {
    VsriovFlowTable *ft;        /* NULL: nobody waits (orphaned) */
    VsriovPool *pool;           /* (a reference) */
    FlowRule *rule;
    int op;
    uint32_t pid;               /* the provider's name of the rule */
    VsriovFlowDone *done;
    void *opaque;
    void *result;               /* CALL_STATS: the caller's room */
};

struct VsriovFlowTable {
    VsriovPF *vpf;
    struct vsriov_net_ff_cap_data limits;   /* as the driver set them */
    FlowGroup *groups[FF_GROUPS];
    FlowClassifier *classifiers[FF_CLASSIFIERS];
    FlowRule *rules[FF_RULES];
    unsigned active;
    /* migration: the objects, flat (flow_pre_save, flow_post_load) */
    uint8_t *saved;
    uint32_t saved_len;
    /* ... and the counters read while it runs (flow_mig_notify) */
    QEMUTimer *refresh;
    NotifierWithReturn mig;
};

/* The provider's names of rules: unique in this process. */
static uint32_t next_pid;

static uint32_t new_pid(void)
{
    if (!++next_pid) {
        next_pid = 1;
    }
    return next_pid;
}

/* ---- capabilities ------------------------------------------------------ */

typedef struct SelCap {
    uint8_t type;
    uint8_t flags;
    uint8_t len;
    uint8_t mask[40];
} SelCap;

/* In type order, as VIRTIO_NET_FF_SELECTOR_CAP lists them. */
static const SelCap sel_caps[] = {
    { VSRIOV_NET_FF_MASK_TYPE_ETH, VSRIOV_NET_FF_MASK_F_PARTIAL_MASK, 14,
      { [0 ... 13] = 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_IPV4, VSRIOV_NET_FF_MASK_F_PARTIAL_MASK, 20,
      { [9] = 0xff, [12 ... 19] = 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_IPV6, VSRIOV_NET_FF_MASK_F_PARTIAL_MASK, 40,
      { [6] = 0xff, [8 ... 39] = 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_TCP, VSRIOV_NET_FF_MASK_F_PARTIAL_MASK, 20,
      { [0 ... 3] = 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_UDP, VSRIOV_NET_FF_MASK_F_PARTIAL_MASK, 8,
      { [0 ... 3] = 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_VLAN, 0, 4, { 0x0f, 0xff, 0xff, 0xff } },
    { VSRIOV_NET_FF_MASK_TYPE_PORT, 0, 4, { 0xff, 0xff, 0xff, 0xff } },
};

static const uint8_t actions[] = {
    VSRIOV_NET_FF_ACTION_DROP, VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT,
};

static const SelCap *sel_cap(uint8_t type)
{
    for (unsigned i = 0; i < ARRAY_SIZE(sel_caps); i++) {
        if (sel_caps[i].type == type) {
            return &sel_caps[i];
        }
    }
    return NULL;
}

static void device_limits(struct vsriov_net_ff_cap_data *c)
{
    memset(c, 0, sizeof(*c));
    c->groups_limit = cpu_to_le32(FF_GROUPS);
    c->classifiers_limit = cpu_to_le32(FF_CLASSIFIERS);
    c->rules_limit = cpu_to_le32(FF_RULES);
    c->rules_per_group_limit = cpu_to_le32(FF_RULES);
    c->last_rule_priority = 0;  /* order by group: one per priority */
    c->selectors_per_classifier_limit = FF_SELECTORS;
}

uint64_t vsriov_flow_cap_ids(void)
{
    QEMU_BUILD_BUG_ON(VSRIOV_NET_FF_ACTION_CAP / 64 !=
                      VSRIOV_NET_FF_RESOURCE_CAP / 64);
    return 1ull << (VSRIOV_NET_FF_RESOURCE_CAP % 64) |
           1ull << (VSRIOV_NET_FF_SELECTOR_CAP % 64) |
           1ull << (VSRIOV_NET_FF_ACTION_CAP % 64);
}

/* The selector capability's data into @out: its length. */
static size_t selector_cap(uint8_t *out)
{
    size_t off = 8;

    out[0] = ARRAY_SIZE(sel_caps);
    memset(out + 1, 0, 7);
    for (unsigned i = 0; i < ARRAY_SIZE(sel_caps); i++) {
        struct vsriov_net_ff_selector s = {
            .type = sel_caps[i].type,
            .flags = sel_caps[i].flags,
            .length = sel_caps[i].len,
        };

        memcpy(out + off, &s, sizeof(s));
        memcpy(out + off + sizeof(s), sel_caps[i].mask, s.length);
        off += sizeof(s) + s.length;
    }
    return off;
}

size_t vsriov_flow_cap_get(VsriovFlowTable *ft, uint16_t cap, void *out)
{
    uint8_t *p = out;

    switch (cap) {
    case VSRIOV_NET_FF_RESOURCE_CAP:
        device_limits(out);
        return sizeof(struct vsriov_net_ff_cap_data);
    case VSRIOV_NET_FF_SELECTOR_CAP:
        return selector_cap(out);
    case VSRIOV_NET_FF_ACTION_CAP:
        memset(p, 0, 8);
        p[0] = ARRAY_SIZE(actions);
        memcpy(p + 8, actions, sizeof(actions));
        return 8 + sizeof(actions);
    }
    return 0;
}

int vsriov_flow_cap_set(VsriovFlowTable *ft, uint16_t cap, const void *data,
                        size_t len)
{
    const uint8_t *p = data;

    switch (cap) {
    case VSRIOV_NET_FF_RESOURCE_CAP: {
        struct vsriov_net_ff_cap_data dev, drv;

        device_limits(&dev);
        memcpy(&drv, data, sizeof(drv));
        /* the driver may only take less */
        if (le32_to_cpu(drv.groups_limit) > FF_GROUPS ||
            le32_to_cpu(drv.classifiers_limit) > FF_CLASSIFIERS ||
            le32_to_cpu(drv.rules_limit) > FF_RULES ||
            le32_to_cpu(drv.rules_per_group_limit) > FF_RULES ||
            drv.last_rule_priority > dev.last_rule_priority ||
            drv.selectors_per_classifier_limit > FF_SELECTORS ||
            drv.reserved[0] || drv.reserved[1]) {
            return -EINVAL;
        }
        ft->limits = drv;
        return 0;
    }
    case VSRIOV_NET_FF_SELECTOR_CAP: {
        /* a subset of ours, in type order, masks within ours */
        size_t off = 8;
        int last = 0;

        if (p[0] > ARRAY_SIZE(sel_caps)) {
            return -EINVAL;
        }
        for (unsigned i = 0; i < p[0]; i++) {
            struct vsriov_net_ff_selector s;
            const SelCap *c;

            if (off + sizeof(s) > len) {
                return -EINVAL;
            }
            memcpy(&s, p + off, sizeof(s));
            c = sel_cap(s.type);
            if (!c || s.type <= last || s.length != c->len ||
                (s.flags & ~c->flags) || off + sizeof(s) + s.length > len) {
                return -EINVAL;
            }
            for (unsigned b = 0; b < s.length; b++) {
                if (p[off + sizeof(s) + b] & ~c->mask[b]) {
                    return -EINVAL;
                }
            }
            last = s.type;
            off += sizeof(s) + s.length;
        }
        return 0;
    }
    case VSRIOV_NET_FF_ACTION_CAP:
        if (p[0] > ARRAY_SIZE(actions) || p[0] + 8 > len) {
            return -EINVAL;
        }
        for (unsigned i = 0; i < p[0]; i++) {
            if (!memchr(actions, p[8 + i], sizeof(actions))) {
                return -EINVAL;
            }
        }
        return 0;
    }
    return -EINVAL;
}

bool vsriov_flow_is_obj(uint16_t type)
{
    return type == VSRIOV_NET_RESOURCE_OBJ_FF_GROUP ||
           type == VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER ||
           type == VSRIOV_NET_RESOURCE_OBJ_FF_RULE;
}

/* ---- checking objects -------------------------------------------------- */

static bool all_or_none(const uint8_t *m, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (m[i] != m[0]) {
            return false;
        }
    }
    return m[0] == 0 || m[0] == 0xff;
}

static bool any(const uint8_t *m, size_t n)
{
    return !buffer_is_zero(m, n);
}

/* A selector's place in an eswitch classifier. */
static int sel_rank(uint8_t type)
{
    switch (type) {
    case VSRIOV_NET_FF_MASK_TYPE_PORT:
        return 0;
    case VSRIOV_NET_FF_MASK_TYPE_ETH:
        return 1;
    case VSRIOV_NET_FF_MASK_TYPE_VLAN:
        return 2;
    case VSRIOV_NET_FF_MASK_TYPE_IPV4:
    case VSRIOV_NET_FF_MASK_TYPE_IPV6:
        return 3;
    default:
        return 4;
    }
}

/*
 * Parse and check a classifier's data: PORT, ETH, [VLAN], [IPV4|IPV6],
 * [TCP|UDP], each mask within the capability's, exact fields whole.
 */
static int classifier_parse(FlowClassifier *c, const uint8_t *d, size_t len,
                            unsigned max_sel, Error **errp)
{
    size_t off = 8;
    int rank = -1;

    if (len < 8 || d[0] < 2 || d[0] > max_sel || any(d + 1, 7)) {
        error_setg(errp, "a classifier has 2 to %u selectors and zero "
                   "reserved bytes", max_sel);
        return -EINVAL;
    }
    c->count = d[0];
    c->key_len = 0;
    for (unsigned i = 0; i < c->count; i++) {
        struct vsriov_net_ff_selector s;
        const SelCap *cap;
        const uint8_t *m;

        if (off + sizeof(s) > len) {
            error_setg(errp, "selector %u is cut short", i);
            return -EINVAL;
        }
        memcpy(&s, d + off, sizeof(s));
        cap = sel_cap(s.type);
        /* PORT, ETH, then each of the others at most once, in order */
        if (!cap || sel_rank(s.type) <= rank ||
            (i < 2 && sel_rank(s.type) != (int)i)) {
            error_setg(errp, "selector %u (type %u) is out of order: "
                       "PORT, ETH, [VLAN], [IPV4|IPV6], [TCP|UDP]",
                       i, s.type);
            return -EINVAL;
        }
        rank = sel_rank(s.type);
        if (s.length != cap->len || (s.flags & ~cap->flags) ||
            s.reserved[0] || s.reserved[1] || any(s.reserved1, 3) ||
            off + sizeof(s) + s.length > len) {
            error_setg(errp, "selector %u (type %u): bad length, flags or "
                       "reserved bytes", i, s.type);
            return -EINVAL;
        }
        m = d + off + sizeof(s);
        for (unsigned b = 0; b < s.length; b++) {
            if (m[b] & ~cap->mask[b]) {
                error_setg(errp, "selector %u (type %u): mask byte %u "
                           "outside the capability's", i, s.type, b);
                return -EINVAL;
            }
        }
        /* fields matched whole: the port, types, protocols, the VID */
        if ((s.type == VSRIOV_NET_FF_MASK_TYPE_PORT && !all_or_none(m, 4)) ||
            (s.type == VSRIOV_NET_FF_MASK_TYPE_ETH &&
             !all_or_none(m + 12, 2)) ||
            (s.type == VSRIOV_NET_FF_MASK_TYPE_VLAN &&
             (!all_or_none(m + 2, 2) ||
              !((m[0] == 0x0f && m[1] == 0xff) || (!m[0] && !m[1])))) ||
            (s.type == VSRIOV_NET_FF_MASK_TYPE_IPV4 &&
             !all_or_none(m + 9, 1)) ||
            (s.type == VSRIOV_NET_FF_MASK_TYPE_IPV6 &&
             !all_or_none(m + 6, 1))) {
            error_setg(errp, "selector %u (type %u): a field that is "
                       "matched whole has a partial mask", i, s.type);
            return -EINVAL;
        }
        c->sel[i] = (FlowSel) { s.type, s.length, off + sizeof(s) };
        c->key_len += s.length;
        off += sizeof(s) + s.length;
    }
    if (c->sel[0].type != VSRIOV_NET_FF_MASK_TYPE_PORT ||
        !all_or_none(d + c->sel[0].off, 4) || !d[c->sel[0].off]) {
        error_setg(errp, "an eswitch classifier starts with the source "
                   "port, matched whole");
        return -EINVAL;
    }
    if (c->key_len > VSRIOV_FLOW_OBJ_MAX - 16) {
        error_setg(errp, "keys of %u bytes", c->key_len);
        return -EINVAL;
    }
    c->len = off;
    memcpy(c->raw, d, off);
    return 0;
}

/*
 * A rule's keys through its classifier into @spec (matches) and @src
 * (the source VF's port): the keys within the masks, the prerequisites
 * of each layer matched.
 */
static int rule_match(const FlowClassifier *c, const uint8_t *keys,
                      VsriovFlowSpec *spec, uint32_t *src, Error **errp)
{
    unsigned ko = 0;
    int l3 = 0;

    for (unsigned i = 0; i < c->count; i++) {
        const FlowSel *s = &c->sel[i];
        const uint8_t *m = c->raw + s->off, *k = keys + ko;

        for (unsigned b = 0; b < s->len; b++) {
            if (k[b] & ~m[b]) {
                error_setg(errp, "key of selector %u (type %u) has bits "
                           "outside its mask", i, s->type);
                return -EINVAL;
            }
        }
        ko += s->len;
        switch (s->type) {
        case VSRIOV_NET_FF_MASK_TYPE_PORT:
            *src = ldl_le_p(k);
            break;
        case VSRIOV_NET_FF_MASK_TYPE_ETH:
            if (any(m, 6)) {
                spec->has |= VSRIOV_FM_ETH_DST;
                memcpy(spec->eth_dst, k, 6);
                memcpy(spec->eth_dst_mask, m, 6);
            }
            if (any(m + 6, 6)) {
                spec->has |= VSRIOV_FM_ETH_SRC;
                memcpy(spec->eth_src, k + 6, 6);
                memcpy(spec->eth_src_mask, m + 6, 6);
            }
            if (m[12]) {
                spec->has |= VSRIOV_FM_ETH_TYPE;
                spec->eth_type = lduw_be_p(k + 12);
            }
            break;
        case VSRIOV_NET_FF_MASK_TYPE_VLAN:
            if (!(spec->has & VSRIOV_FM_ETH_TYPE) ||
                spec->eth_type != ETH_P_VLAN || !m[0]) {
                error_setg(errp, "a VLAN selector needs EtherType 0x8100 "
                           "and the VID matched");
                return -EINVAL;
            }
            spec->has &= ~VSRIOV_FM_ETH_TYPE;
            spec->has |= VSRIOV_FM_VLAN_VID;
            spec->vlan_vid = lduw_be_p(k) & 0xfff;
            if (!spec->vlan_vid || spec->vlan_vid == 0xfff) {
                error_setg(errp, "VLAN id %u", spec->vlan_vid);
                return -EINVAL;
            }
            if (m[2]) {
                spec->has |= VSRIOV_FM_ETH_TYPE;
                spec->eth_type = lduw_be_p(k + 2);
            }
            break;
        case VSRIOV_NET_FF_MASK_TYPE_IPV4:
        case VSRIOV_NET_FF_MASK_TYPE_IPV6: {
            bool v4 = s->type == VSRIOV_NET_FF_MASK_TYPE_IPV4;
            unsigned alen = v4 ? 4 : 16, src_off = v4 ? 12 : 8;
            unsigned proto_off = v4 ? 9 : 6;

            if (!(spec->has & VSRIOV_FM_ETH_TYPE) ||
                spec->eth_type != (v4 ? ETH_P_IP : ETH_P_IPV6)) {
                error_setg(errp, "an IPv%d selector needs EtherType 0x%04x",
                           v4 ? 4 : 6, v4 ? ETH_P_IP : ETH_P_IPV6);
                return -EINVAL;
            }
            l3 = v4 ? 4 : 6;
            if (m[proto_off]) {
                spec->has |= VSRIOV_FM_IP_PROTO;
                spec->ip_proto = k[proto_off];
            }
            if (any(m + src_off, alen)) {
                spec->has |= v4 ? VSRIOV_FM_IPV4_SRC : VSRIOV_FM_IPV6_SRC;
                memcpy(spec->ip_src, k + src_off, alen);
                memcpy(spec->ip_src_mask, m + src_off, alen);
            }
            if (any(m + src_off + alen, alen)) {
                spec->has |= v4 ? VSRIOV_FM_IPV4_DST : VSRIOV_FM_IPV6_DST;
                memcpy(spec->ip_dst, k + src_off + alen, alen);
                memcpy(spec->ip_dst_mask, m + src_off + alen, alen);
            }
            break;
        }
        case VSRIOV_NET_FF_MASK_TYPE_TCP:
        case VSRIOV_NET_FF_MASK_TYPE_UDP: {
            uint8_t proto = s->type == VSRIOV_NET_FF_MASK_TYPE_TCP ? 6 : 17;

            if (!l3 || !(spec->has & VSRIOV_FM_IP_PROTO) ||
                spec->ip_proto != proto) {
                error_setg(errp, "a %s selector needs IP protocol %u",
                           proto == 6 ? "TCP" : "UDP", proto);
                return -EINVAL;
            }
            if (any(m, 2)) {
                spec->has |= VSRIOV_FM_L4_SRC;
                memcpy(spec->l4_src, k, 2);
                memcpy(spec->l4_src_mask, m, 2);
            }
            if (any(m + 2, 2)) {
                spec->has |= VSRIOV_FM_L4_DST;
                memcpy(spec->l4_dst, k + 2, 2);
                memcpy(spec->l4_dst_mask, m + 2, 2);
            }
            break;
        }
        }
    }
    if (spec->has & VSRIOV_FM_ETH_TYPE && !(spec->has & VSRIOV_FM_VLAN_VID) &&
        (spec->eth_type == ETH_P_VLAN || spec->eth_type == ETH_P_DVLAN)) {
        /* (the provider's EtherType is the one after any tag) */
        error_setg(errp, "a tagged frame is matched by a VLAN selector, not "
                   "by EtherType 0x%04x", spec->eth_type);
        return -EINVAL;
    }
    return 0;
}

/* Whether VF @vf (0-based) is enabled and has a representor object. */
static bool vf_has_rep(VsriovFlowTable *ft, int vf)
{
    VsriovRepStats st;
    const char *netdev;
    uint16_t id;

    return vf >= 0 && vf < vsriov_pf_enabled_vfs(ft->vpf) &&
           vsriov_eswitch_vf_rep(ft->vpf->esw, vf, &id, &netdev, &st);
}

/* Check rule data @d (@len bytes) into @r (not yet the table's). */
static int rule_parse(VsriovFlowTable *ft, FlowRule *r, const uint8_t *d,
                      size_t len, Error **errp)
{
    struct vsriov_net_resource_obj_ff_rule h;
    FlowClassifier *c;
    FlowGroup *g;
    uint32_t port = 0;
    uint16_t dst, tci;
    int ret;

    if (len < sizeof(h)) {
        return -EINVAL;
    }
    memcpy(&h, d, sizeof(h));
    r->group = le32_to_cpu(h.group_id);
    r->cls = le32_to_cpu(h.classifier_id);
    g = r->group < FF_GROUPS ? ft->groups[r->group] : NULL;
    c = r->cls < FF_CLASSIFIERS ? ft->classifiers[r->cls] : NULL;
    if (!g || !c) {
        error_setg(errp, "no group %u or no classifier %u", r->group,
                   r->cls);
        return -EINVAL;
    }
    if (h.rule_priority || h.key_length != c->key_len ||
        sizeof(h) + h.key_length > len) {
        error_setg(errp, "rule priority %u (only 0), key length %u (the "
                   "classifier's: %u)", h.rule_priority, h.key_length,
                   c->key_len);
        return -EINVAL;
    }
    if (g->refs >= le32_to_cpu(ft->limits.rules_per_group_limit)) {
        error_setg(errp, "group %u has %u rules already", r->group, g->refs);
        return -ENOSPC;
    }
    memset(&r->spec, 0, sizeof(r->spec));
    ret = rule_match(c, d + sizeof(h), &r->spec, &port, errp);
    if (ret) {
        return ret;
    }
    dst = le16_to_cpu(h.port);
    tci = le16_to_cpu(h.vlan_tci);
    if ((h.flags & ~(VSRIOV_NET_FF_RULE_F_VLAN_POP |
                     VSRIOV_NET_FF_RULE_F_VLAN_PUSH)) ||
        (!(h.flags & VSRIOV_NET_FF_RULE_F_VLAN_PUSH) && tci) ||
        ((h.flags & VSRIOV_NET_FF_RULE_F_VLAN_PUSH) &&
         (tci & 0xf000 || !tci || tci == 0xfff)) ||
        (h.action == VSRIOV_NET_FF_ACTION_DROP && (dst || h.flags)) ||
        (h.action != VSRIOV_NET_FF_ACTION_DROP &&
         h.action != VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT)) {
        error_setg(errp, "action %u, flags 0x%x, port %u, VLAN tag 0x%x",
                   h.action, h.flags, dst, tci);
        return -EINVAL;
    }
    if (port > ft->vpf->num_vfs ||
        (h.action == VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT &&
         dst > ft->vpf->num_vfs)) {
        error_setg(errp, "port %u or %u is no VF of this PF", port, dst);
        return -EINVAL;
    }
    if (!port || (h.action == VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT && !dst)) {
        error_setg(errp, "rules on the uplink's traffic are not offloaded");
        return -EOPNOTSUPP;
    }
    r->src = port - 1;
    r->dst = h.action == VSRIOV_NET_FF_ACTION_DROP ? -1 : dst - 1;
    if (!vf_has_rep(ft, r->src) || (r->dst >= 0 && !vf_has_rep(ft, r->dst))) {
        error_setg(errp, "VF %u or VF %u has no representor", port, dst);
        return -EBUSY;
    }
    r->spec.priority = g->prio;
    r->spec.drop = r->dst < 0;
    r->spec.vlan_pop = h.flags & VSRIOV_NET_FF_RULE_F_VLAN_POP;
    r->spec.vlan_push = h.flags & VSRIOV_NET_FF_RULE_F_VLAN_PUSH ? tci : 0;
    r->len = sizeof(h) + h.key_length;
    memcpy(r->raw, d, r->len);
    return 0;
}

/* ---- the provider ------------------------------------------------------ */

static void rule_free(VsriovFlowTable *ft, FlowRule *r)
{
    if (r->call) {
        r->call->ft = NULL;     /* its answer finds nobody */
        r->call->rule = NULL;
    }
    if (ft->rules[r->id] == r) {
        ft->rules[r->id] = NULL;
        ft->groups[r->group]->refs--;
        ft->classifiers[r->cls]->refs--;
        if (r->active) {
            ft->active--;
        }
    }
    g_free(r);
}

static void call_free(FlowCall *call)
{
    object_unref(OBJECT(call->pool));
    g_free(call);
}

static void call_done(void *opaque, int ret, uint64_t packets,
                      uint64_t bytes, Error *err);

/* Take rule @pid, which nobody wants, out of @pool's switch again. */
static void undo_add(VsriovPool *pool, uint32_t pid)
{
    FlowCall *del = g_new0(FlowCall, 1);

    del->pool = pool;
    object_ref(OBJECT(pool));
    del->op = CALL_DEL;
    del->pid = pid;
    /* (a pool with flow_add has flow_del: 1; its answer finds nobody) */
    vsriov_pool_flow_del(pool, pid, call_done, del, NULL);
}

/* The answer to a provider call for nobody: whatever it put goes again. */
static void orphan_done(FlowCall *call, int ret)
{
    if ((call->op == CALL_ADD || call->op == CALL_RESTORE) && !ret) {
        undo_add(call->pool, call->pid);
    }
    call_free(call);
}

static void call_done(void *opaque, int ret, uint64_t packets,
                      uint64_t bytes, Error *err)
{
    FlowCall *call = opaque;
    VsriovFlowTable *ft = call->ft;
    FlowRule *r = call->rule;
    uint8_t result[VSRIOV_FLOW_OBJ_MAX];
    size_t rlen = 0;

    if (!ft || !r) {
        error_free(err);
        orphan_done(call, ret);
        return;
    }
    r->call = NULL;
    if (err && call->op == CALL_STATS && !call->done) {
        /* (a migration's refresh: the counters stay as last read) */
        trace_vsriov_flow_rule(DEVICE(ft->vpf->pf)->id, r->id, call->op,
                               call->pid, ret);
        error_free(err);
        call_free(call);
        return;
    }
    if (err) {
        error_prepend(&err, "virtual SR-IOV PF '%s': rule %u: ",
                      DEVICE(ft->vpf->pf)->id, r->id);
        vsriov_report_guest_err(err);
    }
    trace_vsriov_flow_rule(DEVICE(ft->vpf->pf)->id, r->id, call->op,
                           call->pid, ret);
    switch (call->op) {
    case CALL_ADD:
    case CALL_RESTORE:
        if (ret) {
            rule_free(ft, r);
            break;
        }
        r->active = true;
        ft->active++;
        break;
    case CALL_DEL:
        if (!ret || ret == -ENOENT) {
            ret = 0;
            rule_free(ft, r);
        }
        break;
    case CALL_STATS:
        if (!ret) {
            struct vsriov_net_ff_rule_counters cnt;

            r->packets = r->base_packets + packets;
            r->bytes = r->base_bytes + bytes;
            cnt.packets = cpu_to_le64(r->packets);
            cnt.bytes = cpu_to_le64(r->bytes);
            memcpy(result, r->raw, r->len);
            memcpy(result + r->len, &cnt, sizeof(cnt));
            rlen = r->len + sizeof(cnt);
        }
        break;
    }
    if (call->done && !call->done(call->opaque, ret, result, rlen) &&
        call->op == CALL_ADD && !ret) {
        /* nobody wants it any more: it goes (the command runs again) */
        rule_free(ft, r);
        undo_add(call->pool, call->pid);
    }
    call_free(call);
}

/* Ask the provider: 1, or its synchronous refusal. */
static int rule_call(VsriovFlowTable *ft, FlowRule *r, int op,
                     VsriovFlowDone *done, void *opaque, Error **errp)
{
    VsriovPF *vpf = ft->vpf;
    FlowCall *call = g_new0(FlowCall, 1);
    int ret;

    call->ft = ft;
    call->pool = vpf->pool;
    object_ref(OBJECT(call->pool));
    call->rule = r;
    call->op = op;
    call->done = done;
    call->opaque = opaque;
    if (r->call) {
        /* a command given up on (the VM stopped): this one takes over */
        r->call->ft = NULL;
        r->call->rule = NULL;
    }
    r->call = call;
    switch (op) {
    case CALL_ADD:
    case CALL_RESTORE:
        call->pid = r->spec.id = new_pid();
        ret = vsriov_pool_flow_add(vpf->pool, vpf->backends[r->src],
                                   r->dst >= 0 ? vpf->backends[r->dst] : NULL,
                                   &r->spec, call_done, call, errp);
        break;
    case CALL_DEL:
        call->pid = r->spec.id;
        ret = vsriov_pool_flow_del(vpf->pool, call->pid, call_done, call,
                                   errp);
        break;
    default:
        call->pid = r->spec.id;
        ret = vsriov_pool_flow_stats(vpf->pool, call->pid, call_done, call,
                                     errp);
        break;
    }
    if (ret < 0) {
        r->call = NULL;
        call_free(call);
    }
    return ret;
}

/* ---- the commands ------------------------------------------------------ */

static uint32_t limit(VsriovFlowTable *ft, uint16_t type)
{
    switch (type) {
    case VSRIOV_NET_RESOURCE_OBJ_FF_GROUP:
        return le32_to_cpu(ft->limits.groups_limit);
    case VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER:
        return le32_to_cpu(ft->limits.classifiers_limit);
    default:
        return le32_to_cpu(ft->limits.rules_limit);
    }
}

static int group_create(VsriovFlowTable *ft, uint32_t id, const uint8_t *d,
                        size_t len, Error **errp)
{
    struct vsriov_net_resource_obj_ff_group g;

    if (len < sizeof(g)) {
        return -EINVAL;
    }
    memcpy(&g, d, sizeof(g));
    if (g.domain != VSRIOV_NET_FF_DOMAIN_ESWITCH) {
        error_setg(errp, "group %u: domain %u (only the eswitch's: %u)", id,
                   g.domain, VSRIOV_NET_FF_DOMAIN_ESWITCH);
        return -EOPNOTSUPP;
    }
    if (any(g.reserved, sizeof(g.reserved))) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < FF_GROUPS; i++) {
        if (ft->groups[i] &&
            ft->groups[i]->prio == le16_to_cpu(g.group_priority)) {
            error_setg(errp, "group %u has priority %u already", i,
                       le16_to_cpu(g.group_priority));
            return -EINVAL;
        }
    }
    ft->groups[id] = g_new0(FlowGroup, 1);
    ft->groups[id]->prio = le16_to_cpu(g.group_priority);
    return 0;
}

int vsriov_flow_create(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                       const void *data, size_t len, VsriovFlowDone *done,
                       void *opaque, Error **errp)
{
    FlowClassifier *c;
    FlowRule *r;
    int ret;

    if (!vsriov_eswitch_switchdev(ft->vpf->esw)) {
        error_setg(errp, "flow objects need switchdev mode");
        return -EOPNOTSUPP;
    }
    if (id >= limit(ft, type)) {
        return -EINVAL;
    }
    switch (type) {
    case VSRIOV_NET_RESOURCE_OBJ_FF_GROUP:
        return ft->groups[id] ? -EEXIST : group_create(ft, id, data, len,
                                                       errp);
    case VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER:
        if (ft->classifiers[id]) {
            return -EEXIST;
        }
        c = g_new0(FlowClassifier, 1);
        ret = classifier_parse(c, data, len,
                               ft->limits.selectors_per_classifier_limit,
                               errp);
        if (ret) {
            g_free(c);
            return ret;
        }
        ft->classifiers[id] = c;
        return 0;
    }
    r = ft->rules[id];
    if (r && (r->active || !r->call)) {
        return -EEXIST;
    }
    if (r) {
        rule_free(ft, r);   /* an addition given up on: this one instead */
    }
    r = g_new0(FlowRule, 1);
    r->id = id;
    ret = rule_parse(ft, r, data, len, errp);
    if (ret) {
        g_free(r);
        return ret;
    }
    ft->rules[id] = r;
    ft->groups[r->group]->refs++;
    ft->classifiers[r->cls]->refs++;
    ret = rule_call(ft, r, CALL_ADD, done, opaque, errp);
    if (ret < 0) {
        rule_free(ft, r);
    }
    return ret;
}

int vsriov_flow_destroy(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                        VsriovFlowDone *done, void *opaque, Error **errp)
{
    FlowRule *r;

    if (id >= limit(ft, type)) {
        return -EINVAL;
    }
    switch (type) {
    case VSRIOV_NET_RESOURCE_OBJ_FF_GROUP:
        if (!ft->groups[id]) {
            return -ENOENT;
        }
        if (ft->groups[id]->refs) {
            return -EBUSY;
        }
        g_clear_pointer(&ft->groups[id], g_free);
        return 0;
    case VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER:
        if (!ft->classifiers[id]) {
            return -ENOENT;
        }
        if (ft->classifiers[id]->refs) {
            return -EBUSY;
        }
        g_clear_pointer(&ft->classifiers[id], g_free);
        return 0;
    }
    r = ft->rules[id];
    if (!r || (!r->active && r->call && r->call->op == CALL_ADD)) {
        return -ENOENT;
    }
    if (!r->active) {
        /* (its restoration failed: the provider has nothing of it) */
        rule_free(ft, r);
        return 0;
    }
    return rule_call(ft, r, CALL_DEL, done, opaque, errp);
}

int vsriov_flow_query(VsriovFlowTable *ft, uint16_t type, uint32_t id,
                      void *result, size_t *len, VsriovFlowDone *done,
                      void *opaque, Error **errp)
{
    FlowRule *r;

    if (id >= limit(ft, type)) {
        return -EINVAL;
    }
    switch (type) {
    case VSRIOV_NET_RESOURCE_OBJ_FF_GROUP: {
        struct vsriov_net_resource_obj_ff_group g = {
            .domain = VSRIOV_NET_FF_DOMAIN_ESWITCH,
        };

        if (!ft->groups[id]) {
            return -ENOENT;
        }
        g.group_priority = cpu_to_le16(ft->groups[id]->prio);
        memcpy(result, &g, sizeof(g));
        *len = sizeof(g);
        return 0;
    }
    case VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER:
        if (!ft->classifiers[id]) {
            return -ENOENT;
        }
        memcpy(result, ft->classifiers[id]->raw, ft->classifiers[id]->len);
        *len = ft->classifiers[id]->len;
        return 0;
    }
    r = ft->rules[id];
    if (!r || !r->active) {
        return -ENOENT;
    }
    return rule_call(ft, r, CALL_STATS, done, opaque, errp);
}

bool vsriov_flow_in_use(VsriovFlowTable *ft)
{
    for (unsigned i = 0; i < FF_GROUPS; i++) {
        if (ft->groups[i]) {
            return true;
        }
    }
    for (unsigned i = 0; i < FF_CLASSIFIERS; i++) {
        if (ft->classifiers[i]) {
            return true;
        }
    }
    return false;   /* (a rule needs a group and a classifier) */
}

bool vsriov_flow_names_vf(VsriovFlowTable *ft, int vf)
{
    for (unsigned i = 0; i < FF_RULES; i++) {
        FlowRule *r = ft->rules[i];

        if (r && (r->src == vf || r->dst == vf)) {
            return true;
        }
    }
    return false;
}

unsigned vsriov_flow_rules(VsriovFlowTable *ft)
{
    return ft ? ft->active : 0;
}

void vsriov_flow_reset(VsriovFlowTable *ft)
{
    for (unsigned i = 0; i < FF_RULES; i++) {
        FlowRule *r = ft->rules[i];

        if (!r) {
            continue;
        }
        if (r->active && rule_call(ft, r, CALL_DEL, NULL, NULL, NULL) > 0) {
            r->call->ft = NULL;     /* (its answer finds nobody) */
            r->call->rule = NULL;
            r->call = NULL;
        }
        rule_free(ft, r);   /* (an addition in flight is undone) */
    }
    for (unsigned i = 0; i < FF_GROUPS; i++) {
        g_clear_pointer(&ft->groups[i], g_free);
    }
    for (unsigned i = 0; i < FF_CLASSIFIERS; i++) {
        g_clear_pointer(&ft->classifiers[i], g_free);
    }
    device_limits(&ft->limits);
}

/* ---- migration --------------------------------------------------------- */

/*
 * The objects, flat: per object its type (le16), id (le32), length (le16)
 * and data; a rule's counters (le64 packets, bytes) after its data.  The
 * destination checks each again as if the driver created it, and puts
 * the rules in its own provider's switch.
 */
static void put_obj(GByteArray *b, uint16_t type, uint32_t id,
                    const void *data, uint16_t len)
{
    uint8_t h[8];

    stw_le_p(h, type);
    stl_le_p(h + 2, id);
    stw_le_p(h + 6, len);
    g_byte_array_append(b, h, 8);
    g_byte_array_append(b, data, len);
}

static int flow_pre_save(void *opaque)
{
    VsriovFlowTable *ft = opaque;
    GByteArray *b = g_byte_array_new();

    for (unsigned i = 0; i < FF_GROUPS; i++) {
        if (ft->groups[i]) {
            struct vsriov_net_resource_obj_ff_group g = {
                .group_priority = cpu_to_le16(ft->groups[i]->prio),
                .domain = VSRIOV_NET_FF_DOMAIN_ESWITCH,
            };

            put_obj(b, VSRIOV_NET_RESOURCE_OBJ_FF_GROUP, i, &g, sizeof(g));
        }
    }
    for (unsigned i = 0; i < FF_CLASSIFIERS; i++) {
        if (ft->classifiers[i]) {
            put_obj(b, VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, i,
                    ft->classifiers[i]->raw, ft->classifiers[i]->len);
        }
    }
    for (unsigned i = 0; i < FF_RULES; i++) {
        FlowRule *r = ft->rules[i];
        uint8_t cnt[16];

        if (r && r->active) {
            put_obj(b, VSRIOV_NET_RESOURCE_OBJ_FF_RULE, i, r->raw, r->len);
            stq_le_p(cnt, r->packets);
            stq_le_p(cnt + 8, r->bytes);
            g_byte_array_append(b, cnt, 16);
        }
    }
    g_free(ft->saved);
    ft->saved_len = b->len;
    ft->saved = g_byte_array_free(b, false);
    return 0;
}

static int flow_post_save(void *opaque)
{
    VsriovFlowTable *ft = opaque;

    g_clear_pointer(&ft->saved, g_free);
    ft->saved_len = 0;
    return 0;
}

static int flow_pre_load(void *opaque)
{
    vsriov_flow_reset(opaque);
    return 0;
}

static bool flow_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovFlowTable *ft = opaque;
    const uint8_t *p = ft->saved;
    size_t off = 0;
    bool ok = false;

    while (off < ft->saved_len) {
        uint16_t type, len;
        uint32_t id;
        int ret;

        if (ft->saved_len - off < 8) {
            error_setg(errp, "flow objects cut short");
            goto out;
        }
        type = lduw_le_p(p + off);
        id = ldl_le_p(p + off + 2);
        len = lduw_le_p(p + off + 6);
        off += 8;
        if (ft->saved_len - off < len + (type ==
            VSRIOV_NET_RESOURCE_OBJ_FF_RULE ? 16 : 0) ||
            !vsriov_flow_is_obj(type)) {
            error_setg(errp, "flow object %u of type 0x%x cut short", id,
                       type);
            goto out;
        }
        ret = vsriov_flow_create(ft, type, id, p + off, len, NULL, NULL,
                                 errp);
        if (ret < 0) {
            error_prepend(errp, "flow object %u of type 0x%x: ", id, type);
            goto out;
        }
        off += len;
        if (type == VSRIOV_NET_RESOURCE_OBJ_FF_RULE) {
            /* (its counters go on from the source's) */
            ft->rules[id]->base_packets = ldq_le_p(p + off);
            ft->rules[id]->base_bytes = ldq_le_p(p + off + 8);
            ft->rules[id]->packets = ft->rules[id]->base_packets;
            ft->rules[id]->bytes = ft->rules[id]->base_bytes;
            ft->rules[id]->call->op = CALL_RESTORE;
            off += 16;
        }
    }
    ok = true;
out:
    g_clear_pointer(&ft->saved, g_free);
    ft->saved_len = 0;
    return ok;
}

static const VMStateDescription vmstate_vsriov_flows = {
    .name = "vsriov-pf/flows",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = flow_pre_save,
    .post_save = flow_post_save,
    .pre_load = flow_pre_load,
    .post_load_errp = flow_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(limits.groups_limit, VsriovFlowTable),
        VMSTATE_UINT32(limits.classifiers_limit, VsriovFlowTable),
        VMSTATE_UINT32(limits.rules_limit, VsriovFlowTable),
        VMSTATE_UINT32(limits.rules_per_group_limit, VsriovFlowTable),
        VMSTATE_UINT8(limits.selectors_per_classifier_limit,
                      VsriovFlowTable),
        VMSTATE_UINT32(saved_len, VsriovFlowTable),
        VMSTATE_VBUFFER_ALLOC_UINT32(saved, VsriovFlowTable, 1, NULL,
                                     saved_len),
        VMSTATE_END_OF_LIST()
    },
};

/* A migration runs: each active rule's counters, read from its provider. */
static void flow_refresh(void *opaque)
{
    VsriovFlowTable *ft = opaque;

    for (unsigned i = 0; i < FF_RULES; i++) {
        FlowRule *r = ft->rules[i];

        /* (a rule with a call in flight is read when the guest asks) */
        if (r && r->active && !r->call) {
            rule_call(ft, r, CALL_STATS, NULL, NULL, NULL);
        }
    }
    timer_mod(ft->refresh, qemu_clock_get_ms(QEMU_CLOCK_REALTIME) +
              FLOW_MIG_REFRESH_MS);
}

static int flow_mig_notify(NotifierWithReturn *n, MigrationEvent *e,
                           Error **errp)
{
    VsriovFlowTable *ft = container_of(n, VsriovFlowTable, mig);

    if (e->type == MIG_EVENT_PRECOPY_SETUP) {
        flow_refresh(ft);
    } else {
        timer_del(ft->refresh);
    }
    return 0;
}

VsriovFlowTable *vsriov_flow_init(VsriovPF *vpf)
{
    VsriovFlowTable *ft = g_new0(VsriovFlowTable, 1);

    ft->vpf = vpf;
    device_limits(&ft->limits);
    ft->refresh = timer_new_ms(QEMU_CLOCK_REALTIME, flow_refresh, ft);
    migration_add_notifier(&ft->mig, flow_mig_notify);
    /* (after the eswitch's section: its representors load first) */
    vmstate_register(VMSTATE_IF(vpf->pf), 0, &vmstate_vsriov_flows, ft);
    return ft;
}

void vsriov_flow_exit(VsriovFlowTable *ft)
{
    if (!ft) {
        return;
    }
    vsriov_flow_reset(ft);
    migration_remove_notifier(&ft->mig);
    timer_free(ft->refresh);
    vmstate_unregister(VMSTATE_IF(ft->vpf->pf), &vmstate_vsriov_flows, ft);
    g_free(ft->saved);
    g_free(ft);
}
