/*
 * vsriov: guest-controlled SR-IOV for virtio-net
 *
 * A virtio-net-pci device with sriov-pool=<pool> is a virtual SR-IOV
 * physical function (vPF).  Its VFs are virtio-net functions created by
 * this code, one per backend taken from a vsriov-pool object, and set up
 * through hw/pci/pcie_sriov.c; the guest enables them with NumVFs and VF
 * Enable like on any SR-IOV NIC.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_VSRIOV_H
#define HW_VIRTIO_SRIOV_VSRIOV_H

#include "qom/object.h"
#include "hw/pci/pci_device.h"
#include "net/net.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "qapi/qapi-types-vsriov.h"

#define TYPE_VSRIOV_POOL "vsriov-pool"

/* A VF's VLAN protocols (Linux's <linux/if_ether.h> values) */
#ifndef ETH_P_8021Q
#define ETH_P_8021Q     0x8100
#endif
#ifndef ETH_P_8021AD
#define ETH_P_8021AD    0x88a8
#endif

/* A VF's administrative configuration, set by the guest through its PF. */
typedef struct VsriovVFConfig {
    uint8_t mac[6];         /* valid when mac_set */
    bool mac_set;
    uint16_t vlan;          /* 0: none */
    uint8_t qos;
    uint16_t vlan_proto;    /* 0x8100 or 0x88a8 */
    uint8_t spoofchk;
    uint8_t trust;
    uint8_t link_state;     /* VSRIOV_VF_LINK_* */
    uint32_t min_tx_rate;   /* Mbit/s, 0: none */
    uint32_t max_tx_rate;
} VsriovVFConfig;

/* A VF's link state: as its PF's, up, down (Linux's IFLA_VF_LINK_STATE_*) */
#define VSRIOV_VF_LINK_AUTO         0
#define VSRIOV_VF_LINK_ENABLE       1
#define VSRIOV_VF_LINK_DISABLE      2

/* Which parts of a VsriovVFConfig changed (configure's @changed). */
#define VSRIOV_VF_CFG_MAC           (1u << 0)
#define VSRIOV_VF_CFG_VLAN          (1u << 1)   /* vlan, qos, vlan_proto */
#define VSRIOV_VF_CFG_SPOOFCHK      (1u << 2)
#define VSRIOV_VF_CFG_TRUST         (1u << 3)
#define VSRIOV_VF_CFG_LINK_STATE    (1u << 4)
#define VSRIOV_VF_CFG_RATE          (1u << 5)   /* min and max */

/* A provider's hand-over token (VsriovPoolClass.handover_token) */
#define VSRIOV_HANDOVER_SIZE 16
#define VSRIOV_VF_CFG_ALL           0x3fu

OBJECT_DECLARE_TYPE(VsriovPool, VsriovPoolClass, VSRIOV_POOL)

/*
 * A guest's rule in its eswitch (flow.c), as a provider takes it: what a
 * frame a VF sends must match (each field with VSRIOV_FM_* set in @has;
 * addresses and ports in network order, with their masks) and what is
 * done with it.  The source and destination VFs are the provider's
 * backends, named in the call.
 */
#define VSRIOV_FM_ETH_DST   (1u << 0)
#define VSRIOV_FM_ETH_SRC   (1u << 1)
#define VSRIOV_FM_ETH_TYPE  (1u << 2)   /* after any VLAN tag */
#define VSRIOV_FM_VLAN_VID  (1u << 3)
#define VSRIOV_FM_IP_PROTO  (1u << 4)
#define VSRIOV_FM_IPV4_SRC  (1u << 5)
#define VSRIOV_FM_IPV4_DST  (1u << 6)
#define VSRIOV_FM_IPV6_SRC  (1u << 7)
#define VSRIOV_FM_IPV6_DST  (1u << 8)
#define VSRIOV_FM_L4_SRC    (1u << 9)   /* TCP or UDP, by ip_proto */
#define VSRIOV_FM_L4_DST    (1u << 10)
typedef struct VsriovFlowSpec {
    uint32_t id;            /* unique in the QEMU process */
    uint16_t priority;      /* higher first */
    uint32_t has;
    uint8_t eth_dst[6], eth_dst_mask[6], eth_src[6], eth_src_mask[6];
    uint16_t eth_type, vlan_vid;
    uint8_t ip_proto;
    uint8_t ip_src[16], ip_src_mask[16], ip_dst[16], ip_dst_mask[16];
    uint8_t l4_src[2], l4_src_mask[2], l4_dst[2], l4_dst_mask[2];
    /* actions: pop, then push (VID, 0: none), then forward or drop */
    bool vlan_pop;
    uint16_t vlan_push;
    bool drop;
} VsriovFlowSpec;

