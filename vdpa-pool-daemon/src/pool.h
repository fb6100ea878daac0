/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool: which VF of which pool is claimed by which client, and the VF
 * attributes clients ask for, validated against the pool's policy.
 *
 * Pure state: no netlink, no OVS, no sockets.  The daemon applies what this
 * module accepts (flows, vDPA devices) and persists it (state file); every
 * change goes through here first, so a refused request changes nothing.
 */
#ifndef VPD_POOL_H
#define VPD_POOL_H

#include "config.h"

#define VPD_POOL_ERROR (vpd_pool_error_quark())
GQuark vpd_pool_error_quark(void);

enum vpd_pool_errc {
	VPD_POOL_ERR_NO_POOL,       /* no such pool */
	VPD_POOL_ERR_DENIED,        /* caller not allowed by the pool */
	VPD_POOL_ERR_EXHAUSTED,     /* not enough free VFs */
	VPD_POOL_ERR_NOT_OWNER,     /* VF not claimed by this client */
	VPD_POOL_ERR_INVALID,       /* attribute outside the pool's policy */
	VPD_POOL_ERR_MAC_IN_USE,    /* MAC of another VF the daemon manages */
};

enum vpd_link_state { VPD_LINK_AUTO, VPD_LINK_ENABLE, VPD_LINK_DISABLE };

struct vpd_vf_attrs {
	uint8_t mac[6];
	uint16_t vlan;        /* 0: untagged */
	uint8_t qos;          /* 802.1p priority, 0-7 */
	uint16_t vlan_proto;  /* 0x8100 (802.1Q) or 0x88a8 (802.1ad) */
	bool spoofchk;
	bool trust;
	enum vpd_link_state link_state;
	uint32_t min_tx_rate; /* Mbit/s, 0: none */
	uint32_t max_tx_rate; /* Mbit/s, 0: none */
};

struct vpd_entry {
	unsigned handle;              /* index in vpd_pools.entries: the API's HANDLE */
	const struct vpd_pool *pool;
	unsigned vf;                  /* VF index of pool->pf */
	/*
	 * The daemon's MAC of it, no other entry's: a stable one per PF and
	 * VF (vpd_pools_new()), unless a migration's hand-over swapped it
	 * with the source VF's (mac_from, vpd_pools_release()).
	 */
	uint8_t default_mac[6];
	bool claimed;
	/*
	 * Not offered to claims: its vhost-vdpa device could not be opened
	 * (held open by a process the daemon does not know of, e.g. a former
	 * claimant that kept its fd; found at start, see daemon.c, or at a
	 * claim, see server.c), or does not exist (provisioning could not
	 * make it).  The server tries it again every 2 s.
	 */
	bool quarantined;
	uint64_t client;              /* claimant's connection id */
	uid_t uid;
	pid_t pid;
	guint64 start_time;           /* the claimant's (proc.h), 0: unknown */
	char *owner;                  /* what the claimant calls itself (VM name) */
	struct vpd_vf_attrs attrs;
	char *vdpa_dev;               /* its vDPA device, set by provisioning */
	char *vhost_path;             /* /dev/vhost-vdpa-N of that device */
	char *rep;                    /* its representor netdev, when OVS is used */
	/*
	 * Its representor port (switchdev pools, REP_OPEN; policy.h): a tap
	 * on the OVS bridge that the VF's traffic goes to and comes from.
	 * NULL: none.  Only while claimed: a release removes it.
	 */
	char *rep_port;
	int rep_ifindex;              /* its tap's (tap.h) */
	/*
	 * The OpenFlow table of its claimant's offloaded rules (rules.h;
	 * 0: none): with a representor port, what the VF sends goes there
	 * (policy.h) instead of straight to the representor port.
	 */
	uint8_t flow_table;
	/*
	 * While claimed: the VF of the same pool (its handle + 1; 0: none)
	 * whose MAC this one took over through a hand-over (a migration's
	 * destination from its source, vpd_pools_set_attrs_from()).  When
	 * that VF is released first, the hand-over is complete: this one
	 * takes that VF's daemon MAC for its own, and that VF this one's
	 * (they swap), so the MAC the guest's VF had from the daemon on the
	 * source (the one SR-IOV CNI's DEL sets back) is its own here.
	 */
	unsigned mac_from;
};

struct vpd_pools {
	GPtrArray *entries;           /* struct vpd_entry *, by pool then VF */
};

struct vpd_pools *vpd_pools_new(const struct vpd_config *cfg);
void vpd_pools_free(struct vpd_pools *pools);
/*
 * Copies of entries (their strings too) for another thread, which may
 * change them: the OVS side's (ovsworker.h).  A copy keeps its entry's
 * handle; a copy of all of a vpd_pools' entries has each at its handle's
 * index, as they are.
 */
