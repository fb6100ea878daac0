// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ovsworker: the OVS side in its own thread (see ovsworker.h).
 */
#include "ovsworker.h"
#include "conn.h"
#include "server.h"         /* VPD_FLOWS_WAIT_MS */

enum job_kind { JOB_APPLY, JOB_FLOWS, JOB_TICK, JOB_STOP, JOB_RULES, JOB_STATS, JOB_PORT_STATS };

struct job {
	enum job_kind kind;
	struct vpd_ovs_worker *w;
	struct vpd_pools *snap;     /* copies of the entries it is about */
	gint64 queued;              /* monotonic, us */
	vpd_ovs_done_fn done;
	vpd_ovs_flows_fn flows_done;
	void *opaque;
	/* the answer */
	GError *error;
	GPtrArray *flows;           /* FLOWS: a GPtrArray of lines per entry */
	GArray *port_stats;         /* PORT_STATS: a struct vpd_port_stats per entry */
	vpd_ovs_port_stats_fn port_stats_done;
	struct vpd_rule_change *rules; /* RULES */
	vpd_ovs_stats_fn stats_done;   /* STATS: of rule id of table */
	uint8_t table;
	uint32_t id;
	uint64_t packets, bytes;
};

struct vpd_ovs_worker {
	struct vpd_ovs *ovs;        /* the worker thread's */
	GPtrArray *reps;            /* the worker thread's: representor by handle */
	GAsyncQueue *jobs;
	GThread *thread;
	struct vpd_pools *pools;    /* the loop thread's: the daemon's entries */
	bool tick_queued;           /* the loop thread's */
	bool stopping;              /* the loop thread's: no more requests */
	guint tick_src;
	unsigned pending;           /* the loop thread's: answers still to come */
};

static void job_free(struct job *j)
{
	vpd_pools_free(j->snap);
	vpd_rule_change_free(j->rules);
	g_clear_error(&j->error);
	if (j->flows)
		g_ptr_array_unref(j->flows);
	if (j->port_stats)
		g_array_unref(j->port_stats);
	g_free(j);
}

/* ---- the worker thread -------------------------------------------------- */

/* The representors the worker knows, into the copies (the daemon's may lag). */
static void fill_reps(struct vpd_ovs_worker *w, struct vpd_pools *snap)
{
	for (unsigned i = 0; i < snap->entries->len; i++) {
		struct vpd_entry *e = snap->entries->pdata[i];
		const char *rep = e->handle < w->reps->len ? w->reps->pdata[e->handle] : NULL;

		if (rep && g_strcmp0(rep, e->rep)) {
			g_free(e->rep);
			e->rep = g_strdup(rep);
		}
	}
}

static void keep_reps(struct vpd_ovs_worker *w, const struct vpd_pools *snap)
{
	for (unsigned i = 0; i < snap->entries->len; i++) {
		const struct vpd_entry *e = snap->entries->pdata[i];

		if (e->rep && e->handle < w->reps->len &&
		    g_strcmp0(e->rep, w->reps->pdata[e->handle])) {
			g_free(w->reps->pdata[e->handle]);
			w->reps->pdata[e->handle] = g_strdup(e->rep);
		}
	}
}

/*
 * Whether j waited longer than ms behind requests OVS did not answer (it
 * then fails, saying so, untried).
 */
static bool waited_too_long(struct job *j, int ms, const char *what)
{
	gint64 waited = g_get_monotonic_time() - j->queued;

	if (waited < ms * 1000ll)
		return false;
	vpd_ovs_fail(&j->error, G_IO_ERROR_TIMED_OUT, "OVS: %s waited %.1f s behind "
		     "requests that OVS did not answer", what, waited / 1e6);
	return true;
}

static gboolean job_done(gpointer data);

/*
 * Hand j's answer to the loop's thread.  Not g_main_context_invoke(),
 * which runs it in this thread when the loop's context is not in use at
 * that moment: a source of its own, run in order with the others.
 */
static void answer(struct job *j)
{
	GSource *src = g_idle_source_new();

	g_source_set_priority(src, G_PRIORITY_DEFAULT);
	g_source_set_callback(src, job_done, j, NULL);
	g_source_attach(src, g_main_context_default());
	g_source_unref(src);
}

