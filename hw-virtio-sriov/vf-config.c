/*
 * vsriov VF configuration core
 *
 * What the guest's PF driver sets for its VFs (MAC, VLAN, spoof check,
 * trust, link state, tx rates) and reads back, whatever channel it came
 * through (the administration virtqueue, admin.c): the checks, the change
 * as one transaction, the defaults a VF starts over with, the link
 * policy, and what an incoming migration re-applies.
 * Results are 0 or a negative errno; the channel maps them to its wire.
 *
 * What belongs to the virtual device is applied here: the VF's MAC (its
 * virtio-net config space, which a bound VF driver is told about with a
 * config interrupt) and its link.  What belongs to the datapath (VLAN,
 * QoS, spoof check, trust, rates) is handed to the pool's provider when it
 * has a configure method, and is otherwise recorded and reported by
 * query-vsriov.  A provider's answer comes from the main loop; no vCPU
 * waits for it.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "hw/pci/pci.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "net/net.h"
#include "net/vhost_net.h"
#include "standard-headers/linux/ethtool.h"
#include "vsriov.h"
#include "trace.h"

#define VLAN_VID_MAX    4094

static VirtIONet *vf_net(VsriovPF *vpf, uint16_t i)
{
    return vsriov_vf_net(vpf->vfs[i]);
}

/* VF @i's configuration before the guest sets any: its provider's. */
static void config_defaults(VsriovPF *vpf, uint16_t i, VsriovVFConfig *c)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    memset(c, 0, sizeof(*c));
    c->vlan_proto = ETH_P_8021Q;
    c->link_state = VSRIOV_VF_LINK_AUTO;
    if (pc->backend_config && vpf->backends[i]) {
        pc->backend_config(vpf->pool, vpf->backends[i]->name, c);
    }
}

void vsriov_vf_default_mac(VsriovPF *vpf, uint16_t i, MACAddr *mac)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (!vpf->backends[i] || !pc->backend_mac ||
        !pc->backend_mac(vpf->pool, vpf->backends[i]->name, mac)) {
        *mac = vpf->cfg.pool_mac[i];
    }
}

/*
 * Whether a vDPA device's config space now reads @mac (all zeros reads as
 * the MAC QEMU holds, as virtio-net does): set_config cannot fail, and
 * some devices (VDUSE's) ignore it.
 */
static bool vf_vdpa_shows_mac(NetClientState *peer, const uint8_t *mac)
{
    struct virtio_net_config cfg = {};
    static const uint8_t zero[ETH_ALEN];

    if (vhost_net_get_config(get_vhost_net(peer), (uint8_t *)&cfg,
                             sizeof(cfg)) < 0) {
        return false;
    }
    return !memcmp(cfg.mac, mac, ETH_ALEN) ||
           !memcmp(cfg.mac, zero, ETH_ALEN);
}

/*
 * Put the VF's MAC in its config space and tell a bound driver (one that
 * negotiated VIRTIO_NET_F_ADMIN_MAC adopts it, if its config space shows
 * it); if the backend refuses it, the VF keeps the MAC it had.
 */
static int vf_apply_mac(VsriovPF *vpf, uint16_t i, const uint8_t *mac)
{
    VirtIONet *n = vf_net(vpf, i);
    NetClientState *nc = qemu_get_queue(n->nic);
    bool shown = true;

    if (nc->peer && nc->peer->info->type == NET_CLIENT_DRIVER_VHOST_VDPA) {
        /* The device's config space is the vDPA device's: write it there. */
        if (vhost_net_set_config(get_vhost_net(nc->peer), mac,
                                 offsetof(struct virtio_net_config, mac),
                                 ETH_ALEN,
                                 VHOST_SET_CONFIG_TYPE_FRONTEND) < 0) {
            return -EIO;
        }
        shown = vf_vdpa_shows_mac(nc->peer, mac);
    }
    memcpy(n->nic_conf.macaddr.a, mac, ETH_ALEN);
    memcpy(n->mac, mac, ETH_ALEN);
    qemu_format_nic_info_str(nc, n->mac);
    trace_vsriov_vf_mac(i, shown);
    if (shown) {
        virtio_net_admin_mac_changed(n);
    } else {
        /*
         * A driver told to adopt the MAC would read the device's own:
         * the switch holds the VF to this one, the driver learns it from
         * whoever sets it on its netdev (the SR-IOV CNI does).
         */
        virtio_notify_config(VIRTIO_DEVICE(n));
    }
    return 0;
}

