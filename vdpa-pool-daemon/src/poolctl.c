// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vdpa-poolctl: the daemon's command-line tool.
 *
 *   vdpa-poolctl check [--json] FILE
 *       Validate a configuration file as the daemon would load it, and show
 *       the PFs and pools it defines.  Exit 0 if valid, 1 with one line
 *       "FILE:LINE: what is wrong" if not, 2 on a usage error.
 *
 *   vdpa-poolctl status [--json] [--socket PATH]
 *       Ask the running daemon (STATUS, root only) for every pooled VF: its
 *       pool, VF index, whether and by whom it is claimed, its attributes
 *       and its vhost-vdpa device.  Exit 1 with the daemon's sentence or the
 *       connection error.  Default socket: /run/vdpa-pool-daemon/api.sock.
 *
 *   vdpa-poolctl metrics [--socket PATH] [--output FILE]
 *       Ask the running daemon (METRICS, root only) for its counters, each
 *       VF's holder and switch port's counters, and write them in
 *       Prometheus' text format (docs/daemon-admin.md, "Metrics"): on
 *       stdout, or to FILE atomically (a temporary file in FILE's folder,
 *       renamed over it), for node_exporter's textfile collector.
 */
#include "config.h"
#include "metrics.h"
#include "pool.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: vdpa-poolctl check [--json] FILE\n"
	      "       vdpa-poolctl status [--json] [--socket PATH]\n"
	      "       vdpa-poolctl metrics [--socket PATH] [--output FILE]\n", f);
}

/* One request, one answer (no fds expected). */
static struct vpd_msg *request(const char *path, GBytes *msg, GError **error)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	g_autoptr(GByteArray) in = g_byte_array_new();
	gsize len;
	const uint8_t *data = g_bytes_get_data(msg, &len);
	gssize total = -1;
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		g_set_error(error, VPD_PROTOCOL_ERROR, 0, "socket path too long");
		return NULL;
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len) {
		g_set_error(error, VPD_PROTOCOL_ERROR, 0, "cannot talk to the daemon at %s: %s",
			    path, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (total < 0 || in->len < (gsize)total) {
		uint8_t buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0) {
			g_set_error(error, VPD_PROTOCOL_ERROR, 0, "the daemon at %s closed the "
				    "connection", path);
			close(fd);
			return NULL;
		}
		g_byte_array_append(in, buf, n);
		if (total < 0 && in->len >= VPD_HEADER_SIZE &&
		    (total = vpd_msg_total_len(in->data, in->len, error)) < 0) {
			close(fd);
			return NULL;
		}
	}
	close(fd);
	{
		g_autoptr(GBytes) b = g_bytes_new(in->data, in->len);

		return vpd_msg_parse(b, error);
	}
}

/*
 * A request of @type with no attributes, and its answer; NULL after
 * saying on stderr why there is none (no daemon, or its refusal).
 */
static struct vpd_msg *ask(const char *path, uint16_t type)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) req = NULL;
	struct vpd_msg *m;
	struct vpd_builder b;

	vpd_builder_init(&b, type, 1);
	req = vpd_builder_finish(&b);
	m = request(path, req, &err);
	if (!m) {
		fprintf(stderr, "vdpa-poolctl: %s\n", err->message);
		return NULL;
	}
	if (m->type == VPD_MSG_ERROR) {
		fprintf(stderr, "vdpa-poolctl: the daemon refused: %s\n",
			vpd_attr_str(vpd_msg_get(m, VPD_A_MESSAGE)) ?: "?");
		vpd_msg_free(m);
		return NULL;
	}
	return m;
}

static unsigned nested_small(GArray *a, uint16_t type)
{
	const struct vpd_attr_view *v = vpd_nested_get(a, type);
	uint16_t w = 0;
	uint8_t b = 0;

	if (v && v->len == 2 && vpd_attr_u16(v, &w))
		return w;
	if (v && v->len == 1 && vpd_attr_u8(v, &b))
		return b;
	return 0;
}

static const char *nested_str(GArray *a, uint16_t type)
{
	const char *s = vpd_attr_str(vpd_nested_get(a, type));

	return s ? s : "";
}

/* JSON output, written with json-glib (valid UTF-8 and escapes). */
static void put_str(JsonBuilder *b, const char *name, const char *v)
{
	json_builder_set_member_name(b, name);
	json_builder_add_string_value(b, v);
}

static void put_int(JsonBuilder *b, const char *name, gint64 v)
{
	json_builder_set_member_name(b, name);
	json_builder_add_int_value(b, v);
}

static void print_root(JsonBuilder *b)
{
	g_autoptr(JsonNode) root = json_builder_get_root(b);
	g_autofree char *text = json_to_string(root, FALSE);

	puts(text);
}

