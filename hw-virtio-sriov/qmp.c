/*
 * vsriov introspection: query-vsriov, query-vsriov-pools, "info vsriov"
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-vsriov.h"
#include "qapi/qapi-types-net.h"
#include "qobject/qdict.h"
#include "monitor/hmp.h"
#include "monitor/monitor.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "net/net.h"
#include "vsriov.h"
#include "eswitch.h"
#include "flow.h"

static const char *backend_type(NetClientState *nc, bool lazy)
{
    return nc ? NetClientDriver_str(nc->info->type)
              : lazy ? "none" : "missing";
}

static VsriovVFConfigInfo *vf_config_info(VsriovPF *vpf, uint16_t i)
{
    VsriovVFConfig *c = &vpf->cfg.vf[i];
    VsriovVFConfigInfo *info = g_new0(VsriovVFConfigInfo, 1);

    if (c->mac_set) {
        info->mac = qemu_mac_strdup_printf(c->mac);
    }
    info->vlan = c->vlan;
    info->qos = c->qos;
    info->vlan_proto = c->vlan_proto == 0x88a8 ? VSRIOV_VLAN_PROTO_DOT1AD
                                               : VSRIOV_VLAN_PROTO_DOT1Q;
    info->spoof_check = c->spoofchk;
    info->trust = c->trust;
    info->link_state = c->link_state == VSRIOV_VF_LINK_ENABLE ?
                       VSRIOV_VF_LINK_STATE_ENABLE :
                       c->link_state == VSRIOV_VF_LINK_DISABLE ?
                       VSRIOV_VF_LINK_STATE_DISABLE : VSRIOV_VF_LINK_STATE_AUTO;
    info->min_tx_rate = c->min_tx_rate;
    info->max_tx_rate = c->max_tx_rate;
    info->applied = VSRIOV_POOL_GET_CLASS(vpf->pool)->configure
                    ? VSRIOV_VF_CONFIG_APPLIED_PROVIDER
                    : VSRIOV_VF_CONFIG_APPLIED_RECORDED;
    return info;
}

static VsriovVFInfo *vf_info(VsriovPF *vpf, uint16_t i, uint16_t enabled)
{
    PCIDevice *vf = vpf->vfs[i];
    NetClientState *nc = vpf->backends[i];
    VirtIONet *n = vsriov_vf_net(vf);
    VsriovVFInfo *info = g_new0(VsriovVFInfo, 1);

    info->index = i;
    info->qom_path = object_get_canonical_path(OBJECT(vf));
    info->bus = pci_dev_bus_num(vf);
    info->devfn = vf->devfn;
    info->mac = qemu_mac_strdup_printf(n->nic_conf.macaddr.a);
    info->netdev = nc ? g_strdup(nc->name) : NULL;
    /* (a VF lacks one: a lazy pool's, a premapped one's still claiming) */
    info->backend = g_strdup(backend_type(nc, true));
    info->state = i < enabled ? VSRIOV_VF_STATE_ENABLED
                              : VSRIOV_VF_STATE_DISABLED;
    info->backing = vsriov_pf_vf_backing(vpf, i);
    info->config = vf_config_info(vpf, i);
    info->link_up = !qemu_get_queue(n->nic)->link_down;
    if (vpf->esw) {
        VsriovRepStats st;
        const char *netdev;
        uint16_t id;

        if (vsriov_eswitch_vf_rep(vpf->esw, i, &id, &netdev, &st)) {
            info->representor = g_new0(VsriovRepInfo, 1);
            info->representor->id = id;
            info->representor->netdev = g_strdup(netdev);
            info->representor->rx_packets = st.rx_packets;
            info->representor->rx_bytes = st.rx_bytes;
            info->representor->rx_dropped = st.rx_dropped;
            info->representor->tx_packets = st.tx_packets;
            info->representor->tx_bytes = st.tx_bytes;
            info->representor->tx_dropped = st.tx_dropped;
        }
    }
    return info;
}

VsriovPFInfoList *qmp_query_vsriov(Error **errp)
{
    VsriovPFInfoList *head = NULL, **tail = &head;
    VsriovPF *vpf;

    QTAILQ_FOREACH(vpf, vsriov_pf_list(), next) {
        VsriovPFInfo *info = g_new0(VsriovPFInfo, 1);
        VsriovVFInfoList **vtail = &info->vfs;
        uint8_t *cap = vpf->pf->config + vpf->sriov_cap;
        uint16_t enabled = vsriov_pf_enabled_vfs(vpf);

        info->id = g_strdup(DEVICE(vpf->pf)->id);
        info->qom_path = object_get_canonical_path(OBJECT(vpf->pf));
        info->pool = g_strdup(
            object_get_canonical_path_component(OBJECT(vpf->pool)));
        info->total_vfs = pci_get_word(cap + PCI_SRIOV_TOTAL_VF);
        info->num_vfs = pci_get_word(cap + PCI_SRIOV_NUM_VF);
        info->vf_enable = pci_get_word(cap + PCI_SRIOV_CTRL) &
                          PCI_SRIOV_CTRL_VFE;
        for (uint16_t i = 0; i < vpf->num_vfs; i++) {
            QAPI_LIST_APPEND(vtail, vf_info(vpf, i, enabled));
        }
        if (vpf->esw) {
            info->has_eswitch_mode = true;
            info->eswitch_mode = vsriov_eswitch_switchdev(vpf->esw) ?
                                 VSRIOV_ESWITCH_MODE_SWITCHDEV :
                                 VSRIOV_ESWITCH_MODE_LEGACY;
            info->has_offloaded_rules = true;
            info->offloaded_rules = vsriov_flow_rules(vpf->flows);
        }
        QAPI_LIST_APPEND(tail, info);
    }
    return head;
}

