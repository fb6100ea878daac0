// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ofconn: OpenFlow 1.4 requests to a bridge and their replies (see
 * ofconn.h).  Each wait takes at most VPD_OVS_TIMEOUT_MS.
 */
#include "ofconn.h"

void vpd_ofconn_init(struct vpd_ofconn *of, char *path, const char *bridge)
{
	*of = (struct vpd_ofconn) { .bridge = bridge };
	vpd_conn_init(&of->c, "OpenFlow", path);
}

void vpd_ofconn_clear(struct vpd_ofconn *of)
{
	vpd_conn_clear(&of->c);
}

bool vpd_ofconn_connect(struct vpd_ofconn *of, GError **error)
{
	g_autoptr(GByteArray) hello = g_byte_array_new();
	GByteArray *in = of->c.in;
	gint64 deadline;
	bool ok;

	if (of->c.fd >= 0)
		return true;
	deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	if (!vpd_conn_open(&of->c, error))
		return false;
	vpd_of_hello(hello, ++of->xid);
	ok = vpd_conn_send(&of->c, hello->data, hello->len, error);
	while (ok && (in->len < 8 || in->len < vpd_of_get16(in->data + 2)))
		ok = vpd_conn_recv(&of->c, deadline, error);
	if (!ok)
		return false;
	if (in->data[1] != VPD_OFPT_HELLO || in->data[0] < VPD_OFP_VERSION) {
		vpd_conn_close(&of->c);
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_SUPPORTED, "OpenFlow: bridge %s does "
				    "not speak OpenFlow 1.4 (add OpenFlow14 to its protocols)",
				    of->bridge);
	}
	g_byte_array_remove_range(in, 0, vpd_of_get16(in->data + 2));
	if (of->connected)
		of->reconnected = true;
	of->connected = true;
	return true;
}

bool vpd_ofconn_send(struct vpd_ofconn *of, const GByteArray *msgs, GError **error)
{
	return vpd_conn_send(&of->c, msgs->data, msgs->len, error);
}

bool vpd_ofconn_closed_by_peer(struct vpd_ofconn *of)
{
	for (;;) {
		int r = vpd_conn_read_ready(&of->c);

		if (r <= 0)
			return r < 0;
		/* Whole messages: echo requests answered, the rest (late replies) dropped. */
		while (of->c.in->len >= 8) {
			const uint8_t *m = of->c.in->data;
			guint len = vpd_of_get16(m + 2);

			if (len < 8) {
				vpd_conn_close(&of->c);
				return true;
			}
			if (of->c.in->len < len)
				break;
			if (m[1] == VPD_OFPT_ECHO_REQUEST) {
				g_autoptr(GByteArray) r = g_byte_array_new();

				vpd_of_echo_reply(r, m, len);
				if (!vpd_ofconn_send(of, r, NULL))
					return true;
			}
			g_byte_array_remove_range(of->c.in, 0, len);
		}
	}
}

bool vpd_ofconn_wait(struct vpd_ofconn *of, uint32_t first_xid, uint32_t xid, uint8_t want,
		     vpd_of_msg_fn each, void *opaque, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	g_autofree char *refused = NULL;

	for (;;) {
		const uint8_t *m = of->c.in->data;
		guint len;

		if (of->c.fd < 0)
			return vpd_ovs_fail(error, G_IO_ERROR_CONNECTION_CLOSED,
					    "OpenFlow: connection lost");
		if (of->c.in->len < 8 || of->c.in->len < vpd_of_get16(m + 2)) {
			if (!vpd_conn_recv(&of->c, deadline, error))
				return false;
			continue;
		}
		len = vpd_of_get16(m + 2);
		if (len < 8) {
			vpd_conn_close(&of->c);
			return vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
					    "OpenFlow: a message of length %u", len);
		}
		if (m[1] == VPD_OFPT_ECHO_REQUEST) {
			g_autoptr(GByteArray) r = g_byte_array_new();

			vpd_of_echo_reply(r, m, len);
			g_byte_array_remove_range(of->c.in, 0, len);
			if (!vpd_ofconn_send(of, r, error))
				return false;
			continue;
		}
		if (m[1] == VPD_OFPT_ERROR) {
			uint16_t type = len >= 12 ? vpd_of_get16(m + 8) : 0;
			uint16_t code = len >= 12 ? vpd_of_get16(m + 10) : 0;
			uint32_t exid = vpd_of_get32(m + 4);

			g_byte_array_remove_range(of->c.in, 0, len);
			if (exid == xid)
				return vpd_ovs_fail(error, G_IO_ERROR_INVALID_ARGUMENT,
						    "OpenFlow: OVS refused request %u: error "
						    "type %u code %u", exid, type, code);
			if (exid >= first_xid && exid < xid && !refused)
				refused = g_strdup_printf("OpenFlow: OVS refused request %u: error "
							  "type %u code %u", exid, type, code);
			continue;
		}
		if (m[1] == want && vpd_of_get32(m + 4) == xid) {
			bool more = want == VPD_OFPT_MULTIPART_REPLY && len >= 12 &&
				    (vpd_of_get16(m + 10) & 1);
			bool ok = !each || each(m, len, opaque);

			g_byte_array_remove_range(of->c.in, 0, len);
			if (!ok)
				return vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
						    "OpenFlow: a malformed reply");
			if (more)
				continue;
			if (refused)
				return vpd_ovs_fail(error, G_IO_ERROR_INVALID_ARGUMENT, "%s",
						    refused);
			return true;
		}
		g_byte_array_remove_range(of->c.in, 0, len);
	}
}

