/*
 * vsriov-pool: network backends for the VFs of virtual SR-IOV PFs
 *
 * The static provider: the pool lists -netdev ids, and a virtual PF claims
 * one per VF when it is realized.  Backends are looked up at claim time,
 * not when the pool is created, because -object is processed before
 * -netdev.  A backend goes back to the pool when its VF goes away.
 *
 *   -netdev tap,id=vf0,... -netdev vhost-vdpa,id=vf1,vhostdev=...
 *   -object vsriov-pool,id=p0,netdevs=vf0,netdevs=vf1
 *
 * With lazy=on the PFs claim backends when the guest enables VFs and
 * return them when it disables them (vpf.c), so PFs can share a pool.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qapi/qapi-visit-common.h"
#include "qapi/qapi-builtin-visit.h"
#include "qom/object_interfaces.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "net/net.h"
#include "vsriov.h"
#include "trace.h"

static VsriovPoolList pools = QTAILQ_HEAD_INITIALIZER(pools);

VsriovPoolList *vsriov_pool_list(void)
{
    return &pools;
}

static VsriovPoolEntry *pool_entry(VsriovPool *pool, guint i)
{
    return &g_array_index(pool->entries, VsriovPoolEntry, i);
}

static void pool_clear_entries(VsriovPool *pool)
{
    for (guint i = 0; i < pool->entries->len; i++) {
        g_free(pool_entry(pool, i)->netdev);
        g_free(pool_entry(pool, i)->owner);
    }
    g_array_set_size(pool->entries, 0);
}

/* A backend can be handed out if it exists and no NIC is attached to it. */
static NetClientState *pool_usable_backend(const char *id)
{
    NetClientState *nc = qemu_find_netdev(id);

    return nc && !nc->peer ? nc : NULL;
}

static unsigned pool_available(VsriovPool *pool)
{
    unsigned n = 0;

    for (guint i = 0; i < pool->entries->len; i++) {
        VsriovPoolEntry *e = pool_entry(pool, i);

        if (!e->owner && pool_usable_backend(e->netdev)) {
            n++;
        }
    }
    return n;
}

static char *pool_unusable(VsriovPool *pool)
{
    GString *why = g_string_new(NULL);

    for (guint i = 0; i < pool->entries->len; i++) {
        VsriovPoolEntry *e = pool_entry(pool, i);
        NetClientState *nc;

        if (e->owner) {
            continue;
        }
        nc = qemu_find_netdev(e->netdev);
        if (!nc) {
            g_string_append_printf(why, "%snetdev '%s' does not exist",
                                   why->len ? ", " : "", e->netdev);
        } else if (nc->peer) {
            g_string_append_printf(why, "%snetdev '%s' is used by '%s'",
                                   why->len ? ", " : "", e->netdev,
                                   nc->peer->name);
        }
    }
    return g_string_free(why, !why->len);
}

static NetClientState *pool_claim(VsriovPool *pool, const char *owner,
                                  Error **errp)
{
    const char *id = object_get_canonical_path_component(OBJECT(pool));

    for (guint i = 0; i < pool->entries->len; i++) {
        VsriovPoolEntry *e = pool_entry(pool, i);
        NetClientState *nc;

        if (e->owner) {
            continue;
        }
        nc = pool_usable_backend(e->netdev);
        if (!nc) {
            continue;
        }
        e->owner = g_strdup(owner);
        trace_vsriov_pool_claim(id, e->netdev, owner);
        return nc;
    }
    error_setg(errp, "vsriov-pool '%s' has no free backend left for %s",
               id, owner);
    return NULL;
}

static void pool_release(VsriovPool *pool, const char *id)
{
    for (guint i = 0; i < pool->entries->len; i++) {
        VsriovPoolEntry *e = pool_entry(pool, i);

        if (e->owner && !strcmp(e->netdev, id)) {
            trace_vsriov_pool_release(
                object_get_canonical_path_component(OBJECT(pool)),
                e->netdev, e->owner);
            g_free(e->owner);
            e->owner = NULL;
            return;
        }
    }
}

static bool pool_has_reps(VsriovPool *pool)
{
    return pool->reps->len;
}