static VirtIONet *pf_net(VsriovPF *vpf)
{
    return VIRTIO_NET(virtio_bus_get_device(&VIRTIO_PCI(vpf->pf)->bus));
}

/*
 * The VF's link as its admin link state says, but never up while the
 * host holds its backend's link down (set_link): the guest's PF driver
 * cannot override the host, nor the host's set_link of the backend the
 * guest's "disable".
 */
static bool vf_link_down(VsriovPF *vpf, uint16_t i)
{
    NetClientState *nc = qemu_get_queue(vf_net(vpf, i)->nic);
    bool backend_down = nc->peer && nc->peer->link_down;

    switch (vpf->cfg.vf[i].link_state) {
    case VSRIOV_VF_LINK_ENABLE:
        return backend_down;
    case VSRIOV_VF_LINK_DISABLE:
        return true;
    default:
        /* auto: the VF's link follows the PF's */
        return qemu_get_queue(pf_net(vpf)->nic)->link_down || backend_down;
    }
}

static void vf_apply_link(VsriovPF *vpf, uint16_t i)
{
    NetClientState *nc = qemu_get_queue(vf_net(vpf, i)->nic);
    bool down = vf_link_down(vpf, i);

    if (nc->link_down != down) {
        nc->link_down = down;
        if (nc->info->link_status_changed) {
            nc->info->link_status_changed(nc);
        }
    }
}

/*
 * The link policy of the PF and of its VFs (VirtIONet.link_policy,
 * qemu-patches/0013), run when the host changes a link (set_link): a
 * VF's link is as vf_link_down() says, and the VFs whose link state is
 * auto follow the PF's.
 */
static void link_policy(VirtIONet *n, void *opaque)
{
    VsriovPF *vpf = opaque;

    if (!vpf->cfg.vf) {
        return;
    }
    if (n == pf_net(vpf)) {
        for (uint16_t i = 0; i < vpf->num_vfs; i++) {
            if (vpf->vfs[i] &&
                vpf->cfg.vf[i].link_state == VSRIOV_VF_LINK_AUTO) {
                vf_apply_link(vpf, i);
            }
        }
        return;
    }
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        if (vpf->vfs[i] && n == vf_net(vpf, i)) {
            /* (its device reports the link once this returns) */
            qemu_get_queue(n->nic)->link_down = vf_link_down(vpf, i);
            trace_vsriov_vf_link(i, vpf->cfg.vf[i].link_state,
                                 qemu_get_queue(n->nic)->link_down);
            return;
        }
    }
}

void vsriov_vf_follow_link(VsriovPF *vpf, VirtIONet *n)
{
    n->link_policy = link_policy;
    n->link_policy_opaque = vpf;
}

/*
 * Ask the pool's provider to apply @c to VF @i's datapath.  A provider
 * without a configure method (the static pool) records it only.
 */
static uint32_t vf_config_diff(const VsriovVFConfig *a, const VsriovVFConfig *b)
{
    uint32_t d = 0;

    if (a->mac_set != b->mac_set || memcmp(a->mac, b->mac, ETH_ALEN)) {
        d |= VSRIOV_VF_CFG_MAC;
    }
    if (a->vlan != b->vlan || a->qos != b->qos ||
        a->vlan_proto != b->vlan_proto) {
        d |= VSRIOV_VF_CFG_VLAN;
    }
    if (a->spoofchk != b->spoofchk) {
        d |= VSRIOV_VF_CFG_SPOOFCHK;
    }
    if (a->trust != b->trust) {
        d |= VSRIOV_VF_CFG_TRUST;
    }
    if (a->link_state != b->link_state) {
        d |= VSRIOV_VF_CFG_LINK_STATE;
    }
    if (a->min_tx_rate != b->min_tx_rate || a->max_tx_rate != b->max_tx_rate) {
        d |= VSRIOV_VF_CFG_RATE;
    }
    return d;
}