/* Completion of a provider's asynchronous operation (see configure). */
typedef void VsriovPoolDone(void *opaque, int ret, Error *err);

/* Completion of a flow call: its counters (flow_stats), or @ret < 0. */
typedef void VsriovPoolFlowDone(void *opaque, int ret, uint64_t packets,
                                uint64_t bytes, Error *err);

/* A VF's counters as the VF sees them (vf-stats.c). */
typedef struct VsriovVFStats {
    uint64_t rx_packets, rx_bytes, rx_dropped;
    uint64_t tx_packets, tx_bytes, tx_dropped;
    uint64_t multicast;
} VsriovVFStats;

/*
 * Completion of vf_stats: the VF's counters (@st valid during the call),
 * or @ret < 0 and @err, which the callee hands over (-ENODATA: the
 * provider has none now).
 */
typedef void VsriovPoolStatsDone(void *opaque, int ret,
                                 const VsriovVFStats *st, Error *err);

/* Completion of rep_open: @netdev valid during the call, or @ret < 0. */
typedef void VsriovPoolRepDone(void *opaque, const char *netdev, int ret,
                               Error *err);

/*
 * Completion of claim_async: @ncs[0..@n-1] the backends claimed (the
 * array is the callee's, valid during the call), or @n 0, a negative
 * errno @ret and @err, which the callee hands over.
 */
typedef void VsriovPoolClaimDone(void *opaque, NetClientState **ncs,
                                 unsigned n, int ret, Error *err);

/*
 * A pool hands out network backends, one per VF.  The static provider
 * (this file's vsriov-pool) takes them from -netdev ids; a provider that
 * asks a host daemon is a subclass that implements the same methods.
 */
struct VsriovPoolClass {
    ObjectClass parent_class;

