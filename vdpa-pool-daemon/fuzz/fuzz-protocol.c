// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target: the API socket's codec, as the daemon reads a client's
 * bytes (header check, then the whole message, then each attribute the
 * handlers look at).  Built and run by scripts/fuzz-daemon.
 */
#include "protocol.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	g_autoptr(GBytes) bytes = NULL;
	g_autoptr(vpd_msg) m = NULL;
	gssize total;

	if (size < VPD_HEADER_SIZE)
		return 0;
	total = vpd_msg_total_len(data, size, NULL);
	if (total < 0 || (gsize)total > size)
		return 0;
	bytes = g_bytes_new(data, total);
	m = vpd_msg_parse(bytes, NULL);
	if (!m)
		return 0;
	for (guint i = 0; i < m->attrs->len; i++) {
		const struct vpd_attr_view *a = &g_array_index(m->attrs, struct vpd_attr_view, i);
		g_autoptr(GArray) nested = vpd_attr_nested(a);
		uint32_t u32;
		uint16_t u16;
		uint8_t u8;

		vpd_attr_u32(a, &u32);
		vpd_attr_u16(a, &u16);
		vpd_attr_u8(a, &u8);
		vpd_attr_str(a);
		for (guint j = 0; j < nested->len; j++)
			vpd_attr_str(&g_array_index(nested, struct vpd_attr_view, j));
	}
	return 0;
}
