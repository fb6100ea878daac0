/*
 * vsriov VF-configuration channel
 *
 * The guest's PF driver configures its VFs (MAC, VLAN, spoof check, trust,
 * link state, tx rates) and reads their configuration and counters through
 * a mailbox in a Vendor-Specific Extended Capability of the PF: it writes
 * the VF number and the arguments, then the opcode, which runs the
 * command.  A command that needs the pool's provider (a host daemon)
 * reads back "in progress" (EINPROGRESS) until the provider answers from
 * the main loop, so no vCPU waits on the outside world; the others
 * complete within the write.  docs/vf-config-channel.md specifies it;
 * vfcfg.h has the layout.
 *
 * What belongs to the virtual device is applied here: the VF's MAC (its
 * virtio-net config space, which a bound VF driver is told about with a
 * config interrupt) and its link.  What belongs to the datapath (VLAN,
 * QoS, spoof check, trust, rates) is handed to the pool's provider when it
 * has a configure method, and is otherwise recorded and reported by
 * query-vsriov.
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
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "net/net.h"
#include "net/tap.h"
#include "net/vhost_net.h"
#include "standard-headers/linux/ethtool.h"
#include "vsriov.h"
#include "vfcfg.h"
#include "trace.h"

#include <net/if.h>
#include <sys/ioctl.h>
#ifdef CONFIG_LINUX
#include <linux/if_tun.h>
#endif

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
    c->link_state = VSRIOV_VFCFG_LINK_AUTO;
    if (pc->backend_config && vpf->backends[i]) {
        pc->backend_config(vpf->pool, vpf->backends[i]->name, c);
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
            return VSRIOV_VFCFG_S_EIO;
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
    return VSRIOV_VFCFG_S_OK;
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

    switch (vpf->vfcfg[i].link_state) {
    case VSRIOV_VFCFG_LINK_ENABLE:
        return backend_down;
    case VSRIOV_VFCFG_LINK_DISABLE:
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

    if (!vpf->vfcfg) {
        return;
    }
    if (n == pf_net(vpf)) {
        for (uint16_t i = 0; i < vpf->num_vfs; i++) {
            if (vpf->vfs[i] &&
                vpf->vfcfg[i].link_state == VSRIOV_VFCFG_LINK_AUTO) {
                vf_apply_link(vpf, i);
            }
        }
        return;
    }
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        if (vpf->vfs[i] && n == vf_net(vpf, i)) {
            /* (its device reports the link once this returns) */
            qemu_get_queue(n->nic)->link_down = vf_link_down(vpf, i);
            trace_vsriov_vf_link(i, vpf->vfcfg[i].link_state,
                                 qemu_get_queue(n->nic)->link_down);
            return;
        }
    }
}

void vsriov_vfcfg_follow_link(VsriovPF *vpf, VirtIONet *n)
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
struct VsriovVfcfgOp {
    VsriovPF *vpf;          /* NULL once the PF went */
    uint16_t vf;
    uint32_t gen;           /* the VF's vfcfg_gen when it was made */
    VsriovVfcfgDone *done;  /* the guest's command, which waits; NULL: a */
    void *opaque;           /* reset or a rollback, which nobody waits for */
    VsriovVFConfig c;
    QLIST_ENTRY(VsriovVfcfgOp) next;
};

static bool vf_has_ops(VsriovPF *vpf, uint16_t i)
{
    VsriovVfcfgOp *op;

    QLIST_FOREACH(op, &vpf->vfcfg_ops, next) {
        if (op->vf == i) {
            return true;
        }
    }
    return false;
}

/* What a provider's failure tells the guest: refused, invalid, timed out. */
static uint16_t status_of(int ret)
{
    switch (ret) {
    case 0:
        return VSRIOV_VFCFG_S_OK;
    case -EPERM:
    case -EACCES:
    case -EADDRINUSE:
        return VSRIOV_VFCFG_S_EPERM;
    case -EINVAL:
        return VSRIOV_VFCFG_S_EINVAL;
    case -ENOSPC:
        return VSRIOV_VFCFG_S_ENOSPC;
    case -ETIMEDOUT:
    case -EAGAIN:
        return VSRIOV_VFCFG_S_ETIMEDOUT;
    default:
        return VSRIOV_VFCFG_S_EIO;
    }
}