static gpointer worker_thread(gpointer data)
{
	struct vpd_ovs_worker *w = data;

	for (;;) {
		struct job *j = g_async_queue_timeout_pop(w->jobs, G_USEC_PER_SEC);
		struct vpd_entry *e;

		if (!j) {
			vpd_ovs_idle(w->ovs);
			continue;
		}
		if (j->kind == JOB_STOP) {
			job_free(j);
			break;
		}
		if (j->snap)
			fill_reps(w, j->snap);
		switch (j->kind) {
		case JOB_RULES:
			if (!waited_too_long(j, VPD_OVS_TIMEOUT_MS, "the rules' change"))
				vpd_ovs_rules(w->ovs, j->rules, &j->error);
			break;
		case JOB_STATS:
			if (!waited_too_long(j, VPD_OVS_TIMEOUT_MS, "the question"))
				vpd_ovs_rule_stats(w->ovs, j->table, j->id, &j->packets, &j->bytes,
						   &j->error);
			break;
		case JOB_APPLY:
			e = j->snap->entries->pdata[0];
			if (waited_too_long(j, VPD_OVS_TIMEOUT_MS,
					    "the change (made once OVS answers again)"))
				vpd_ovs_set_dirty(w->ovs, e);
			else
				vpd_ovs_apply(w->ovs, e, &j->error);
			break;
		case JOB_FLOWS:
			/* Its STATUS has answered without them by then. */
			if (waited_too_long(j, VPD_FLOWS_WAIT_MS, "the question"))
				break;
			j->flows = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
			for (unsigned i = 0; i < j->snap->entries->len; i++) {
				GPtrArray *lines = vpd_ovs_vf_flows(w->ovs, j->snap->entries->pdata[i],
								    &j->error);

				if (!lines) {
					/* once OVS fails, the other VFs are not asked */
					g_clear_pointer(&j->flows, g_ptr_array_unref);
					break;
				}
				g_ptr_array_add(j->flows, lines);
			}
			break;
		case JOB_PORT_STATS:
			/* Its METRICS has answered without them by then. */
			if (waited_too_long(j, VPD_FLOWS_WAIT_MS, "the question"))
				break;
			j->port_stats = g_array_new(false, true, sizeof(struct vpd_port_stats));
			if (!vpd_ovs_port_stats(w->ovs, j->snap, j->port_stats, &j->error))
				g_clear_pointer(&j->port_stats, g_array_unref);
			break;
		case JOB_TICK:
			vpd_ovs_tick(w->ovs, j->snap);
			keep_reps(w, j->snap);
			break;
		case JOB_STOP:
			break;
		}
		answer(j);
	}
	return NULL;
}

/* ---- the loop's thread --------------------------------------------------- */

static gboolean job_done(gpointer data)
{
	struct job *j = data;
	struct vpd_ovs_worker *w = j->w;

	w->pending--;
	switch (j->kind) {
	case JOB_APPLY:
	case JOB_RULES:
		j->done(j->error, j->opaque);
		break;
	case JOB_STATS:
		j->stats_done(j->error, j->packets, j->bytes, j->opaque);
		break;
	case JOB_FLOWS:
		j->flows_done(j->flows, j->error, j->opaque);
		break;
	case JOB_PORT_STATS:
		j->port_stats_done(j->port_stats, j->error, j->opaque);
		break;
	case JOB_TICK:
		w->tick_queued = false;
		/* What STATUS shows of each VF's port. */
		for (unsigned i = 0; i < j->snap->entries->len; i++) {
			const struct vpd_entry *c = j->snap->entries->pdata[i];
			struct vpd_entry *e = w->pools->entries->pdata[c->handle];

			if (c->rep && g_strcmp0(c->rep, e->rep)) {
				g_free(e->rep);
				e->rep = g_strdup(c->rep);
			}
		}
		break;
	case JOB_STOP:
		break;
	}
	job_free(j);
	return G_SOURCE_REMOVE;
}

/* Queue j; once the worker stops, answer it at once. */
static void push(struct vpd_ovs_worker *w, struct job *j)
{
	if (w->stopping) {
		vpd_ovs_fail(&j->error, G_IO_ERROR_CANCELLED, "OVS: the daemon is stopping");
		if (j->kind == JOB_APPLY || j->kind == JOB_RULES)
			j->done(j->error, j->opaque);
		else if (j->kind == JOB_STATS)
			j->stats_done(j->error, 0, 0, j->opaque);
		else if (j->kind == JOB_FLOWS)
			j->flows_done(NULL, j->error, j->opaque);
		else if (j->kind == JOB_PORT_STATS)
			j->port_stats_done(NULL, j->error, j->opaque);
		job_free(j);
		return;
	}
	j->w = w;
	j->queued = g_get_monotonic_time();
	w->pending++;
	g_async_queue_push(w->jobs, j);
}