    /* Backends the pool could hand out now. */
    unsigned (*available)(VsriovPool *pool);
    /*
     * Claim one backend for @owner (a QOM path, for introspection).
     * Returns the backend, or NULL with @errp set.
     */
    NetClientState *(*claim)(VsriovPool *pool, const char *owner,
                             Error **errp);
    /*
     * Optional: claim @n backends, one for each of @owners (copied if
     * kept), without waiting for anyone outside QEMU.  @done is called
     * exactly once, from the main loop and never before claim_async
     * returns, with all @n backends, or with none (what it got is given
     * back) and -ENOSPC (the pool has not that many), -EPERM (its policy
     * refuses), -ETIMEDOUT (its provider did not answer in time) or
     * another errno.  Lazy pools that have it are asked this way at VF
     * Enable, which then completes later (vpf.c); others with claim.
     */
    void (*claim_async)(VsriovPool *pool, const char *const *owners,
                        unsigned n, VsriovPoolClaimDone *done, void *opaque);
    /*
     * Return the backend claimed before as netdev @id.  Called after its
     * VF went away; the netdev may be gone too (netdev_del while in use).
     */
    void (*release)(VsriovPool *pool, const char *id);
    /*
     * Optional: apply a VF's administrative configuration (what the guest
     * set through the PF) to the datapath behind @nc.  Without it, the
     * configuration is recorded and reported only.  Asynchronous: @done is
     * called exactly once, from the main loop and never before configure
     * returns, with 0, or a negative errno and an error it hands over:
     * -EPERM (or -EADDRINUSE, a MAC taken) the provider's policy refuses
     * it, -EINVAL a value the provider cannot take, -ETIMEDOUT the
     * provider did not answer in time (it may still apply it), -EAGAIN too
     * many requests in flight, any other: it could not apply it.  Requests
     * for one VF are applied in the order they were made.
     */
    void (*configure)(VsriovPool *pool, NetClientState *nc,
                      const VsriovVFConfig *cfg, uint32_t changed,
                      VsriovPoolDone *done, void *opaque);
    /*
     * Optional: the MAC address the provider gave the backend it handed
     * out as netdev @id (a host daemon's for its VF), which the VF then
     * has; false if it gave none (the VF keeps the MAC QEMU gives it).
     */
    bool (*backend_mac)(VsriovPool *pool, const char *id, MACAddr *mac);
    /*
     * Optional: where the provider's defaults for the VF of netdev @id
     * differ from QEMU's in @cfg (e.g. a daemon that checks spoofing
     * unless told not to), set them: a VF starts from what its datapath
     * does, and the guest reads that back.
     */
    void (*backend_config)(VsriovPool *pool, const char *id,
                           VsriovVFConfig *cfg);
    /*
     * Optional: why the backends the pool names are not all usable now,
     * e.g. "netdev 'vf9' does not exist", or NULL if they are.  Free it
     * with g_free().
     */
    char *(*unusable)(VsriovPool *pool);
    /*
     * Optional: the provider's hand-over token for what this QEMU holds
     * (into @token; false: none), which a migration sends, and the one
     * that came with an incoming migration, which the provider shows when
     * a VF takes the MAC it had on the source (a daemon's mac-handover).
     */
    bool (*handover_token)(VsriovPool *pool,
                           uint8_t token[VSRIOV_HANDOVER_SIZE]);
    void (*set_incoming_handover)(VsriovPool *pool,
                                  const uint8_t token[VSRIOV_HANDOVER_SIZE]);
    /*
     * Optional (switchdev mode, eswitch.c): whether the pool may give its
     * VFs representors at all, and the host side of the representor of
     * the VF whose backend is netdev @id: @done gets the id of a netdev,
     * the pool's until rep_close(), or a negative errno with an error it
     * hands over: -EPERM the pool gives that VF none (its policy),
     * -ENOSPC its backend is missing or in use, -ETIMEDOUT its provider
     * did not answer in time, another: it could not.  @done is called
     * exactly once, from the main loop, within the call (a static pool) or
     * later (a daemon's).
     */
    bool (*has_reps)(VsriovPool *pool);
    void (*rep_open)(VsriovPool *pool, const char *id,
                     VsriovPoolRepDone *done, void *opaque);
    /* The representor backend @rep that rep_open gave for @id goes. */
    void (*rep_close)(VsriovPool *pool, const char *id, const char *rep);
    /*
     * Optional (flow offload, flow.c): put @spec in the switch for frames
     * the VF of netdev @src sends, forwarding to the VF of netdev @dst
     * (NULL: @spec->drop); take rule @id out; read its counters.  @done
     * is called exactly once, from the main loop, never within the call:
     * 0, or -EPERM the provider's policy refuses it (a VF not this
     * pool's, a VLAN outside its range), -EINVAL a rule it cannot take,
     * -ENOSPC its limit of rules, -EAGAIN its limit of changes,
     * -ETIMEDOUT it did not answer in time, -ENOENT (flow_del,
     * flow_stats) no such rule.  Without them the pool offloads nothing.
     */
    void (*flow_add)(VsriovPool *pool, const char *src, const char *dst,
                     const VsriovFlowSpec *spec, VsriovPoolFlowDone *done,
                     void *opaque);
    void (*flow_del)(VsriovPool *pool, uint32_t id, VsriovPoolFlowDone *done,
                     void *opaque);
    void (*flow_stats)(VsriovPool *pool, uint32_t id,
                       VsriovPoolFlowDone *done, void *opaque);
    /*
     * Optional: the counters of the VF on netdev @id as the VF sees them,
     * from the provider's switch; @done later, from the main loop.
     * Without it the VF's counters are its backend's, if it has any.
     */
    void (*vf_stats)(VsriovPool *pool, const char *id,
                     VsriovPoolStatsDone *done, void *opaque);
    /*
     * Optional: whether the pool has its backends (without it: ready).
     * A pool still claiming them (a daemon pool added at run time) hands
     * them out only through claim_async, whose @done comes when they
     * came; a failed one (*@error: why, the pool's) gives none.
     */
    VsriovPoolState (*state)(VsriovPool *pool, const char **error);
};