struct vpd_entry *vpd_entry_copy(const struct vpd_entry *e);
struct vpd_pools *vpd_pools_copy(const GPtrArray *entries);

/*
 * Claim n free VFs of pool (neither claimed nor quarantined) for a client,
 * all or none; the claimant is process pid started at start_time (proc.h,
 * 0: unknown).  The claimed entries are appended to out (not owned).
 */
bool vpd_pools_claim(struct vpd_pools *pools, const char *pool, uint64_t client,
		     uid_t uid, gid_t gid, pid_t pid, guint64 start_time, const char *owner,
		     unsigned n, GPtrArray *out, GError **error);

/*
 * Release one entry held by client; its attributes go back to defaults.
 * When a claimed VF had taken over e's MAC through a hand-over (e is a
 * migration's source) and does not use its own daemon MAC, the two swap
 * their daemon MACs (see mac_from) before e's attributes go back to its
 * (new) defaults; *heir (if given) is that VF, whose daemon MAC changed,
 * else NULL.
 */
bool vpd_pools_release(struct vpd_pools *pools, struct vpd_entry *e,
		       uint64_t client, struct vpd_entry **heir, GError **error);

/* Release everything client holds (it disconnected); returns how many. */
unsigned vpd_pools_release_client(struct vpd_pools *pools, uint64_t client);

/*
 * Complete the hand-overs whose source VF is no longer claimed (a state
 * file restored: the source's claimant went while the daemon was away),
 * as vpd_pools_release() does.  Returns how many.
 */
unsigned vpd_pools_settle_handovers(struct vpd_pools *pools);

/*
 * Make the daemon's MAC of e mac, which another entry of e's pool has:
 * the two swap (a state file's record).  False, changing nothing, when
 * no entry of the pool has it or the one that has it is claimed.
 */
bool vpd_pools_take_default_mac(struct vpd_pools *pools, struct vpd_entry *e,
				const uint8_t mac[6]);

/*
 * Check attrs against e's pool and ownership; on success, store them.  A
 * MAC that another VF of pools has, or that is the daemon's MAC of another
 * VF (free or not: it gets it back at its next claim), is refused
 * (VPD_POOL_ERR_MAC_IN_USE), so no two VFs of different VMs ever share
 * one.  Between VFs of one VM (a migration's source and destination) a MAC
 * may pass, in pools with mac-handover: with "token", from the VFs of
 * client @handover_from (whose hand-over token the request showed; 0:
 * none); with "same-owner", between VFs that one uid claimed under one
 * owner name.  A free VF whose own MAC another VF uses is not offered
 * until it is let go.  @handover_from VPD_HANDOVER_RESTORED: the daemon
 * restores claims from its own records, and VFs that one uid claimed under
 * one owner name are one VM's in any pool with mac-handover (the daemon
 * checked the hand-over when it took it; the records keep no token, and
 * a migration's source may still hold the MAC in them).
 */
#define VPD_HANDOVER_RESTORED UINT64_MAX
bool vpd_pools_set_attrs_from(struct vpd_pools *pools, struct vpd_entry *e,
			      uint64_t client, const struct vpd_vf_attrs *attrs,
			      uint64_t handover_from, GError **error);

/* vpd_pools_set_attrs_from() with no hand-over token. */
bool vpd_pools_set_attrs(struct vpd_pools *pools, struct vpd_entry *e,
			 uint64_t client, const struct vpd_vf_attrs *attrs,
			 GError **error);

/*
 * VFs of pool that a claim may take: neither claimed nor quarantined, nor
 * with their MAC in use by another VF (vpd_pools_set_attrs()).
 */
unsigned vpd_pools_free_count(const struct vpd_pools *pools, const char *pool);

/*
 * Whether e's traffic may pass as it is: claimed, link not disabled, and
 * in a VLAN its pool allows (no VLAN only where the pool's range has 0; a
 * VF of a pool of VLANs 100-199 passes nothing until its client gives it
 * one of them: untagged is another tenant's network).
 */
bool vpd_entry_passes(const struct vpd_entry *e);
/*
 * The transmit rate e is held to, Mbit/s (0: none): its client's
 * max_tx_rate, or its pool's max-tx-rate when the client set none (0) or,
 * were it ever so, more.  The attribute stays what the client set; this is
 * what the datapath enforces.
 */
uint32_t vpd_entry_max_tx_rate(const struct vpd_entry *e);
void vpd_entry_default_attrs(const struct vpd_entry *e, struct vpd_vf_attrs *out);

typedef struct vpd_pools vpd_pools;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vpd_pools, vpd_pools_free)

#endif
