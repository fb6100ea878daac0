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
 * With a lazy pool (lazy=on), the PF starts with VFs that have no backend,
 * and its TotalVFs is the pool's size.  When the guest sets VF Enable,
 * pcie_sriov asks this file first (sriov_prepare_vfs): each VF to be
 * enabled is replaced by one with a backend claimed from the pool, at the
 * same function and with the same MAC; if the pool cannot give them all,
 * VF Enable does not take.  A pool that must ask a host daemon
 * (claim_async) is not waited for in the vCPU: VF Enable reads set and
 * the VFs appear when the backends came (pcie_sriov_pf_vfs_ready()), or
 * VF Enable clears if they did not.  A guest driver that asks first
 * (PREPARE_VFS, vfcfg.c) has them before it sets VF Enable; backends that
 * came and that no VF Enable took go back after 10 s.  When the VFs are
 * disabled again (VF Enable cleared, PF reset) they are replaced by
 * backend-less VFs and their backends go back to the pool.  Both the
 * binding of backends that came and their return run in the main loop, in
 * slices, not in the guest's config write.  Enabling then
 * pays for opening the backends (for vhost-vdpa, mapping guest memory), in
 * exchange for pools shared by PFs that hold backends only while they use
 * them.
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
#include "qemu/timer.h"
#include "qapi/qapi-events-vsriov.h"
#include "hw/pci/pci.h"
#include "hw/pci/pci_bus.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "hw/virtio/virtio-pci.h"
#include "hw/virtio/virtio-net.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "block/aio.h"
#include "system/memory.h"
#include "migration/vmstate.h"
#include "migration/register.h"
#include "migration/savevm.h"
#include "system/runstate.h"
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
    /* (VF Enable set, VFs waiting for their backends: none yet) */
    return vpf->vfs[0]->enabled ? pcie_sriov_num_vfs(vpf->pf) : 0;
}

static bool vpf_vf_enable_set(VsriovPF *vpf)
{
    return pci_get_word(vpf->pf->config + vpf->sriov_cap + PCI_SRIOV_CTRL) &
           PCI_SRIOV_CTRL_VFE;
}

/*
 * Every write to the PF's config space goes through here after the usual
 * handling (pcie_sriov_config_write() included); a change in the number of
 * enabled VFs is reported to management.
 */
#define VFS_CHANGED_INTERVAL_NS NANOSECONDS_PER_SECOND

static void vpf_send_vfs_changed(VsriovPF *vpf, bool delayed)
{
    g_autofree char *path = object_get_canonical_path(OBJECT(vpf->pf));

    trace_vsriov_vfs_changed_event(DEVICE(vpf->pf)->id, vpf->enabled_vfs,
                                   delayed);
    vpf->event_last_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    qapi_event_send_vsriov_vfs_changed(DEVICE(vpf->pf)->id, path,
                                       vpf->enabled_vfs);
}

static void vpf_event_timer(void *opaque)
{
    vpf_send_vfs_changed(opaque, true);
}

/*
 * A guest can flip VF Enable as fast as it likes: at most one event per
 * second per PF, the held-back one saying the number of enabled VFs when
 * it is sent (the last change is never lost).
 */
static void vpf_vfs_changed(VsriovPF *vpf)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    if (timer_pending(vpf->event_timer)) {
        return;
    }
    if (!vpf->event_last_ns ||
        now - vpf->event_last_ns >= VFS_CHANGED_INTERVAL_NS) {
        vpf_send_vfs_changed(vpf, false);
    } else {
        timer_mod(vpf->event_timer,
                  vpf->event_last_ns + VFS_CHANGED_INTERVAL_NS);
    }
}

/*
 * Take note of the VFs enabled now: VFs that came or went start over with
 * a default configuration, and VSRIOV_VFS_CHANGED says so.
 */
static void vpf_sync_enabled(VsriovPF *vpf)
{
    uint16_t now = vsriov_pf_enabled_vfs(vpf);

    if (now == vpf->enabled_vfs) {
        return;
    }
    for (uint16_t i = MIN(now, vpf->enabled_vfs);
         i < MAX(now, vpf->enabled_vfs); i++) {
        vsriov_vfcfg_reset_vf(vpf, i);
    }
    trace_vsriov_vfs_changed(DEVICE(vpf->pf)->id, vpf->enabled_vfs, now);
    vpf->enabled_vfs = now;
    vpf_vfs_changed(vpf);
}

static void vpf_config_write(PCIDevice *pf, uint32_t addr, uint32_t val,
                             int len)
{
    VsriovPF *vpf = vpf_of(pf);

    vpf->in_config_write = true;
    vpf->parent_config_write(pf, addr, val, len);
    vpf->in_config_write = false;
    if (vsriov_vfcfg_config_write(vpf, addr, len)) {
        return;
    }
    vpf_sync_enabled(vpf);
}

/* The backend a VF's NIC is attached to, or NULL. */
static NetClientState *vpf_vf_backend(PCIDevice *vf)
{
    VirtIONet *n = vsriov_vf_net(vf);

    return qemu_get_queue(n->nic)->peer;
}

/* Remove the VFs created so far and return their backends. */
static void vpf_destroy_vfs(VsriovPF *vpf)
{
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        PCIDevice *vf = vpf->vfs[i];
        g_autofree char *backend = vpf->backends[i] ?
                                   g_strdup(vpf->backends[i]->name) : NULL;

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
        if (backend) {
            VSRIOV_POOL_GET_CLASS(vpf->pool)->release(vpf->pool, backend);
        }
    }
    g_free(vpf->vfs);
    g_free(vpf->backends);
    vpf->vfs = NULL;
    vpf->backends = NULL;
    vpf->num_vfs = 0;
}