static gboolean tick(gpointer data)
{
	struct vpd_ovs_worker *w = data;
	struct job *j;

	/* One at a time: while OVS hangs, ticks do not pile up. */
	if (w->tick_queued)
		return G_SOURCE_CONTINUE;
	j = g_new0(struct job, 1);
	j->kind = JOB_TICK;
	j->snap = vpd_pools_copy(w->pools->entries);
	w->tick_queued = true;
	push(w, j);
	return G_SOURCE_CONTINUE;
}

struct vpd_ovs_worker *vpd_ovs_worker_new(struct vpd_ovs *ovs, struct vpd_pools *pools)
{
	struct vpd_ovs_worker *w = g_new0(struct vpd_ovs_worker, 1);

	w->ovs = ovs;
	w->pools = pools;
	w->reps = g_ptr_array_new_with_free_func(g_free);
	for (unsigned i = 0; i < pools->entries->len; i++)
		g_ptr_array_add(w->reps,
				g_strdup(((struct vpd_entry *)pools->entries->pdata[i])->rep));
	w->jobs = g_async_queue_new();
	w->thread = g_thread_new("vpd-ovs", worker_thread, w);
	w->tick_src = g_timeout_add_seconds(1, tick, w);
	return w;
}

void vpd_ovs_worker_free(struct vpd_ovs_worker *w)
{
	struct job *stop;

	if (!w)
		return;
	g_source_remove(w->tick_src);
	w->stopping = true;
	stop = g_new0(struct job, 1);
	stop->kind = JOB_STOP;
	g_async_queue_push(w->jobs, stop);
	g_thread_join(w->thread);
	/* The answers it gave go to their callers (each was invoked already). */
	while (w->pending)
		g_main_context_iteration(NULL, TRUE);
	g_async_queue_unref(w->jobs);
	g_ptr_array_unref(w->reps);
	vpd_ovs_free(w->ovs);
	g_free(w);
}

void vpd_ovs_worker_apply(struct vpd_ovs_worker *w, const struct vpd_entry *e,
			  vpd_ovs_done_fn done, void *opaque)
{
	struct job *j = g_new0(struct job, 1);
	g_autoptr(GPtrArray) one = g_ptr_array_new();

	g_ptr_array_add(one, (gpointer)e);
	j->kind = JOB_APPLY;
	j->snap = vpd_pools_copy(one);
	j->done = done;
	j->opaque = opaque;
	push(w, j);
}

void vpd_ovs_worker_flows(struct vpd_ovs_worker *w, const GPtrArray *entries,
			  vpd_ovs_flows_fn done, void *opaque)
{
	struct job *j = g_new0(struct job, 1);

	j->kind = JOB_FLOWS;
	j->snap = vpd_pools_copy(entries);
	j->flows_done = done;
	j->opaque = opaque;
	push(w, j);
}

void vpd_ovs_worker_port_stats(struct vpd_ovs_worker *w, const GPtrArray *entries,
			       vpd_ovs_port_stats_fn done, void *opaque)
{
	struct job *j = g_new0(struct job, 1);

	j->kind = JOB_PORT_STATS;
	j->snap = vpd_pools_copy(entries);
	j->port_stats_done = done;
	j->opaque = opaque;
	push(w, j);
}

void vpd_ovs_worker_rules(struct vpd_ovs_worker *w, const struct vpd_rule_change *c,
			  vpd_ovs_done_fn done, void *opaque)
{
	struct job *j = g_new0(struct job, 1);

	j->kind = JOB_RULES;
	j->rules = vpd_rule_change_copy(c);
	j->done = done;
	j->opaque = opaque;
	push(w, j);
}

void vpd_ovs_worker_rule_stats(struct vpd_ovs_worker *w, uint8_t table, uint32_t id,
			       vpd_ovs_stats_fn done, void *opaque)
{
	struct job *j = g_new0(struct job, 1);

	j->kind = JOB_STATS;
	j->table = table;
	j->id = id;
	j->stats_done = done;
	j->opaque = opaque;
	push(w, j);
}
