// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * conn: a unix stream socket to OVS with bounded sends and reads, and the
 * OVS side's errors (see conn.h).
 */
#include "conn.h"
#include "ovs.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------- */

bool vpd_ovs_fail(GError **error, int code, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, G_IO_ERROR, code, msg);
	return false;
}

bool vpd_ovs_error_is_transient(const GError *err)
{
	/* (a database ovs-vsctl init has not filled yet: OVS is starting) */
	return g_error_matches(err, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED) ||
	       g_error_matches(err, G_IO_ERROR, G_IO_ERROR_NOT_INITIALIZED) ||
	       g_error_matches(err, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) ||
	       g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
}

/* ---- the socket --------------------------------------------------------- */

void vpd_conn_init(struct vpd_conn *c, const char *what, char *path)
{
	c->fd = -1;
	c->in = g_byte_array_new();
	c->path = path;
	c->what = what;
}

void vpd_conn_clear(struct vpd_conn *c)
{
	vpd_conn_close(c);
	g_clear_pointer(&c->in, g_byte_array_unref);
	g_clear_pointer(&c->path, g_free);
}

void vpd_conn_close(struct vpd_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->in)
		g_byte_array_set_size(c->in, 0);
}

bool vpd_conn_open(struct vpd_conn *c, GError **error)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = VPD_OVS_TIMEOUT_MS / 1000 };

	vpd_conn_close(c);
	if (strlen(c->path) >= sizeof(sa.sun_path))
		return vpd_ovs_fail(error, G_IO_ERROR_FILENAME_TOO_LONG,
				    "%s: socket path %s too long", c->what, c->path);
	strcpy(sa.sun_path, c->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* A peer that stops reading blocks a send at most this long. */
	if (c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		vpd_conn_close(c);
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_CONNECTED,
				    "%s: cannot connect to %s: %s", c->what, c->path, g_strerror(e));
	}
	return true;
}

bool vpd_conn_send(struct vpd_conn *c, const void *data, gsize len, GError **error)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = errno;

			vpd_conn_close(c);
			return vpd_ovs_fail(error, G_IO_ERROR_CONNECTION_CLOSED, "%s: send: %s",
					    c->what, g_strerror(e));
		}
		p += n;
		len -= n;
	}
	return true;
}

int vpd_conn_read_ready(struct vpd_conn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	uint8_t buf[4096];
	ssize_t n;

	if (c->fd < 0 || poll(&pfd, 1, 0) != 1)
		return 0;
	n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		vpd_conn_close(c);
		return -1;
	}
	g_byte_array_append(c->in, buf, n);
	return 1;
}

bool vpd_conn_recv(struct vpd_conn *c, gint64 deadline, GError **error)
{
	uint8_t buf[16384];
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	gint64 left = (deadline - g_get_monotonic_time()) / 1000;
	ssize_t n;
	int r;

	if (left <= 0 || (r = poll(&pfd, 1, left)) == 0) {
		vpd_conn_close(c);
		return vpd_ovs_fail(error, G_IO_ERROR_TIMED_OUT, "%s: no answer within %d s",
				    c->what, VPD_OVS_TIMEOUT_MS / 1000);
	}
	n = r < 0 ? -1 : recv(c->fd, buf, sizeof(buf), 0);
	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0) {
		int e = n ? errno : 0;

		vpd_conn_close(c);
		return vpd_ovs_fail(error, G_IO_ERROR_CONNECTION_CLOSED, "%s: connection closed%s%s",
				    c->what, e ? ": " : "", e ? g_strerror(e) : "");
	}
	g_byte_array_append(c->in, buf, n);
	return true;
}
