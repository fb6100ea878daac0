// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proc: process identity from /proc (see proc.h).
 */
#include "proc.h"

#include <string.h>

#define START_TIME_FIELD 22

bool vpd_proc_parse_start_time(const char *stat, gsize len, guint64 *start_time)
{
	const char *end = stat + len;
	const char *p = NULL;
	guint64 v = 0;
	unsigned field;

	/* "PID (COMM) STATE ...": the last ')' closes COMM, whatever COMM holds. */
	for (const char *c = stat; c < end; c++)
		if (*c == ')')
			p = c;
	if (!p || len == 0 || !g_ascii_isdigit(stat[0]) || !memchr(stat, '(', p - stat))
		return false;
	/* p is on field 2's ')'; each ' ' starts the next field, none empty. */
	for (field = 2, p++; p < end && field < START_TIME_FIELD; p++) {
		if (*p != ' ')
			continue;
		if (p[-1] == ' ')
			return false;
		field++;
	}
	if (field != START_TIME_FIELD || p >= end || !g_ascii_isdigit(*p))
		return false;
	for (; p < end && g_ascii_isdigit(*p); p++) {
		if (v > (G_MAXUINT64 - (*p - '0')) / 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	if (p < end && *p != ' ' && *p != '\n')
		return false;
	*start_time = v;
	return true;
}

guint64 vpd_proc_start_time(pid_t pid)
{
	g_autofree char *path = NULL;
	g_autofree char *text = NULL;
	guint64 t;
	gsize len;

	if (pid <= 0)
		return 0;
	path = g_strdup_printf("/proc/%d/stat", (int)pid);
	if (!g_file_get_contents(path, &text, &len, NULL) ||
	    !vpd_proc_parse_start_time(text, len, &t))
		return 0;
	return t;
}

bool vpd_boot_id_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!g_ascii_isdigit(s[i]) && (s[i] < 'a' || s[i] > 'f')) {
			return false;
		}
	}
	return true;
}

char *vpd_proc_boot_id(GError **error)
{
	static const char path[] = "/proc/sys/kernel/random/boot_id";
	g_autofree char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, error))
		return NULL;
	g_strchomp(text);
	if (!vpd_boot_id_valid(text)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
			    "%s holds no boot id: '%s'", path, text);
		return NULL;
	}
	return g_steal_pointer(&text);
}