/*
 * A virtual PF takes backends from @pool from its realize to its exit:
 * the pool cannot be deleted meanwhile.
 */
void vsriov_pool_use(VsriovPool *pool);
void vsriov_pool_unuse(VsriovPool *pool);
/* VsriovPoolClass's state (@error may be NULL; *@error NULL unless failed) */
VsriovPoolState vsriov_pool_state(VsriovPool *pool, const char **error);
/* VsriovPoolClass's representor methods (none: the pool gives none). */
bool vsriov_pool_has_reps(VsriovPool *pool);
void vsriov_pool_rep_open(VsriovPool *pool, NetClientState *backend,
                          VsriovPoolRepDone *done, void *opaque);
void vsriov_pool_rep_close(VsriovPool *pool, const char *id,
                           const char *rep);
/*
 * VsriovPoolClass's flow methods: 1 (@done will say), or -EOPNOTSUPP
 * with @errp set when the pool offloads no rules (a static pool).
 */
int vsriov_pool_flow_add(VsriovPool *pool, NetClientState *src,
                         NetClientState *dst, const VsriovFlowSpec *spec,
                         VsriovPoolFlowDone *done, void *opaque,
                         Error **errp);
int vsriov_pool_flow_del(VsriovPool *pool, uint32_t id,
                         VsriovPoolFlowDone *done, void *opaque,
                         Error **errp);
int vsriov_pool_flow_stats(VsriovPool *pool, uint32_t id,
                           VsriovPoolFlowDone *done, void *opaque,
                           Error **errp);
/* VsriovPoolClass's vf_stats: false if the pool has none (nothing called) */
bool vsriov_pool_vf_stats(VsriovPool *pool, NetClientState *backend,
                          VsriovPoolStatsDone *done, void *opaque);

typedef struct VsriovPoolEntry {
    char *netdev;       /* -netdev id */
    char *owner;        /* QOM path of the VF holding it, or NULL */
} VsriovPoolEntry;

struct VsriovPool {
    Object parent_obj;

    GArray *entries;    /* of VsriovPoolEntry */
    GPtrArray *reps;    /* representor backends' netdev ids, per entry */
    bool lazy;          /* backends claimed at VF Enable, not at PF realize */
    unsigned users;     /* virtual PFs that take backends from it */
    QTAILQ_ENTRY(VsriovPool) next;
};

typedef struct VsriovVFConfigOp VsriovVFConfigOp; /* vf-config.c */
typedef struct VsriovClaim VsriovClaim;         /* vpf.c */
typedef struct VsriovAdmin VsriovAdmin;         /* admin.c */
typedef struct VsriovESwitch VsriovESwitch;     /* eswitch.c */
typedef struct VsriovFlowTable VsriovFlowTable; /* flow.c */
typedef struct VsriovPF VsriovPF;
/* A staging's end (vsriov_pf_stage_vfs()): @err is the callee's. */
typedef void VsriovStageDone(VsriovPF *vpf, int ret, Error *err,
                             void *opaque);

