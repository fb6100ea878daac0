// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target: a client's FLOW_ADD as the daemon reads it (the
 * message, then vpd_rule_parse(): every match and action attribute, their
 * values, masks and prerequisites).  Built and run by scripts/fuzz-daemon;
 * its corpus starts from the golden FLOW_ADD.
 */
#include "protocol.h"
#include "rules.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	g_autoptr(GBytes) bytes = NULL;
	g_autoptr(vpd_msg) m = NULL;
	struct vpd_rule r;
	g_autofree char *why = NULL;
	gssize total;
	int errnum = 0;

	if (size < VPD_HEADER_SIZE)
		return 0;
	total = vpd_msg_total_len(data, size, NULL);
	if (total < 0 || (gsize)total > size)
		return 0;
	bytes = g_bytes_new(data, total);
	m = vpd_msg_parse(bytes, NULL);
	if (!m)
		return 0;
	if (!vpd_rule_parse(m, &r, &errnum, &why) && (errnum != EINVAL || !why))
		__builtin_trap();   /* a refusal always says why, with EINVAL */
	return 0;
}
