/*
 * vsriov virtual PF: live migration
 *
 * The VFs are devices of their own and migrate as such (their PCI
 * config, their virtio-net state); the PF's SR-IOV capability, VF Enable
 * included, with the PF, which is loaded first (it is realized before its
 * VFs): its post_load enables the VFs before they load.  What is the
 * virtual PF's own is the configuration the guest set, which the
 * destination's provider gets again, since its datapath knows nothing of
 * it.  The destination has its own pool of the same shape.  A lazy
 * pool's destination claims backends for as many VFs as the source had
 * enabled when the migration started (vmstate_vsriov_pf_shape), staged
 * as an SRIOV_MEMBERS_PREPARE would, so that the PF's post_load finds
 * them.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "hw/pci/pci.h"
#include "migration/vmstate.h"
#include "migration/register.h"
#include "migration/savevm.h"
#include "system/runstate.h"
#include "vsriov.h"
#include "trace.h"

static const VMStateDescription vmstate_vsriov_vf_config = {
    .name = "vsriov-vf-config",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(mac, VsriovVFConfig, 6),
        VMSTATE_BOOL(mac_set, VsriovVFConfig),
        VMSTATE_UINT16(vlan, VsriovVFConfig),
        VMSTATE_UINT8(qos, VsriovVFConfig),
        VMSTATE_UINT16(vlan_proto, VsriovVFConfig),
        VMSTATE_UINT8(spoofchk, VsriovVFConfig),
        VMSTATE_UINT8(trust, VsriovVFConfig),
        VMSTATE_UINT8(link_state, VsriovVFConfig),
        VMSTATE_UINT32(min_tx_rate, VsriovVFConfig),
        VMSTATE_UINT32(max_tx_rate, VsriovVFConfig),
        VMSTATE_END_OF_LIST()
    }
};

/*
 * The PF's shape, sent when the migration starts: a destination whose
 * pool cannot give as many VFs fails it then, while the source still
 * runs, not after the source stopped.
 */
static int vpf_pre_save_shape(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->mig.incoming_num_vfs = vpf->num_vfs;
    vpf->mig.incoming_enabled = vsriov_pf_enabled_vfs(vpf);
    return 0;
}

static void vpf_incoming_failed(VsriovPF *vpf, Error *err);
static void vpf_approve_switchover(VsriovPF *vpf);

/* A lazy pool's backends for the incoming VFs came, or not. */
static void vpf_incoming_staged(VsriovPF *vpf, int ret, Error *err,
                                void *opaque)
{
    if (!vpf->mig.incoming_staging) {
        error_free(err);    /* (the migration ended meanwhile) */
        return;
    }
    if (ret) {
        error_prepend(&err, "virtual SR-IOV PF '%s': pool '%s' did not "
                      "give the %u VF(s) the migration's source has "
                      "enabled: ", DEVICE(vpf->pf)->id,
                      object_get_canonical_path_component(OBJECT(vpf->pool)),
                      vpf->mig.incoming_enabled);
        vpf_incoming_failed(vpf, err);
        return;
    }
    vpf->mig.incoming_staging = false;
    vpf_approve_switchover(vpf);
}

static bool vpf_post_load_shape(void *opaque, int version_id, Error **errp)
{
    VsriovPF *vpf = opaque;

    if (vpf->mig.incoming_num_vfs != vpf->num_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s' has %u VF(s) from pool "
                   "'%s' where the source's has %u",
                   DEVICE(vpf->pf)->id, vpf->num_vfs,
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   vpf->mig.incoming_num_vfs);
        error_append_hint(errp, "The destination needs a pool of the same "
                          "shape (as many backends, or sriov-totalvfs).\n");
        return false;
    }
    if (vpf->mig.incoming_enabled > vpf->num_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s': %u VFs enabled of %u",
                   DEVICE(vpf->pf)->id, vpf->mig.incoming_enabled,
                   vpf->num_vfs);
        return false;
    }
    /* (a premapped pool added at run time that has not its VFs yet) */
    for (uint16_t i = 0; !vpf->pool->lazy && i < vpf->num_vfs; i++) {
        if (vsriov_pf_vf_backing(vpf, i) != VSRIOV_VF_BACKING_BOUND) {
            const char *why = NULL;
            VsriovPoolState st = vsriov_pool_state(vpf->pool, &why);

            error_setg(errp, "virtual SR-IOV PF '%s': pool '%s' %s",
                       DEVICE(vpf->pf)->id,
                       object_get_canonical_path_component(OBJECT(vpf->pool)),
                       st == VSRIOV_POOL_STATE_CLAIMING
                       ? "is still claiming its VFs" : "gave its VFs none");
            if (why) {
                error_append_hint(errp, "%s\n", why);
            }
            error_append_hint(errp, "Start the migration once the pool is "
                              "ready (VSRIOV_POOL_STATE_CHANGED).\n");
            return false;
        }
    }
    if (vpf->pool->lazy && vpf->mig.incoming_enabled &&
        vsriov_pf_stage_vfs(vpf, vpf->mig.incoming_enabled, vpf_incoming_staged,
                            NULL) > 0) {
        /* (a pool that claims in the caller gets them at VF Enable) */
        vpf->mig.incoming_staging = true;
        return true;
    }
    vpf_approve_switchover(vpf);
    return true;
}