/*
 * A change the provider applied (or that has none): the device's part,
 * the VF's MAC and link.  0, or -EIO if the MAC did not reach the VF's
 * backend (the record keeps the old configuration).
 */
static int vf_set_done(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c)
{
    VsriovVFConfig old = vpf->vfcfg[i];

    if (old.mac_set != c->mac_set ||
        (c->mac_set && memcmp(old.mac, c->mac, ETH_ALEN))) {
        MACAddr mac;

        if (c->mac_set) {
            memcpy(mac.a, c->mac, ETH_ALEN);
        } else {
            vsriov_vf_default_mac(vpf, i, &mac);
        }
        if (vf_apply_mac(vpf, i, mac.a) != VSRIOV_VFCFG_S_OK) {
            return -EIO;
        }
    }
    vpf->vfcfg[i] = *c;
    /* (also when it is the same: the host may have changed the link) */
    vf_apply_link(vpf, i);
    return 0;
}

static bool vf_configure(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c,
                         VsriovVfcfgDone *done, void *opaque);

/*
 * A provider's answer that says it changed nothing (VsriovPoolClass's
 * configure); after any other failure it may have done part or all of it.
 */
static bool vfcfg_refused(int ret)
{
    return ret == -EPERM || ret == -EACCES || ret == -EADDRINUSE ||
           ret == -EINVAL || ret == -EAGAIN || ret == -ENOSPC;
}

static void vf_configure_done(void *opaque, int ret, Error *err)
{
    VsriovVfcfgOp *op = opaque;
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
    current = op->gen == vpf->vfcfg_gen[i];
    if (current) {
        /*
         * After a time-out the provider may apply it late; after a failed
         * reset its datapath may not be at the defaults: the next call
         * sends the whole configuration.
         */
        if (!ret) {
            vpf->vfcfg_unsure[i] = false;
        } else if (!op->done || !vfcfg_refused(ret)) {
            vpf->vfcfg_unsure[i] = true;
        }   /* (refused: it changed nothing, the VF is as sure as it was) */
    }
    if (ret) {
        error_prepend(&err, "PF '%s' VF %u: ", DEVICE(vpf->pf)->id, i);
        vsriov_report_guest_err(err);
    } else if (current && op->done) {
        ret = vf_set_done(vpf, i, &op->c);
        if (ret) {
            vpf->vfcfg_unsure[i] = true;
        }
    }
    if (current && op->done && vpf->vfcfg_unsure[i]) {
        /*
         * What the guest asked may be in the datapath (late, in part, or
         * before the device's part failed) while the record says it is
         * not: put the recorded configuration back, so that a failed
         * command leaves nothing behind.
         */
        vf_configure(vpf, i, &vpf->vfcfg[i], NULL, NULL);
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
                         VsriovVfcfgDone *done, void *opaque)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);
    VsriovVfcfgOp *op;
    uint32_t changed;

    if (!pc->configure || !vpf->backends[i]) {
        vpf->vfcfg_unsure[i] = false;
        return false;
    }
    /*
     * After a time-out, the whole configuration: the provider may have
     * applied the command QEMU gave up on.
     */
    changed = vpf->vfcfg_unsure[i] ? VSRIOV_VF_CFG_ALL
                                   : vf_config_diff(&vpf->vfcfg[i], c);
    op = g_new0(VsriovVfcfgOp, 1);
    op->vpf = vpf;
    op->vf = i;
    op->gen = vpf->vfcfg_gen[i];
    op->done = done;
    op->opaque = opaque;
    op->c = *c;
    QLIST_INSERT_HEAD(&vpf->vfcfg_ops, op, next);
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
 * Change VF @i's configuration to @c (valid: vsriov_vfcfg_check()): the
 * provider's datapath first, then the device's part (MAC, link), all or
 * nothing.  0 or a negative errno when done at once; 1 when the provider
 * answers later, and @done says how it went.
 */