/* The MAC the pool's provider gave @backend, if it gave one. */
static bool provider_mac(VsriovPF *vpf, NetClientState *backend,
                         MACAddr *mac)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    return pc->backend_mac && pc->backend_mac(vpf->pool, backend->name, mac);
}

void vsriov_vf_default_mac(VsriovPF *vpf, uint16_t i, MACAddr *mac)
{
    if (!vpf->backends[i] || !provider_mac(vpf, vpf->backends[i], mac)) {
        *mac = vpf->vf_pool_mac[i];
    }
}

/*
 * Create and realize VF @index with @backend (NULL: none).  Once the PF's
 * SR-IOV capability exists (a lazy pool's VF made at VF Enable), the VF
 * also gets its VF number, its pool MAC and the IDs pcie_sriov gives VFs.
 */
static PCIDevice *vpf_create_vf(VsriovPF *vpf, uint16_t index,
                                NetClientState *backend, Error **errp)
{
    PCIDevice *pf = vpf->pf;
    PCIDevice *vf = pci_new(pf->devfn + 1 + index, "virtio-net-pci");
    g_autofree char *name = g_strdup_printf("vf[%u]", index);
    bool late = vpf->sriov_cap;
    MACAddr mac;

    if (backend && !vsriov_check_backend_memory(backend, errp)) {
        object_unref(OBJECT(vf));
        return NULL;
    }
    object_property_add_child(OBJECT(pf), name, OBJECT(vf));
    if (backend) {
        qdev_prop_set_netdev(DEVICE(vf), "netdev", backend);
    }
    /* Its driver may adopt the MACs the PF's driver sets (ADMIN_MAC). */
    qdev_prop_set_bit(DEVICE(vf), "admin_mac", true);
    /* A VF knows its PF while it is realized: virtio-pci then adds ARI. */
    vf->exp.sriov_vf.pf = pf;
    if (late) {
        vf->exp.sriov_vf.vf_number = index;
        qdev_prop_set_macaddr(DEVICE(vf), "mac", vpf->vf_pool_mac[index].a);
        /* It appears through VF Enable (which resets it), not hot-plug. */
        DEVICE(vf)->hotplugged = false;
    }
    if (backend && provider_mac(vpf, backend, &mac)) {
        /* The provider's, e.g. a VDUSE device's, which carries none. */
        qdev_prop_set_macaddr(DEVICE(vf), "mac", mac.a);
    }
    if (!qdev_realize(DEVICE(vf), BUS(pci_get_bus(pf)), errp)) {
        object_unparent(OBJECT(vf));
        object_unref(OBJECT(vf));
        return NULL;
    }
    if (late) {
        for (int r = 0; r < PCI_NUM_REGIONS; r++) {
            if (vf->io_regions[r].size != vpf->vf_bar_size[r]) {
                error_setg(errp, "VF %u with backend '%s' would have BAR "
                           "%d of 0x%" FMT_PCIBUS " bytes where the PF's VFs "
                           "have 0x%" FMT_PCIBUS, index,
                           backend ? backend->name : "(none)", r,
                           vf->io_regions[r].size, vpf->vf_bar_size[r]);
                object_unparent(OBJECT(vf));
                object_unref(OBJECT(vf));
                return NULL;
            }
        }
        pci_config_set_vendor_id(vf->config, 0xffff);
        pci_config_set_device_id(vf->config, 0xffff);
    }
    vsriov_vfcfg_follow_link(vpf, vsriov_vf_net(vf));
    return vf; /* one reference for us, one for the child property */
}

/*
 * Lazy pools: replace disabled VF @i by a new one with @backend (NULL:
 * none).  A VF without backend has nothing that can fail to realize (a VF
 * is not plugged through its slot: qemu-patches/0010).
 */
static bool vpf_replace_vf(VsriovPF *vpf, uint16_t i, NetClientState *backend,
                           Error **errp)
{
    VirtIONet *n = vsriov_vf_net(vpf->vfs[i]);
    PCIDevice *vf;

    /* QEMU's table of default MACs knows the VF by its pool MAC */
    n->nic_conf.macaddr = vpf->vf_pool_mac[i];
    object_unparent(OBJECT(vpf->vfs[i]));
    object_unref(OBJECT(vpf->vfs[i]));
    vf = vpf_create_vf(vpf, i, backend, errp);
    if (!vf) {
        vf = vpf_create_vf(vpf, i, NULL, &error_abort);
    }
    vpf->vfs[i] = vf;
    return vf && backend == vpf_vf_backend(vf);
}

/*
 * Lazy pools: the backends of disabled VFs go back to the pool from the
 * main loop, not in the guest's config write that disabled them: replacing
 * a VF and closing its backend (for vhost-vdpa, unmapping guest memory)
 * costs milliseconds each.  They go in slices of RELEASE_SLICE_NS, with a
 * pause between slices for the vCPUs waiting for the BQL.  A VF that is
 * enabled again meanwhile, or that a VF Enable or a PREPARE_VFS waits for
 * (vpf_wanted()), keeps its backend.
 */
#define RELEASE_SLICE_NS (10 * SCALE_MS)
#define RELEASE_PAUSE_NS (1 * SCALE_MS)

static uint16_t vpf_wanted(VsriovPF *vpf);