static const VMStateDescription vmstate_vsriov_pf_shape = {
    .name = "vsriov-pf-shape",
    .version_id = 1,
    .minimum_version_id = 1,
    .early_setup = true,
    .pre_save = vpf_pre_save_shape,
    .post_load_errp = vpf_post_load_shape,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(mig.incoming_num_vfs, VsriovPF),
        VMSTATE_UINT16(mig.incoming_enabled, VsriovPF),
        VMSTATE_END_OF_LIST()
    }
};

/*
 * A lazy pool's destination claims its VFs' backends when the source's
 * shape has come, while the source runs on; until they come, the live
 * section vsriov-pf-claims holds the switch-over (with the switchover-ack
 * capability), and should its pool not give them, the section's next part
 * fails the migration, before the source stops.  Its parts carry nothing:
 * they are the destination's chances to fail it, at most one per
 * CLAIMS_PART_NS.
 */
#define CLAIMS_PART_NS (100 * SCALE_MS)

static void vpf_incoming_failed(VsriovPF *vpf, Error *err)
{
    vpf->mig.incoming_staging = false;
    vpf->mig.incoming_failed = true;
    error_free(vpf->mig.incoming_err);
    vpf->mig.incoming_err = err;
    trace_vsriov_incoming_claims(DEVICE(vpf->pf)->id, false);
}

static void vpf_approve_switchover(VsriovPF *vpf)
{
    int ret;

    trace_vsriov_incoming_claims(DEVICE(vpf->pf)->id, true);
    if (!vpf->mig.switchover_pending) {
        return;
    }
    vpf->mig.switchover_pending = false;
    ret = qemu_loadvm_approve_switchover();
    if (ret) {
        error_report("virtual SR-IOV PF '%s': switchover ack not sent: %s",
                     DEVICE(vpf->pf)->id, strerror(-ret));
    }
}

static bool vpf_claims_switchover_ack_needed(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->mig.switchover_pending = true;
    return true;
}

static int vpf_claims_save_setup(QEMUFile *f, void *opaque, Error **errp)
{
    VsriovPF *vpf = opaque;

    vpf->mig.claims_part_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    return 0;
}

static bool vpf_claims_is_active_iterate(void *opaque)
{
    VsriovPF *vpf = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    if (now - vpf->mig.claims_part_ns < CLAIMS_PART_NS) {
        return false;
    }
    vpf->mig.claims_part_ns = now;
    return true;
}

static int vpf_claims_save_iterate(QEMUFile *f, void *opaque)
{
    return 1;   /* (no data: this part is all) */
}

static int vpf_claims_load_state(QEMUFile *f, void *opaque, int version_id)
{
    VsriovPF *vpf = opaque;

    if (vpf->mig.incoming_failed) {
        if (vpf->mig.incoming_err) {
            error_report_err(g_steal_pointer(&vpf->mig.incoming_err));
        }
        return -EBUSY;
    }
    return 0;
}

static int vpf_claims_load_cleanup(void *opaque)
{
    VsriovPF *vpf = opaque;

    vpf->mig.incoming_staging = vpf->mig.incoming_failed = false;
    vpf->mig.switchover_pending = false;
    error_free(vpf->mig.incoming_err);
    vpf->mig.incoming_err = NULL;
    return 0;
}

static const SaveVMHandlers vpf_claims_handlers = {
    .save_setup = vpf_claims_save_setup,
    .is_active_iterate = vpf_claims_is_active_iterate,
    .save_live_iterate = vpf_claims_save_iterate,
    .load_state = vpf_claims_load_state,
    .load_cleanup = vpf_claims_load_cleanup,
    .switchover_ack_needed = vpf_claims_switchover_ack_needed,
};

static bool vpf_pre_save(void *opaque, Error **errp)
{
    VsriovPF *vpf = opaque;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    /*
     * A VF configuration the provider has not answered yet is not in the
     * record: the guest's command went back to its queue (admin.c) and
     * runs again on the destination, which applies every VF's whole
     * configuration after load.  A VF Enable that waits for its backends
     * cannot be migrated half done.
     */
    if (vsriov_pf_waits_for_pool(vpf)) {
        error_setg(errp, "virtual SR-IOV PF '%s': a VF Enable waits for "
                   "its pool's provider", DEVICE(vpf->pf)->id);
        error_append_hint(errp, "Migrate again once it has completed.\n");
        return false;
    }
    vpf->mig.has_handover_token = pc->handover_token &&
                              pc->handover_token(vpf->pool,
                                                 vpf->mig.handover_token);
    return true;
}