int vsriov_vfcfg_change(VsriovPF *vpf, uint16_t i, const VsriovVFConfig *c,
                        VsriovVfcfgDone *done, void *opaque)
{
    int ret;

    if (vf_configure(vpf, i, c, done, opaque)) {
        return 1;
    }
    ret = vf_set_done(vpf, i, c);
    return ret;
}

/* Whether @c is a configuration a VF of @vpf can have: 0 or -EINVAL. */
int vsriov_vfcfg_check(VsriovPF *vpf, const VsriovVFConfig *c)
{
    int32_t speed = pf_net(vpf)->net_conf.speed;

    if ((c->mac_set && !valid_unicast(c->mac)) ||
        c->vlan > VLAN_VID_MAX || c->qos > 7 ||
        (c->vlan_proto != ETH_P_8021Q && c->vlan_proto != ETH_P_8021AD) ||
        c->spoofchk > 1 || c->trust > 1 ||
        c->link_state > VSRIOV_VFCFG_LINK_DISABLE ||
        (c->max_tx_rate && c->min_tx_rate > c->max_tx_rate) ||
        (speed > 0 && (c->max_tx_rate > (uint32_t)speed ||
                       c->min_tx_rate > (uint32_t)speed))) {
        return -EINVAL;
    }
    return 0;
}

/* The backends PREPARE_VFS waited for came, or not (@ret). */
void vsriov_vfcfg_prepare_done(VsriovPF *vpf, int ret)
{
    uint16_t status = status_of(ret);

    vsriov_admin_prepare_done(vpf, ret);
    if (!vpf->vfcfg_prepare) {
        return;     /* (the administration virtqueue's) */
    }
    vpf->vfcfg_prepare = false;
    vpf->vfcfg_busy = false;
    pci_set_word(vpf->pf->config + vpf->vfcfg_cap + VSRIOV_VFCFG_STATUS,
                 status);
    trace_vsriov_vfcfg_done(DEVICE(vpf->pf)->id,
                            VSRIOV_VFCFG_CMD_PREPARE_VFS, 0, status);
}

/*
 * After an incoming migration: the configuration the guest set goes to
 * this host's provider, whose datapath knows nothing of it, and each
 * enabled VF's link is as it says.
 */
void vsriov_vfcfg_post_load(VsriovPF *vpf)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        VsriovVFConfig *c = &vpf->vfcfg[i];
        MACAddr def;

        vpf->vfcfg_gen[i]++;
        vpf->vfcfg_unsure[i] = false;
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
            vpf->vfcfg_unsure[i] = true;    /* all of it */
            vf_configure(vpf, i, c, NULL, NULL);
            vf_apply_link(vpf, i);
        }
    }
}

/* Back to the defaults, as when the VF was first enabled. */
void vsriov_vfcfg_reset_vf(VsriovPF *vpf, uint16_t i)
{
    VsriovVFConfig old = vpf->vfcfg[i];
    VsriovVFConfig def;

    config_defaults(vpf, i, &def);
    /* what is in flight for the VF's last life no longer applies */
    vpf->vfcfg_gen[i]++;
    if (vpf->pool->lazy && !vpf->backends[i]) {
        /* it has no backend (the next one comes fresh from the pool) */
        vpf->vfcfg_unsure[i] = false;
    } else {
        /*
         * (a lazy pool's VF that went keeps its backend until the main
         * loop gives it back, and may be enabled again with it)
         */
        /* what is in flight may land after the record says "default" */
        vpf->vfcfg_unsure[i] |= vf_has_ops(vpf, i);
        if (vpf->vfcfg_unsure[i] || vf_config_diff(&old, &def)) {
            /* (its own failure makes the VF unsure: it is current) */
            vf_configure(vpf, i, &def, NULL, NULL);
        }
    }
    vpf->vfcfg[i] = def;
    if (old.mac_set) {
        MACAddr mac;

        vsriov_vf_default_mac(vpf, i, &mac);
        vf_apply_mac(vpf, i, mac.a);
    }
    if (old.link_state != VSRIOV_VFCFG_LINK_AUTO) {
        vf_apply_link(vpf, i);
    }
}

