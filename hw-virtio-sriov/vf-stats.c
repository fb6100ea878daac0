/*
 * vsriov VF counters
 *
 * A VF's counters come from its pool's provider where it keeps them (a
 * host daemon's: the VF's switch port's, VsriovPoolClass.vf_stats), else
 * from its backend where the backend has them: a tap's, as the host sees
 * the tap (its rx is what the VF sent).  The tap is named
 * by the fd QEMU holds, so a tap passed by fd counts too: TUNGETIFF gives
 * its name and SIOCGIFHWADDR its MAC, both from the device itself, in
 * whatever network namespace it is now.  Its counters are asked for by
 * that name over rtnetlink, in QEMU's own namespace.  A tap moved to
 * another namespace leaves its name free here, and whatever device takes
 * it is not the VF's: the link that answers must be a tun device with the
 * tap's MAC, or the VF's counters read 0 (as the spec has it for counters a
 * device does not keep) and QEMU says why, once until they are found again.
 *
 * The ioctls on a tap take the host's RTNL, which any process on the host
 * may hold for long, and RTM_GETLINK takes it too: so a tap's counters are
 * read in a worker thread, never in a vCPU or under the BQL, and the
 * command that asked is answered when the worker (or the provider) is
 * done.  A VF's counters are read at most every VSRIOV_VF_STATS_MIN_MS: a
 * guest asking more often gets the last ones, so it cannot keep the host's
 * RTNL busy.  A provider that did not answer in time (a stuck daemon, its
 * 5 s deadline) is not asked again for VSRIOV_VF_STATS_QUIET_MS: each
 * query holds the administration queue, and the guest's driver reads its
 * VFs' counters one after the other, so asking again would hold the
 * guest's VF configuration commands behind 5 s per VF.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "block/aio.h"
#include "block/thread-pool.h"
#include "hw/pci/pci.h"
#include "net/net.h"
#include "net/tap.h"
#include "vsriov.h"
#include "trace.h"

#ifdef CONFIG_LINUX
#include <net/if.h>
#include <sys/ioctl.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#endif

/* One read of a VF's counters, by a worker or the pool's provider. */
struct VsriovVFStatsRead {
    VsriovPF *vpf;          /* NULL: the PF went; nobody waits */
    uint16_t vf;
    NetClientState *nc;     /* the backend it reads */
    int fd;                 /* a duplicate of the tap's, the worker's; or -1:
                             * the pool's provider reads them */
    bool ok;
    VsriovVFStats st;
    char *why;              /* why not @ok */
    VsriovVFStatsDone *done;
    void *opaque;
    QLIST_ENTRY(VsriovVFStatsRead) next;
};

#ifdef CONFIG_LINUX
/* What rtnetlink says of link @name in QEMU's network namespace. */
typedef struct LinkInfo {
    bool tun;
    bool has_mac;
    uint8_t mac[ETH_ALEN];
    bool has_stats;
    struct rtnl_link_stats64 stats;
} LinkInfo;

#define NL_BUF_SIZE (64 * 1024)

static void link_attrs(struct rtattr *rta, int len, LinkInfo *li)
{
    for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
        switch (rta->rta_type) {
        case IFLA_ADDRESS:
            if (RTA_PAYLOAD(rta) == ETH_ALEN) {
                memcpy(li->mac, RTA_DATA(rta), ETH_ALEN);
                li->has_mac = true;
            }
            break;
        case IFLA_STATS64:
            memcpy(&li->stats, RTA_DATA(rta),
                   MIN(RTA_PAYLOAD(rta), sizeof(li->stats)));
            li->has_stats = true;
            break;
        case IFLA_LINKINFO: {
            struct rtattr *k = RTA_DATA(rta);
            int klen = RTA_PAYLOAD(rta);

            for (; RTA_OK(k, klen); k = RTA_NEXT(k, klen)) {
                if (k->rta_type == IFLA_INFO_KIND &&
                    !strncmp(RTA_DATA(k), "tun", RTA_PAYLOAD(k))) {
                    li->tun = true;
                }
            }
            break;
        }
        }
    }
}