typedef struct VsriovVFStatsRead VsriovVFStatsRead; /* vf-stats.c */
/* The last counters read of each VF, and the reads in flight. */
typedef struct VsriovVFStatsCache {
    VsriovVFStats st;
    NetClientState *nc;     /* of this backend (NULL: none read yet) */
    int64_t at;             /* QEMU_CLOCK_REALTIME, ms */
    bool lost;              /* not found the last time (and said so) */
} VsriovVFStatsCache;
typedef struct VsriovPFStats {
    VsriovVFStatsCache *vf;
    QLIST_HEAD(, VsriovVFStatsRead) reads;
    int64_t quiet_until;    /* the provider timed out: not asked till then */
} VsriovPFStats;

/* The VFs' configuration as the guest set it (vf-config.c), per VF. */
typedef struct VsriovPFConfig {
    VsriovVFConfig *vf;
    MACAddr *pool_mac;      /* its MAC before the guest set one */
    bool *unsure;           /* a timed-out provider may have done it */
    uint32_t *gen;          /* bumped when it starts over */
    QLIST_HEAD(, VsriovVFConfigOp) ops;     /* provider calls in flight */
} VsriovPFConfig;

/*
 * How a lazy pool's VFs get and give back their backends (vpf.c; the
 * states are in docs/architecture.md).
 */
typedef struct VsriovPFBacking {
    VsriovClaim *claim;         /* backends claimed, or bound (bind_timer) */
    uint16_t want_vfs;          /* VF Enable waiting for its backends */
    uint16_t prepare_vfs;       /* a staging waiting for its backends */
    VsriovStageDone *stage_done;    /* ... and whom it tells */
    void *stage_opaque;
    QEMUTimer *stage_timer;     /* gives back backends no VF Enable took */
    QEMUTimer *release_timer;   /* gives back disabled VFs' backends */
    QEMUTimer *bind_timer;      /* binds the claimed backends to VFs */
    uint16_t release_from;      /* ... from this VF on (num_vfs: none) */
    bool claim_waits;           /* a claim waits for the pool's releases */
    bool *failed;               /* per VF: enabled, its backend did not come */
    VsriovVFBacking *noted;     /* per VF: as last traced */
} VsriovPFBacking;

/* What the PF's migration holds (migration.c). */
typedef struct VsriovPFMigration {
    uint16_t incoming_num_vfs;  /* the migration source's num_vfs */
    uint16_t incoming_enabled;  /* ... and VFs enabled at its start */
    bool incoming_loaded;       /* its state came; the VM has not run yet */
    bool incoming_staging;      /* a lazy pool claims for the incoming VFs */
    bool incoming_failed;       /* ... and did not give them: it fails */
    Error *incoming_err;        /* ... why, until the migration says it */
    bool switchover_pending;    /* the switchover ack waits for the VFs */
    char *claims_id;            /* the vsriov-pf-claims section's id */
    int64_t claims_part_ns;     /* (source) when its last part went */
    uint8_t handover_token[VSRIOV_HANDOVER_SIZE];   /* the pool's, migrated */
    bool has_handover_token;
    VMChangeStateEntry *vm_state;
} VsriovPFMigration;

/* State of one virtual PF, embedded in VirtIONetPCI. */
struct VsriovPF {
    /* properties */
    VsriovPool *pool;
    uint16_t total_vfs;     /* 0: as many as the pool has free */
    uint32_t admin_delay_ms;    /* testing: answers held back (max: never) */
    bool eswitch;           /* switchdev mode offered (representor queues) */