static void vf_get_config(VsriovPF *vpf, uint16_t i, uint8_t *data)
{
    VsriovVFConfig *c = &vpf->vfcfg[i];

    memcpy(data + VSRIOV_VFCFG_CFG_MAC, vf_net(vpf, i)->mac, ETH_ALEN);
    pci_set_word(data + VSRIOV_VFCFG_CFG_VLAN, c->vlan);
    data[VSRIOV_VFCFG_CFG_QOS] = c->qos;
    data[VSRIOV_VFCFG_CFG_SPOOFCHK] = c->spoofchk;
    data[VSRIOV_VFCFG_CFG_TRUST] = c->trust;
    data[VSRIOV_VFCFG_CFG_LINK_STATE] = c->link_state;
    pci_set_word(data + VSRIOV_VFCFG_CFG_VLAN_PROTO, c->vlan_proto);
    pci_set_long(data + VSRIOV_VFCFG_CFG_MIN_RATE, c->min_tx_rate);
    pci_set_long(data + VSRIOV_VFCFG_CFG_MAX_RATE, c->max_tx_rate);
}

/*
 * Counters of a tap backend, from the host's view of the tap (its rx is
 * what the VF sent): found through the tap's fd, so taps passed by fd work
 * too.  Other backends' counters belong to a provider.
 */
bool vsriov_vf_stats(VsriovPF *vpf, uint16_t i, VsriovVFStats *st)
{
#ifdef CONFIG_LINUX
    NetClientState *nc = vpf->backends[i];
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    struct ifreq ifr = {};
    size_t len;
    int fd;

    if (!nc || nc->info->type != NET_CLIENT_DRIVER_TAP) {
        return false;
    }
    fd = tap_get_fd(nc);
    if (fd < 0 || ioctl(fd, TUNGETIFF, &ifr) < 0 ||
        !g_file_get_contents("/proc/self/net/dev", &text, &len, NULL)) {
        return false;
    }
    lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        g_autofree char *name = NULL;
        char *colon = strchr(*l, ':');

        if (!colon) {
            continue;
        }
        name = g_strstrip(g_strndup(*l, colon - *l));
        /* host rx = VF tx, and the other way round */
        if (!strcmp(name, ifr.ifr_name) &&
            sscanf(colon + 1, "%" SCNu64 " %" SCNu64 " %*u %" SCNu64
                   " %*u %*u %*u %" SCNu64 " %" SCNu64 " %" SCNu64
                   " %*u %" SCNu64, &st->tx_bytes, &st->tx_packets,
                   &st->tx_dropped, &st->multicast, &st->rx_bytes,
                   &st->rx_packets, &st->rx_dropped) == 7) {
            return true;
        }
    }
#endif
    return false;
}

static void vf_get_stats(VsriovPF *vpf, uint16_t i, uint8_t *data)
{
    VsriovVFStats st = {};

    if (!vsriov_vf_stats(vpf, i, &st)) {
        return;
    }
    pci_set_quad(data + VSRIOV_VFCFG_STATS_TX_BYTES, st.tx_bytes);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_TX_PACKETS, st.tx_packets);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_TX_DROPPED, st.tx_dropped);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_MULTICAST, st.multicast);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_RX_BYTES, st.rx_bytes);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_RX_PACKETS, st.rx_packets);
    pci_set_quad(data + VSRIOV_VFCFG_STATS_RX_DROPPED, st.rx_dropped);
}