/* A configure call to the pool's provider, until it completes. */
struct VsriovVFConfigOp {
    VsriovPF *vpf;          /* NULL once the PF went */
    uint16_t vf;
    uint32_t gen;           /* the VF's cfg.gen when it was made */
    VsriovVFConfigDone *done;  /* the guest's command, which waits; NULL: a */
    void *opaque;           /* reset or a rollback, which nobody waits for */
    VsriovVFConfig c;
    QLIST_ENTRY(VsriovVFConfigOp) next;
};

static bool vf_has_ops(VsriovPF *vpf, uint16_t i)
{
    VsriovVFConfigOp *op;

    QLIST_FOREACH(op, &vpf->cfg.ops, next) {
        if (op->vf == i) {
            return true;
        }
    }
    return false;
}

/*
 * A change the provider applied (or that has none): the device's part,
 * the VF's MAC and link.  0, or -EIO if the MAC did not reach the VF's
 * backend (the record keeps the old configuration).
 */
static int vf_set_done(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c)
{
    VsriovVFConfig old = vpf->cfg.vf[i];

    if (old.mac_set != c->mac_set ||
        (c->mac_set && memcmp(old.mac, c->mac, ETH_ALEN))) {
        MACAddr mac;

        if (c->mac_set) {
            memcpy(mac.a, c->mac, ETH_ALEN);
        } else {
            vsriov_vf_default_mac(vpf, i, &mac);
        }
        if (vf_apply_mac(vpf, i, mac.a)) {
            return -EIO;
        }
    }
    vpf->cfg.vf[i] = *c;
    /* (also when it is the same: the host may have changed the link) */
    vf_apply_link(vpf, i);
    return 0;
}

static bool vf_configure(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c,
                         VsriovVFConfigDone *done, void *opaque);

/*
 * A provider's answer that says it changed nothing (VsriovPoolClass's
 * configure); after any other failure it may have done part or all of it.
 */
static bool provider_refused(int ret)
{
    return ret == -EPERM || ret == -EACCES || ret == -EADDRINUSE ||
           ret == -EINVAL || ret == -EAGAIN || ret == -ENOSPC;
}

static void vf_configure_done(void *opaque, int ret, Error *err)
{
    VsriovVFConfigOp *op = opaque;
    VsriovPF *vpf = op->vpf;
    uint16_t i = op->vf;
    bool current;

    if (!vpf) {
        error_free(err);
        g_free(op);
        return;
    }
    QLIST_REMOVE(op, next);
    /* a VF that started over meanwhile took its own configuration */
    current = op->gen == vpf->cfg.gen[i];
    if (current) {
        /*
         * After a time-out the provider may apply it late; after a failed
         * reset its datapath may not be at the defaults: the next call
         * sends the whole configuration.
         */
        if (!ret) {
            vpf->cfg.unsure[i] = false;
        } else if (!op->done || !provider_refused(ret)) {
            vpf->cfg.unsure[i] = true;
        }   /* (refused: it changed nothing, the VF is as sure as it was) */
    }
    if (ret) {
        error_prepend(&err, "PF '%s' VF %u: ", DEVICE(vpf->pf)->id, i);
        vsriov_report_guest_err(err);
    } else if (current && op->done) {
        ret = vf_set_done(vpf, i, &op->c);
        if (ret) {
            vpf->cfg.unsure[i] = true;
        }
    }
    if (current && op->done && vpf->cfg.unsure[i]) {
        /*
         * What the guest asked may be in the datapath (late, in part, or
         * before the device's part failed) while the record says it is
         * not: put the recorded configuration back, so that a failed
         * command leaves nothing behind.
         */
        vf_configure(vpf, i, &vpf->cfg.vf[i], NULL, NULL);
    }
    if (op->done) {
        op->done(vpf, i, current ? ret : -ESTALE, op->opaque);
    }
    g_free(op);
}