/* Give back the backends of disabled VFs @from.. soon. */
static void vpf_release_later(VsriovPF *vpf, uint16_t from)
{
    vpf->release_from = MIN(vpf->release_from, from);
    if (vpf->release_from < vpf->num_vfs &&
        !timer_pending(vpf->release_timer)) {
        timer_mod(vpf->release_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
    }
}

/*
 * Give back the backends of disabled VFs from vpf->release_from on until
 * @end (QEMU_CLOCK_REALTIME); true if none is left to give back.
 */
static bool vpf_release_pass(VsriovPF *vpf, int64_t end)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    uint16_t wanted = vpf_wanted(vpf);
    uint16_t kept = vpf->num_vfs;   /* the first one kept for a waiter */
    uint16_t i;

    memory_region_transaction_begin();
    for (i = vpf->release_from; i < vpf->num_vfs; i++) {
        NetClientState *nc = vpf->backends[i];
        g_autofree char *id = NULL;

        if (!nc || vpf->vfs[i]->enabled) {
            continue;
        }
        if (i < wanted) {
            kept = MIN(kept, i);
            continue;
        }
        if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= end) {
            break;
        }
        /* the VF's end may free a backend that was netdev_del'ed */
        id = g_strdup(nc->name);
        vpf_replace_vf(vpf, i, NULL, &error_abort);
        vpf->backends[i] = NULL;
        pc->release(vpf->pool, id);
    }
    memory_region_transaction_commit();
    trace_vsriov_release_slice(DEVICE(vpf->pf)->id, i, MIN(kept, i));
    /* what a waiter keeps goes when it is done (vpf_claims_done()) */
    vpf->release_from = MIN(kept, i);
    return i == vpf->num_vfs;
}

/* Whether @vpf has backends to give back (vpf_release_pass() would). */
static bool vpf_releasing(VsriovPF *vpf)
{
    for (uint16_t i = MAX(vpf->release_from, vpf_wanted(vpf));
         i < vpf->num_vfs; i++) {
        if (vpf->backends[i] && !vpf->vfs[i]->enabled) {
            return true;
        }
    }
    return false;
}

/* Whether a PF of @pool has backends to give back to it. */
static bool pool_releasing(VsriovPool *pool)
{
    VsriovPF *vpf;

    QTAILQ_FOREACH(vpf, &vpfs, next) {
        if (vpf->pool == pool && vpf_releasing(vpf)) {
            return true;
        }
    }
    return false;
}

static void vpf_start_claim(VsriovPF *vpf);

/* Once @pool has back all that was on its way: the claims that waited go. */
static void pool_start_waiting_claims(VsriovPool *pool)
{
    VsriovPF *vpf;

    if (pool_releasing(pool)) {
        return;     /* another PF's timer is the last */
    }
    QTAILQ_FOREACH(vpf, &vpfs, next) {
        if (vpf->pool == pool && vpf->claim_waits) {
            vpf->claim_waits = false;
            vpf_start_claim(vpf);
        }
    }
}

static void vpf_release_timer(void *opaque)
{
    VsriovPF *vpf = opaque;

    if (!vpf_release_pass(vpf, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                               RELEASE_SLICE_NS)) {
        timer_mod(vpf->release_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + RELEASE_PAUSE_NS);
        return;
    }
    pool_start_waiting_claims(vpf->pool);
}

/* After a reset from outside a config write (see vsriov_pf_vfs_disabled). */
static void vpf_reset_bh(void *opaque)
{
    VsriovPF *vpf = opaque;

    if (vpf->pool->lazy) {
        vpf_release_later(vpf, 0);
    }
    vpf_sync_enabled(vpf);
}

/* VFs 0..@num_vfs-1 without a backend. */
static unsigned vpf_missing(VsriovPF *vpf, uint16_t num_vfs)
{
    unsigned n = 0;

    for (uint16_t i = 0; i < num_vfs; i++) {
        n += !vpf->backends[i];
    }
    return n;
}

/*
 * Backends claimed without waiting (claim_async), until they came and
 * were bound to VFs: like the release, the binding runs in slices of the
 * main loop (vpf_bind_timer()), since each VF replaced costs milliseconds.
 */
struct VsriovClaim {
    VsriovPF *vpf;          /* NULL once the PF went */
    VsriovPool *pool;       /* referenced: what comes late goes back */
    char **names;           /* the backends that came (NULL: not yet) */
    unsigned n, k;          /* how many; bound or given back so far */
    int ret;                /* and how the binding goes */
    Error *err;
};

#define STAGE_HOLD_NS (10 * NANOSECONDS_PER_SECOND)

static void vpf_claimed(void *opaque, NetClientState **ncs, unsigned n,
                        int ret, Error *err);

/* The most VFs a VF Enable or a PREPARE_VFS waits for. */
static uint16_t vpf_wanted(VsriovPF *vpf)
{
    return MAX(vpf->want_vfs, vpf->prepare_vfs);
}

/* Claim what the VFs wanted lack, unless a claim is in flight. */
static void vpf_start_claim(VsriovPF *vpf)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    g_autofree char *path = object_get_canonical_path(OBJECT(vpf->pf));
    g_autoptr(GPtrArray) owners = g_ptr_array_new_with_free_func(g_free);
    uint16_t wanted = vpf_wanted(vpf);
    VsriovClaim *c;

    if (vpf->claim) {
        return;     /* its completion looks again */
    }
    if (pool_releasing(vpf->pool)) {
        /*
         * Backends on their way back to the pool come first (as RELEASEs
         * before the CLAIMs): vpf_release_timer() starts this claim.
         */
        vpf->claim_waits = true;
        return;
    }
    for (uint16_t i = 0; i < wanted; i++) {
        if (!vpf->backends[i]) {
            g_ptr_array_add(owners, g_strdup_printf("%s/vf[%u]", path, i));
        }
    }
    if (!owners->len) {
        return;
    }
    c = g_new0(VsriovClaim, 1);
    c->vpf = vpf;
    c->pool = vpf->pool;
    object_ref(OBJECT(c->pool));
    vpf->claim = c;
    trace_vsriov_claim_start(DEVICE(vpf->pf)->id, owners->len);
    pc->claim_async(vpf->pool, (const char *const *)owners->pdata,
                    owners->len, vpf_claimed, c);
}

