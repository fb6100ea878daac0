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
 * (claim_async) is not waited for in the vCPU, and VF Enable takes at
 * once, as on a PCIe device: the backend-less VFs answer config reads
 * (an unpatched Linux reads them 100 ms after VF Enable), while their
 * virtio reset is held (virtio_pci_hold_reset()), so that their driver
 * waits before it reads their features, which depend on the backend.
 * When a VF's backend came, the VF is swapped for one with it at the
 * same function, with what the driver wrote to its config space, and
 * the driver's reset completes; if the backend does not come, the VF's
 * reset completes on a device that offers no features, which its
 * driver refuses (Linux: "device uses modern interface but does not
 * have VIRTIO_F_VERSION_1"), and query-vsriov says "failed"; VF Enable
 * does not change under the driver.  A guest driver that asks first
 * (SRIOV_MEMBERS_PREPARE, admin.c) has them before it sets VF Enable;
 * backends that came and that no VF Enable took go back after 10 s.  When
 * the VFs are disabled again (VF Enable cleared, PF reset) they are
 * replaced by backend-less VFs and their backends go back to the pool.
 * Both the binding of backends that came and their return run in the main
 * loop, in slices, not in the guest's config write.  Enabling then pays
 * for opening the backends (for vhost-vdpa, mapping guest memory), in
 * exchange for pools shared by PFs that hold backends only while they use
 * them.  docs/architecture.md has a VF's states from placeholder to
 * released.
 *
 * A premapped pool that is still claiming its backends (a daemon pool
 * added at run time) gives them the lazy way: the PF starts with
 * backend-less VFs and claims them all (claim_async) at once; a VF Enable
 * meanwhile gets VFs that wait as with a lazy pool.  Once they came the
 * VFs keep them, as a premapped pool's do; if they do not come, the VFs
 * enabled meanwhile fail as a lazy pool's do.
 *
 * This is the PF core: it calls only the VF configuration core
 * (vf-config.c) and the pools below it; the channels and migration above
 * it learn of what it finishes through the callbacks they pass.
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
#include "qobject/qobject.h"
#include "qom/qom-qobject.h"
#include "hw/pci/pci.h"
#include "hw/pci/pci_bus.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "hw/virtio/virtio-pci.h"
#include "hw/virtio/virtio-features.h"
#include "hw/virtio/virtio-net.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "block/aio.h"
#include "system/memory.h"
#include "system/runstate.h"
#include "vsriov.h"
#include "trace.h"

static VsriovPFList vpfs = QTAILQ_HEAD_INITIALIZER(vpfs);

VsriovPFList *vsriov_pf_list(void)
{
    return &vpfs;
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
 * A change in the number of enabled VFs is reported to management.  A
 * guest can flip VF Enable as fast as it likes: the monitor sends at most
 * one VSRIOV_VFS_CHANGED per second per PF (keyed by its QOM path), the
 * last one held back (qemu-patches/0021).
 */
static void vpf_vfs_changed(VsriovPF *vpf)
{
    g_autofree char *path = object_get_canonical_path(OBJECT(vpf->pf));

    trace_vsriov_vfs_changed_event(DEVICE(vpf->pf)->id, vpf->enabled_vfs);
    qapi_event_send_vsriov_vfs_changed(DEVICE(vpf->pf)->id, path,
                                       vpf->enabled_vfs);
}

static void vpf_note_backing(VsriovPF *vpf);

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
        vsriov_vf_config_reset(vpf, i);
    }
    trace_vsriov_vfs_changed(DEVICE(vpf->pf)->id, vpf->enabled_vfs, now);
    vpf->enabled_vfs = now;
    vpf_vfs_changed(vpf);
    vpf_note_backing(vpf);
}

