// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target: the JSON reader of OVSDB's replies (the stream scanner
 * that frames them, then the parser and the lookups the daemon does).
 * Built and run by scripts/fuzz-daemon.
 */
#include "json.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	gssize span = vpd_json_span(text, size);
	g_autoptr(vpd_json) j = NULL;

	if (span < 0 || (gsize)span > size)
		return 0;
	j = vpd_json_parse(text, span ? (gsize)span : size, NULL);
	if (j) {
		const struct vpd_json *r = vpd_json_get(j, "result");

		for (unsigned i = 0; i < vpd_json_len(r); i++)
			vpd_json_get(vpd_json_at(r, i), "rows");
	}
	return 0;
}
