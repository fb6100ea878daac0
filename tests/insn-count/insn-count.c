// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insn-count: a TCG plugin that counts the guest instructions each vCPU
 * executes, split into user and kernel mode, and tells a reader the running
 * totals on a Unix socket.
 *
 *   qemu-system-x86_64 ... -plugin /path/libinsn-count.so,sock=PATH[,per=insn|tb]
 *
 * Each connection to PATH gets one line, "user U kernel K vcpus N" (sums
 * over the vCPUs), and is closed; a reader marks a window by reading twice
 * and subtracting.  The counters are never reset, so any number of readers
 * and overlapping windows are fine.
 *
 * Mode: by the instruction's virtual address, bit 63 set is kernel.  On
 * x86-64 Linux the kernel's text is in the upper half and user code in the
 * lower (SMEP keeps the kernel from running user pages; the legacy
 * vsyscall page is emulated, never executed); the address is known at
 * translation time, so the choice costs nothing when the code runs.  The
 * alternative, CS.RPL through qemu_plugin_read_register(), needs a callback
 * per block that reads registers: a helper call out of the generated code
 * for each block, which is what this plugin must not cost.  (Real-mode and
 * firmware code before the kernel runs counts as "user".)
 *
 * Fast path: a scoreboard of two 64-bit counters per vCPU and an inline add
 * emitted into the generated code: per=insn (the default) adds 1 before each
 * instruction (exact: an instruction that faults still counts, the ones
 * after it in its block do not); per=tb adds the block's length at its
 * start (cheaper; a block left early by a fault counts whole).  A block
 * never crosses a page, so all its instructions have the same mode.
 *
 * The socket is served by a thread of the plugin's own, which only reads
 * the counters (aligned 64-bit loads; a vCPU's add is seen whole or not).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct counts {
    uint64_t user;
    uint64_t kernel;
};

static struct qemu_plugin_scoreboard *score;
static qemu_plugin_u64 user_insns, kernel_insns;
static bool per_tb;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int listen_fd = -1;

static qemu_plugin_u64 entry_for(uint64_t vaddr)
{
    return (vaddr >> 63) ? kernel_insns : user_insns;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    (void)id;
    if (per_tb) {
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb, QEMU_PLUGIN_INLINE_ADD_U64, entry_for(qemu_plugin_tb_vaddr(tb)), n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
            insn, QEMU_PLUGIN_INLINE_ADD_U64, entry_for(qemu_plugin_insn_vaddr(insn)), 1);
    }
}

static int format_counts(char *buf, size_t len)
{
    return snprintf(buf, len, "user %" PRIu64 " kernel %" PRIu64 " vcpus %d\n",
                    qemu_plugin_u64_sum(user_insns), qemu_plugin_u64_sum(kernel_insns),
                    qemu_plugin_num_vcpus());
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        char line[128];
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            return NULL;
        }
        int n = format_counts(line, sizeof(line));
        /* One short line: a reader that went away loses it, nothing else. */
        (void)send(fd, line, (size_t)n, MSG_NOSIGNAL);
        close(fd);
    }
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    char line[128];

    (void)id;
    (void)p;
    format_counts(line, sizeof(line));
    qemu_plugin_outs(line);
    if (listen_fd >= 0) {
        unlink(sock_path);
    }
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    pthread_t thread;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "insn-count: socket path too long: %s\n", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    strcpy(sock_path, path);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0) {
        perror("insn-count: socket");
        return -1;
    }
    unlink(path);
    if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(listen_fd, 8) < 0) {
        fprintf(stderr, "insn-count: %s: %s\n", path, strerror(errno));
        close(listen_fd);
        listen_fd = -1;
        return -1;
    }
    if (pthread_create(&thread, NULL, serve, NULL) != 0) {
        fprintf(stderr, "insn-count: cannot start the socket's thread\n");
        return -1;
    }
    pthread_detach(thread);
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    const char *sock = NULL;

    (void)info;
    for (int i = 0; i < argc; i++) {
        char *val = strchr(argv[i], '=');

        if (val && !strncmp(argv[i], "sock=", 5)) {
            sock = val + 1;
        } else if (val && !strncmp(argv[i], "per=", 4) &&
                   (!strcmp(val + 1, "insn") || !strcmp(val + 1, "tb"))) {
            per_tb = !strcmp(val + 1, "tb");
        } else {
            fprintf(stderr, "insn-count: unknown option %s (sock=PATH, per=insn|tb)\n",
                    argv[i]);
            return -1;
        }
    }
    score = qemu_plugin_scoreboard_new(sizeof(struct counts));
    user_insns = qemu_plugin_scoreboard_u64_in_struct(score, struct counts, user);
    kernel_insns = qemu_plugin_scoreboard_u64_in_struct(score, struct counts, kernel);
    if (sock && listen_on(sock) < 0) {
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