static void vpf_incoming_failed(VsriovPF *vpf, Error *err);
static void vpf_approve_switchover(VsriovPF *vpf);

/* What a VF Enable and a PREPARE_VFS waiting for backends learn. */
static void vpf_claims_done(VsriovPF *vpf, int ret, Error *err)
{
    const char *id = DEVICE(vpf->pf)->id;

    if (vpf->want_vfs && !vpf_vf_enable_set(vpf)) {
        vpf->want_vfs = 0;      /* cleared meanwhile: they stay staged */
    }
    if (ret) {
        if (vpf->want_vfs) {
            error_prepend(&err, "virtual SR-IOV PF '%s': VF Enable with %u "
                          "VF(s) refused: ", id, vpf->want_vfs);
            vpf->want_vfs = 0;
            pcie_sriov_pf_vfs_ready(vpf->pf, false);
        } else if (vpf->prepare_vfs && vpf->incoming_staging) {
            error_prepend(&err, "virtual SR-IOV PF '%s': pool '%s' did not "
                          "give the %u VF(s) the migration's source has "
                          "enabled: ", id,
                          object_get_canonical_path_component(
                              OBJECT(vpf->pool)), vpf->prepare_vfs);
            vpf_incoming_failed(vpf, g_steal_pointer(&err));
        } else if (vpf->prepare_vfs) {
            error_prepend(&err, "virtual SR-IOV PF '%s': PREPARE_VFS of %u "
                          "VF(s) failed: ", id, vpf->prepare_vfs);
        } else {
            error_prepend(&err, "virtual SR-IOV PF '%s': backends for a "
                          "cleared VF Enable: ", id);
        }
        if (err) {
            vsriov_report_guest_err(err);
        }
        if (vpf->prepare_vfs) {
            vpf->prepare_vfs = 0;
            vsriov_vfcfg_prepare_done(vpf, ret);
        }
        /* no VF Enable takes what the disabled VFs kept for it */
        vpf_release_later(vpf, 0);
        return;
    }
    if (vpf->prepare_vfs && !vpf_missing(vpf, vpf->prepare_vfs)) {
        vpf->prepare_vfs = 0;
        vsriov_vfcfg_prepare_done(vpf, 0);
        if (vpf->incoming_staging) {
            vpf->incoming_staging = false;
            vpf_approve_switchover(vpf);
        }
    }
    if (vpf->want_vfs && !vpf_missing(vpf, vpf->want_vfs)) {
        trace_vsriov_vfs_backed(id, vpf->want_vfs);
        vpf->want_vfs = 0;
        pcie_sriov_pf_vfs_ready(vpf->pf, true);
        vpf_sync_enabled(vpf);
    }
    /* (a claim made for fewer VFs than are wanted now) */
    vpf_start_claim(vpf);
    /* what was kept for the waiters and is not enabled now goes back */
    vpf_release_later(vpf, vpf->release_from);
}

/* The backends of @c no VF took go back, and @c goes. */
static void claim_free(VsriovClaim *c)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(c->pool);

    for (; c->k < c->n; c->k++) {
        pc->release(c->pool, c->names[c->k]);
    }
    g_strfreev(c->names);
    error_free(c->err);
    object_unref(OBJECT(c->pool));
    g_free(c);
}

/*
 * Bind the backends of the claim that came to the disabled VFs that lack
 * one, first ones first, for RELEASE_SLICE_NS at most; when all are (or
 * one failed), what waits for them learns it.
 */
static void vpf_bind_timer(void *opaque)
{
    VsriovPF *vpf = opaque;
    VsriovClaim *c = vpf->claim;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(c->pool);
    int64_t end = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + RELEASE_SLICE_NS;
    Error *err;
    uint16_t i;
    int ret;

    memory_region_transaction_begin();
    for (i = 0; i < vpf->num_vfs && c->k < c->n && !c->ret; i++) {
        const char *name = c->names[c->k];
        NetClientState *nc;

        if (vpf->backends[i] || vpf->vfs[i]->enabled) {
            continue;
        }
        if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= end) {
            break;
        }
        /* (a netdev may be deleted by hand meanwhile) */
        nc = qemu_find_netdev(name);
        c->k++;
        if (!nc) {
            error_setg(&c->err, "backend '%s' went away", name);
            c->ret = -EIO;
            pc->release(c->pool, name);
            break;
        }
        vpf->backends[i] = nc;
        if (!vpf_replace_vf(vpf, i, nc, &c->err)) {
            vpf->backends[i] = NULL;
            pc->release(c->pool, name);
            c->ret = -EIO;
        }
    }
    memory_region_transaction_commit();
    if (i < vpf->num_vfs && c->k < c->n && !c->ret) {
        timer_mod(vpf->bind_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + RELEASE_PAUSE_NS);
        return;
    }
    ret = c->ret;
    err = g_steal_pointer(&c->err);
    if (!ret) {
        timer_mod(vpf->stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
    }
    vpf->claim = NULL;
    claim_free(c);      /* what no VF took goes back, before a next claim */
    vpf_claims_done(vpf, ret, err);
}

