// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vdpa-poolctl: the daemon's command-line tool.
 *
 *   vdpa-poolctl check [--json] FILE
 *       Validate a configuration file as the daemon would load it, and show
 *       the PFs and pools it defines.  Exit 0 if valid, 1 with one line
 *       "FILE:LINE: what is wrong" if not, 2 on a usage error.
 *
 * Commands that talk to a running daemon (pools, claims, VF attributes and
 * their flows) come with its API socket.
 */
#include "config.h"
#include "pool.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fputs("usage: vdpa-poolctl check [--json] FILE\n", f);
}

static void print_human(const struct vpd_config *cfg, const struct vpd_pools *pools)
{
	printf("socket %s, state %s, OVS bridge %s\n", cfg->socket_path, cfg->state_path,
	       cfg->ovs_bridge);
	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		const struct vpd_pf *pf = cfg->pfs->pdata[i];

		printf("pf %s: %u VFs, eswitch %s, vdpa management device %s\n", pf->name,
		       pf->num_vfs, pf->switchdev ? "switchdev" : "legacy", pf->vdpa_mgmtdev);
	}
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		const struct vpd_pool *p = cfg->pools->pdata[i];

		printf("pool %s: pf %s VFs %u-%u (%u free), VLANs %u-%u, MAC policy %s\n",
		       p->name, p->pf->name, p->first_vf, p->last_vf,
		       vpd_pools_free_count(pools, p->name), p->vlan_min, p->vlan_max,
		       p->mac_policy == VPD_MAC_ANY ? "any" :
		       p->mac_policy == VPD_MAC_LOCKED ? "locked" : "prefix");
	}
}

static void print_json(const struct vpd_config *cfg, const struct vpd_pools *pools)
{
	g_autoptr(GString) s = g_string_new("{\"pfs\":[");

	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		const struct vpd_pf *pf = cfg->pfs->pdata[i];
		g_autofree char *name = g_strescape(pf->name, NULL);

		g_string_append_printf(s, "%s{\"name\":\"%s\",\"num_vfs\":%u,\"switchdev\":%s}",
				       i ? "," : "", name, pf->num_vfs,
				       pf->switchdev ? "true" : "false");
	}
	g_string_append(s, "],\"pools\":[");
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		const struct vpd_pool *p = cfg->pools->pdata[i];
		g_autofree char *name = g_strescape(p->name, NULL);
		g_autofree char *pf = g_strescape(p->pf->name, NULL);

		g_string_append_printf(s, "%s{\"name\":\"%s\",\"pf\":\"%s\",\"first_vf\":%u,"
				       "\"last_vf\":%u,\"free\":%u,\"vlan_min\":%u,"
				       "\"vlan_max\":%u}", i ? "," : "", name, pf, p->first_vf,
				       p->last_vf, vpd_pools_free_count(pools, p->name),
				       p->vlan_min, p->vlan_max);
	}
	g_string_append(s, "]}");
	puts(s->str);
}

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = NULL;
	g_autoptr(vpd_pools) pools = NULL;
	bool json = false;
	const char *file = NULL;

	if (argc < 2 || strcmp(argv[1], "check")) {
		usage(stderr);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!file && argv[i][0] != '-') {
			file = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!file) {
		usage(stderr);
		return 2;
	}
	cfg = vpd_config_load(file, &err);
	if (!cfg) {
		fprintf(stderr, "vdpa-poolctl: %s\n", err->message);
		return 1;
	}
	pools = vpd_pools_new(cfg);
	if (json)
		print_json(cfg, pools);
	else
		print_human(cfg, pools);
	return 0;
}
