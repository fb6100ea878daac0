// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target: the configuration parser (a file an admin wrote, or
 * got wrong).  Built and run by scripts/fuzz-daemon.
 */
#include "config.h"
#include "pool.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	g_autofree char *text = g_strndup((const char *)data, size);
	g_autoptr(vpd_config) cfg = vpd_config_parse(text, "fuzz.conf", NULL);

	if (cfg) {
		struct vpd_pools *pools = vpd_pools_new(cfg);

		for (unsigned i = 0; i < cfg->pools->len; i++)
			vpd_pools_free_count(pools, ((struct vpd_pool *)cfg->pools->pdata[i])->name);
		vpd_pools_free(pools);
	}
	return 0;
}
