/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * json: the little JSON the daemon needs to talk to OVSDB (RFC 7047).
 *
 * A parser into a tree, and a scanner that finds where one value ends in
 * a stream (OVSDB's JSON-RPC sends values back to back, with no framing).
 * Both check every byte; nesting is limited to VPD_JSON_MAX_DEPTH.
 */
#ifndef VPD_JSON_H
#define VPD_JSON_H

#include <glib.h>
#include <stdbool.h>

#define VPD_JSON_MAX_DEPTH 64

enum vpd_json_type {
	VPD_JSON_NULL,
	VPD_JSON_FALSE,
	VPD_JSON_TRUE,
	VPD_JSON_NUMBER,
	VPD_JSON_STRING,
	VPD_JSON_ARRAY,
	VPD_JSON_OBJECT,
};

struct vpd_json {
	enum vpd_json_type type;
	double num;
	char *str;          /* STRING: the value, NUL-terminated (no NULs inside) */
	GPtrArray *items;   /* ARRAY: the elements; OBJECT: the values */
	GPtrArray *keys;    /* OBJECT: the member names (char *) */
};

/*
 * Length of the first whole value in buf (leading white space included),
 * 0 if buf holds only part of one, -1 if buf cannot start a value.
 */
gssize vpd_json_span(const char *buf, gsize len);

struct vpd_json *vpd_json_parse(const char *buf, gsize len, GError **error);
void vpd_json_free(struct vpd_json *j);

/* Member key of an object, element i of an array; NULL if absent. */
const struct vpd_json *vpd_json_get(const struct vpd_json *obj, const char *key);
const struct vpd_json *vpd_json_at(const struct vpd_json *arr, unsigned i);
unsigned vpd_json_len(const struct vpd_json *arr);

/* Append s as a JSON string (quoted and escaped) to out. */
void vpd_json_put_str(GString *out, const char *s);

typedef struct vpd_json vpd_json;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vpd_json, vpd_json_free)

#endif