void vsriov_pf_config_write(VsriovPF *vpf, PCIDevice *pf, uint32_t addr,
                            uint32_t val, int len, PCIConfigWriteFunc *write)
{
    if (!vpf->pf) {
        write(pf, addr, val, len);  /* not a virtual PF (or one of its VFs) */
        return;
    }
    vpf->in_config_write = true;
    write(pf, addr, val, len);
    vpf->in_config_write = false;
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

/*
 * What a VF takes from its PF: how its DMA is translated and laid out (a
 * vIOMMU's iommu_platform and ats, packed rings) and its queue sizes, so
 * that a guest with a vIOMMU translates the VFs' DMA as it does the PF's.
 */
static const char *const vf_inherits[] = {
    "iommu_platform", "ats", "packed", "rx_queue_size", "tx_queue_size",
};

/*
 * Create and realize VF @index with @backend (NULL: none).  Once the PF's
 * SR-IOV capability exists (a lazy pool's VF made at VF Enable), the VF
 * also gets its VF number, its pool MAC and the IDs pcie_sriov gives VFs.
 * A VF without backend holds its reset: a driver finding it enabled waits
 * until it has one (vpf_swap_vf()) or has failed (vpf_fail_vf()).
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
    for (size_t k = 0; k < ARRAY_SIZE(vf_inherits); k++) {
        QObject *v = object_property_get_qobject(OBJECT(pf), vf_inherits[k],
                                                 &error_abort);

        object_property_set_qobject(OBJECT(vf), vf_inherits[k], v,
                                    &error_abort);
        qobject_unref(v);
    }
    /* A VF knows its PF while it is realized: virtio-pci then adds ARI. */
    vf->exp.sriov_vf.pf = pf;
    if (late) {
        vf->exp.sriov_vf.vf_number = index;
        qdev_prop_set_macaddr(DEVICE(vf), "mac", vpf->cfg.pool_mac[index].a);
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
    virtio_pci_hold_reset(VIRTIO_PCI(vf), !backend);
    vsriov_vf_follow_link(vpf, vsriov_vf_net(vf));
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
    n->nic_conf.macaddr = vpf->cfg.pool_mac[i];
    object_unparent(OBJECT(vpf->vfs[i]));
    object_unref(OBJECT(vpf->vfs[i]));
    vf = vpf_create_vf(vpf, i, backend, errp);
    if (!vf) {
        vf = vpf_create_vf(vpf, i, NULL, &error_abort);
    }
    vpf->vfs[i] = vf;
    vpf->backing.failed[i] = false;
    return vf && backend == vpf_vf_backend(vf);
}

/*
 * Write to @to what a driver wrote to the config space @cfg of the VF it
 * replaces: the header's and the capabilities' writable registers, but
 * the vendor-specific capabilities' (virtio's PCI configuration access
 * window writes through to the BARs).  The VFs have the same layout.
 */
static void vpf_replay_config(PCIDevice *to, const uint8_t *cfg)
{
    uint32_t size = pci_config_size(to);
    g_autofree bool *skip = g_new0(bool, size);

    for (uint8_t pos = to->config[PCI_CAPABILITY_LIST] & ~3; pos;
         pos = to->config[pos + PCI_CAP_LIST_NEXT] & ~3) {
        if (to->config[pos + PCI_CAP_LIST_ID] == PCI_CAP_ID_VNDR) {
            uint8_t len = to->config[pos + PCI_CAP_FLAGS];

            for (uint32_t o = pos; o < MIN(pos + len, size); o++) {
                skip[o] = true;
            }
        }
    }
    for (uint32_t o = PCI_COMMAND; o + 4 <= size; o += 4) {
        if (!skip[o] && ldl_le_p(to->wmask + o)) {
            to->config_write(to, o, ldl_le_p(cfg + o), 4);
        }
    }
}

/*
 * Enabled VF @i, which has no backend and whose driver may wait for its
 * reset (vpf_create_vf()), becomes a VF with @backend at the same function
 * (on failure, a VF without backend: false), enabled, with what the
 * driver wrote to its config space.  Its driver finds the new VF behind
 * the same addresses, its reset done: it reads the backend's features.
 */
static bool vpf_swap_vf(VsriovPF *vpf, uint16_t i, NetClientState *backend,
                        Error **errp)
{
    g_autofree uint8_t *cfg = g_memdup2(vpf->vfs[i]->config,
                                        pci_config_size(vpf->vfs[i]));
    bool ok;

    pci_set_enabled(vpf->vfs[i], false);
    ok = vpf_replace_vf(vpf, i, backend, errp);
    pci_set_enabled(vpf->vfs[i], true);
    vpf_replay_config(vpf->vfs[i], cfg);
    if (ok) {
        /* (its defaults were those of a VF without backend until now) */
        vsriov_vf_config_backed(vpf, i);
    }
    trace_vsriov_vf_swapped(DEVICE(vpf->pf)->id, i, ok);
    return ok;
}

/*
 * Enabled VF @i got no backend: its reset completes on a device that
 * offers no features (not even VIRTIO_F_VERSION_1), which its driver
 * refuses, so that it does not drive a NIC without backend.  It stays so
 * until VF Enable is set again (vsriov_pf_prepare_vfs()).  What a driver
 * that did not wait for the reset negotiated goes (and with it what a
 * migration's destination could not take).
 */
static void vpf_fail_vf(VsriovPF *vpf, uint16_t i)
{
    VirtIOPCIProxy *proxy = VIRTIO_PCI(vpf->vfs[i]);

    virtio_bus_reset(&proxy->bus);
    virtio_features_clear(virtio_bus_get_device(&proxy->bus)->host_features_ex);
    virtio_pci_hold_reset(proxy, false);
    vpf->backing.failed[i] = true;
}

/* Whether VF @i is enabled and failed (a disabled one starts over). */
static bool vpf_vf_failed(VsriovPF *vpf, uint16_t i)
{
    return vpf->backing.failed[i] && vpf->vfs[i]->enabled;
}

/* Failed VFs 0..@num_vfs-1 (disabled) start over, as VFs that wait. */
static void vpf_unfail(VsriovPF *vpf, uint16_t num_vfs)
{
    for (uint16_t i = 0; i < num_vfs; i++) {
        if (vpf->backing.failed[i] && !vpf->vfs[i]->enabled) {
            vpf_replace_vf(vpf, i, NULL, &error_abort);
        }
    }
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
    if (!vpf->pool->lazy) {
        /* (a premapped pool's VFs keep what they got while claiming) */
        vpf_note_backing(vpf);
        return;
    }
    vpf->backing.release_from = MIN(vpf->backing.release_from, from);
    if (vpf->backing.release_from < vpf->num_vfs &&
        !timer_pending(vpf->backing.release_timer)) {
        timer_mod(vpf->backing.release_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
    }
    vpf_note_backing(vpf);
}

/*
 * Give back the backends of disabled VFs from backing.release_from on until
 * @end (QEMU_CLOCK_REALTIME); true if none is left to give back.
 */
static bool vpf_release_pass(VsriovPF *vpf, int64_t end)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    uint16_t wanted = vpf_wanted(vpf);
    uint16_t kept = vpf->num_vfs;   /* the first one kept for a waiter */
    uint16_t i;

    memory_region_transaction_begin();
    for (i = vpf->backing.release_from; i < vpf->num_vfs; i++) {
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
    vpf->backing.release_from = MIN(kept, i);
    vpf_note_backing(vpf);
    return i == vpf->num_vfs;
}

/* Whether @vpf has backends to give back (vpf_release_pass() would). */
static bool vpf_releasing(VsriovPF *vpf)
{
    for (uint16_t i = vpf->backing.release_from; i < vpf->num_vfs; i++) {
        if (vsriov_pf_vf_backing(vpf, i) == VSRIOV_VF_BACKING_RELEASING) {
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
        if (vpf->pool == pool && vpf->backing.claim_waits) {
            vpf->backing.claim_waits = false;
            vpf_start_claim(vpf);
        }
    }
}

static void vpf_release_timer(void *opaque)
{
    VsriovPF *vpf = opaque;

    if (!vpf_release_pass(vpf, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                               RELEASE_SLICE_NS)) {
        timer_mod(vpf->backing.release_timer,
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
    return MAX(vpf->backing.want_vfs, vpf->backing.prepare_vfs);
}

/* Claim what the VFs wanted lack, unless a claim is in flight. */
static void vpf_start_claim(VsriovPF *vpf)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    g_autofree char *path = object_get_canonical_path(OBJECT(vpf->pf));
    g_autoptr(GPtrArray) owners = g_ptr_array_new_with_free_func(g_free);
    uint16_t wanted = vpf_wanted(vpf);
    VsriovClaim *c;

    if (vpf->backing.claim) {
        return;     /* its completion looks again */
    }
    if (pool_releasing(vpf->pool)) {
        /*
         * Backends on their way back to the pool come first (as RELEASEs
         * before the CLAIMs): vpf_release_timer() starts this claim.
         */
        vpf->backing.claim_waits = true;
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
    vpf->backing.claim = c;
    trace_vsriov_claim_start(DEVICE(vpf->pf)->id, owners->len);
    vpf_note_backing(vpf);
    pc->claim_async(vpf->pool, (const char *const *)owners->pdata,
                    owners->len, vpf_claimed, c);
}

/* The staging in progress ended: its caller learns how (@err its). */
static void vpf_staged(VsriovPF *vpf, int ret, Error *err)
{
    VsriovStageDone *done = vpf->backing.stage_done;

    vpf->backing.prepare_vfs = 0;
    vpf->backing.stage_done = NULL;
    if (done) {
        done(vpf, ret, err, vpf->backing.stage_opaque);
    } else if (err && ret != -ECANCELED) {
        /* (the claim of a premapped pool's VFs, vsriov_pf_core_realize()) */
        error_prepend(&err, "virtual SR-IOV PF '%s': its VFs got no "
                      "backends: ", DEVICE(vpf->pf)->id);
        warn_report_err(err);
    } else {
        error_free(err);
    }
}

/* What a VF Enable and a staging waiting for backends learn. */
static void vpf_claims_done(VsriovPF *vpf, int ret, Error *err)
{
    const char *id = DEVICE(vpf->pf)->id;

    if (vpf->backing.want_vfs && !vpf_vf_enable_set(vpf)) {
        /* cleared meanwhile: they stay staged */
        vpf->backing.want_vfs = 0;
    }
    if (ret) {
        if (vpf->backing.want_vfs) {
            unsigned failed = 0;

            /* their drivers' resets complete on VFs that offer nothing */
            for (uint16_t i = 0; i < vpf->backing.want_vfs; i++) {
                if (!vpf->backends[i] && vpf->vfs[i]->enabled) {
                    vpf_fail_vf(vpf, i);
                    failed++;
                }
            }
            error_prepend(&err, "virtual SR-IOV PF '%s': %u of the %u VF(s) "
                          "enabled got no backend: ", id, failed,
                          vpf->backing.want_vfs);
            vpf->backing.want_vfs = 0;
            if (vpf->backing.prepare_vfs) {
                /* (the staging's own caller says it its way; none: this) */
                vpf_staged(vpf, ret, vpf->backing.stage_done ?
                                     error_copy(err) : NULL);
            }
            vsriov_report_guest_err(err);
        } else if (vpf->backing.prepare_vfs) {
            vpf_staged(vpf, ret, err);
        } else {
            error_prepend(&err, "virtual SR-IOV PF '%s': backends for a "
                          "cleared VF Enable: ", id);
            vsriov_report_guest_err(err);
        }
        /* no VF Enable takes what the disabled VFs kept for it */
        vpf_release_later(vpf, 0);
        return;
    }
    if (vpf->backing.prepare_vfs &&
        !vpf_missing(vpf, vpf->backing.prepare_vfs)) {
        vpf_staged(vpf, 0, NULL);
    }
    if (vpf->backing.want_vfs && !vpf_missing(vpf, vpf->backing.want_vfs)) {
        /* (each VF's driver went on when its VF was swapped) */
        trace_vsriov_vfs_backed(id, vpf->backing.want_vfs);
        vpf->backing.want_vfs = 0;
    }
    /* (a claim made for fewer VFs than are wanted now) */
    vpf_start_claim(vpf);
    /* what was kept for the waiters and is not enabled now goes back */
    vpf_release_later(vpf, vpf->backing.release_from);
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
 * Bind the backends of the claim that came to the VFs that lack one, first
 * ones first, for RELEASE_SLICE_NS at most: a disabled VF is replaced, an
 * enabled one (its driver waiting) swapped; a failed one is left as its
 * driver saw it.  When all are bound (or one failed), what waits for them
 * learns it.
 */
static void vpf_bind_timer(void *opaque)
{
    VsriovPF *vpf = opaque;
    VsriovClaim *c = vpf->backing.claim;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(c->pool);
    int64_t end = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + RELEASE_SLICE_NS;
    Error *err;
    uint16_t i;
    int ret;

    memory_region_transaction_begin();
    for (i = 0; i < vpf->num_vfs && c->k < c->n && !c->ret; i++) {
        const char *name = c->names[c->k];
        NetClientState *nc;

        if (vpf->backends[i] || vpf_vf_failed(vpf, i)) {
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
        if (!(vpf->vfs[i]->enabled ? vpf_swap_vf(vpf, i, nc, &c->err)
                                   : vpf_replace_vf(vpf, i, nc, &c->err))) {
            vpf->backends[i] = NULL;
            pc->release(c->pool, name);
            c->ret = -EIO;
        }
    }
    memory_region_transaction_commit();
    if (i < vpf->num_vfs && c->k < c->n && !c->ret) {
        timer_mod(vpf->backing.bind_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + RELEASE_PAUSE_NS);
        vpf_note_backing(vpf);
        return;
    }
    ret = c->ret;
    err = g_steal_pointer(&c->err);
    if (!ret) {
        timer_mod(vpf->backing.stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
    }
    vpf->backing.claim = NULL;
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
        vpf->backing.claim = NULL;
        claim_free(c);
        vpf_claims_done(vpf, ret, err);
        return;
    }
    /* (in a main-loop iteration of its own, not the provider's last one) */
    timer_mod(vpf->backing.bind_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
}

/* Backends claimed ahead that no VF Enable took in time go back. */
static void vpf_stage_timer(void *opaque)
{
    VsriovPF *vpf = opaque;

    /* (what an incoming migration staged waits for its end) */
    if (vpf->backing.claim || vpf_wanted(vpf) ||
        runstate_check(RUN_STATE_INMIGRATE)) {
        timer_mod(vpf->backing.stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
        return;
    }
    vpf_release_later(vpf, 0);
}

int vsriov_pf_stage_vfs(VsriovPF *vpf, uint16_t num_vfs,
                        VsriovStageDone *done, void *opaque)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (num_vfs > vpf->num_vfs || vpf_vf_enable_set(vpf)) {
        return -EINVAL;
    }
    if (!vpf->pool->lazy || !pc->claim_async) {
        return 0;   /* VF Enable itself has them at once */
    }
    if (vpf->backing.prepare_vfs) {
        /* the one in progress is superseded */
        vpf_staged(vpf, -ECANCELED, NULL);
    }
    if (!num_vfs) {
        /* none to come: what was prepared goes back */
        vpf_release_later(vpf, 0);
        return 0;
    }
    /* a release pending since a reset spares what is staged now */
    vpf->backing.release_from = MAX(vpf->backing.release_from, num_vfs);
    if (!vpf_missing(vpf, num_vfs)) {
        timer_mod(vpf->backing.stage_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + STAGE_HOLD_NS);
        return 0;
    }
    vpf->backing.prepare_vfs = num_vfs;
    vpf->backing.stage_done = done;
    vpf->backing.stage_opaque = opaque;
    vpf_start_claim(vpf);
    vpf_note_backing(vpf);
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

bool vsriov_pf_prepare_vfs(VsriovPF *vpf, uint16_t num_vfs, Error **errp)
{
    VsriovPoolClass *pc;
    const char *id;
    Error *err = NULL;
    bool backed = false, ok = true;

    if (!vpf->pf || (!vpf->pool->lazy && !vpf_missing(vpf, num_vfs))) {
        return true;    /* its VFs have their backends from the start */
    }
    pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    id = DEVICE(vpf->pf)->id;
    /* one memory topology update for all the VFs, not one per VF */
    memory_region_transaction_begin();
    if (vpf->pool->lazy) {
        /* VFs past this VF Enable keep nothing (a release may be pending) */
        vpf->backing.release_from = num_vfs;
        vpf_release_later(vpf, num_vfs);
    }
    vpf_unfail(vpf, num_vfs);
    if (!vpf_missing(vpf, num_vfs)) {
        trace_vsriov_vfs_backed(id, num_vfs);
        backed = true;
    } else if (pc->claim_async) {
        /*
         * The VFs are enabled now; those without backend hold their
         * drivers' resets until it came (vpf_bind_timer()) or did not
         * (vpf_claims_done()).
         */
        vpf->backing.want_vfs = num_vfs;
        vpf_start_claim(vpf);
    } else {
        vpf_flush_releases(vpf, num_vfs);
        if (vpf_claim_now(vpf, num_vfs, &err)) {
            trace_vsriov_vfs_backed(id, num_vfs);
            backed = true;
        } else {
            error_prepend(&err, "virtual SR-IOV PF '%s': VF Enable with %u "
                          "VF(s) refused: ", id, num_vfs);
            vsriov_report_guest_err(error_copy(err));
            error_propagate(errp, err);
            /* what it claimed goes back with it (a cheap, static pool) */
            vpf->backing.release_from = 0;
            vpf_release_pass(vpf, INT64_MAX);
            ok = false;
        }
    }
    memory_region_transaction_commit();
    if (backed) {
        timer_del(vpf->backing.stage_timer);
    }
    vpf_note_backing(vpf);
    return ok;
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

VsriovVFBacking vsriov_pf_vf_backing(VsriovPF *vpf, uint16_t i)
{
    uint16_t wanted = vpf_wanted(vpf);

    if (!vpf->backends[i]) {
        if (vpf_vf_failed(vpf, i)) {
            return VSRIOV_VF_BACKING_FAILED;
        }
        return vpf->backing.claim && i < wanted ? VSRIOV_VF_BACKING_CLAIMING
                                                : VSRIOV_VF_BACKING_NONE;
    }
    if (vpf->vfs[i]->enabled || !vpf->pool->lazy) {
        return VSRIOV_VF_BACKING_BOUND;
    }
    /* (vpf_release_pass() gives back from release_from on, but the wanted) */
    return i < wanted || i < vpf->backing.release_from
           ? VSRIOV_VF_BACKING_STAGED : VSRIOV_VF_BACKING_RELEASING;
}

/*
 * The one place where a VF's backing is seen to change: the engine's
 * steps call it when they are done, and it traces each VF whose state is
 * not the one it traced last.
 */
static void vpf_note_backing(VsriovPF *vpf)
{
    for (uint16_t i = 0; vpf->backing.noted && i < vpf->num_vfs; i++) {
        VsriovVFBacking now = vsriov_pf_vf_backing(vpf, i);

        if (now != vpf->backing.noted[i]) {
            trace_vsriov_vf_backing(DEVICE(vpf->pf)->id, i,
                                    VsriovVFBacking_str(vpf->backing.noted[i]),
                                    VsriovVFBacking_str(now));
            vpf->backing.noted[i] = now;
        }
    }
}

/* Whether a VF Enable or a staging waits for the pool (a claim is out). */
bool vsriov_pf_waits_for_pool(VsriovPF *vpf)
{
    return vpf->backing.claim || vpf_wanted(vpf);
}

bool vsriov_pf_core_realize(VsriovPF *vpf, PCIDevice *pf,
                            uint16_t cap_offset, Error **errp)
{
    ERRP_GUARD();
    const char *id = DEVICE(pf)->id;
    VsriovPoolClass *pc;
    unsigned free_backends, max_fns, n;
    g_autofree char *path = NULL;
    g_autofree char *unusable = NULL;
    VirtIODevice *vdev;
    int16_t cap_size;
    bool pending;

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
    /* a premapped pool still claiming: its VFs get their backends later */
    pending = !vpf->pool->lazy && pc->claim_async &&
              vsriov_pool_state(vpf->pool, NULL) == VSRIOV_POOL_STATE_CLAIMING;
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
    vpf->backing.failed = g_new0(bool, n);
    vpf->num_vfs = n;
    path = object_get_canonical_path(OBJECT(pf));
    for (uint16_t i = 0; i < n; i++) {
        g_autofree char *owner = g_strdup_printf("%s/vf[%u]", path, i);

        if (!vpf->pool->lazy && !pending) {
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
    vsriov_vf_config_init(vpf);
    vsriov_vf_stats_init(vpf);
    vdev = virtio_bus_get_device(&VIRTIO_PCI(pf)->bus);
    vsriov_vf_follow_link(vpf, VIRTIO_NET(vdev));
    virtio_add_feature(&vdev->host_features, VIRTIO_F_SR_IOV);

    vpf->enabled_vfs = 0;
    for (int r = 0; r < PCI_NUM_REGIONS; r++) {
        vpf->vf_bar_size[r] = vpf->vfs[0]->io_regions[r].size;
    }
    /*
     * Not the main context: block layer drains in other devices' reset
     * poll that one, and VFs must not change in the middle of a reset.
     */
    vpf->reset_bh = aio_bh_new(iohandler_get_aio_context(), vpf_reset_bh, vpf);
    vpf->backing.stage_timer = timer_new_ns(QEMU_CLOCK_REALTIME,
                                            vpf_stage_timer, vpf);
    vpf->backing.release_timer = timer_new_ns(QEMU_CLOCK_REALTIME,
                                              vpf_release_timer, vpf);
    vpf->backing.bind_timer = timer_new_ns(QEMU_CLOCK_REALTIME,
                                           vpf_bind_timer, vpf);
    vpf->backing.release_from = n;
    vpf->backing.claim_waits = false;
    vpf->backing.claim = NULL;
    vpf->backing.want_vfs = vpf->backing.prepare_vfs = 0;
    vpf->backing.stage_done = NULL;
    vpf->backing.noted = g_new(VsriovVFBacking, n);
    for (uint16_t i = 0; i < n; i++) {
        vpf->backing.noted[i] = vsriov_pf_vf_backing(vpf, i);
    }
    QTAILQ_INSERT_TAIL(&vpfs, vpf, next);
    vsriov_pool_use(vpf->pool);
    trace_vsriov_pf_realize(id, n,
        object_get_canonical_path_component(OBJECT(vpf->pool)));
    if (pending) {
        /* all of them, as a staging with nobody to tell (vpf_staged()) */
        vpf->backing.prepare_vfs = n;
        vpf_start_claim(vpf);
        vpf_note_backing(vpf);
    }
    return true;

fail:
    vpf_destroy_vfs(vpf);
    g_clear_pointer(&vpf->backing.failed, g_free);
    vpf->pf = NULL;
    return false;
}

void vsriov_pf_core_exit(VsriovPF *vpf, PCIDevice *pf)
{
    trace_vsriov_pf_exit(DEVICE(pf)->id);
    QTAILQ_REMOVE(&vpfs, vpf, next);
    vsriov_pool_unuse(vpf->pool);
    timer_free(vpf->backing.stage_timer);
    vpf->backing.stage_timer = NULL;
    timer_free(vpf->backing.release_timer);
    vpf->backing.release_timer = NULL;
    timer_free(vpf->backing.bind_timer);
    vpf->backing.bind_timer = NULL;
    if (vpf->backing.claim && vpf->backing.claim->names) {
        /* they came: what no VF took goes back */
        claim_free(vpf->backing.claim);
    } else if (vpf->backing.claim) {
        /* its backends go back when they come */
        vpf->backing.claim->vpf = NULL;
    }
    vpf->backing.claim = NULL;
    vpf->backing.want_vfs = vpf->backing.prepare_vfs = 0;
    vpf->backing.stage_done = NULL;
    g_clear_pointer(&vpf->backing.noted, g_free);
    g_clear_pointer(&vpf->backing.failed, g_free);
    if (vpf->reset_bh) {
        qemu_bh_delete(vpf->reset_bh);
        vpf->reset_bh = NULL;
    }
    vsriov_vf_stats_exit(vpf);
    vsriov_vf_config_exit(vpf);
    vpf_destroy_vfs(vpf);
    vpf->sriov_cap = 0;
    vpf->pf = NULL;
    /* (its releases, which other PFs' claims may wait for, are done) */
    pool_start_waiting_claims(vpf->pool);
}
