// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ovsdb: JSON-RPC transactions with ovsdb-server (see ovsdb.h).  Requests
 * wait at most VPD_OVS_TIMEOUT_MS for their reply.
 */
#include "ovsdb.h"

#include <string.h>

void vpd_ovsdb_init(struct vpd_ovsdb *db, const char *path)
{
	vpd_conn_init(&db->c, "OVSDB", g_strdup(path));
	db->id = 0;
}

void vpd_ovsdb_clear(struct vpd_ovsdb *db)
{
	vpd_conn_clear(&db->c);
}

bool vpd_ovsdb_connect(struct vpd_ovsdb *db, GError **error)
{
	return db->c.fd >= 0 || vpd_conn_open(&db->c, error);
}

/* Send one JSON-RPC message. */
static bool send_json(struct vpd_ovsdb *db, JsonBuilder *b, GError **error)
{
	g_autoptr(JsonNode) root = json_builder_get_root(b);
	gsize len;
	g_autofree char *text = json_to_string(root, FALSE);

	len = strlen(text);
	return vpd_conn_send(&db->c, text, len, error);
}

static bool send_once(struct vpd_ovsdb *db, JsonNode *ops, unsigned *id, GError **error)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	JsonArray *a = json_node_get_array(ops);

	if (!vpd_ovsdb_connect(db, error))
		return false;
	*id = ++db->id;
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "method");
	json_builder_add_string_value(b, "transact");
	json_builder_set_member_name(b, "params");
	json_builder_begin_array(b);
	json_builder_add_string_value(b, "Open_vSwitch");
	for (guint i = 0; i < json_array_get_length(a); i++)
		json_builder_add_value(b, json_array_dup_element(a, i));
	json_builder_end_array(b);
	json_builder_set_member_name(b, "id");
	json_builder_add_int_value(b, *id);
	json_builder_end_object(b);
	return send_json(db, b, error);
}

bool vpd_ovsdb_send(struct vpd_ovsdb *db, JsonNode *ops, unsigned *id, GError **error)
{
	g_autoptr(GError) first = NULL;

	if (send_once(db, ops, id, &first))
		return true;
	return send_once(db, ops, id, error);
}

/* The server's keep-alive: answer with its own id. */
static bool answer_echo(struct vpd_ovsdb *db, const struct vpd_json *mid, GError **error)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "id");
	if (mid && mid->type == VPD_JSON_STRING)
		json_builder_add_string_value(b, mid->str);
	else if (mid && mid->type == VPD_JSON_NUMBER)
		json_builder_add_double_value(b, mid->num);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "result");
	json_builder_begin_array(b);
	json_builder_end_array(b);
	json_builder_set_member_name(b, "error");
	json_builder_add_null_value(b);
	json_builder_end_object(b);
	return send_json(db, b, error);
}

struct vpd_json *vpd_ovsdb_wait(struct vpd_ovsdb *db, unsigned id, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;

	for (;;) {
		gssize span = db->c.fd < 0 ? -1 : vpd_json_span((char *)db->c.in->data,
								 db->c.in->len);
		g_autoptr(vpd_json) msg = NULL;
		const struct vpd_json *mid, *method, *result, *err;

		if (db->c.fd < 0) {
			vpd_ovs_fail(error, G_IO_ERROR_CONNECTION_CLOSED, "OVSDB: connection lost");
			return NULL;
		}
		if (span < 0) {
			vpd_conn_close(&db->c);
			vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
				     "OVSDB sent something that is not JSON-RPC");
			return NULL;
		}
		if (span == 0) {
			if (!vpd_conn_recv(&db->c, deadline, error))
				return NULL;
			continue;
		}
		msg = vpd_json_parse((char *)db->c.in->data, span, error);
		g_byte_array_remove_range(db->c.in, 0, span);
		if (!msg) {
			vpd_conn_close(&db->c);
			return NULL;
		}
		method = vpd_json_get(msg, "method");
		mid = vpd_json_get(msg, "id");
		if (method && method->type == VPD_JSON_STRING && !strcmp(method->str, "echo")) {
			if (!answer_echo(db, mid, error))
				return NULL;
			continue;
		}
		if (!mid || mid->type != VPD_JSON_NUMBER || mid->num != id)
			continue;  /* a notification or an old reply */
		err = vpd_json_get(msg, "error");
		if (err && err->type != VPD_JSON_NULL) {
			vpd_ovs_fail(error, G_IO_ERROR_INVALID_ARGUMENT,
				     "OVSDB refused the transaction: %s",
				     err->type == VPD_JSON_STRING ? err->str : "(error)");
			return NULL;
		}
		result = vpd_json_get(msg, "result");
		if (!result || result->type != VPD_JSON_ARRAY) {
			vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA, "OVSDB's reply has no result");
			return NULL;
		}
		for (unsigned i = 0; i < vpd_json_len(result); i++) {
			const struct vpd_json *r = vpd_json_at(result, i);
			const struct vpd_json *e = vpd_json_get(r, "error");
			const struct vpd_json *d = vpd_json_get(r, "details");

			if (e && e->type == VPD_JSON_STRING) {
				vpd_ovs_fail(error, G_IO_ERROR_INVALID_ARGUMENT,
					     "OVSDB: operation %u failed: %s%s%s", i, e->str,
					     d && d->type == VPD_JSON_STRING ? ": " : "",
					     d && d->type == VPD_JSON_STRING ? d->str : "");
				return NULL;
			}
		}
		/* Take the result out of the message before it is freed. */
		for (unsigned i = 0; i < msg->keys->len; i++) {
			if (!strcmp(msg->keys->pdata[i], "result"))
				return g_ptr_array_steal_index(msg->items, i);
		}
		vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA, "OVSDB's reply has no result");
		return NULL;
	}
}

void vpd_ovsdb_idle(struct vpd_ovsdb *db)
{
	/* (closed: the next request connects again) */
	while (vpd_conn_read_ready(&db->c) > 0) {
		for (;;) {
			gssize span = vpd_json_span((char *)db->c.in->data, db->c.in->len);
			g_autoptr(vpd_json) msg = NULL;
			const struct vpd_json *method;

			if (span < 0) {
				vpd_conn_close(&db->c);
				return;
			}
			if (span == 0)
				break;
			msg = vpd_json_parse((char *)db->c.in->data, span, NULL);
			g_byte_array_remove_range(db->c.in, 0, span);
			method = vpd_json_get(msg, "method");
			if (method && method->type == VPD_JSON_STRING && !strcmp(method->str, "echo") &&
			    !answer_echo(db, vpd_json_get(msg, "id"), NULL))
				return;
		}
	}
}

struct vpd_json *vpd_ovsdb_transact(struct vpd_ovsdb *db, JsonNode *ops, GError **error)
{
	unsigned id;

	if (!vpd_ovsdb_send(db, ops, &id, error))
		return NULL;
	return vpd_ovsdb_wait(db, id, error);
}

int vpd_ovsdb_count(const struct vpd_json *result, unsigned i)
{
	const struct vpd_json *c = vpd_json_get(vpd_json_at(result, i), "count");

	return c && c->type == VPD_JSON_NUMBER ? (int)c->num : -1;
}