static int status(const char *path, bool json)
{
	static const char *const state[] = { "free", "claimed", "claimed (not connected)",
					     "quarantined" };
	static const char *const link[] = { "auto", "enable", "disable" };
	g_autoptr(vpd_msg) m = ask(path, VPD_MSG_STATUS);
	g_autoptr(JsonBuilder) jb = json_builder_new();

	if (!m)
		return 1;
	json_builder_begin_array(jb);
	if (!json)
		printf("%-12s %4s  %-24s %-17s %5s %3s %-8s %-6s %-7s %s\n", "POOL", "VF", "STATE",
		       "MAC", "VLAN", "QOS", "SPOOFCHK", "TRUST", "LINK", "OWNER / VHOST");
	for (guint i = 0; i < m->attrs->len; i++) {
		const struct vpd_attr_view *v = &g_array_index(m->attrs, struct vpd_attr_view, i);
		g_autoptr(GArray) a = NULL;
		const struct vpd_attr_view *macv;
		char mac[18] = "";
		uint32_t st;

		if (v->type != VPD_A_VF)
			continue;
		a = vpd_attr_nested(v);
		macv = vpd_nested_get(a, VPD_A_MAC);
		if (macv && macv->len == 6)
			snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", macv->value[0],
				 macv->value[1], macv->value[2], macv->value[3], macv->value[4],
				 macv->value[5]);
		st = MIN(vpd_nested_u32(a, VPD_A_COUNT), 3u);
		if (json) {
			json_builder_begin_object(jb);
			put_str(jb, "pool", nested_str(a, VPD_A_POOL));
			put_int(jb, "vf", vpd_nested_u32(a, VPD_A_VF_INDEX));
			put_int(jb, "handle", vpd_nested_u32(a, VPD_A_HANDLE));
			put_str(jb, "state", state[st]);
			put_str(jb, "owner", nested_str(a, VPD_A_OWNER));
			put_str(jb, "mac", mac);
			put_int(jb, "vlan", nested_small(a, VPD_A_VLAN));
			put_int(jb, "qos", nested_small(a, VPD_A_QOS));
			put_int(jb, "vlan_proto", nested_small(a, VPD_A_VLAN_PROTO));
			json_builder_set_member_name(jb, "spoofchk");
			json_builder_add_boolean_value(jb, nested_small(a, VPD_A_SPOOFCHK));
			json_builder_set_member_name(jb, "trust");
			json_builder_add_boolean_value(jb, nested_small(a, VPD_A_TRUST));
			put_str(jb, "link_state", link[MIN(nested_small(a, VPD_A_LINK_STATE), 2u)]);
			put_int(jb, "min_tx_rate", vpd_nested_u32(a, VPD_A_MIN_TX_RATE));
			put_int(jb, "max_tx_rate", vpd_nested_u32(a, VPD_A_MAX_TX_RATE));
			put_str(jb, "vhost", nested_str(a, VPD_A_VHOST_PATH));
			if (vpd_nested_get(a, VPD_A_PORT)) {
				put_str(jb, "port", nested_str(a, VPD_A_PORT));
				if (vpd_nested_get(a, VPD_A_REP_PORT))
					put_str(jb, "representor_port",
						nested_str(a, VPD_A_REP_PORT));
				json_builder_set_member_name(jb, "flows");
				json_builder_begin_array(jb);
				for (guint j = 0; j < a->len; j++) {
					const struct vpd_attr_view *f =
						&g_array_index(a, struct vpd_attr_view, j);

					if (f->type == VPD_A_FLOW && vpd_attr_str(f))
						json_builder_add_string_value(jb, vpd_attr_str(f));
				}
				json_builder_end_array(jb);
			}
			json_builder_end_object(jb);
		} else {
			printf("%-12s %4u  %-24s %-17s %5u %3u %-8s %-6s %-7s %s%s%s\n",
			       nested_str(a, VPD_A_POOL), vpd_nested_u32(a, VPD_A_VF_INDEX), state[st],
			       mac, nested_small(a, VPD_A_VLAN), nested_small(a, VPD_A_QOS),
			       nested_small(a, VPD_A_SPOOFCHK) ? "on" : "off",
			       nested_small(a, VPD_A_TRUST) ? "on" : "off",
			       link[MIN(nested_small(a, VPD_A_LINK_STATE), 2u)],
			       nested_str(a, VPD_A_OWNER), st ? " " : "",
			       nested_str(a, VPD_A_VHOST_PATH));
			if (vpd_nested_get(a, VPD_A_PORT))
				printf("%19s port %s\n", "", nested_str(a, VPD_A_PORT));
			if (vpd_nested_get(a, VPD_A_REP_PORT))
				printf("%19s representor port %s\n", "",
				       nested_str(a, VPD_A_REP_PORT));
			for (guint j = 0; j < a->len; j++) {
				const struct vpd_attr_view *f =
					&g_array_index(a, struct vpd_attr_view, j);

				if (f->type == VPD_A_FLOW && vpd_attr_str(f))
					printf("%19s flow %s\n", "", vpd_attr_str(f));
			}
		}
	}
	if (json) {
		json_builder_end_array(jb);
		print_root(jb);
	}
	return 0;
}

