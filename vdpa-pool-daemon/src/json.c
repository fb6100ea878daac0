// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * json: a strict recursive-descent JSON parser (RFC 8259) for OVSDB replies.
 */
#include "json.h"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *p, *end;
	GError **error;
};

static bool fail(struct parser *ps, const char *what)
{
	if (ps->error && !*ps->error)
		g_set_error(ps->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
			    "bad JSON from OVSDB: %s", what);
	return false;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && strchr(" \t\r\n", *ps->p) && *ps->p)
		ps->p++;
}

void vpd_json_free(struct vpd_json *j)
{
	if (!j)
		return;
	g_free(j->str);
	if (j->items)
		g_ptr_array_unref(j->items);
	if (j->keys)
		g_ptr_array_unref(j->keys);
	g_free(j);
}

static int hex4(const char *s)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		int c = g_ascii_xdigit_value(s[i]);

		if (c < 0)
			return -1;
		v = v * 16 + c;
	}
	return v;
}

/* A string at ps->p (the opening quote); the decoded value in out. */
static bool parse_string(struct parser *ps, GString *out)
{
	ps->p++;
	while (ps->p < ps->end) {
		unsigned char c = *ps->p++;

		if (c == '"')
			return true;
		if (c < 0x20)
			return fail(ps, "control character in a string");
		if (c != '\\') {
			g_string_append_c(out, c);
			continue;
		}
		if (ps->p >= ps->end)
			break;
		c = *ps->p++;
		switch (c) {
		case '"': case '\\': case '/':
			g_string_append_c(out, c);
			break;
		case 'b': g_string_append_c(out, '\b'); break;
		case 'f': g_string_append_c(out, '\f'); break;
		case 'n': g_string_append_c(out, '\n'); break;
		case 'r': g_string_append_c(out, '\r'); break;
		case 't': g_string_append_c(out, '\t'); break;
		case 'u': {
			int u, lo;

			if (ps->end - ps->p < 4 || (u = hex4(ps->p)) < 0)
				return fail(ps, "bad \\u escape");
			ps->p += 4;
			if (u >= 0xd800 && u < 0xdc00) {
				if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
				    (lo = hex4(ps->p + 2)) < 0xdc00 || lo > 0xdfff)
					return fail(ps, "unpaired surrogate");
				ps->p += 6;
				u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
			} else if (u >= 0xdc00 && u < 0xe000) {
				return fail(ps, "unpaired surrogate");
			}
			if (u == 0)
				return fail(ps, "NUL in a string");
			g_string_append_unichar(out, u);
			break;
		}
		default:
			return fail(ps, "bad escape");
		}
	}
	return fail(ps, "unterminated string");
}

static bool parse_number(struct parser *ps, double *out)
{
	const char *s = ps->p;
	g_autofree char *copy = NULL;
	char *endp;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (ps->p >= ps->end || !g_ascii_isdigit(*ps->p))
		return fail(ps, "bad number");
	if (*ps->p == '0')
		ps->p++;
	else
		while (ps->p < ps->end && g_ascii_isdigit(*ps->p))
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (ps->p >= ps->end || !g_ascii_isdigit(*ps->p))
			return fail(ps, "bad number");
		while (ps->p < ps->end && g_ascii_isdigit(*ps->p))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p >= ps->end || !g_ascii_isdigit(*ps->p))
			return fail(ps, "bad number");
		while (ps->p < ps->end && g_ascii_isdigit(*ps->p))
			ps->p++;
	}
	copy = g_strndup(s, ps->p - s);
	*out = g_ascii_strtod(copy, &endp);
	return true;
}

static struct vpd_json *parse_value(struct parser *ps, unsigned depth);

static bool parse_members(struct parser *ps, struct vpd_json *j, unsigned depth, char close)
{
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return true;
	}
	for (;;) {
		struct vpd_json *v;

		skip_ws(ps);
		if (j->keys) {
			GString *key = g_string_new(NULL);

			if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps, key)) {
				g_string_free(key, TRUE);
				return fail(ps, "object member without a name");
			}
			g_ptr_array_add(j->keys, g_string_free(key, FALSE));
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				return fail(ps, "':' missing");
			ps->p++;
		}
		v = parse_value(ps, depth + 1);
		if (!v)
			return false;
		g_ptr_array_add(j->items, v);
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return true;
		}
		return fail(ps, "',' or end of array/object missing");
	}
}