    /* runtime */
    PCIDevice *pf;
    PCIDevice **vfs;            /* also the PF's sriov_pf.vf */
    NetClientState **backends;  /* NULL: none (a lazy pool's disabled VF) */
    pcibus_t vf_bar_size[PCI_NUM_REGIONS];
    bool in_config_write;
    QEMUBH *reset_bh;           /* after a reset: backends, enabled_vfs */
    VsriovPFBacking backing;    /* (vpf.c) */
    uint16_t num_vfs;       /* VFs created (TotalVFs) */
    uint16_t enabled_vfs;   /* VFs enabled, as last reported */
    uint16_t sriov_cap;
    VsriovPFConfig cfg;         /* (vf-config.c) */
    VsriovPFStats stats;        /* (vf-stats.c) */
    VsriovAdmin *admin;     /* the administration virtqueue (admin.c) */
    VsriovESwitch *esw;     /* switchdev mode (eswitch.c), with eswitch */
    VsriovFlowTable *flows; /* the eswitch's rules (flow.c), with esw */
    VsriovPFMigration mig;      /* (migration.c) */
    QTAILQ_ENTRY(VsriovPF) next;
};

/*
 * Hooks called by virtio-net-pci (qemu-patches/0005, and 0011 for
 * hw/pci/pcie_sriov.c's VF Enable and disable, 0008).  Realize and exit
 * (hooks.c) put the parts below together.
 */
bool vsriov_pf_realize(VsriovPF *vpf, PCIDevice *pf, uint16_t cap_offset,
                       Error **errp);
void vsriov_pf_exit(VsriovPF *vpf, PCIDevice *pf);
/*
 * Every config write to the device (@write: its class's), after which a
 * change in the number of enabled VFs is taken note of.
 */
void vsriov_pf_config_write(VsriovPF *vpf, PCIDevice *pf, uint32_t addr,
                            uint32_t val, int len, PCIConfigWriteFunc *write);
/* PCIDeviceClass.sriov_prepare_vfs and sriov_vfs_disabled (0008, 0011) */
bool vsriov_pf_prepare_vfs(VsriovPF *vpf, uint16_t num_vfs, Error **errp);
void vsriov_pf_vfs_disabled(VsriovPF *vpf);
/*
 * Backends staged for VFs 0..@num_vfs-1 ahead of VF Enable (a guest's
 * SRIOV_MEMBERS_PREPARE, an incoming migration), @num_vfs 0: give back
 * what was staged.  0 done, a negative errno, or 1: in progress, and
 * @done is called once from the main loop with 0 or a negative errno
 * (unless the PF goes first).  One staging at a time: -EBUSY meanwhile.
 */
int vsriov_pf_stage_vfs(VsriovPF *vpf, uint16_t num_vfs,
                        VsriovStageDone *done, void *opaque);


/*
 * The PF core (vpf.c): its VFs and their backends.  Its realize leaves
 * vpf->pf NULL for a virtio-net-pci that is no virtual PF.
 */
bool vsriov_pf_core_realize(VsriovPF *vpf, PCIDevice *pf,
                            uint16_t cap_offset, Error **errp);
void vsriov_pf_core_exit(VsriovPF *vpf, PCIDevice *pf);
/* Whether a VF Enable or a staging waits for the pool (a claim is out). */
bool vsriov_pf_waits_for_pool(VsriovPF *vpf);
/* Where VF @i's backend stands (docs/architecture.md's table). */
VsriovVFBacking vsriov_pf_vf_backing(VsriovPF *vpf, uint16_t i);

/* The PF's migration (migration.c): its sections, registered and gone. */
void vsriov_pf_migration_init(VsriovPF *vpf);
void vsriov_pf_migration_exit(VsriovPF *vpf);

/*
 * Whether a VF's backend can reach guest memory (vdpa-mem.c): for
 * vhost-vdpa, shared RAM for a VA-mode device, a memlock limit that lets a
 * PA-mode device pin it.
 */
#ifdef CONFIG_VHOST_VDPA
bool vsriov_check_backend_memory(NetClientState *nc, Error **errp);
#else
static inline bool vsriov_check_backend_memory(NetClientState *nc,
                                               Error **errp)
{
    return true;    /* no vhost-vdpa backend to check */
}
#endif

/*
 * The VF configuration core (vf-config.c): what a channel's commands and
 * the PF's life cycle do to a VF's configuration.
 */