/*
 * The source's provider's hand-over token, which the destination's shows
 * when a VF takes the MAC it had on the source (a daemon pool's handover).
 */
static bool vpf_handover_needed(void *opaque)
{
    VsriovPF *vpf = opaque;

    return vpf->mig.has_handover_token;
}

static bool vpf_handover_post_load(void *opaque, int version_id,
                                   Error **errp)
{
    VsriovPF *vpf = opaque;
    VsriovPoolClass *pc = VSRIOV_POOL_GET_CLASS(vpf->pool);

    if (pc->set_incoming_handover) {
        pc->set_incoming_handover(vpf->pool, vpf->mig.handover_token);
    }
    return true;
}

static const VMStateDescription vmstate_vsriov_pf_handover = {
    .name = "vsriov-pf/handover",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = vpf_handover_needed,
    .post_load_errp = vpf_handover_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(mig.handover_token, VsriovPF, VSRIOV_HANDOVER_SIZE),
        VMSTATE_END_OF_LIST()
    }
};

static bool vpf_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovPF *vpf = opaque;

    if (vpf->backing.want_vfs) {
        error_setg(errp, "virtual SR-IOV PF '%s': pool '%s' had not given "
                   "the %u VF(s) the guest enabled when the migration "
                   "completed", DEVICE(vpf->pf)->id,
                   object_get_canonical_path_component(OBJECT(vpf->pool)),
                   vpf->backing.want_vfs);
        return false;
    }

    for (uint16_t i = 0; i < vpf->num_vfs; i++) {
        if (vsriov_vf_config_check(vpf, &vpf->cfg.vf[i])) {
            error_setg(errp, "virtual SR-IOV PF '%s': the incoming "
                       "configuration of VF %u is not one it can have here",
                       DEVICE(vpf->pf)->id, i);
            return false;
        }
    }
    /* (the PF, loaded before, enabled them: no reset, no event) */
    vpf->enabled_vfs = vsriov_pf_enabled_vfs(vpf);
    /*
     * The VFs' own state may come later in the stream (a lazy pool's VFs,
     * made at VF Enable, are registered after this section): what needs
     * it waits until the VM runs (vpf_vm_state()).
     */
    vpf->mig.incoming_loaded = true;
    return true;
}

static void vpf_vm_state(void *opaque, bool running, RunState state)
{
    VsriovPF *vpf = opaque;

    if (running && vpf->mig.incoming_loaded) {
        vpf->mig.incoming_loaded = false;
        vsriov_vf_config_post_load(vpf);
    }
}

static const VMStateDescription vmstate_vsriov_pf = {
    .name = "vsriov-pf",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save_errp = vpf_pre_save,
    .post_load_errp = vpf_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16_EQUAL(num_vfs, VsriovPF,
                             "the destination's PF must have as many VFs "
                             "(TotalVFs) as the source's"),
        VMSTATE_STRUCT_VARRAY_POINTER_UINT16(cfg.vf, VsriovPF, num_vfs,
                                             vmstate_vsriov_vf_config,
                                             VsriovVFConfig),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_vsriov_pf_handover,
        NULL
    }
};

void vsriov_pf_migration_init(VsriovPF *vpf)
{
    PCIDevice *pf = vpf->pf;
    g_autofree char *se_id = NULL;

    vmstate_register(VMSTATE_IF(pf), 0, &vmstate_vsriov_pf_shape, vpf);
    vmstate_register(VMSTATE_IF(pf), 0, &vmstate_vsriov_pf, vpf);
    se_id = vmstate_if_get_id(VMSTATE_IF(pf));
    vpf->mig.claims_id = g_strdup_printf("%s/vsriov-pf-claims", se_id);
    register_savevm_live(vpf->mig.claims_id, 0, 1, &vpf_claims_handlers, vpf);
    vpf->mig.incoming_loaded = false;
    vpf->mig.vm_state = qemu_add_vm_change_state_handler(vpf_vm_state, vpf);
}

void vsriov_pf_migration_exit(VsriovPF *vpf)
{
    PCIDevice *pf = vpf->pf;

    qemu_del_vm_change_state_handler(vpf->mig.vm_state);
    vpf->mig.vm_state = NULL;
    vmstate_unregister(VMSTATE_IF(pf), &vmstate_vsriov_pf, vpf);
    unregister_savevm(NULL, vpf->mig.claims_id, vpf);
    g_clear_pointer(&vpf->mig.claims_id, g_free);
    error_free(vpf->mig.incoming_err);
    vpf->mig.incoming_err = NULL;
    vmstate_unregister(VMSTATE_IF(pf), &vmstate_vsriov_pf_shape, vpf);
}