static struct vpd_json *parse_value(struct parser *ps, unsigned depth)
{
	struct vpd_json *j = g_new0(struct vpd_json, 1);
	static const struct {
		const char *word;
		enum vpd_json_type type;
	} words[] = {
		{ "null", VPD_JSON_NULL }, { "false", VPD_JSON_FALSE }, { "true", VPD_JSON_TRUE },
	};
	bool ok = false;

	skip_ws(ps);
	if (depth > VPD_JSON_MAX_DEPTH) {
		fail(ps, "nested too deep");
	} else if (ps->p >= ps->end) {
		fail(ps, "value missing");
	} else if (*ps->p == '{' || *ps->p == '[') {
		j->type = *ps->p == '{' ? VPD_JSON_OBJECT : VPD_JSON_ARRAY;
		j->items = g_ptr_array_new_with_free_func((GDestroyNotify)vpd_json_free);
		if (j->type == VPD_JSON_OBJECT)
			j->keys = g_ptr_array_new_with_free_func(g_free);
		ok = parse_members(ps, j, depth, *ps->p == '{' ? '}' : ']');
	} else if (*ps->p == '"') {
		GString *s = g_string_new(NULL);

		j->type = VPD_JSON_STRING;
		ok = parse_string(ps, s);
		j->str = g_string_free(s, FALSE);
	} else if (*ps->p == '-' || g_ascii_isdigit(*ps->p)) {
		j->type = VPD_JSON_NUMBER;
		ok = parse_number(ps, &j->num);
	} else {
		for (unsigned i = 0; i < G_N_ELEMENTS(words) && !ok; i++) {
			gsize n = strlen(words[i].word);

			if ((gsize)(ps->end - ps->p) >= n && !memcmp(ps->p, words[i].word, n)) {
				j->type = words[i].type;
				ps->p += n;
				ok = true;
			}
		}
		if (!ok)
			fail(ps, "unexpected character");
	}
	if (!ok) {
		vpd_json_free(j);
		return NULL;
	}
	return j;
}

struct vpd_json *vpd_json_parse(const char *buf, gsize len, GError **error)
{
	struct parser ps = { .p = buf, .end = buf + len, .error = error };
	struct vpd_json *j = parse_value(&ps, 0);

	if (!j)
		return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		fail(&ps, "trailing bytes after the value");
		vpd_json_free(j);
		return NULL;
	}
	return j;
}

gssize vpd_json_span(const char *buf, gsize len)
{
	gsize i = 0;
	unsigned depth = 0;
	bool in_str = false;

	while (i < len && strchr(" \t\r\n", buf[i]) && buf[i])
		i++;
	if (i == len)
		return 0;
	if (buf[i] != '{' && buf[i] != '[')
		return -1;  /* OVSDB sends objects only */
	for (; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > VPD_JSON_MAX_DEPTH + 1)
				return -1;
		} else if (c == '}' || c == ']') {
			if (--depth == 0)
				return i + 1;
		}
	}
	return 0;
}

const struct vpd_json *vpd_json_get(const struct vpd_json *obj, const char *key)
{
	if (!obj || obj->type != VPD_JSON_OBJECT)
		return NULL;
	for (unsigned i = 0; i < obj->keys->len; i++)
		if (!strcmp(obj->keys->pdata[i], key))
			return obj->items->pdata[i];
	return NULL;
}

const struct vpd_json *vpd_json_at(const struct vpd_json *arr, unsigned i)
{
	if (!arr || arr->type != VPD_JSON_ARRAY || i >= arr->items->len)
		return NULL;
	return arr->items->pdata[i];
}

unsigned vpd_json_len(const struct vpd_json *arr)
{
	return arr && arr->type == VPD_JSON_ARRAY ? arr->items->len : 0;
}

void vpd_json_put_str(GString *out, const char *s)
{
	g_string_append_c(out, '"');
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			g_string_append_printf(out, "\\%c", c);
		else if (c < 0x20)
			g_string_append_printf(out, "\\u%04x", c);
		else
			g_string_append_c(out, c);
	}
	g_string_append_c(out, '"');
}