void vsriov_vf_config_init(VsriovPF *vpf);
void vsriov_vf_config_exit(VsriovPF *vpf);
/* Back to the defaults, as when VF @i was first enabled. */
void vsriov_vf_config_reset(VsriovPF *vpf, uint16_t i);
void vsriov_vf_config_backed(VsriovPF *vpf, uint16_t i);
/* After an incoming migration: the provider gets every VF's again. */
void vsriov_vf_config_post_load(VsriovPF *vpf);
/*
 * The MAC VF @i has before its guest sets one: the one its backend's
 * provider gave, else the one QEMU gave the VF.
 */
void vsriov_vf_default_mac(VsriovPF *vpf, uint16_t i, MACAddr *mac);
/* The PF's or a VF's link follows the VF link policy (set_link). */
void vsriov_vf_follow_link(VsriovPF *vpf, VirtIONet *n);
/*
 * A VF configuration change asked by the guest completed: 0, or the
 * provider's negative errno, -EIO (the VF's backend took no MAC) or
 * -ESTALE (the VF started over meanwhile).
 */
typedef void VsriovVFConfigDone(VsriovPF *vpf, uint16_t vf, int ret,
                                void *opaque);
/* Whether @c is a configuration a VF of @vpf can have: 0 or -EINVAL. */
int vsriov_vf_config_check(VsriovPF *vpf, const VsriovVFConfig *c);
/*
 * Change VF @i's configuration to @c (valid), all or nothing: 0 or a
 * negative errno when done at once; 1 when the provider answers later,
 * and @done says how it went.
 */
int vsriov_vf_config_change(VsriovPF *vpf, uint16_t i,
                            const VsriovVFConfig *c,
                            VsriovVFConfigDone *done, void *opaque);
/*
 * The counters of VF @i as the VF sees them (vf-stats.c): its pool's
 * provider's where it keeps them, else its backend's where it has them (a
 * tap's).  True if @st holds them now: 0s for a backend without counters,
 * what was read less than VSRIOV_VF_STATS_MIN_MS ago, or the last ones
 * while the provider is not asked (VSRIOV_VF_STATS_QUIET_MS).  Else the
 * provider or a worker thread reads them, and @done gets them in the main
 * loop, unless the PF goes first.
 */
#define VSRIOV_VF_STATS_MIN_MS 250
/* After the provider did not answer in time, it is not asked for this long */
#define VSRIOV_VF_STATS_QUIET_MS 10000
typedef void VsriovVFStatsDone(VsriovPF *vpf, uint16_t i,
                               const VsriovVFStats *st, void *opaque);
bool vsriov_vf_stats(VsriovPF *vpf, uint16_t i, VsriovVFStats *st,
                     VsriovVFStatsDone *done, void *opaque);
void vsriov_vf_stats_init(VsriovPF *vpf);
void vsriov_vf_stats_exit(VsriovPF *vpf);

/* The administration virtqueue (admin.c), on a PF's virtio device. */
void vsriov_admin_init(VsriovPF *vpf);
void vsriov_admin_exit(VsriovPF *vpf);

/* The virtio-net device of a VF (a virtio-net-pci function). */
static inline VirtIONet *vsriov_vf_net(PCIDevice *vf)
{
    return VIRTIO_NET(virtio_bus_get_device(&VIRTIO_PCI(vf)->bus));
}

/* For the QMP/HMP introspection in qmp.c. */
typedef QTAILQ_HEAD(, VsriovPF) VsriovPFList;
typedef QTAILQ_HEAD(, VsriovPool) VsriovPoolList;
VsriovPFList *vsriov_pf_list(void);
VsriovPoolList *vsriov_pool_list(void);
uint16_t vsriov_pf_enabled_vfs(VsriovPF *vpf);

/*
 * Report an error that a guest's action caused (a VF configuration
 * command, a VF Enable): a guest may repeat those at will, so at most 10
 * are reported per 10 s and then how many were not.  Takes err.
 */
void vsriov_report_guest_err(Error *err);

#endif /* HW_VIRTIO_SRIOV_VSRIOV_H */
