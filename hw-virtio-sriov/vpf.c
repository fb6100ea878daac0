/*
 * vsriov virtual PF: VFs of a virtio-net-pci PF, created from pool backends
 *
 * When a virtio-net-pci device has sriov-pool=<pool>, this file creates its
 * VFs right after the PF's virtio device is plugged: one virtio-net-pci
 * function per backend claimed from the pool, at function numbers PF+1,
 * PF+2, ... on the PF's bus (offset 1, stride 1, with ARI), and hands them
 * to hw/pci/pcie_sriov.c, which owns the SR-IOV capability, VF Enable and
 * the VF BARs.  The backends are opened when the VM starts (they are
 * -netdev objects), so enabling VFs in the guest only flips their
 * visibility: its cost does not depend on guest RAM or backend type.
 *
 * The VFs are QOM children of the PF ("vf[N]"); they and their backends'
 * claims go away with the PF.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-events-vsriov.h"
#include "hw/pci/pci.h"
#include "hw/pci/pci_bus.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "hw/virtio/virtio-pci.h"
#include "migration/blocker.h"
#include "vsriov.h"
#include "vfcfg.h"
#include "trace.h"

static VsriovPFList vpfs = QTAILQ_HEAD_INITIALIZER(vpfs);

VsriovPFList *vsriov_pf_list(void)
{
    return &vpfs;
}

static VsriovPF *vpf_of(PCIDevice *pf)
{
    VsriovPF *vpf;

    QTAILQ_FOREACH(vpf, &vpfs, next) {
        if (vpf->pf == pf) {
            return vpf;
        }
    }
    return NULL;
}

uint16_t vsriov_pf_enabled_vfs(VsriovPF *vpf)
{
    return pcie_sriov_num_vfs(vpf->pf);
}

/*
 * Every write to the PF's config space goes through here after the usual
 * handling (pcie_sriov_config_write() included); a change in the number of
 * enabled VFs is reported to management.
 */
static void vpf_config_write(PCIDevice *pf, uint32_t addr, uint32_t val,
                             int len)
{
    VsriovPF *vpf = vpf_of(pf);
    uint16_t now;

    vpf->parent_config_write(pf, addr, val, len);
    if (vsriov_vfcfg_config_write(vpf, addr, len)) {
        return;
    }
    now = vsriov_pf_enabled_vfs(vpf);
    if (now != vpf->enabled_vfs) {
        /* VFs that come or go start over with a default configuration. */
        for (uint16_t i = MIN(now, vpf->enabled_vfs);
             i < MAX(now, vpf->enabled_vfs); i++) {
            vsriov_vfcfg_reset_vf(vpf, i);
        }
        g_autofree char *path = object_get_canonical_path(OBJECT(pf));

        trace_vsriov_vfs_changed(DEVICE(pf)->id, vpf->enabled_vfs, now);
        vpf->enabled_vfs = now;
        qapi_event_send_vsriov_vfs_changed(DEVICE(pf)->id, path, now);
    }
}

/* Remove the VFs created so far and return their backends. */
static void vpf_destroy_vfs(VsriovPF *vpf)
{
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        PCIDevice *vf = vpf->vfs[i];

        if (vf) {
            /*
             * The PCIe slot's hot-unplug may have removed the function
             * already; only a VF still parented to the PF is ours to go.
             */
            if (OBJECT(vf)->parent == OBJECT(vpf->pf)) {
                object_unparent(OBJECT(vf));
            }
            object_unref(OBJECT(vf));
        }
        if (vpf->backends[i]) {
            VSRIOV_POOL_GET_CLASS(vpf->pool)->release(vpf->pool,
                                                      vpf->backends[i]);
        }
    }
    g_free(vpf->vfs);
    g_free(vpf->backends);
    vpf->vfs = NULL;
    vpf->backends = NULL;
    vpf->num_vfs = 0;
}

static PCIDevice *vpf_create_vf(VsriovPF *vpf, uint16_t index,
                                NetClientState *backend, Error **errp)
{
    PCIDevice *pf = vpf->pf;
    PCIDevice *vf = pci_new(pf->devfn + 1 + index, "virtio-net-pci");
    g_autofree char *name = g_strdup_printf("vf[%u]", index);

    object_property_add_child(OBJECT(pf), name, OBJECT(vf));
    qdev_prop_set_netdev(DEVICE(vf), "netdev", backend);
    /* A VF knows its PF while it is realized: virtio-pci then adds ARI. */
    vf->exp.sriov_vf.pf = pf;
    if (!qdev_realize(DEVICE(vf), BUS(pci_get_bus(pf)), errp)) {
        object_unparent(OBJECT(vf));
        object_unref(OBJECT(vf));
        return NULL;
    }
    return vf; /* one reference for us, one for the child property */
}