bool vpd_ofconn_bundle_send(struct vpd_ofconn *of, const GPtrArray *mods, uint32_t *first,
			    uint32_t *commit, GError **error)
{
	g_autoptr(GByteArray) out = g_byte_array_new();
	uint32_t bundle = ++of->bundle;

	if (!vpd_ofconn_connect(of, error))
		return false;
	*first = of->xid + 1;
	vpd_of_bundle_ctrl(out, ++of->xid, bundle, VPD_OFPBCT_OPEN_REQUEST);
	for (unsigned i = 0; i < mods->len; i++)
		vpd_of_bundle_add(out, ++of->xid, bundle, mods->pdata[i]);
	*commit = ++of->xid;
	vpd_of_bundle_ctrl(out, *commit, bundle, VPD_OFPBCT_COMMIT_REQUEST);
	return vpd_ofconn_send(of, out, error);
}

static bool bundle_checked_once(struct vpd_ofconn *of, const GPtrArray *mods, GError **error)
{
	g_autoptr(GByteArray) out = g_byte_array_new();
	uint32_t bundle = ++of->bundle, first, barrier, commit;
	GError *err = NULL;

	if (!vpd_ofconn_connect(of, error))
		return false;
	first = of->xid + 1;
	vpd_of_bundle_ctrl(out, ++of->xid, bundle, VPD_OFPBCT_OPEN_REQUEST);
	for (unsigned i = 0; i < mods->len; i++)
		vpd_of_bundle_add(out, ++of->xid, bundle, mods->pdata[i]);
	barrier = ++of->xid;
	vpd_of_barrier_request(out, barrier);
	if (!vpd_ofconn_send(of, out, error))
		return false;
	if (!vpd_ofconn_wait(of, first, barrier, VPD_OFPT_BARRIER_REPLY, NULL, NULL, &err)) {
		g_byte_array_set_size(out, 0);
		vpd_of_bundle_ctrl(out, ++of->xid, bundle, VPD_OFPBCT_DISCARD_REQUEST);
		if (of->c.fd >= 0)
			vpd_ofconn_send(of, out, NULL);
		g_propagate_error(error, err);
		return false;
	}
	g_byte_array_set_size(out, 0);
	commit = ++of->xid;
	vpd_of_bundle_ctrl(out, commit, bundle, VPD_OFPBCT_COMMIT_REQUEST);
	return vpd_ofconn_send(of, out, error) &&
	       vpd_ofconn_wait(of, commit, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, error);
}

bool vpd_ofconn_bundle_checked(struct vpd_ofconn *of, const GPtrArray *mods, GError **error)
{
	g_autoptr(GError) first = NULL;

	if (bundle_checked_once(of, mods, &first))
		return true;
	if (of->c.fd < 0 && !g_error_matches(first, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT))
		return bundle_checked_once(of, mods, error);  /* it had gone stale */
	g_propagate_error(error, g_steal_pointer(&first));
	return false;
}