/*
 * Ask the pool's provider to apply @c to VF @i's datapath; its answer
 * comes later (vf_configure_done()).  @done: told when the guest's
 * command completes; NULL: a reset or a rollback, which nobody waits for.
 * False if there is nothing to apply to (a provider without configure,
 * the static pool, only records it; a lazy pool's VF gets a fresh
 * backend).
 */
static bool vf_configure(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c,
                         VsriovVFConfigDone *done, void *opaque)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    VsriovVFConfigOp *op;
    uint32_t changed;

    if (!pc->configure || !vpf->backends[i]) {
        vpf->cfg.unsure[i] = false;
        return false;
    }
    /*
     * After a time-out, the whole configuration: the provider may have
     * applied the command QEMU gave up on.
     */
    changed = vpf->cfg.unsure[i] ? VSRIOV_VF_CFG_ALL
                                   : vf_config_diff(&vpf->cfg.vf[i], c);
    op = g_new0(VsriovVFConfigOp, 1);
    op->vpf = vpf;
    op->vf = i;
    op->gen = vpf->cfg.gen[i];
    op->done = done;
    op->opaque = opaque;
    op->c = *c;
    QLIST_INSERT_HEAD(&vpf->cfg.ops, op, next);
    pc->configure(vpf->pool, vpf->backends[i], c, changed, vf_configure_done,
                  op);
    return true;
}

static bool valid_unicast(const uint8_t *mac)
{
    static const uint8_t zero[ETH_ALEN];

    return !(mac[0] & 1) && memcmp(mac, zero, ETH_ALEN);
}

/*
 * Change VF @i's configuration to @c (valid: vsriov_vf_config_check()): the
 * provider's datapath first, then the device's part (MAC, link), all or
 * nothing.  0 or a negative errno when done at once (-EAGAIN: the VF's
 * backend is still on its way); 1 when the provider answers later, and
 * @done says how it went.
 */
int vsriov_vf_config_change(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c,
                        VsriovVFConfigDone *done, void *opaque)
{
    int ret;

    if (VSRIOV_POOL_GET_CLASS(vpf->pool)->configure && !vpf->backends[i]) {
        /*
         * An enabled VF whose backend is on its way (or did not come):
         * its provider has no datapath to apply it to yet.
         */
        return -EAGAIN;
    }
    if (vf_configure(vpf, i, c, done, opaque)) {
        return 1;
    }
    ret = vf_set_done(vpf, i, c);
    return ret;
}

/* Whether @c is a configuration a VF of @vpf can have: 0 or -EINVAL. */
int vsriov_vf_config_check(VsriovPF *vpf, const VsriovVFConfig *c)
{
    int32_t speed = pf_net(vpf)->net_conf.speed;

    if ((c->mac_set && !valid_unicast(c->mac)) ||
        c->vlan > VLAN_VID_MAX || c->qos > 7 ||
        (c->vlan_proto != ETH_P_8021Q && c->vlan_proto != ETH_P_8021AD) ||
        c->spoofchk > 1 || c->trust > 1 ||
        c->link_state > VSRIOV_VF_LINK_DISABLE ||
        (c->max_tx_rate && c->min_tx_rate > c->max_tx_rate) ||
        (speed > 0 && (c->max_tx_rate > (uint32_t)speed ||
                       c->min_tx_rate > (uint32_t)speed))) {
        return -EINVAL;
    }
    return 0;
}

/*
 * After an incoming migration: the configuration the guest set goes to
 * this host's provider, whose datapath knows nothing of it, and each
 * enabled VF's link is as it says.
 */