static void vpf_claimed(void *opaque, NetClientState **ncs, unsigned n,
                        int ret, Error *err)
{
    VsriovClaim *c = opaque;
    VsriovPF *vpf = c->vpf;

    c->names = g_new0(char *, n + 1);
    for (unsigned k = 0; k < n; k++) {
        c->names[k] = g_strdup(ncs[k]->name);
    }
    c->n = n;
    if (!vpf) {
        claim_free(c);  /* the PF went: all go back */
        error_free(err);
        return;
    }
    trace_vsriov_claim_done(DEVICE(vpf->pf)->id, n, ret);
    if (ret) {
        vpf->claim = NULL;
        claim_free(c);
        vpf_claims_done(vpf, ret, err);
        return;
    }
    /* (in a main-loop iteration of its own, not the provider's last one) */
    timer_mod(vpf->bind_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
}

/* Backends claimed ahead that no VF Enable took in time go back. */
static void vpf_stage_timer(void *opaque)
{
    VsriovPF *vpf = opaque;

    /* (what an incoming migration staged waits for its end) */
    if (vpf->claim || vpf_wanted(vpf) || runstate_check(RUN_STATE_INMIGRATE)) {
        timer_mod(vpf->stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
        return;
    }
    vpf_release_later(vpf, 0);
}

int vsriov_pf_stage_vfs(VsriovPF *vpf, uint16_t num_vfs)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (num_vfs > vpf->num_vfs || vpf_vf_enable_set(vpf)) {
        return -EINVAL;
    }
    if (!vpf->pool->lazy || !pc->claim_async) {
        return 0;   /* VF Enable itself has them at once */
    }
    if (!num_vfs) {
        /* none to come: what was prepared goes back */
        vpf->prepare_vfs = 0;
        vpf_release_later(vpf, 0);
        return 0;
    }
    /* a release pending since a reset spares what is staged now */
    vpf->release_from = MAX(vpf->release_from, num_vfs);
    if (!vpf_missing(vpf, num_vfs)) {
        timer_mod(vpf->stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
        return 0;
    }
    vpf->prepare_vfs = num_vfs;
    vpf_start_claim(vpf);
    return 1;
}

/*
 * A pool that claims in the caller (no claim_async) gives its backends
 * without a wait: if it has too few free for VFs 0..@num_vfs-1 while some
 * are on their way back from disabled VFs, they come back now.
 */
static void vpf_flush_releases(VsriovPF *vpf, uint16_t num_vfs)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    VsriovPF *other;

    if (pc->available(vpf->pool) >= vpf_missing(vpf, num_vfs)) {
        return;
    }
    QTAILQ_FOREACH(other, &vpfs, next) {
        if (other->pool == vpf->pool) {
            vpf_release_pass(other, INT64_MAX);
        }
    }
}

/* Claim, in the caller, what VFs 0..@num_vfs-1 lack (pools with claim). */
static bool vpf_claim_now(VsriovPF *vpf, uint16_t num_vfs, Error **errp)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    g_autofree char *path = object_get_canonical_path(OBJECT(vpf->pf));

    for (uint16_t i = 0; i < num_vfs; i++) {
        g_autofree char *owner = g_strdup_printf("%s/vf[%u]", path, i);
        NetClientState *nc;

        if (vpf->backends[i]) {
            continue;
        }
        nc = pc->claim(vpf->pool, owner, errp);
        if (!nc) {
            return false;
        }
        vpf->backends[i] = nc;
        if (!vpf_replace_vf(vpf, i, nc, errp)) {
            /* the VF has no backend now: give it back */
            vpf->backends[i] = NULL;
            pc->release(vpf->pool, nc->name);
            return false;
        }
    }
    return true;
}

int vsriov_pf_prepare_vfs(VsriovPF *vpf, uint16_t num_vfs, Error **errp)
{
    VsriovPoolClass *pc;
    const char *id;
    Error *err = NULL;
    int ret = 0;

    if (!vpf->pf || !vpf->pool->lazy) {
        return 0;   /* its VFs have their backends from the start */
    }
    pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    id = DEVICE(vpf->pf)->id;
    /* one memory topology update for all the VFs, not one per VF */
    memory_region_transaction_begin();
    /* VFs past this VF Enable keep nothing (a release may be pending) */
    vpf->release_from = num_vfs;
    vpf_release_later(vpf, num_vfs);
    if (!vpf_missing(vpf, num_vfs)) {
        trace_vsriov_vfs_backed(id, num_vfs);
    } else if (pc->claim_async) {
        vpf->want_vfs = num_vfs;
        vpf_start_claim(vpf);
        ret = 1;    /* vpf_claims_done() ends the wait */
    } else {
        vpf_flush_releases(vpf, num_vfs);
        if (vpf_claim_now(vpf, num_vfs, &err)) {
            trace_vsriov_vfs_backed(id, num_vfs);
        } else {
            error_prepend(&err, "virtual SR-IOV PF '%s': VF Enable with %u "
                          "VF(s) refused: ", id, num_vfs);
            vsriov_report_guest_err(error_copy(err));
            error_propagate(errp, err);
            /* what it claimed goes back with it (a cheap, static pool) */
            vpf->release_from = 0;
            vpf_release_pass(vpf, INT64_MAX);
            ret = -1;
        }
    }
    memory_region_transaction_commit();
    if (!ret) {
        timer_del(vpf->stage_timer);
    }
    return ret;
}

/*
 * After enabled VFs were disabled.  Their backends go back from the main
 * loop (vpf_release_timer()).  In a config write (the guest cleared VF
 * Enable, or an FLR of the PF) vpf_config_write() takes note of the VFs
 * that went; a reset from elsewhere (system reset, bus reset) may run
 * while the bus walks its devices, so that is left to a bottom half.
 */
