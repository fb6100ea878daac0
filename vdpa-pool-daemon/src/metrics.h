/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics: what `vdpa-poolctl metrics` writes (docs/daemon-admin.md,
 * "Metrics"): the daemon's latency histograms and each VF port's counters
 * as METRICS carries them (docs/daemon-protocol.md), and the Prometheus
 * text exposition format (version 0.0.4) they are written in, for
 * node_exporter's textfile collector.
 *
 * Pure: no I/O.  The daemon measures (vpd_hist_observe()) and answers
 * METRICS; vdpa-poolctl turns the answer into text (vpd_metrics_format()).
 */
#ifndef VPD_METRICS_H
#define VPD_METRICS_H

#include "protocol.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A latency histogram: how many observations fell at or under each bound
 * (and over the one before it), how many in all, their sum.  The bounds
 * (vpd_hist_bounds_ns) go from 50 us to 10 s; what is over the last is
 * only in count (Prometheus' +Inf bucket).
 */
#define VPD_HIST_BUCKETS 16
extern const uint64_t vpd_hist_bounds_ns[VPD_HIST_BUCKETS];

struct vpd_hist {
	uint64_t bucket[VPD_HIST_BUCKETS];      /* not cumulative */
	uint64_t count;
	uint64_t sum_ns;
};

void vpd_hist_observe(struct vpd_hist *h, uint64_t ns);
/*
 * As a u64s attribute: count, sum (ns), then each bucket's upper bound
 * (ns) and count (not cumulative), bounds increasing.
 */
void vpd_hist_put(struct vpd_builder *b, uint16_t type, const struct vpd_hist *h);

/*
 * A VF's switch port's counters (enum vpd_port_stat, protocol.h), as OVS's
 * Interface statistics name them (vpd_port_stat_ovs_key); have: a bit
 * (1 << stat) per counter OVS gave.
 */
extern const char *const vpd_port_stat_ovs_key[VPD_PS_N];

struct vpd_port_stats {
	uint32_t have;
	uint64_t v[VPD_PS_N];
};

void vpd_port_stats_put(struct vpd_builder *b, const struct vpd_port_stats *s);

/*
 * The exposition format's writer.  A family (one metric name, its HELP
 * and TYPE once) is begun, then its samples follow: all of a family's
 * samples must be together, so a family begun twice in a row writes its
 * HELP and TYPE once, and one begun again after another family is refused
 * (false, a bug of the caller: nothing written).
 */
struct vpd_prom {
	GString *out;
	GHashTable *seen;               /* the families begun */
	char *cur;                      /* the one being written */
	bool refused;                   /* its samples are not written */
};

void vpd_prom_init(struct vpd_prom *p, GString *out);
void vpd_prom_clear(struct vpd_prom *p);
/* type: "counter", "gauge", "histogram"; help is escaped. */
bool vpd_prom_family(struct vpd_prom *p, const char *name, const char *type, const char *help);
/*
 * A sample of the current family: its name and suffix ("" or, for a
 * histogram, "_bucket", "_sum", "_count"), labels (name, value, ...,
 * NULL; values escaped; NULL for none) and value as written.
 */
void vpd_prom_sample(struct vpd_prom *p, const char *suffix, const char *const *labels,
		     const char *value);
void vpd_prom_u64(struct vpd_prom *p, const char *suffix, const char *const *labels,
		  uint64_t value);
/*
 * The current family's histogram of labels: n buckets of the bounds (ns,
 * increasing) and counts (not cumulative) given, written cumulative, the
 * +Inf bucket count, _sum (seconds) and _count.
 */
void vpd_prom_histogram(struct vpd_prom *p, const char *const *labels, const uint64_t *bounds_ns,
			const uint64_t *counts, unsigned n, uint64_t count, uint64_t sum_ns);
/* A label value escaped as the format says: \\, \" and \n. */
void vpd_prom_escape_label(GString *out, const char *v);
/* ns as seconds, exactly, without trailing zeros ("0.00005", "2.5", "10"). */
void vpd_prom_seconds(GString *out, uint64_t ns);

/*
 * The text of a METRICS reply; false with error when the reply is not one
 * (a histogram that does not add up, a VF without its pool).
 */
bool vpd_metrics_format(const struct vpd_msg *reply, GString *out, GError **error);

#endif
