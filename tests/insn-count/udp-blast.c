// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * udp-blast: send UDP datagrams as fast as the socket takes them, with no
 * time-driven work of its own (no clock reads, timers, deadlines or
 * runtime threads: one thread in a loop of sendmmsg), for the bench's
 * instruction counts per packet (scripts/bench_pods.py, udp-tx).
 *
 *   udp-blast IPV4 PORT SIZE COUNT [BATCH]
 *   udp-blast -l PORT
 *
 * COUNT datagrams of SIZE bytes (0: until killed), BATCH per sendmmsg
 * (default 32); a full socket buffer blocks the call.  Prints "sent N" at
 * the end.  With -l, receives on PORT (any IPv4 address) until killed, the
 * same way (a blocking recvmmsg of up to 32, no timeout): the receiving
 * end of udp-rx.  Built static by tests/insn-count/build, so the busybox
 * guests run it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_BATCH 256

static int sink(const char *port)
{
    static char bufs[32][2048];
    struct mmsghdr msgs[32];
    struct iovec iovs[32];
    struct sockaddr_in at = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    at.sin_port = htons((unsigned short)atoi(port));
    if (fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof(at)) < 0) {
        perror("udp-blast -l");
        return 1;
    }
    memset(msgs, 0, sizeof(msgs));
    for (int i = 0; i < 32; i++) {
        iovs[i].iov_base = bufs[i];
        iovs[i].iov_len = sizeof(bufs[i]);
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (;;) {
        if (recvmmsg(fd, msgs, 32, MSG_WAITFORONE, NULL) < 0 && errno != EINTR) {
            perror("udp-blast -l: recvmmsg");
            return 1;
        }
    }
}

int main(int argc, char **argv)
{
    static char buf[65507];
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov;
    struct sockaddr_in to = { .sin_family = AF_INET };
    unsigned long long count, sent = 0;
    int fd, size, batch = 32;

    if (argc == 3 && !strcmp(argv[1], "-l")) {
        return sink(argv[2]);
    }
    if (argc < 5 || argc > 6 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
        fprintf(stderr, "usage: udp-blast IPV4 PORT SIZE COUNT [BATCH] | -l PORT\n");
        return 2;
    }
    to.sin_port = htons((unsigned short)atoi(argv[2]));
    size = atoi(argv[3]);
    count = strtoull(argv[4], NULL, 10);
    if (argc == 6) {
        batch = atoi(argv[5]);
    }
    if (size < 0 || size > (int)sizeof(buf) || batch < 1 || batch > MAX_BATCH) {
        fprintf(stderr, "udp-blast: SIZE 0-%zu, BATCH 1-%d\n", sizeof(buf), MAX_BATCH);
        return 2;
    }
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
        perror("udp-blast");
        return 1;
    }
    iov.iov_base = buf;
    iov.iov_len = (size_t)size;
    memset(msgs, 0, sizeof(msgs));
    for (int i = 0; i < batch; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    while (!count || sent < count) {
        unsigned int n = batch;

        if (count && count - sent < n) {
            n = (unsigned int)(count - sent);
        }
        int r = sendmmsg(fd, msgs, n, 0);

        if (r < 0) {
            /* ECONNREFUSED: an ICMP error from the peer's port, before its
             * sink listens or after it ended; ENOBUFS: the queue is full. */
            if (errno == EINTR || errno == ECONNREFUSED || errno == ENOBUFS) {
                continue;
            }
            perror("udp-blast: sendmmsg");
            return 1;
        }
        sent += (unsigned int)r;
    }
    printf("sent %llu\n", sent);
    return 0;
}