/* RTM_GETLINK of @name: 0, or a negative errno with *@why. */
static int link_get(const char *name, LinkInfo *li, char **why)
{
    struct {
        struct nlmsghdr nh;
        struct ifinfomsg ifi;
        char attrs[RTA_SPACE(IFNAMSIZ)];
    } req = {};
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    g_autofree char *buf = g_malloc(NL_BUF_SIZE);
    struct rtattr *rta = (struct rtattr *)req.attrs;
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    size_t nlen = strnlen(name, IFNAMSIZ - 1) + 1;
    ssize_t n;
    int sk, ret = 0;

    rta->rta_type = IFLA_IFNAME;
    rta->rta_len = RTA_LENGTH(nlen);
    memcpy(RTA_DATA(rta), name, nlen - 1);
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifi)) + RTA_SPACE(nlen);
    req.nh.nlmsg_type = RTM_GETLINK;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = 1;
    req.ifi.ifi_family = AF_UNSPEC;

    sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (sk < 0) {
        *why = g_strdup_printf("no rtnetlink socket: %s", strerror(errno));
        return -errno;
    }
    /* (the kernel answers before sendto() returns) */
    if (sendto(sk, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
               sizeof(kernel)) < 0) {
        ret = -errno;
        *why = g_strdup_printf("RTM_GETLINK: %s", strerror(errno));
        goto out;
    }
    n = recv(sk, buf, NL_BUF_SIZE, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 || n > NL_BUF_SIZE || !NLMSG_OK(nh, n) ||
        nh->nlmsg_seq != 1) {
        ret = n < 0 ? -errno : -EPROTO;
        *why = g_strdup_printf("RTM_GETLINK: no answer (%s)",
                               n < 0 ? strerror(errno) : "malformed");
        goto out;
    }
    if (nh->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = NLMSG_DATA(nh);

        ret = nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ?
              e->error : -EPROTO;
        *why = g_strdup_printf("no link %s in QEMU's network namespace (%s)",
                               name, strerror(-ret));
        goto out;
    }
    if (nh->nlmsg_type != RTM_NEWLINK ||
        nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg))) {
        ret = -EPROTO;
        *why = g_strdup("RTM_GETLINK: an answer of another type");
        goto out;
    }
    memset(li, 0, sizeof(*li));
    link_attrs(IFLA_RTA(NLMSG_DATA(nh)), IFLA_PAYLOAD(nh), li);
out:
    close(sk);
    return ret;
}

