/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * protocol: the wire format of the daemon's API socket
 * (docs/daemon-protocol.md), the one definition both ends use.
 *
 * A message is a 16-byte header and a payload of attributes (TLVs):
 *
 *   u32 magic "VPD1" | u16 version | u16 type | u32 seq | u32 payload length
 *   attribute: u16 type | u16 length (of the value) | value | pad to 4 bytes
 *
 * all little endian.  Nested attributes (a VF in a reply) carry attributes
 * as their value.  The parser checks every length before it reads and
 * rejects what it does not know.
 */
#ifndef VPD_PROTOCOL_H
#define VPD_PROTOCOL_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define VPD_MAGIC 0x31445056u   /* "VPD1" */
#define VPD_VERSION 1
#define VPD_HEADER_SIZE 16
#define VPD_MAX_PAYLOAD (256 * 1024)
#define VPD_MAX_DEPTH 2
#define VPD_HANDOVER_SIZE 16
#define VPD_MAX_U64S 64         /* u64s in one attribute, at most */

#define VPD_PROTOCOL_ERROR (vpd_protocol_error_quark())
GQuark vpd_protocol_error_quark(void);

enum vpd_msg_type {
	VPD_MSG_CLAIM = 1,      /* pool, owner, count -> VFs (+ fds) */
	VPD_MSG_RELEASE = 2,    /* handle */
	VPD_MSG_SET_ATTRS = 3,  /* handle, attributes */
	VPD_MSG_QUERY = 4,      /* -> VFs */
	VPD_MSG_STATUS = 5,     /* -> every pooled VF, with POOL, OWNER and
				 * COUNT (0 free, 1 claimed, 2 claimed by a
				 * process not connected); root only */
	VPD_MSG_REP_OPEN = 6,   /* handle -> PORT + the representor's tap fd
				 * (pools with switchdev = yes) */
	VPD_MSG_REP_CLOSE = 7,  /* handle: its representor port goes */
	VPD_MSG_FLOW_ADD = 8,   /* FLOW_ID, PRIORITY, HANDLE (the source VF),
				 * M_* matches, OUT/VLAN_* actions: a guest's
				 * rule in the connection's own table */
	VPD_MSG_FLOW_DEL = 9,   /* FLOW_ID */
	VPD_MSG_FLOW_STATS = 10, /* FLOW_ID -> PACKETS, BYTES */
	VPD_MSG_METRICS = 11,   /* -> every pooled VF (with PORT_STATS), each
				 * pool's POOL_STATS, the CONNS by uid,
				 * START_TIME; root only */
	VPD_MSG_VF_STATS = 12,  /* HANDLE (a VF the connection claimed) ->
				 * PORT_STATS of its switch port, absent
				 * when OVS could not say */
	VPD_MSG_REPLY = 64,     /* success; may carry VFs */
	VPD_MSG_ERROR = 65,     /* errno, message */
};

/*
 * PORT_STATS (METRICS, VF_STATS): u64s have (bit N: value N is there),
 * then VPD_PS_N values, the switch port's counters as the switch sees
 * them (rx: what the VF sent).
 */
enum vpd_port_stat {
	VPD_PS_RX_PACKETS, VPD_PS_RX_BYTES, VPD_PS_RX_DROPPED,
	VPD_PS_TX_PACKETS, VPD_PS_TX_BYTES, VPD_PS_TX_DROPPED,
	VPD_PS_POLICER_DROPPED,         /* the port's ingress policer (police.h) */
	VPD_PS_N,
};