bool vsriov_pf_realize(VsriovPF *vpf, PCIDevice *pf, uint16_t cap_offset,
                       Error **errp)
{
    const char *id = DEVICE(pf)->id;
    VsriovPoolClass *pc;
    unsigned free_backends, max_fns, n;
    g_autofree char *path = NULL;
    VirtIODevice *vdev;
    int16_t cap_size;

    if (!vpf->pool) {
        if (vpf->total_vfs) {
            error_setg(errp, "sriov-totalvfs needs sriov-pool");
            return false;
        }
        return true;
    }
    if (!id) {
        error_setg(errp, "a virtual SR-IOV PF (sriov-pool) needs an id");
        return false;
    }
    if (pci_is_vf(pf) || pf->exp.sriov_cap) {
        error_setg(errp, "sriov-pool cannot be combined with VFs declared "
                   "with sriov-pf, nor used on a VF");
        return false;
    }
    if (!pci_is_express(pf) || pci_bus_is_root(pci_get_bus(pf))) {
        error_setg(errp, "sriov-pool needs the PF on a PCI Express port, "
                   "e.g. -device pcie-root-port,id=rp0 "
                   "-device virtio-net-pci,bus=rp0,...");
        return false;
    }
    if (PCI_FUNC(pf->devfn)) {
        error_setg(errp, "a virtual SR-IOV PF must be function 0 of its "
                   "slot (its VFs take the functions after it)");
        return false;
    }

    pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    free_backends = pc->available(vpf->pool);
    max_fns = PCI_DEVFN_MAX - 1 - pf->devfn;
    if (vpf->total_vfs) {
        if (vpf->total_vfs > free_backends) {
            error_setg(errp, "sriov-totalvfs=%u but vsriov-pool '%s' has "
                       "%u free backend(s)", vpf->total_vfs,
                       object_get_canonical_path_component(OBJECT(vpf->pool)),
                       free_backends);
            return false;
        }
        n = vpf->total_vfs;
    } else {
        n = free_backends;
    }
    if (!n) {
        error_setg(errp, "vsriov-pool '%s' has no free backend for PF '%s'",
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   id);
        return false;
    }
    if (n > max_fns) {
        error_setg(errp, "%u VFs do not fit after function %u of the bus "
                   "(at most %u)", n, pf->devfn, max_fns);
        return false;
    }

    vpf->pf = pf;
    vpf->vfs = g_new0(PCIDevice *, n);
    vpf->backends = g_new0(NetClientState *, n);
    vpf->num_vfs = n;
    path = object_get_canonical_path(OBJECT(pf));
    for (uint16_t i = 0; i < n; i++) {
        g_autofree char *owner = g_strdup_printf("%s/vf[%u]", path, i);

        vpf->backends[i] = pc->claim(vpf->pool, owner, errp);
        if (!vpf->backends[i]) {
            goto fail;
        }
        vpf->vfs[i] = vpf_create_vf(vpf, i, vpf->backends[i], errp);
        if (!vpf->vfs[i]) {
            goto fail;
        }
    }

    cap_size = pcie_sriov_pf_init_from_vfs(pf, cap_offset, vpf->vfs, n, errp);
    if (cap_size < 0) {
        goto fail;
    }
    vpf->sriov_cap = cap_offset;
    if (cap_offset + cap_size + VSRIOV_VFCFG_SIZEOF > PCIE_CONFIG_SPACE_SIZE) {
        error_setg(errp, "no room in PF '%s' config space for the VF "
                   "configuration capability", id);
        pcie_sriov_pf_exit(pf);
        pf->exp.sriov_cap = 0;
        goto fail;
    }
    vsriov_vfcfg_init(vpf, cap_offset + cap_size);
    vdev = virtio_bus_get_device(&VIRTIO_PCI(pf)->bus);
    virtio_add_feature(&vdev->host_features, VIRTIO_F_SR_IOV);

    error_setg(&vpf->migration_blocker,
               "virtual SR-IOV PF '%s' cannot be migrated: its VFs' "
               "backends belong to this host", id);
    if (migrate_add_blocker(&vpf->migration_blocker, errp) < 0) {
        vsriov_vfcfg_exit(vpf);
        pcie_sriov_pf_exit(pf);
        pf->exp.sriov_cap = 0;
        goto fail;
    }

    vpf->parent_config_write = pf->config_write;
    pf->config_write = vpf_config_write;
    vpf->enabled_vfs = 0;
    QTAILQ_INSERT_TAIL(&vpfs, vpf, next);
    trace_vsriov_pf_realize(id, n,
        object_get_canonical_path_component(OBJECT(vpf->pool)));
    return true;

fail:
    vpf_destroy_vfs(vpf);
    vpf->pf = NULL;
    return false;
}

void vsriov_pf_exit(VsriovPF *vpf, PCIDevice *pf)
{
    if (!vpf->pf) {
        return;
    }
    trace_vsriov_pf_exit(DEVICE(pf)->id);
    QTAILQ_REMOVE(&vpfs, vpf, next);
    migrate_del_blocker(&vpf->migration_blocker);
    pf->config_write = vpf->parent_config_write;
    vsriov_vfcfg_exit(vpf);
    vpf_destroy_vfs(vpf);
    vpf->pf = NULL;
}