void vsriov_pf_vfs_disabled(VsriovPF *vpf)
{
    if (!vpf->pf) {
        return;
    }
    if (vpf->in_config_write) {
        if (vpf->pool->lazy) {
            vpf_release_later(vpf, 0);
        }
    } else {
        qemu_bh_schedule(vpf->reset_bh);
    }
}

/*
 * Migration.  The VFs are devices of their own and migrate as such (their
 * PCI config, their virtio-net state); the PF's SR-IOV capability, VF
 * Enable included, with the PF, which is loaded first (it is realized
 * before its VFs): its post_load enables the VFs before they load.  What
 * is the virtual PF's own is the configuration the guest set, which the
 * destination's provider gets again, since its datapath knows nothing of
 * it.  The destination has its own pool of the same shape.  A lazy
 * pool's destination claims backends for as many VFs as the source had
 * enabled when the migration started (vmstate_vsriov_pf_shape), staged as
 * a PREPARE_VFS would, so that the PF's post_load finds them.
 */
static const VMStateDescription vmstate_vsriov_vf_config = {
    .name = "vsriov-vf-config",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(mac, VsriovVFConfig, 6),
        VMSTATE_BOOL(mac_set, VsriovVFConfig),
        VMSTATE_UINT16(vlan, VsriovVFConfig),
        VMSTATE_UINT8(qos, VsriovVFConfig),
        VMSTATE_UINT16(vlan_proto, VsriovVFConfig),
        VMSTATE_UINT8(spoofchk, VsriovVFConfig),
        VMSTATE_UINT8(trust, VsriovVFConfig),
        VMSTATE_UINT8(link_state, VsriovVFConfig),
        VMSTATE_UINT32(min_tx_rate, VsriovVFConfig),
        VMSTATE_UINT32(max_tx_rate, VsriovVFConfig),
        VMSTATE_END_OF_LIST()
    }
};

/*
 * The PF's shape, sent when the migration starts: a destination whose
 * pool cannot give as many VFs fails it then, while the source still
 * runs, not after the source stopped.
 */
static int vpf_pre_save_shape(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->incoming_num_vfs = vpf->num_vfs;
    vpf->incoming_enabled = vsriov_pf_enabled_vfs(vpf);
    return 0;
}

static bool vpf_post_load_shape(void *opaque, int version_id, Error **errp)
{
    VsriovPF *vpf = opaque;

    if (vpf->incoming_num_vfs != vpf->num_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s' has %u VF(s) from pool "
                   "'%s' where the source's has %u",
                   DEVICE(vpf->pf)->id, vpf->num_vfs,
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   vpf->incoming_num_vfs);
        error_append_hint(errp, "The destination needs a pool of the same "
                          "shape (as many backends, or sriov-totalvfs).\n");
        return false;
    }
    if (vpf->incoming_enabled > vpf->num_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s': %u VFs enabled of %u",
                   DEVICE(vpf->pf)->id, vpf->incoming_enabled, vpf->num_vfs);
        return false;
    }
    if (vpf->pool->lazy && vpf->incoming_enabled &&
        vsriov_pf_stage_vfs(vpf, vpf->incoming_enabled) > 0) {
        /* (a pool that claims in the caller gets them at VF Enable) */
        vpf->incoming_staging = true;
        return true;
    }
    vpf_approve_switchover(vpf);
    return true;
}

static const VMStateDescription vmstate_vsriov_pf_shape = {
    .name = "vsriov-pf-shape",
    .version_id = 1,
    .minimum_version_id = 1,
    .early_setup = true,
    .pre_save = vpf_pre_save_shape,
    .post_load_errp = vpf_post_load_shape,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(incoming_num_vfs, VsriovPF),
        VMSTATE_UINT16(incoming_enabled, VsriovPF),
        VMSTATE_END_OF_LIST()
    }
};

/*
 * A lazy pool's destination claims its VFs' backends when the source's
 * shape has come, while the source runs on; until they come, the live
 * section vsriov-pf-claims holds the switch-over (with the switchover-ack
 * capability), and should its pool not give them, the section's next part
 * fails the migration, before the source stops.  Its parts carry nothing:
 * they are the destination's chances to fail it, at most one per
 * CLAIMS_PART_NS.
 */
#define CLAIMS_PART_NS (100 * SCALE_MS)

static void vpf_incoming_failed(VsriovPF *vpf, Error *err)
{
    vpf->incoming_staging = false;
    vpf->incoming_failed = true;
    error_free(vpf->incoming_err);
    vpf->incoming_err = err;
    trace_vsriov_incoming_claims(DEVICE(vpf->pf)->id, false);
}

static void vpf_approve_switchover(VsriovPF *vpf)
{
    int ret;

    trace_vsriov_incoming_claims(DEVICE(vpf->pf)->id, true);
    if (!vpf->switchover_pending) {
        return;
    }
    vpf->switchover_pending = false;
    ret = qemu_loadvm_approve_switchover();
    if (ret) {
        error_report("virtual SR-IOV PF '%s': switchover ack not sent: %s",
                     DEVICE(vpf->pf)->id, strerror(-ret));
    }
}

static bool vpf_claims_switchover_ack_needed(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->switchover_pending = true;
    return true;
}

static int vpf_claims_save_setup(QEMUFile *f, void *opaque, Error **errp)
{
    VsriovPF *vpf = opaque;

    vpf->claims_part_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    return 0;
}

static bool vpf_claims_is_active_iterate(void *opaque)
{
    VsriovPF *vpf = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    if (now - vpf->claims_part_ns < CLAIMS_PART_NS) {
        return false;
    }
    vpf->claims_part_ns = now;
    return true;
}

static int vpf_claims_save_iterate(QEMUFile *f, void *opaque)
{
    return 1;   /* (no data: this part is all) */
}