enum vpd_attr {
	VPD_A_POOL = 1,         /* string */
	VPD_A_OWNER = 2,        /* string */
	VPD_A_COUNT = 3,        /* u32 */
	VPD_A_HANDLE = 4,       /* u32: a claimed VF, as the daemon numbers them */
	VPD_A_VF = 5,           /* nested: one VF */
	VPD_A_VF_INDEX = 6,     /* u32: VF index on its PF */
	VPD_A_MAC = 7,          /* 6 bytes */
	VPD_A_VLAN = 8,         /* u16 */
	VPD_A_QOS = 9,          /* u8 */
	VPD_A_VLAN_PROTO = 10,  /* u16 */
	VPD_A_SPOOFCHK = 11,    /* u8 0/1 */
	VPD_A_TRUST = 12,       /* u8 0/1 */
	VPD_A_LINK_STATE = 13,  /* u8: 0 auto, 1 enable, 2 disable */
	VPD_A_MIN_TX_RATE = 14, /* u32 Mbit/s */
	VPD_A_MAX_TX_RATE = 15, /* u32 Mbit/s */
	VPD_A_VHOST_PATH = 16,  /* string: /dev/vhost-vdpa-N */
	VPD_A_ERRNO = 17,       /* u32 */
	VPD_A_MESSAGE = 18,     /* string */
	VPD_A_PORT = 19,        /* string: in STATUS, the VF's own OVS port; in
				 * a REP_OPEN reply, QUERY and SET_ATTRS, its
				 * representor port (when it has one) */
	VPD_A_FLOW = 20,        /* string, repeated: an OVS flow of the VF and
				 * its counters (STATUS) */
	VPD_A_HANDOVER = 21,    /* 16 bytes: in a CLAIM (any value), asks for
				 * the connection's hand-over token, which the
				 * REPLY carries; in a SET_ATTRS, another
				 * connection's token */
	VPD_A_REP_PORT = 22,    /* string: the VF's representor port (STATUS) */
	/* A guest's rule (FLOW_*): matches carry value then mask */
	VPD_A_FLOW_ID = 23,     /* u32: the client's number, unique per connection */
	VPD_A_PRIORITY = 24,    /* u16: higher matched first */
	VPD_A_M_ETH_DST = 25,   /* 12 bytes: address, mask */
	VPD_A_M_ETH_SRC = 26,   /* 12 bytes: address, mask */
	VPD_A_M_ETH_TYPE = 27,  /* u16, exact: the EtherType after any VLAN tag */
	VPD_A_M_VLAN_VID = 28,  /* u16, exact, 1..4094: the frame's 802.1Q VID */
	VPD_A_M_IP_PROTO = 29,  /* u8, exact */
	VPD_A_M_IPV4_SRC = 30,  /* 8 bytes: address, mask (network order) */
	VPD_A_M_IPV4_DST = 31,  /* 8 bytes */
	VPD_A_M_IPV6_SRC = 32,  /* 32 bytes: address, mask */
	VPD_A_M_IPV6_DST = 33,  /* 32 bytes */
	VPD_A_M_L4_SRC = 34,    /* 4 bytes: be16 port, be16 mask (TCP or UDP) */
	VPD_A_M_L4_DST = 35,    /* 4 bytes */
	VPD_A_OUT = 36,         /* u32: the handle to forward to; absent: drop */
	VPD_A_VLAN_POP = 37,    /* u8 1: pop the outer 802.1Q tag first */
	VPD_A_VLAN_PUSH = 38,   /* u16: push an 802.1Q tag, VID 1..4094 */
	VPD_A_PACKETS = 39,     /* u64 */
	VPD_A_BYTES = 40,       /* u64 */
	/* METRICS (docs/daemon-protocol.md, "Metrics") */
	VPD_A_UID = 41,         /* u32 */
	VPD_A_PORT_STATS = 42,  /* u64s: the VF's port's counters, as OVS has them
				 * (enum vpd_port_stat) */
	VPD_A_POOL_STATS = 43,  /* nested: POOL, CLAIMS ... RELEASE_HIST */
	VPD_A_CLAIMS = 44,      /* u64: CLAIMs granted */
	VPD_A_CLAIMS_REFUSED = 45, /* u64: CLAIMs refused */
	VPD_A_RELEASES = 46,    /* u64: VFs released by a RELEASE */
	VPD_A_RELEASES_GONE = 47, /* u64: VFs released as their client went */
	VPD_A_CLAIM_HIST = 48,  /* u64s: a histogram (vpd_hist_put()) */
	VPD_A_RELEASE_HIST = 49, /* u64s */
	VPD_A_CONNS = 50,       /* nested: UID, COUNT (its connections) */
	VPD_A_START_TIME = 51,  /* u64: the daemon's start, Unix time, s */
	VPD_A_MAX = 51,
};