/* A static pool's: rep-netdevs names them, one per entry of netdevs. */
static void pool_rep_open(VsriovPool *pool, const char *id,
                          VsriovPoolRepDone *done, void *opaque)
{
    const char *pid = object_get_canonical_path_component(OBJECT(pool));
    Error *err = NULL;

    for (guint i = 0; i < pool->entries->len && i < pool->reps->len; i++) {
        const char *rep = g_ptr_array_index(pool->reps, i);
        NetClientState *nc;

        if (strcmp(pool_entry(pool, i)->netdev, id)) {
            continue;
        }
        nc = qemu_find_netdev(rep);
        if (!nc || nc->peer || nc->info->type == NET_CLIENT_DRIVER_NIC) {
            error_setg(&err, "vsriov-pool '%s': representor backend '%s' "
                       "of netdev '%s' %s", pid, rep, id,
                       !nc ? "does not exist" : "is in use");
            done(opaque, NULL, -ENOSPC, err);
            return;
        }
        done(opaque, rep, 0, NULL);
        return;
    }
    error_setg(&err, "vsriov-pool '%s' gives netdev '%s' no representor",
               pid, id);
    done(opaque, NULL, -EPERM, err);
}

VsriovPoolState vsriov_pool_state(VsriovPool *pool, const char **error)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);
    const char *why = NULL;
    VsriovPoolState st = pc->state ? pc->state(pool, &why)
                                   : VSRIOV_POOL_STATE_READY;

    if (error) {
        *error = st == VSRIOV_POOL_STATE_FAILED ? why : NULL;
    }
    return st;
}

bool vsriov_pool_has_reps(VsriovPool *pool)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    return pc->has_reps && pc->has_reps(pool);
}

void vsriov_pool_rep_open(VsriovPool *pool, NetClientState *backend,
                          VsriovPoolRepDone *done, void *opaque)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);
    Error *err = NULL;

    if (!backend || !pc->rep_open) {
        error_setg(&err, "vsriov-pool '%s': the VF has no backend",
                   object_get_canonical_path_component(OBJECT(pool)));
        done(opaque, NULL, -EPERM, err);
        return;
    }
    pc->rep_open(pool, backend->name, done, opaque);
}

void vsriov_pool_rep_close(VsriovPool *pool, const char *id,
                           const char *rep)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    if (pc->rep_close) {
        pc->rep_close(pool, id, rep);
    }
}

static int no_flows(VsriovPool *pool, Error **errp)
{
    error_setg(errp, "pool '%s' cannot offload rules (its backends are "
               "QEMU's netdevs, no switch of a provider's)",
               object_get_canonical_path_component(OBJECT(pool)));
    return -EOPNOTSUPP;
}

int vsriov_pool_flow_add(VsriovPool *pool, NetClientState *src,
                         NetClientState *dst, const VsriovFlowSpec *spec,
                         VsriovPoolFlowDone *done, void *opaque,
                         Error **errp)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    if (!pc->flow_add) {
        return no_flows(pool, errp);
    }
    if (!src || (!spec->drop && !dst)) {
        error_setg(errp, "vsriov-pool '%s': the VF has no backend",
                   object_get_canonical_path_component(OBJECT(pool)));
        return -EPERM;
    }
    pc->flow_add(pool, src->name, dst ? dst->name : NULL, spec, done,
                 opaque);
    return 1;
}

int vsriov_pool_flow_del(VsriovPool *pool, uint32_t id,
                         VsriovPoolFlowDone *done, void *opaque,
                         Error **errp)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    if (!pc->flow_del) {
        return no_flows(pool, errp);
    }
    pc->flow_del(pool, id, done, opaque);
    return 1;
}

int vsriov_pool_flow_stats(VsriovPool *pool, uint32_t id,
                           VsriovPoolFlowDone *done, void *opaque,
                           Error **errp)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    if (!pc->flow_stats) {
        return no_flows(pool, errp);
    }
    pc->flow_stats(pool, id, done, opaque);
    return 1;
}

bool vsriov_pool_vf_stats(VsriovPool *pool, NetClientState *backend,
                          VsriovPoolStatsDone *done, void *opaque)
{
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(pool);

    if (!pc->vf_stats) {
        return false;
    }
    pc->vf_stats(pool, backend->name, done, opaque);
    return true;
}