/* The worker: the counters of the tap behind r->fd, as the VF sees them. */
static int stats_read(void *opaque)
{
    VsriovVFStatsRead *r = opaque;
    struct ifreq ifr = {};
    uint8_t mac[ETH_ALEN];
    char name[IFNAMSIZ];
    LinkInfo li;
    int ret;

    if (ioctl(r->fd, TUNGETIFF, &ifr) < 0) {
        r->why = g_strdup_printf("TUNGETIFF: %s", strerror(errno));
        return -errno;
    }
    pstrcpy(name, sizeof(name), ifr.ifr_name);
    memset(&ifr, 0, sizeof(ifr));
    if (ioctl(r->fd, SIOCGIFHWADDR, &ifr) < 0) {
        r->why = g_strdup_printf("tap %s: SIOCGIFHWADDR: %s", name,
                                 strerror(errno));
        return -errno;
    }
    memcpy(mac, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
    ret = link_get(name, &li, &r->why);
    if (ret) {
        return ret;
    }
    if (!li.tun || !li.has_mac || memcmp(li.mac, mac, ETH_ALEN)) {
        r->why = g_strdup_printf("link %s in QEMU's network namespace is not "
                                 "its tap (the tap moved to another one?)",
                                 name);
        return -ENODEV;
    }
    if (!li.has_stats) {
        r->why = g_strdup_printf("link %s has no counters", name);
        return -ENODATA;
    }
    /* host rx = VF tx, and the other way round */
    r->st.tx_packets = li.stats.rx_packets;
    r->st.tx_bytes = li.stats.rx_bytes;
    r->st.tx_dropped = li.stats.rx_dropped;
    r->st.multicast = li.stats.multicast;
    r->st.rx_packets = li.stats.tx_packets;
    r->st.rx_bytes = li.stats.tx_bytes;
    r->st.rx_dropped = li.stats.tx_dropped;
    return 0;
}

#endif

/* Back in the main loop: keep the counters, and tell whoever waits. */
static void read_done(void *opaque, int ret)
{
    VsriovVFStatsRead *r = opaque;
    VsriovPF *vpf = r->vpf;

    if (r->fd >= 0) {
        close(r->fd);
    }
    if (ret && !r->why) {
        r->why = g_strdup(strerror(-ret));
    }
    if (vpf) {
        VsriovVFStatsCache *c = &vpf->stats.vf[r->vf];

        QLIST_REMOVE(r, next);
        trace_vsriov_vf_stats(DEVICE(vpf->pf)->id, r->vf, ret,
                              r->why ? r->why : "");
        c->st = ret ? (VsriovVFStats){} : r->st;
        c->nc = r->nc;
        c->at = qemu_clock_get_ms(QEMU_CLOCK_REALTIME);
        if (ret && !c->lost) {
            warn_report("virtual SR-IOV PF '%s': VF %u's counters read 0: %s",
                        DEVICE(vpf->pf)->id, r->vf, r->why);
        } else if (!ret && c->lost) {
            info_report("virtual SR-IOV PF '%s': VF %u's counters are read "
                        "again", DEVICE(vpf->pf)->id, r->vf);
        }
        c->lost = ret;
        if (r->fd < 0 && ret == -ETIMEDOUT) {
            vpf->stats.quiet_until = c->at + VSRIOV_VF_STATS_QUIET_MS;
        }
        r->done(vpf, r->vf, &c->st, r->opaque);
    }
    g_free(r->why);
    g_free(r);
}

static void provider_done(void *opaque, int ret, const VsriovVFStats *st,
                          Error *err)
{
    VsriovVFStatsRead *r = opaque;

    if (ret && err) {
        r->why = g_strdup(error_get_pretty(err));
    } else if (!ret) {
        r->st = *st;
    }
    error_free(err);
    read_done(r, ret);
}

static VsriovVFStatsRead *read_new(VsriovPF *vpf, uint16_t i,
                                   NetClientState *nc, int fd,
                                   VsriovVFStatsDone *done, void *opaque)
{
    VsriovVFStatsRead *r = g_new0(VsriovVFStatsRead, 1);

    r->vpf = vpf;
    r->vf = i;
    r->nc = nc;
    r->fd = fd;
    r->done = done;
    r->opaque = opaque;
    QLIST_INSERT_HEAD(&vpf->stats.reads, r, next);
    return r;
}

bool vsriov_vf_stats(VsriovPF *vpf, uint16_t i, VsriovVFStats *st,
                     VsriovVFStatsDone *done, void *opaque)
{
    VsriovVFStatsCache *c = &vpf->stats.vf[i];
    NetClientState *nc = vpf->backends[i];
    VsriovVFStatsRead *r;

    *st = (VsriovVFStats){};
    if (!nc) {
        return true;
    }
    if (c->nc == nc &&
        qemu_clock_get_ms(QEMU_CLOCK_REALTIME) - c->at <
        VSRIOV_VF_STATS_MIN_MS) {
        *st = c->st;
        return true;
    }
    if (qemu_clock_get_ms(QEMU_CLOCK_REALTIME) < vpf->stats.quiet_until) {
        trace_vsriov_vf_stats_quiet(DEVICE(vpf->pf)->id, i);
        if (c->nc == nc) {
            *st = c->st;
        }
        return true;
    }
    r = read_new(vpf, i, nc, -1, done, opaque);
    if (vsriov_pool_vf_stats(vpf->pool, nc, provider_done, r)) {
        return false;
    }
    /* (the provider keeps none: nothing will answer it) */
    QLIST_REMOVE(r, next);
    g_free(r);
#ifdef CONFIG_LINUX
    if (nc->info->type == NET_CLIENT_DRIVER_TAP) {
        int fd = tap_get_fd(nc);

        /* (the worker's own: the backend may close its fd meanwhile) */
        fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (fd >= 0) {
            r = read_new(vpf, i, nc, fd, done, opaque);
            thread_pool_submit_aio(stats_read, r, read_done, r);
            return false;
        }
    }
#endif
    return true;
}

void vsriov_vf_stats_init(VsriovPF *vpf)
{
    vpf->stats.vf = g_new0(VsriovVFStatsCache, vpf->num_vfs);
    QLIST_INIT(&vpf->stats.reads);
}

void vsriov_vf_stats_exit(VsriovPF *vpf)
{
    VsriovVFStatsRead *r;

    /* what the workers still read is for nobody */
    while ((r = QLIST_FIRST(&vpf->stats.reads))) {
        QLIST_REMOVE(r, next);
        r->vpf = NULL;
    }
    g_free(vpf->stats.vf);
    vpf->stats.vf = NULL;
}
