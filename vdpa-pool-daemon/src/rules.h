/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rules: a guest's offloaded flow rules (FLOW_ADD, FLOW_DEL, FLOW_STATS;
 * docs/daemon-protocol.md, "Flow rules"), as the daemon checks and keeps
 * them: what a FLOW_ADD asks, refused with an errno and a sentence when
 * it is malformed (EINVAL), names a VF that is not the connection's
 * (EPERM) or pushes a VLAN outside the pool's range (EPERM); each
 * connection's rules, its OpenFlow table (one of 1..253, shared by no
 * other connection) and its change budget (a token bucket).
 *
 * Pure: no sockets, no OVS.  policy.h turns a rule into its OpenFlow flow;
 * the server (server.c) sends it through the datapath.  The rule's source
 * port is always the HANDLE's VF: nothing from the client names a port.
 */
#ifndef VPD_RULES_H
#define VPD_RULES_H

#include "pool.h"
#include "protocol.h"

#include <stdbool.h>
#include <stdint.h>

#define VPD_RULES_TABLE_MIN 1
#define VPD_RULES_TABLE_MAX 253

/* What a FLOW_ADD asks for; a field not asked is zero (mask zero). */
struct vpd_rule_match {
	uint8_t eth_dst[6], eth_dst_mask[6];
	uint8_t eth_src[6], eth_src_mask[6];
	uint16_t eth_type;            /* 0: any */
	uint16_t vlan_vid;            /* 0: any */
	bool has_ip_proto;
	uint8_t ip_proto;
	uint8_t ipv4_src[4], ipv4_src_mask[4];
	uint8_t ipv4_dst[4], ipv4_dst_mask[4];
	uint8_t ipv6_src[16], ipv6_src_mask[16];
	uint8_t ipv6_dst[16], ipv6_dst_mask[16];
	uint16_t l4_src, l4_src_mask; /* host order */
	uint16_t l4_dst, l4_dst_mask;
};

/*
 * One rule as OVS gets it.  The VFs are named by their PF (configuration,
 * which outlives every thread) and index, so a copy can go to the OVS
 * worker thread without the daemon's entries.
 */
struct vpd_rule {
	uint32_t id;                  /* the client's FLOW_ID */
	uint16_t priority;            /* the client's PRIORITY */
	uint8_t table;                /* the connection's table */
	unsigned in_handle, out_handle; /* out_handle UINT_MAX: drop */
	const struct vpd_pool *pool;  /* of the source VF */
	const struct vpd_pf *in_pf, *out_pf;
	unsigned in_vf, out_vf;
	struct vpd_rule_match m;
	bool vlan_pop;
	uint16_t vlan_push;           /* 0: none */
};

/*
 * The rule a FLOW_ADD m asks for (no VF looked up yet: in_handle and
 * out_handle as given), or false with *errnum (EINVAL) and *why.  Checks
 * each attribute's value (VIDs 1..4094, VLAN_POP 1) and the
 * prerequisites as OVS has them: IPv4 matches need ETH_TYPE 0x0800, IPv6
 * 0x86dd, IP_PROTO one of those, L4 ports IP_PROTO 6 or 17; bits of a
 * value outside its mask are refused too (OVS would drop them silently).
 */
bool vpd_rule_parse(const struct vpd_msg *m, struct vpd_rule *r, int *errnum, char **why);

/*
 * Whether client may have r (parsed): its HANDLE and OUT are VFs it
 * claimed (else EPERM; ENOENT: no such handle), of pools with switchdev =
 * yes (EPERM), each with a representor port (EINVAL); a VLAN push within
 * the pool's range (EPERM).  On success r's VFs and pool are filled in.
 */
bool vpd_rule_check(struct vpd_rule *r, const struct vpd_pools *pools, uint64_t client,
		    int *errnum, char **why);

/* A token bucket: at most rate changes a second, rate at once. */
struct vpd_bucket {
	double tokens;
	gint64 last;                  /* monotonic us of the last refill; 0: full */
};

/* Take one token at now (monotonic us) if there is one. */
bool vpd_bucket_take(struct vpd_bucket *b, unsigned rate, gint64 now);