/* A list of netdev ids: none empty, none twice. */
static bool pool_check_ids(strList *list, const char *prop, Error **errp)
{
    for (strList *a = list; a; a = a->next) {
        if (!*a->value) {
            error_setg(errp, "vsriov-pool: empty netdev id in '%s'", prop);
            return false;
        }
        for (strList *b = a->next; b; b = b->next) {
            if (!strcmp(a->value, b->value)) {
                error_setg(errp, "vsriov-pool: netdev '%s' is listed twice",
                           a->value);
                return false;
            }
        }
    }
    return true;
}

static void pool_get_netdevs(Object *obj, Visitor *v, const char *name,
                             void *opaque, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(obj);
    strList *list = NULL, **tail = &list;

    for (guint i = 0; i < pool->entries->len; i++) {
        QAPI_LIST_APPEND(tail, g_strdup(pool_entry(pool, i)->netdev));
    }
    visit_type_strList(v, name, &list, errp);
    qapi_free_strList(list);
}

static void pool_set_netdevs(Object *obj, Visitor *v, const char *name,
                             void *opaque, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(obj);
    g_autoptr(strList) list = NULL;

    if (QTAILQ_IN_USE(pool, next)) {
        error_setg(errp, "vsriov-pool '%s': 'netdevs' cannot change once the "
                   "pool exists",
                   object_get_canonical_path_component(OBJECT(pool)));
        return;
    }
    if (!visit_type_strList(v, name, &list, errp) ||
        !pool_check_ids(list, "netdevs", errp)) {
        return;
    }
    pool_clear_entries(pool);
    for (strList *a = list; a; a = a->next) {
        VsriovPoolEntry e = { .netdev = g_strdup(a->value) };

        g_array_append_val(pool->entries, e);
    }
}

static void pool_get_rep_netdevs(Object *obj, Visitor *v, const char *name,
                                 void *opaque, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(obj);
    strList *list = NULL, **tail = &list;

    for (guint i = 0; i < pool->reps->len; i++) {
        QAPI_LIST_APPEND(tail, g_strdup(g_ptr_array_index(pool->reps, i)));
    }
    visit_type_strList(v, name, &list, errp);
    qapi_free_strList(list);
}

static void pool_set_rep_netdevs(Object *obj, Visitor *v, const char *name,
                                 void *opaque, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(obj);
    g_autoptr(strList) list = NULL;

    if (QTAILQ_IN_USE(pool, next)) {
        error_setg(errp, "vsriov-pool '%s': 'rep-netdevs' cannot change "
                   "once the pool exists",
                   object_get_canonical_path_component(OBJECT(pool)));
        return;
    }
    if (!visit_type_strList(v, name, &list, errp) ||
        !pool_check_ids(list, "rep-netdevs", errp)) {
        return;
    }
    g_ptr_array_set_size(pool->reps, 0);
    for (strList *a = list; a; a = a->next) {
        g_ptr_array_add(pool->reps, g_strdup(a->value));
    }
}

static bool pool_get_lazy(Object *obj, Error **errp)
{
    return VSRIOV_POOL(obj)->lazy;
}

static void pool_set_lazy(Object *obj, bool value, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(obj);

    if (QTAILQ_IN_USE(pool, next)) {
        error_setg(errp, "vsriov-pool '%s': 'lazy' cannot change once the "
                   "pool exists",
                   object_get_canonical_path_component(OBJECT(pool)));
        return;
    }
    pool->lazy = value;
}

static void pool_complete(UserCreatable *uc, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(uc);

    if (!pool->entries->len) {
        error_setg(errp, "vsriov-pool '%s' needs at least one backend "
                   "in 'netdevs'",
                   object_get_canonical_path_component(OBJECT(pool)));
        return;
    }
    if (pool->reps->len && pool->reps->len != pool->entries->len) {
        error_setg(errp, "vsriov-pool '%s' has %u backends in 'netdevs' "
                   "and %u in 'rep-netdevs': one representor backend per "
                   "VF backend",
                   object_get_canonical_path_component(OBJECT(pool)),
                   pool->entries->len, pool->reps->len);
        return;
    }
    for (guint i = 0; i < pool->reps->len; i++) {
        for (guint j = 0; j < pool->entries->len; j++) {
            if (!strcmp(g_ptr_array_index(pool->reps, i),
                        pool_entry(pool, j)->netdev)) {
                error_setg(errp, "vsriov-pool '%s': netdev '%s' is in "
                           "both 'netdevs' and 'rep-netdevs'",
                           object_get_canonical_path_component(OBJECT(pool)),
                           pool_entry(pool, j)->netdev);
                return;
            }
        }
    }
    QTAILQ_INSERT_TAIL(&pools, pool, next);
}

