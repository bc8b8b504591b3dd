// SPDX-License-Identifier: GPL-2.0
/*
 * ECN marker for an emulated switch port (tc clsact egress, direct action).
 *
 * The kernel here has no RED/fq_codel qdisc, so the port's queue is mirrored
 * by a virtual queue: it drains at the port's shaped rate (the htb/tbf behind
 * this hook drains the real one at the same rate) and grows by every packet
 * that the real queue would accept. A packet arriving while the virtual
 * backlog is above K (bytes) gets CE if it is ECN-capable (ECT(0)/ECT(1)),
 * as a DCTCP-style switch marks on instantaneous queue depth. Packets that
 * would overflow the switch buffer are left to the qdisc to drop and are not
 * added to the backlog; of a GSO packet (TCP or UDP GSO, segmented by the
 * qdisc, or forwarded whole to the next hop) the segments that still fit
 * are. A GSO packet counts as its segments, and is marked whole with the
 * probability that its segments would be one by one (below).
 *
 * Build-time parameters (clang -D): DB_RATE_BPS (bits/s), DB_K_BYTES,
 * DB_BUFFER_BYTES. One object is loaded per port, so each port has its own
 * queue state (the map is not pinned).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef DB_RATE_BPS
#define DB_RATE_BPS 200000000ULL
#endif
#ifndef DB_K_BYTES
#define DB_K_BYTES 30000ULL
#endif
#ifndef DB_BUFFER_BYTES
#define DB_BUFFER_BYTES 100000ULL
#endif

#define DB_NSEC_PER_SEC 1000000000ULL
#define DB_MAX_IDLE_NS  DB_NSEC_PER_SEC /* caps the drain product (no overflow) */
#define DB_ECN_MASK     0x3
#define DB_ECN_CE       0x3

/* Queue state and counters of one port; readable with `bpftool map dump`. */
struct db_port {
    struct bpf_spin_lock lock;
    __u64                last_ns;     /* time of the last update of backlog */
    __u64                backlog;     /* virtual queue depth, bytes */
    __u64                max_backlog; /* largest depth seen, bytes */
    __u64                packets;     /* packets seen (IPv4; a GSO packet counts its segments) */
    __u64                ect;         /* of them ECN-capable */
    __u64                marked;      /* of them set to CE here */
    __u64                overflow;    /* packets beyond the buffer (the qdisc drops them) */
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct db_port);
} db_port_map SEC(".maps");

static __always_inline int db_set_ce(struct __sk_buff *skb, __u16 old_word)
{
    /* The first 16-bit word of the IP header is version/IHL then TOS. */
    __u16 new_word = old_word | bpf_htons(DB_ECN_CE);
    __u32 csum_off = ETH_HLEN + __builtin_offsetof(struct iphdr, check);

    if (bpf_l3_csum_replace(skb, csum_off, old_word, new_word, sizeof(__u16)) < 0)
        return -1;
    return bpf_skb_store_bytes(skb, ETH_HLEN, &new_word, sizeof(new_word), 0);
}

SEC("tc")
int db_ecn_mark(struct __sk_buff *skb)
{
    void           *data     = (void *)(long)skb->data;
    void           *data_end = (void *)(long)skb->data_end;
    struct ethhdr  *eth      = data;
    struct iphdr   *ip       = data + sizeof(*eth);
    struct db_port *port;
    __u32           key = 0;
    __u64           now, idle, drained, queued, len = skb->len;
    __u64           segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
    int             mark = 0, accepted = 0, ecn_capable;
    __u32           prandom;
    __u16           first_word;

    if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
        return TC_ACT_OK;

    port = bpf_map_lookup_elem(&db_port_map, &key);
    if (!port)
        return TC_ACT_OK;

    first_word  = *(__u16 *)ip;
    ecn_capable = (ip->tos & DB_ECN_MASK) != 0;
    now         = bpf_ktime_get_ns();
    prandom     = bpf_get_prandom_u32(); /* outside the lock: no calls under it */

    bpf_spin_lock(&port->lock);
    idle = now - port->last_ns;
    if (idle > DB_MAX_IDLE_NS)
        idle = DB_MAX_IDLE_NS;
    drained       = idle * (DB_RATE_BPS / 8) / DB_NSEC_PER_SEC;
    port->backlog = port->backlog > drained ? port->backlog - drained : 0;
    port->last_ns = now;
    port->packets += segs;
    queued = port->backlog;
    if (queued + len <= DB_BUFFER_BYTES) {
        accepted      = 1;
        port->backlog = queued + len;
    } else {
        port->overflow += 1;
        if (segs > 1 && queued < DB_BUFFER_BYTES) {
            accepted      = 1; /* the head segments fit */
            port->backlog = DB_BUFFER_BYTES;
        }
    }
    if (accepted && ecn_capable && (ip->tos & DB_ECN_MASK) != DB_ECN_CE) {
        if (segs <= 1 || queued > DB_K_BYTES) {
            mark = queued > DB_K_BYTES;
        } else {
            /* A switch sees a GSO packet's segments one by one: those that
             * arrive behind more than K bytes are marked, the first ones
             * perhaps not. One CE bit covers them all here, so the whole
             * packet is marked with the probability that a segment is:
             * the marks a sender reads stay, on average, the segments'. */
            __u64 seg    = len / segs;
            __u64 clear  = seg ? (DB_K_BYTES - queued) / seg + 1 : segs;
            __u64 marked = clear < segs ? segs - clear : 0;
            mark         = marked != 0 && prandom % segs < marked;
        }
        if (mark)
            port->marked += segs;
    }
    if (port->backlog > port->max_backlog)
        port->max_backlog = port->backlog;
    port->ect += ecn_capable ? segs : 0;
    bpf_spin_unlock(&port->lock);

    if (mark)
        db_set_ce(skb, first_word);
    return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