/*
 * text into path atomically: a file of its own in path's folder (not
 * named *.prom: the textfile collector reads only those), synced, mode
 * 0644, renamed over path.  A reader sees the old file or the new one.
 */
static bool write_atomically(const char *path, const GString *text, GError **error)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *base = g_path_get_basename(path);
	g_autofree char *tmp = g_strdup_printf("%s/.%s.XXXXXX", dir, base);
	gsize off = 0;
	int fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot write in %s: %s", dir, g_strerror(errno));
		return false;
	}
	while (off < text->len) {
		ssize_t n = write(fd, text->str + off, text->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += n;
	}
	if (off < text->len || fchmod(fd, 0644) < 0 || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		int errnum = errno;

		if (off < text->len)
			close(fd);
		unlink(tmp);
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errnum),
			    "cannot write %s: %s", path, g_strerror(errnum));
		return false;
	}
	return true;
}

static int metrics(const char *path, const char *output)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_msg) m = ask(path, VPD_MSG_METRICS);
	g_autoptr(GString) text = g_string_new(NULL);

	if (!m)
		return 1;
	if (!vpd_metrics_format(m, text, &err)) {
		fprintf(stderr, "vdpa-poolctl: %s\n", err->message);
		return 1;
	}
	if (!output) {
		fwrite(text->str, 1, text->len, stdout);
		return fflush(stdout) ? 1 : 0;
	}
	if (!write_atomically(output, text, &err)) {
		fprintf(stderr, "vdpa-poolctl: %s\n", err->message);
		return 1;
	}
	return 0;
}

static void print_human(const struct vpd_config *cfg, const struct vpd_pools *pools)
{
	printf("socket %s, state %s, OVS bridge %s\n", cfg->socket_path, cfg->state_path,
	       cfg->ovs_bridge ? cfg->ovs_bridge : "(none: OVS is left alone)");
	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		const struct vpd_pf *pf = cfg->pfs->pdata[i];

		printf("pf %s: %u VFs, eswitch %s, vdpa management device %s\n", pf->name,
		       pf->num_vfs, pf->switchdev ? "switchdev" : "legacy", pf->vdpa_mgmtdev);
	}
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		const struct vpd_pool *p = cfg->pools->pdata[i];

		printf("pool %s: pf %s VFs %u-%u (%u free), VLANs %u-%u, MAC policy %s%s\n",
		       p->name, p->pf->name, p->first_vf, p->last_vf,
		       vpd_pools_free_count(pools, p->name), p->vlan_min, p->vlan_max,
		       p->mac_policy == VPD_MAC_ANY ? "any" :
		       p->mac_policy == VPD_MAC_LOCKED ? "locked" : "prefix",
		       p->switchdev ? ", switchdev (representor ports)" : "");
	}
}

static void print_json(const struct vpd_config *cfg, const struct vpd_pools *pools)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "pfs");
	json_builder_begin_array(b);
	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		const struct vpd_pf *pf = cfg->pfs->pdata[i];

		json_builder_begin_object(b);
		put_str(b, "name", pf->name);
		put_int(b, "num_vfs", pf->num_vfs);
		json_builder_set_member_name(b, "switchdev");
		json_builder_add_boolean_value(b, pf->switchdev);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_set_member_name(b, "pools");
	json_builder_begin_array(b);
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		const struct vpd_pool *p = cfg->pools->pdata[i];

		json_builder_begin_object(b);
		put_str(b, "name", p->name);
		put_str(b, "pf", p->pf->name);
		put_int(b, "first_vf", p->first_vf);
		put_int(b, "last_vf", p->last_vf);
		put_int(b, "free", vpd_pools_free_count(pools, p->name));
		put_int(b, "vlan_min", p->vlan_min);
		put_int(b, "vlan_max", p->vlan_max);
		json_builder_set_member_name(b, "switchdev");
		json_builder_add_boolean_value(b, p->switchdev);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
	print_root(b);
}

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = NULL;
	g_autoptr(vpd_pools) pools = NULL;
	bool json = false;
	const char *file = NULL;
	const char *sock = "/run/vdpa-pool-daemon/api.sock";

	if (argc >= 2 && !strcmp(argv[1], "status")) {
		for (int i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--json")) {
				json = true;
			} else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
				sock = argv[++i];
			} else {
				usage(stderr);
				return 2;
			}
		}
		return status(sock, json);
	}
	if (argc >= 2 && !strcmp(argv[1], "metrics")) {
		const char *output = NULL;

		for (int i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
				sock = argv[++i];
			} else if (!strcmp(argv[i], "--output") && i + 1 < argc) {
				output = argv[++i];
			} else {
				usage(stderr);
				return 2;
			}
		}
		return metrics(sock, output);
	}
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