VsriovPoolInfoList *qmp_query_vsriov_pools(Error **errp)
{
    VsriovPoolInfoList *head = NULL, **tail = &head;
    VsriovPool *pool;

    QTAILQ_FOREACH(pool, vsriov_pool_list(), next) {
        VsriovPoolInfo *info = g_new0(VsriovPoolInfo, 1);
        VsriovPoolEntryInfoList **etail = &info->entries;
        const char *why;

        info->id = g_strdup(object_get_canonical_path_component(OBJECT(pool)));
        info->free = VSRIOV_POOL_GET_CLASS(pool)->available(pool);
        info->lazy = pool->lazy;
        info->state = vsriov_pool_state(pool, &why);
        info->error = g_strdup(why);
        for (guint i = 0; i < pool->entries->len; i++) {
            VsriovPoolEntry *e = &g_array_index(pool->entries,
                                                VsriovPoolEntry, i);
            VsriovPoolEntryInfo *ei = g_new0(VsriovPoolEntryInfo, 1);

            ei->netdev = g_strdup(e->netdev);
            ei->backend = g_strdup(backend_type(qemu_find_netdev(e->netdev),
                                   pool->lazy ||
                                   info->state != VSRIOV_POOL_STATE_READY));
            ei->claimed_by = g_strdup(e->owner);
            QAPI_LIST_APPEND(etail, ei);
        }
        QAPI_LIST_APPEND(tail, info);
    }
    return head;
}

void hmp_info_vsriov(Monitor *mon, const QDict *qdict)
{
    g_autoptr(VsriovPFInfoList) pfs = qmp_query_vsriov(NULL);
    g_autoptr(VsriovPoolInfoList) pools = qmp_query_vsriov_pools(NULL);

    if (!pfs && !pools) {
        monitor_printf(mon, "no virtual SR-IOV PF and no vsriov-pool\n");
        return;
    }
    for (VsriovPFInfoList *p = pfs; p; p = p->next) {
        VsriovPFInfo *pf = p->value;

        monitor_printf(mon, "PF %s (%s): pool %s, TotalVFs %u, NumVFs %u, "
                       "VF Enable %s%s%s", pf->id, pf->qom_path, pf->pool,
                       pf->total_vfs, pf->num_vfs,
                       pf->vf_enable ? "on" : "off",
                       pf->has_eswitch_mode ? ", eswitch " : "",
                       pf->has_eswitch_mode ?
                       VsriovEswitchMode_str(pf->eswitch_mode) : "");
        if (pf->has_offloaded_rules) {
            monitor_printf(mon, ", %u offloaded rules", pf->offloaded_rules);
        }
        monitor_printf(mon, "\n");
        for (VsriovVFInfoList *v = pf->vfs; v; v = v->next) {
            VsriovVFInfo *vf = v->value;

            monitor_printf(mon, "  VF %u: %02x:%02x.%u mac %s netdev %s (%s) "
                           "%s\n", vf->index, vf->bus, PCI_SLOT(vf->devfn),
                           PCI_FUNC(vf->devfn), vf->mac, vf->netdev ?: "-",
                           vf->backend, VsriovVFState_str(vf->state));
            monitor_printf(mon, "    vlan %u qos %u proto %s, spoofchk %s, "
                           "trust %s, link-state %s, tx rate %u-%u Mbit/s"
                           "%s%s\n", vf->config->vlan, vf->config->qos,
                           vf->config->vlan_proto == VSRIOV_VLAN_PROTO_DOT1AD
                           ? "802.1ad" : "802.1Q",
                           vf->config->spoof_check ? "on" : "off",
                           vf->config->trust ? "on" : "off",
                           VsriovVFLinkState_str(vf->config->link_state),
                           vf->config->min_tx_rate, vf->config->max_tx_rate,
                           vf->config->mac ? ", admin mac " : "",
                           vf->config->mac ?: "");
            if (vf->representor) {
                VsriovRepInfo *r = vf->representor;

                monitor_printf(mon, "    representor %u on netdev %s: rx %"
                               PRIu64 " (dropped %" PRIu64 "), tx %" PRIu64
                               " (dropped %" PRIu64 ")\n", r->id, r->netdev,
                               r->rx_packets, r->rx_dropped, r->tx_packets,
                               r->tx_dropped);
            }
        }
    }
    for (VsriovPoolInfoList *p = pools; p; p = p->next) {
        VsriovPoolInfo *pool = p->value;

        monitor_printf(mon, "pool %s: %u free%s, %s%s%s\n", pool->id,
                       pool->free,
                       pool->lazy ? " (lazy: claimed at VF Enable)" : "",
                       VsriovPoolState_str(pool->state),
                       pool->error ? ": " : "", pool->error ?: "");
        for (VsriovPoolEntryInfoList *e = pool->entries; e; e = e->next) {
            monitor_printf(mon, "  %s (%s)%s%s\n", e->value->netdev,
                           e->value->backend,
                           e->value->claimed_by ? " claimed by " : " free",
                           e->value->claimed_by ?: "");
        }
    }
}