static int vpf_claims_load_state(QEMUFile *f, void *opaque, int version_id)
{
    VsriovPF *vpf = opaque;

    if (vpf->incoming_failed) {
        if (vpf->incoming_err) {
            error_report_err(g_steal_pointer(&vpf->incoming_err));
        }
        return -EBUSY;
    }
    return 0;
}

static int vpf_claims_load_cleanup(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->incoming_staging = vpf->incoming_failed = false;
    vpf->switchover_pending = false;
    error_free(vpf->incoming_err);
    vpf->incoming_err = NULL;
    return 0;
}

static const SaveVMHandlers vpf_claims_handlers = {
    .save_setup = vpf_claims_save_setup,
    .is_active_iterate = vpf_claims_is_active_iterate,
    .save_live_iterate = vpf_claims_save_iterate,
    .load_state = vpf_claims_load_state,
    .load_cleanup = vpf_claims_load_cleanup,
    .switchover_ack_needed = vpf_claims_switchover_ack_needed,
};

static bool vpf_pre_save(void *opaque, Error **errp)
{
    VsriovPF *vpf = opaque;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (vpf->vfcfg_busy || !QLIST_EMPTY(&vpf->vfcfg_ops) || vpf->claim ||
        vpf_wanted(vpf)) {
        error_setg(errp, "virtual SR-IOV PF '%s': a VF configuration or VF "
                   "Enable waits for its pool's provider",
                   DEVICE(vpf->pf)->id);
        error_append_hint(errp, "Migrate again once it has completed.\n");
        return false;
    }
    vpf->has_handover_token = pc->handover_token &&
                              pc->handover_token(vpf->pool,
                                                 vpf->handover_token);
    return true;
}

/*
 * The source's provider's hand-over token, which the destination's shows
 * when a VF takes the MAC it had on the source (a daemon pool's handover).
 */
static bool vpf_handover_needed(void *opaque)
{
    VsriovPF *vpf = opaque;

    return vpf->has_handover_token;
}

static bool vpf_handover_post_load(void *opaque, int version_id,
                                   Error **errp)
{
    VsriovPF *vpf = opaque;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (pc->set_incoming_handover) {
        pc->set_incoming_handover(vpf->pool, vpf->handover_token);
    }
    return true;
}

static const VMStateDescription vmstate_vsriov_pf_handover = {
    .name = "vsriov-pf/handover",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = vpf_handover_needed,
    .post_load_errp = vpf_handover_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(handover_token, VsriovPF, VSRIOV_HANDOVER_SIZE),
        VMSTATE_END_OF_LIST()
    }
};

static bool vpf_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovPF *vpf = opaque;

    if (vpf->want_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s': pool '%s' had not given "
                   "the %u VF(s) the guest enabled when the migration "
                   "completed", DEVICE(vpf->pf)->id,
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   vpf->want_vfs);
        return false;
    }

    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        if (vsriov_vfcfg_check(vpf, &vpf->vfcfg[i])) {
            error_setg(errp, "virtual SR-IOV PF '%s': the incoming "
                       "configuration of VF %u is not one it can have here",
                       DEVICE(vpf->pf)->id, i);
            return false;
        }
    }
    /* (the PF, loaded before, enabled them: no reset, no event) */
    vpf->enabled_vfs = vsriov_pf_enabled_vfs(vpf);
    /*
     * The VFs' own state may come later in the stream (a lazy pool's VFs,
     * made at VF Enable, are registered after this section): what needs
     * it waits until the VM runs (vpf_vm_state()).
     */
    vpf->incoming_loaded = true;
    return true;
}

static void vpf_vm_state(void *opaque, bool running, RunState state)
{
    VsriovPF *vpf = opaque;

    if (running && vpf->incoming_loaded) {
        vpf->incoming_loaded = false;
        vsriov_vfcfg_post_load(vpf);
    }
}

static const VMStateDescription vmstate_vsriov_pf = {
    .name = "vsriov-pf",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save_errp = vpf_pre_save,
    .post_load_errp = vpf_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16_EQUAL(num_vfs, VsriovPF,
                             "the destination's PF must have as many VFs "
                             "(TotalVFs) as the source's"),
        VMSTATE_STRUCT_VARRAY_POINTER_UINT16(vfcfg, VsriovPF, num_vfs,
                                             vmstate_vsriov_vf_config,
                                             VsriovVFConfig),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_vsriov_pf_handover,
        NULL
    }
};

