/*
 * vsriov: can a VF's vhost-vdpa backend reach guest memory?
 *
 * vhost-vdpa maps guest RAM for the device in one of two ways, chosen by
 * the device's parent driver:
 *
 * - VA mode (vdpa_sim with use_va=1, its default; VDUSE): the kernel keeps
 *   the process's virtual addresses and silently skips memory that is not
 *   a shared file mapping.  With private guest RAM the VF negotiates, and
 *   then never moves a packet.
 * - PA mode (hardware parents: mlx5_vdpa, ifcvf, vp_vdpa, ...; vdpa_sim
 *   with use_va=0): the kernel pins all guest RAM, once per device, and
 *   counts it against the process's memlock limit; above the limit the
 *   mapping fails and the VF is as dead.
 *
 * vsriov_check_backend_memory() turns both into an error when the VF is
 * created, naming the fix.  The mode is not reported by the kernel; it is
 * told from where the device sits in sysfs: VDUSE devices, and devices with
 * no parent device (vdpa_sim's; then its use_va parameter says), use VA;
 * devices of a hardware parent, PA.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/units.h"
#include "qom/object.h"
#include "exec/cpu-common.h"
#include "system/hostmem.h"
#include "system/ramblock.h"
#include "hw/boards.h"
#include "hw/virtio/vhost.h"
#include "hw/virtio/vhost-vdpa.h"
#include "net/vhost_net.h"
#include "vsriov.h"

#include <sys/resource.h>
#include <sys/sysmacros.h>

/* The vhost-vdpa device behind a netdev, or -1. */
static int vdpa_fd(NetClientState *nc)
{
    VHostNetState *net;
    struct vhost_vdpa *v;

    if (!nc || nc->info->type != NET_CLIENT_DRIVER_VHOST_VDPA) {
        return -1;
    }
    net = get_vhost_net(nc);
    v = net ? net->dev.opaque : NULL;
    return v && v->shared ? v->shared->device_fd : -1;
}

/* Does the vDPA device behind @fd map user virtual addresses? */
static bool vdpa_uses_va(int fd, char **parent)
{
    g_autofree char *link = NULL;
    g_autofree char *path = NULL;
    g_autofree char *use_va = NULL;
    const char *slash;
    struct stat st;

    if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
        return false;
    }
    link = g_strdup_printf("/sys/dev/char/%u:%u", major(st.st_rdev),
                           minor(st.st_rdev));
    path = realpath(link, NULL);
    if (!path) {
        return false;
    }
    /* the vDPA device: the char device's parent */
    *parent = g_path_get_dirname(path);
    if (strstr(path, "/vduse/")) {
        return true;
    }
    /*
     * A vDPA device with no parent device, /sys/devices/NAME/vhost-vdpa-N,
     * is a software simulator: vdpa_sim, VA mode unless use_va=0.
     */
    slash = g_str_has_prefix(path, "/sys/devices/")
            ? strchr(path + strlen("/sys/devices/"), '/') : NULL;
    if (slash && !strchr(slash + 1, '/')) {
        return !g_file_get_contents("/sys/module/vdpa_sim/parameters/use_va",
                                    &use_va, NULL, NULL) || use_va[0] == 'Y';
    }
    return false;
}

/* Is @mr's RAM a shared file mapping (what VA mode reaches)? */
static bool ram_shared(MemoryRegion *mr)
{
    RAMBlock *rb = mr->ram_block;

    return qemu_ram_is_shared(rb) && qemu_ram_get_fd(rb) >= 0;
}

static int backend_private(Object *obj, void *opaque)
{
    HostMemoryBackend *b;
    char **which = opaque;

    if (!object_dynamic_cast(obj, TYPE_MEMORY_BACKEND)) {
        return 0;
    }
    b = MEMORY_BACKEND(obj);
    if (!host_memory_backend_is_mapped(b) ||
        ram_shared(host_memory_backend_get_memory(b))) {
        return 0;
    }
    *which = g_strdup(object_get_canonical_path_component(obj));
    return 1;
}

/*
 * Is all guest RAM made of shared file mappings?  Guest RAM is the
 * machine's RAM (pc.ram, or the backend of -machine memory-backend) and
 * every memory backend mapped into the guest: NUMA nodes' memdevs, which
 * the machine's RAM is then a container of, and plugged DIMMs.  (ROMs
 * and device memory are no DMA targets.)
 */
static bool guest_ram_shared(char **which)
{
    MemoryRegion *ram = current_machine->ram;

    if (ram && ram->ram_block && !ram_shared(ram)) {
        *which = g_strdup(memory_region_name(ram));
        return false;
    }
    return !object_child_foreach_recursive(object_get_objects_root(),
                                           backend_private, which);
}

/* How many PA-mode vhost-vdpa devices pin guest RAM in this QEMU. */
static int count_pa_devices(void)
{
    NetClientState *ncs[MAX_QUEUE_NUM];
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    int n = MIN(qemu_find_net_clients_except(NULL, ncs, NET_CLIENT_DRIVER_NIC,
                                             MAX_QUEUE_NUM), MAX_QUEUE_NUM);
    int pa = 0;

    for (int i = 0; i < n; i++) {
        g_autofree char *parent = NULL;
        int fd = vdpa_fd(ncs[i]);

        if (fd < 0 || g_hash_table_contains(seen, GINT_TO_POINTER(fd))) {
            continue;
        }
        g_hash_table_add(seen, GINT_TO_POINTER(fd));
        pa += !vdpa_uses_va(fd, &parent);
    }
    return pa;
}

bool vsriov_check_backend_memory(NetClientState *nc, Error **errp)
{
    ERRP_GUARD();
    g_autofree char *parent = NULL;
    g_autofree char *which = NULL;
    uint64_t ram = current_machine->ram_size;
    struct rlimit rl;
    int fd = vdpa_fd(nc);
    int pa;

    if (fd < 0) {
        return true;
    }
    if (vdpa_uses_va(fd, &parent)) {
        if (!guest_ram_shared(&which)) {
            error_setg(errp, "netdev '%s': the vDPA device (%s) maps guest "
                       "memory by virtual address and ignores private "
                       "memory, but guest RAM '%s' is private",
                       nc->name, parent, which);
            error_append_hint(errp, "Give the guest shared file-backed RAM, "
                              "e.g. -object memory-backend-memfd,id=mem,"
                              "size=%" PRIu64 "M,share=on "
                              "-machine memory-backend=mem\n", ram / MiB);
            return false;
        }
        return true;
    }
    if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY) {
        return true;
    }
    pa = count_pa_devices();
    if ((uint64_t)rl.rlim_cur < ram * pa) {
        error_setg(errp, "netdev '%s': %d vDPA device(s) pin guest RAM "
                   "(%" PRIu64 " MiB each, %" PRIu64 " MiB in all) but the "
                   "memlock limit is %" PRIu64 " MiB",
                   nc->name, pa, ram / MiB, ram * pa / MiB,
                   (uint64_t)rl.rlim_cur / MiB);
        error_append_hint(errp, "Raise it (ulimit -l, systemd LimitMEMLOCK=, "
                          "libvirt <memoryBacking><locked/>).\n");
        return false;
    }
    return true;
}