/* The provider answered the mailbox's command. */
static void mailbox_done(VsriovPF *vpf, uint16_t i, int ret, void *opaque)
{
    uint16_t opcode = (uintptr_t)opaque;
    /* (a VF that started over meanwhile: the command is moot) */
    uint16_t status = status_of(ret == -ESTALE ? 0 : ret);

    vpf->vfcfg_busy = false;
    pci_set_word(vpf->pf->config + vpf->vfcfg_cap + VSRIOV_VFCFG_STATUS,
                 status);
    trace_vsriov_vfcfg_done(DEVICE(vpf->pf)->id, opcode, i + 1, status);
}

/* Run one command; the result goes to @data, the status is returned. */
static int vfcfg_run(VsriovPF *vpf, uint16_t opcode, uint16_t group,
                     uint32_t member, uint8_t *data)
{
    uint16_t enabled = vsriov_pf_enabled_vfs(vpf);
    VsriovVFConfig c;
    uint16_t i;
    int ret;

    if (group != VSRIOV_VFCFG_GROUP_SRIOV) {
        return VSRIOV_VFCFG_S_EINVAL;
    }
    if (opcode == VSRIOV_VFCFG_CMD_PREPARE_VFS) {
        /* the group's own command: member 0, NumVFs to come */
        ret = member || !pci_get_word(data) ? -EINVAL
              : vsriov_pf_stage_vfs(vpf, pci_get_word(data));
        if (ret > 0) {
            vpf->vfcfg_busy = true;
            vpf->vfcfg_prepare = true;
            return VSRIOV_VFCFG_S_EINPROGRESS;
        }
        return status_of(ret);
    }
    if (member < 1 || member > enabled) {
        /* only enabled VFs exist to be configured */
        return VSRIOV_VFCFG_S_EINVAL;
    }
    i = member - 1;
    c = vpf->vfcfg[i];

    switch (opcode) {
    case VSRIOV_VFCFG_CMD_GET_CONFIG:
        memset(data, 0, VSRIOV_VFCFG_DATA_SIZE);
        vf_get_config(vpf, i, data);
        return VSRIOV_VFCFG_S_OK;
    case VSRIOV_VFCFG_CMD_GET_STATS:
        memset(data, 0, VSRIOV_VFCFG_DATA_SIZE);
        vf_get_stats(vpf, i, data);
        return VSRIOV_VFCFG_S_OK;
    case VSRIOV_VFCFG_CMD_SET_MAC:
        if (!valid_unicast(data)) {
            return VSRIOV_VFCFG_S_EINVAL;
        }
        memcpy(c.mac, data, ETH_ALEN);
        c.mac_set = true;
        break;
    case VSRIOV_VFCFG_CMD_SET_VLAN:
        c.vlan = pci_get_word(data);
        c.qos = data[2];
        c.vlan_proto = pci_get_word(data + 4);
        break;
    case VSRIOV_VFCFG_CMD_SET_SPOOFCHK:
        c.spoofchk = data[0];
        break;
    case VSRIOV_VFCFG_CMD_SET_TRUST:
        c.trust = data[0];
        break;
    case VSRIOV_VFCFG_CMD_SET_LINK_STATE:
        c.link_state = data[0];
        break;
    case VSRIOV_VFCFG_CMD_SET_RATE:
        c.min_tx_rate = pci_get_long(data);
        c.max_tx_rate = pci_get_long(data + 4);
        break;
    default:
        return VSRIOV_VFCFG_S_EOPNOTSUPP;
    }
    if (vsriov_vfcfg_check(vpf, &c)) {
        return VSRIOV_VFCFG_S_EINVAL;
    }
    ret = vsriov_vfcfg_change(vpf, i, &c, mailbox_done,
                              (void *)(uintptr_t)opcode);
    if (ret > 0) {
        vpf->vfcfg_busy = true;
        return VSRIOV_VFCFG_S_EINPROGRESS;
    }
    return status_of(ret);
}

