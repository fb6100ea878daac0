// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target: the state file's reader (a snapshot that may be
 * anything after a crash, a full disk or someone's mistake, and its
 * journal), and the /proc/PID/stat parser.  The input is the snapshot,
 * then optionally "\n%%journal%%\n" and the journal.  Built and run by
 * scripts/fuzz-daemon.
 */
#include "proc.h"
#include "state.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BOOT "be69aea7-a93a-4d22-8b5a-e15cb451e3a5"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char conf[] =
	"[pf pf0]\nnum-vfs = 8\n[pf pf1]\nnum-vfs = 2\n"
	"[pool a]\npf = pf0\nvfs = 0-3\nvlans = 100-199\nmac-policy = prefix 02\n"
	"[pool b]\npf = pf1\nvfs = 0-1\n"
	"[pool c]\npf = pf0\nvfs = 4-7\nmac-policy = any\nmac-handover = token\n";

/* The reader's warnings are expected here; writing them costs runs. */
static GLogWriterOutput drop(GLogLevelFlags level, const GLogField *fields, gsize n,
			     gpointer data)
{
	(void)level;
	(void)fields;
	(void)n;
	(void)data;
	return G_LOG_WRITER_HANDLED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vpd_config *cfg;
	static const char sep[] = "\n%%journal%%\n";
	const char *text = (const char *)data;
	const char *journal = NULL;
	struct vpd_state_report report = {};
	struct vpd_pools *pools;
	gsize len = size, jlen = 0;
	guint64 gen, t;

	if (!cfg) {
		g_log_set_writer_func(drop, NULL, NULL);
		cfg = vpd_config_parse(conf, "fuzz.conf", NULL);
	}
	vpd_proc_parse_start_time(text, size, &t);
	for (gsize i = 0; i + sizeof(sep) - 1 <= size; i++) {
		if (!memcmp(text + i, sep, sizeof(sep) - 1)) {
			len = i;
			journal = text + i + sizeof(sep) - 1;
			jlen = size - len - (sizeof(sep) - 1);
			break;
		}
	}
	pools = vpd_pools_new(cfg);
	vpd_state_parse(pools, "/fuzz/state", text, len, journal, jlen, BOOT, &gen, &report,
			NULL);
	vpd_state_report_clear(&report);
	vpd_pools_free(pools);
	return 0;
}