bool vsriov_pf_realize(VsriovPF *vpf, PCIDevice *pf, uint16_t cap_offset,
                       Error **errp)
{
    ERRP_GUARD();
    const char *id = DEVICE(pf)->id;
    VsriovPoolClass *pc;
    unsigned free_backends, max_fns, n;
    g_autofree char *path = NULL;
    g_autofree char *unusable = NULL;
    g_autofree char *se_id = NULL;
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
        error_setg(errp, "sriov-pool needs the PF on a PCI Express port");
        error_append_hint(errp, "Put it on a root port, e.g. -device "
                          "pcie-root-port,id=rp0 "
                          "-device virtio-net-pci,bus=rp0,...\n");
        return false;
    }
    if (PCI_FUNC(pf->devfn)) {
        error_setg(errp, "a virtual SR-IOV PF must be function 0 of its "
                   "slot (its VFs take the functions after it)");
        return false;
    }

    pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    free_backends = pc->available(vpf->pool);
    /* (a lazy pool's backends may come later: not checked here) */
    unusable = !vpf->pool->lazy && pc->unusable ? pc->unusable(vpf->pool)
                                                : NULL;
    max_fns = PCI_DEVFN_MAX - 1 - pf->devfn;
    if (vpf->pool->lazy) {
        /* Backends are claimed at VF Enable: the pool's size is the limit */
        n = vpf->pool->entries->len;
        if (vpf->total_vfs > n) {
            error_setg(errp, "sriov-totalvfs=%u but lazy vsriov-pool '%s' "
                       "has %u backend(s)", vpf->total_vfs,
                       object_get_canonical_path_component(OBJECT(vpf->pool)),
                       n);
            return false;
        }
        n = vpf->total_vfs ?: n;
    } else if (vpf->total_vfs) {
        if (vpf->total_vfs > free_backends) {
            error_setg(errp, "sriov-totalvfs=%u but vsriov-pool '%s' has "
                       "%u free backend(s)%s%s", vpf->total_vfs,
                       object_get_canonical_path_component(OBJECT(vpf->pool)),
                       free_backends, unusable ? ": " : "", unusable ?: "");
            return false;
        }
        n = vpf->total_vfs;
    } else {
        n = free_backends;
    }
    if (!n) {
        error_setg(errp, "vsriov-pool '%s' has no free backend for PF '%s'%s%s",
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   id, unusable ? ": " : "", unusable ?: "");
        return false;
    }
    if (unusable) {
        warn_report("vsriov-pool '%s': %s; PF '%s' gets %u VF(s)",
                    object_get_canonical_path_component(OBJECT(vpf->pool)),
                    unusable, id, n);
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

        if (!vpf->pool->lazy) {
            vpf->backends[i] = pc->claim(vpf->pool, owner, errp);
            if (!vpf->backends[i]) {
                goto fail;
            }
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
    vsriov_vfcfg_follow_link(vpf, VIRTIO_NET(vdev));
    virtio_add_feature(&vdev->host_features, VIRTIO_F_SR_IOV);

    vmstate_register(VMSTATE_IF(pf), 0, &vmstate_vsriov_pf_shape, vpf);
    vmstate_register(VMSTATE_IF(pf), 0, &vmstate_vsriov_pf, vpf);
    se_id = vmstate_if_get_id(VMSTATE_IF(pf));
    vpf->claims_id = g_strdup_printf("%s/vsriov-pf-claims", se_id);
    register_savevm_live(vpf->claims_id, 0, 1, &vpf_claims_handlers, vpf);

    vpf->parent_config_write = pf->config_write;
    pf->config_write = vpf_config_write;
    vpf->enabled_vfs = 0;
    for (int r = 0; r < PCI_NUM_REGIONS; r++) {
        vpf->vf_bar_size[r] = vpf->vfs[0]->io_regions[r].size;
    }
    /*
     * Not the main context: block layer drains in other devices' reset
     * poll that one, and VFs must not change in the middle of a reset.
     */
    vpf->reset_bh = aio_bh_new(iohandler_get_aio_context(), vpf_reset_bh, vpf);
    vpf->event_timer = timer_new_ns(QEMU_CLOCK_REALTIME, vpf_event_timer, vpf);
    vpf->incoming_loaded = false;
    vpf->vm_state = qemu_add_vm_change_state_handler(vpf_vm_state, vpf);
    vpf->stage_timer = timer_new_ns(QEMU_CLOCK_REALTIME, vpf_stage_timer, vpf);
    vpf->release_timer = timer_new_ns(QEMU_CLOCK_REALTIME, vpf_release_timer,
                                      vpf);
    vpf->bind_timer = timer_new_ns(QEMU_CLOCK_REALTIME, vpf_bind_timer, vpf);
    vpf->release_from = n;
    vpf->claim_waits = false;
    vpf->claim = NULL;
    vpf->want_vfs = vpf->prepare_vfs = 0;
    vpf->event_last_ns = 0;
    QTAILQ_INSERT_TAIL(&vpfs, vpf, next);
    vsriov_admin_init(vpf);
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
    vsriov_admin_exit(vpf);
    QTAILQ_REMOVE(&vpfs, vpf, next);
    qemu_del_vm_change_state_handler(vpf->vm_state);
    vpf->vm_state = NULL;
    timer_free(vpf->event_timer);
    vpf->event_timer = NULL;
    timer_free(vpf->stage_timer);
    vpf->stage_timer = NULL;
    timer_free(vpf->release_timer);
    vpf->release_timer = NULL;
    timer_free(vpf->bind_timer);
    vpf->bind_timer = NULL;
    if (vpf->claim && vpf->claim->names) {
        claim_free(vpf->claim);     /* they came: what no VF took goes back */
    } else if (vpf->claim) {
        vpf->claim->vpf = NULL;     /* its backends go back when they come */
    }
    vpf->claim = NULL;
    vpf->want_vfs = vpf->prepare_vfs = 0;
    vmstate_unregister(VMSTATE_IF(pf), &vmstate_vsriov_pf, vpf);
    unregister_savevm(NULL, vpf->claims_id, vpf);
    g_clear_pointer(&vpf->claims_id, g_free);
    error_free(vpf->incoming_err);
    vpf->incoming_err = NULL;
    vmstate_unregister(VMSTATE_IF(pf), &vmstate_vsriov_pf_shape, vpf);
    pf->config_write = vpf->parent_config_write;
    if (vpf->reset_bh) {
        qemu_bh_delete(vpf->reset_bh);
        vpf->reset_bh = NULL;
    }
    vsriov_vfcfg_exit(vpf);
    vpf_destroy_vfs(vpf);
    vpf->sriov_cap = 0;
    vpf->pf = NULL;
    /* (its releases, which other PFs' claims may wait for, are done) */
    pool_start_waiting_claims(vpf->pool);
}