/* A parsed attribute; value points into the message buffer. */
struct vpd_attr_view {
	uint16_t type;
	uint16_t len;
	const uint8_t *value;
};

struct vpd_msg {
	uint16_t type;
	uint32_t seq;
	GArray *attrs;          /* struct vpd_attr_view, top level only */
	GBytes *buf;            /* keeps the values alive */
};

/* Building: append attributes, then finish into bytes to send. */
struct vpd_builder {
	GByteArray *buf;
	GArray *nest;           /* offsets of open nested attributes */
};

void vpd_builder_init(struct vpd_builder *b, uint16_t type, uint32_t seq);
void vpd_put_u8(struct vpd_builder *b, uint16_t type, uint8_t v);
void vpd_put_u16(struct vpd_builder *b, uint16_t type, uint16_t v);
void vpd_put_u32(struct vpd_builder *b, uint16_t type, uint32_t v);
void vpd_put_u64(struct vpd_builder *b, uint16_t type, uint64_t v);
void vpd_put_bytes(struct vpd_builder *b, uint16_t type, const void *v, uint16_t len);
void vpd_put_str(struct vpd_builder *b, uint16_t type, const char *s);
void vpd_nest_start(struct vpd_builder *b, uint16_t type);
void vpd_nest_end(struct vpd_builder *b);
GBytes *vpd_builder_finish(struct vpd_builder *b);

/*
 * Length of the message whose header starts data (len >= VPD_HEADER_SIZE),
 * or -1 with error for a header that cannot start a valid message.
 */
gssize vpd_msg_total_len(const uint8_t *data, gsize len, GError **error);

/* Parse one whole message; NULL with error if anything is off. */
struct vpd_msg *vpd_msg_parse(GBytes *bytes, GError **error);
void vpd_msg_free(struct vpd_msg *msg);

const struct vpd_attr_view *vpd_msg_get(const struct vpd_msg *msg, uint16_t type);
bool vpd_attr_u32(const struct vpd_attr_view *a, uint32_t *out);
bool vpd_attr_u64(const struct vpd_attr_view *a, uint64_t *out);
bool vpd_attr_u16(const struct vpd_attr_view *a, uint16_t *out);
bool vpd_attr_u8(const struct vpd_attr_view *a, uint8_t *out);
/* Element i of a u64s attribute (PORT_STATS, *_HIST); false past its end. */
bool vpd_attr_u64_at(const struct vpd_attr_view *a, unsigned i, uint64_t *out);
/* How many u64s a u64s attribute holds (0: none, or not one). */
unsigned vpd_attr_u64_count(const struct vpd_attr_view *a);
/* Append a u64s attribute of n values (n <= VPD_MAX_U64S). */
void vpd_put_u64s(struct vpd_builder *b, uint16_t type, const uint64_t *v, unsigned n);
const char *vpd_attr_str(const struct vpd_attr_view *a);  /* NULL if invalid */

/* The attributes nested in a VPD_A_VF (already validated by the parser). */
GArray *vpd_attr_nested(const struct vpd_attr_view *a);
/* The first attribute of @type in such a list, or NULL. */
const struct vpd_attr_view *vpd_nested_get(GArray *a, uint16_t type);
/* Its value as a u32 or a u64; 0 when it is missing or of another size. */
uint32_t vpd_nested_u32(GArray *a, uint16_t type);
uint64_t vpd_nested_u64(GArray *a, uint16_t type);

typedef struct vpd_msg vpd_msg;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vpd_msg, vpd_msg_free)

#endif