void vsriov_pool_use(VsriovPool *pool)
{
    pool->users++;
}

void vsriov_pool_unuse(VsriovPool *pool)
{
    assert(pool->users);
    pool->users--;
}

/*
 * A pool whose backends are held by VFs must stay until they are gone, and
 * so must a pool a virtual PF takes backends from at VF Enable.
 */
static bool pool_can_be_deleted(UserCreatable *uc)
{
    VsriovPool *pool = VSRIOV_POOL(uc);

    if (pool->users) {
        return false;
    }
    for (guint i = 0; i < pool->entries->len; i++) {
        if (pool_entry(pool, i)->owner) {
            return false;
        }
    }
    return true;
}

static void pool_instance_init(Object *obj)
{
    VsriovPool *pool = VSRIOV_POOL(obj);

    pool->entries = g_array_new(false, true, sizeof(VsriovPoolEntry));
    pool->reps = g_ptr_array_new_with_free_func(g_free);
}

static void pool_instance_finalize(Object *obj)
{
    VsriovPool *pool = VSRIOV_POOL(obj);
    VsriovPool *p;

    QTAILQ_FOREACH(p, &pools, next) {
        if (p == pool) {
            QTAILQ_REMOVE(&pools, pool, next);
            break;
        }
    }
    pool_clear_entries(pool);
    g_array_free(pool->entries, true);
    g_ptr_array_free(pool->reps, true);
}

static void pool_class_init(ObjectClass *oc, const void *data)
{
    UserCreatableClass *ucc = USER_CREATABLE_CLASS(oc);
    VsriovPoolClass *pc = VSRIOV_POOL_CLASS(oc);

    ucc->complete = pool_complete;
    ucc->can_be_deleted = pool_can_be_deleted;
    pc->available = pool_available;
    pc->claim = pool_claim;
    pc->release = pool_release;
    pc->unusable = pool_unusable;
    pc->has_reps = pool_has_reps;
    pc->rep_open = pool_rep_open;

    object_class_property_add(oc, "netdevs", "strList",
                              pool_get_netdevs, pool_set_netdevs,
                              NULL, NULL);
    object_class_property_set_description(oc, "netdevs",
        "ids of -netdev backends, one per VF");
    object_class_property_add(oc, "rep-netdevs", "strList",
                              pool_get_rep_netdevs, pool_set_rep_netdevs,
                              NULL, NULL);
    object_class_property_set_description(oc, "rep-netdevs",
        "ids of -netdev backends, one per entry of 'netdevs': the host "
        "side of that VF's representor in switchdev mode");
    object_class_property_add_bool(oc, "lazy", pool_get_lazy, pool_set_lazy);
    object_class_property_set_description(oc, "lazy",
        "claim backends when the guest enables VFs, not when the PF is "
        "realized");
}

static const TypeInfo pool_info = {
    .name = TYPE_VSRIOV_POOL,
    .parent = TYPE_OBJECT,
    .instance_size = sizeof(VsriovPool),
    .instance_init = pool_instance_init,
    .instance_finalize = pool_instance_finalize,
    .class_size = sizeof(VsriovPoolClass),
    .class_init = pool_class_init,
    .interfaces = (const InterfaceInfo[]) {
        { TYPE_USER_CREATABLE },
        { }
    },
};

static void vsriov_pool_register_types(void)
{
    type_register_static(&pool_info);
}

type_init(vsriov_pool_register_types);

#define GUEST_REPORT_BURST 10
#define GUEST_REPORT_WINDOW_NS (10 * NANOSECONDS_PER_SECOND)

void vsriov_report_guest_err(Error *err)
{
    static int64_t window;
    static unsigned shown, hidden;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    trace_vsriov_guest_err(error_get_pretty(err));
    if (now - window >= GUEST_REPORT_WINDOW_NS) {
        if (hidden) {
            warn_report("vsriov: %u more such report(s) in the last 10 s not "
                        "shown (guest-triggered)", hidden);
        }
        window = now;
        shown = hidden = 0;
    }
    if (shown < GUEST_REPORT_BURST) {
        shown++;
        warn_report_err(err);
    } else {
        hidden++;
        error_free(err);
    }
}