void vsriov_vf_config_post_load(VsriovPF *vpf)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        VsriovVFConfig *c = &vpf->cfg.vf[i];
        MACAddr def;

        vpf->cfg.gen[i]++;
        vpf->cfg.unsure[i] = false;
        vsriov_vf_default_mac(vpf, i, &def);
        if (pc->backend_mac && i < vpf->enabled_vfs && !c->mac_set &&
            memcmp(vf_net(vpf, i)->mac, def.a, ETH_ALEN)) {
            /*
             * The VF keeps the MAC it had on the source, which is not
             * the one this host's provider gave its backend (a daemon's
             * VF has a MAC of its own): it is held by configuration now,
             * so that the provider's datapath lets it through.
             */
            c->mac_set = true;
            memcpy(c->mac, vf_net(vpf, i)->mac, ETH_ALEN);
        }
        if (c->mac_set) {
            /* (its virtio-net state brought the MAC; this is QEMU's note) */
            memcpy(vf_net(vpf, i)->nic_conf.macaddr.a, c->mac, ETH_ALEN);
        }
        if (i < vpf->enabled_vfs) {
            vpf->cfg.unsure[i] = true;    /* all of it */
            vf_configure(vpf, i, c, NULL, NULL);
            vf_apply_link(vpf, i);
        }
    }
}

/*
 * Enabled VF @i, enabled without a backend, got one: its configuration is
 * the defaults of its provider, whose VF has them as it is handed out.
 * Nothing the guest set goes: a VF without backend takes no configuration
 * (vsriov_vf_config_change()).
 */
void vsriov_vf_config_backed(VsriovPF *vpf, uint16_t i)
{
    vpf->cfg.gen[i]++;
    vpf->cfg.unsure[i] = false;
    config_defaults(vpf, i, &vpf->cfg.vf[i]);
}

/* Back to the defaults, as when the VF was first enabled. */
void vsriov_vf_config_reset(VsriovPF *vpf, uint16_t i)
{
    VsriovVFConfig old = vpf->cfg.vf[i];
    VsriovVFConfig def;

    config_defaults(vpf, i, &def);
    /* what is in flight for the VF's last life no longer applies */
    vpf->cfg.gen[i]++;
    if (!vpf->backends[i]) {
        /* it has no backend (the next one comes fresh from the pool) */
        vpf->cfg.unsure[i] = false;
    } else {
        /*
         * (a lazy pool's VF that went keeps its backend until the main
         * loop gives it back, and may be enabled again with it)
         */
        /* what is in flight may land after the record says "default" */
        vpf->cfg.unsure[i] |= vf_has_ops(vpf, i);
        if (vpf->cfg.unsure[i] || vf_config_diff(&old, &def)) {
            /* (its own failure makes the VF unsure: it is current) */
            vf_configure(vpf, i, &def, NULL, NULL);
        }
    }
    vpf->cfg.vf[i] = def;
    if (old.mac_set) {
        MACAddr mac;

        vsriov_vf_default_mac(vpf, i, &mac);
        vf_apply_mac(vpf, i, mac.a);
    }
    if (old.link_state != VSRIOV_VF_LINK_AUTO) {
        vf_apply_link(vpf, i);
    }
}

void vsriov_vf_config_init(VsriovPF *vpf)
{
    vpf->cfg.vf = g_new0(VsriovVFConfig, vpf->num_vfs);
    vpf->cfg.pool_mac = g_new0(MACAddr, vpf->num_vfs);
    vpf->cfg.unsure = g_new0(bool, vpf->num_vfs);
    vpf->cfg.gen = g_new0(uint32_t, vpf->num_vfs);
    QLIST_INIT(&vpf->cfg.ops);
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        config_defaults(vpf, i, &vpf->cfg.vf[i]);
        vpf->cfg.pool_mac[i] = vf_net(vpf, i)->nic_conf.macaddr;
    }
}

void vsriov_vf_config_exit(VsriovPF *vpf)
{
    VsriovVFConfigOp *op;

    /* what the provider still has to answer is answered to nobody */
    while ((op = QLIST_FIRST(&vpf->cfg.ops))) {
        QLIST_REMOVE(op, next);
        op->vpf = NULL;
        op->done = NULL;
    }
    g_free(vpf->cfg.gen);
    vpf->cfg.gen = NULL;
    g_free(vpf->cfg.vf);
    g_free(vpf->cfg.pool_mac);
    g_free(vpf->cfg.unsure);
    vpf->cfg.unsure = NULL;
    vpf->cfg.vf = NULL;
    vpf->cfg.pool_mac = NULL;
}