/* Which tables are in use: bit t of used[t / 8]. */
struct vpd_tables {
	uint8_t used[32];
};

/* A free table of VPD_RULES_TABLE_MIN..MAX, marked used; 0: none free. */
uint8_t vpd_tables_alloc(struct vpd_tables *t);
void vpd_tables_free(struct vpd_tables *t, uint8_t table);

/*
 * A change of one table's rules, as the datapath makes it (one atomic
 * bundle): the whole table's rules go (del_table), then rules of del
 * (FLOW_IDs), then add's come.
 */
struct vpd_rule_change {
	uint8_t table;
	bool del_table;
	GArray *del;                  /* uint32_t */
	GPtrArray *add;               /* struct vpd_rule *, owned */
};

struct vpd_rule_change *vpd_rule_change_new(uint8_t table);
struct vpd_rule_change *vpd_rule_change_copy(const struct vpd_rule_change *c);
void vpd_rule_change_free(struct vpd_rule_change *c);

/* One connection's rules. */
struct vpd_rules {
	GHashTable *by_id;            /* FLOW_ID -> struct vpd_rule * */
	uint8_t table;                /* 0: none yet (no FLOW_ADD so far) */
	struct vpd_bucket bucket;
};

void vpd_rules_init(struct vpd_rules *rs);
void vpd_rules_clear(struct vpd_rules *rs);
/* A copy of r kept in rs under its id (which rs has not). */
void vpd_rules_add(struct vpd_rules *rs, const struct vpd_rule *r);
/* The rules whose source VF is of pool (what max-flows counts). */
unsigned vpd_rules_count_pool(const struct vpd_rules *rs, const struct vpd_pool *pool);
/*
 * Take out of rs every rule that names the VF handle (as source or
 * destination) and return them (a GPtrArray owning them; empty: none).
 */
GPtrArray *vpd_rules_take_vf(struct vpd_rules *rs, unsigned handle);

/*
 * What OVS holds of the guests' rules, table by table, as the OVS side
 * (ovs.c, in its worker thread) made it, so that after ovs-vswitchd
 * restarts (it forgets every flow) each table can be made again as it
 * was, and each rule's counters go on from what OVS had counted (a guest
 * never sees one go backwards).  A change OVS committed is held; of one
 * that failed only its deletions count (the server forgot those rules
 * and forgets the failed adds).  Changes must be noted in the order they
 * were sent to OVS.  One thread's; not the server's rules (struct
 * vpd_rules), whose limits (max-flows, max-flow-changes) a restore does
 * not touch.
 */
struct vpd_held_rules {
	GHashTable *tables;           /* table -> GHashTable FLOW_ID -> held rule */
};

void vpd_held_rules_init(struct vpd_held_rules *h);
void vpd_held_rules_clear(struct vpd_held_rules *h);
/* Change c was sent to OVS: committed (ok) or not. */
void vpd_held_rules_note(struct vpd_held_rules *h, const struct vpd_rule_change *c, bool ok);
/*
 * After OVS forgot every flow: the changes that make each held table
 * again (a GPtrArray of struct vpd_rule_change *, owned; in table order,
 * each with del_table and all of its rules, by FLOW_ID; a table without
 * rules too).  From now on each rule's counters start from what was
 * counted so far.
 */
GPtrArray *vpd_held_rules_restore(struct vpd_held_rules *h);
/*
 * Rule id of table's counters as its client sees them: *packets and
 * *bytes are OVS's (since the rule was last made in OVS), and become what
 * was counted before plus those; never less than an earlier answer
 * (counters that went back without a restore noted, e.g. the flow made
 * again by someone else, count from there).  false (nothing changed): the
 * rule is not held.
 */
bool vpd_held_rules_count(struct vpd_held_rules *h, uint8_t table, uint32_t id,
			  uint64_t *packets, uint64_t *bytes);
/*
 * Rule id of table's counters as last answered (OVS cannot say now: it
 * restarted and the rule is not made again yet).  false: not held.
 */
bool vpd_held_rules_counted(const struct vpd_held_rules *h, uint8_t table, uint32_t id,
			    uint64_t *packets, uint64_t *bytes);

#endif
