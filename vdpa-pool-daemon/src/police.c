// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * police: a netdev's ingress policer's drops, from an rtnetlink filter
 * dump (see police.h).
 */
#include "police.h"
#include "conn.h"

#include <linux/gen_stats.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <string.h>

struct police_dump {
	uint64_t drops;
	bool found;
};

/* A police action's stats (TCA_ACT_STATS or a filter's TCA_STATS2). */
static void add_stats(struct police_dump *d, struct nlattr *stats)
{
	struct nlattr *st[TCA_STATS_MAX + 1];
	struct gnet_stats_queue q;

	if (!stats || nla_parse_nested(st, TCA_STATS_MAX, stats, NULL) < 0 ||
	    !st[TCA_STATS_QUEUE] || nla_len(st[TCA_STATS_QUEUE]) < (int)sizeof(q))
		return;
	memcpy(&q, nla_data(st[TCA_STATS_QUEUE]), sizeof(q));
	d->drops += q.drops;
	d->found = true;
}

/* The actions nested in acts (TCA_MATCHALL_ACT, TCA_BASIC_ACT): the police ones'. */
static void add_actions(struct police_dump *d, struct nlattr *acts)
{
	struct nlattr *a;
	int rem;

	if (!acts)
		return;
	nla_for_each_nested(a, acts, rem) {
		struct nlattr *at[TCA_ACT_MAX + 1];

		if (nla_parse_nested(at, TCA_ACT_MAX, a, NULL) < 0 || !at[TCA_ACT_KIND] ||
		    strncmp(nla_data(at[TCA_ACT_KIND]), "police", nla_len(at[TCA_ACT_KIND])))
			continue;
		add_stats(d, at[TCA_ACT_STATS]);
	}
}

static int filter_cb(struct nl_msg *msg, void *arg)
{
	struct police_dump *d = arg;
	struct nlattr *tb[TCA_MAX + 1];
	const char *kind;

	if (nlmsg_parse(nlmsg_hdr(msg), sizeof(struct tcmsg), tb, TCA_MAX, NULL) < 0 ||
	    !tb[TCA_KIND] || !tb[TCA_OPTIONS])
		return NL_SKIP;
	kind = nla_data(tb[TCA_KIND]);
	if (!memchr(kind, 0, nla_len(tb[TCA_KIND])))
		return NL_SKIP;
	if (!strcmp(kind, "matchall")) {
		struct nlattr *mt[TCA_MATCHALL_MAX + 1];

		if (nla_parse_nested(mt, TCA_MATCHALL_MAX, tb[TCA_OPTIONS], NULL) >= 0)
			add_actions(d, mt[TCA_MATCHALL_ACT]);
	} else if (!strcmp(kind, "basic")) {
		struct nlattr *bt[TCA_BASIC_MAX + 1];

		if (nla_parse_nested(bt, TCA_BASIC_MAX, tb[TCA_OPTIONS], NULL) < 0)
			return NL_SKIP;
		add_actions(d, bt[TCA_BASIC_ACT]);
		/* an old-style policer: its stats are the filter's */
		if (bt[TCA_BASIC_POLICE])
			add_stats(d, tb[TCA_STATS2]);
	}
	return NL_OK;
}

bool vpd_police_drops(const char *ifname, uint64_t *drops, GError **error)
{
	struct police_dump d = { 0 };
	struct tcmsg t = {
		.tcm_family = AF_UNSPEC,
		.tcm_ifindex = (int)if_nametoindex(ifname),
		/* what "tc filter show dev X ingress" asks: ingress or clsact's */
		.tcm_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS),
	};
	struct nl_sock *sk;
	struct nl_msg *msg = NULL;
	int err = -NLE_NOMEM;

	*drops = 0;
	if (!t.tcm_ifindex)
		return false;           /* not a kernel netdev (a DPDK port) */
	sk = nl_socket_alloc();
	if (sk && (err = nl_connect(sk, NETLINK_ROUTE)) >= 0) {
		msg = nlmsg_alloc_simple(RTM_GETTFILTER, NLM_F_REQUEST | NLM_F_DUMP);
		err = msg && nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO) >= 0
			? nl_send_auto(sk, msg) : -NLE_NOMEM;
	}
	if (err >= 0) {
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, filter_cb, &d);
		err = nl_recvmsgs_default(sk);
	}
	nlmsg_free(msg);
	if (sk)
		nl_socket_free(sk);
	/* EINVAL, ENOENT: no ingress qdisc, so no policer */
	if (err < 0 && err != -NLE_INVAL && err != -NLE_OBJ_NOTFOUND && err != -NLE_NODEV)
		return vpd_ovs_fail(error, G_IO_ERROR_FAILED, "%s: tc filter dump: %s", ifname,
				    nl_geterror(err));
	*drops = d.drops;
	return d.found;
}