bool vsriov_vfcfg_config_write(VsriovPF *vpf, uint32_t addr, int len)
{
    uint8_t *cap = vpf->pf->config + vpf->vfcfg_cap;
    uint32_t op = vpf->vfcfg_cap + VSRIOV_VFCFG_OPCODE;
    uint16_t opcode, status;

    if (!vpf->vfcfg_cap || addr >= op + 2 || addr + len <= op) {
        return false;
    }
    if (vpf->vfcfg_busy) {
        /* one command at a time: the one in progress keeps its status */
        qemu_log_mask(LOG_GUEST_ERROR, "vsriov: PF '%s': VF configuration "
                      "command written while one is in progress: ignored\n",
                      DEVICE(vpf->pf)->id);
        return true;
    }
    opcode = pci_get_word(cap + VSRIOV_VFCFG_OPCODE);
    status = vfcfg_run(vpf, opcode, pci_get_word(cap + VSRIOV_VFCFG_GROUP),
                       pci_get_long(cap + VSRIOV_VFCFG_MEMBER),
                       cap + VSRIOV_VFCFG_DATA);
    pci_set_word(cap + VSRIOV_VFCFG_STATUS, status);
    trace_vsriov_vfcfg_cmd(DEVICE(vpf->pf)->id, opcode,
                           pci_get_long(cap + VSRIOV_VFCFG_MEMBER), status);
    return true;
}

void vsriov_vfcfg_init(VsriovPF *vpf, uint16_t offset)
{
    PCIDevice *pf = vpf->pf;
    uint8_t *cap;

    pcie_add_capability(pf, PCI_EXT_CAP_ID_VNDR, 1, offset,
                        VSRIOV_VFCFG_SIZEOF);
    cap = pf->config + offset;
    pci_set_long(cap + PCI_VNDR_HEADER,
                 VSRIOV_VFCFG_VSEC_ID | VSRIOV_VFCFG_VSEC_REV << 16 |
                 (uint32_t)VSRIOV_VFCFG_SIZEOF << 20);
    pci_set_word(pf->wmask + offset + VSRIOV_VFCFG_OPCODE, 0xffff);
    pci_set_long(pf->wmask + offset + VSRIOV_VFCFG_MEMBER, 0xffffffff);
    pci_set_word(pf->wmask + offset + VSRIOV_VFCFG_GROUP, 0xffff);
    memset(pf->wmask + offset + VSRIOV_VFCFG_DATA, 0xff,
           VSRIOV_VFCFG_DATA_SIZE);
    vpf->vfcfg_cap = offset;
    vpf->vfcfg = g_new0(VsriovVFConfig, vpf->num_vfs);
    vpf->vf_pool_mac = g_new0(MACAddr, vpf->num_vfs);
    vpf->vfcfg_unsure = g_new0(bool, vpf->num_vfs);
    vpf->vfcfg_gen = g_new0(uint32_t, vpf->num_vfs);
    QLIST_INIT(&vpf->vfcfg_ops);
    vpf->vfcfg_busy = false;
    vpf->vfcfg_prepare = false;
    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        config_defaults(vpf, i, &vpf->vfcfg[i]);
        vpf->vf_pool_mac[i] = vf_net(vpf, i)->nic_conf.macaddr;
    }
}

void vsriov_vfcfg_exit(VsriovPF *vpf)
{
    VsriovVfcfgOp *op;

    /* what the provider still has to answer is answered to nobody */
    while ((op = QLIST_FIRST(&vpf->vfcfg_ops))) {
        QLIST_REMOVE(op, next);
        op->vpf = NULL;
        op->done = NULL;
    }
    vpf->vfcfg_busy = false;
    vpf->vfcfg_prepare = false;
    g_free(vpf->vfcfg_gen);
    vpf->vfcfg_gen = NULL;
    g_free(vpf->vfcfg);
    g_free(vpf->vf_pool_mac);
    g_free(vpf->vfcfg_unsure);
    vpf->vfcfg_unsure = NULL;
    vpf->vfcfg = NULL;
    vpf->vf_pool_mac = NULL;
    vpf->vfcfg_cap = 0;
}
