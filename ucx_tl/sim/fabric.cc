// The fabric model and its event loop; see sim.h for the model.
//
// Ports are numbered: host NIC h (to its leaf), leaf->host h, leaf l ->
// spine s, spine s -> leaf l. A packet's next port is computed when it
// finishes a hop. Packets live in a pool with a free list; events are PODs
// in a heap; flows (and their pacers) are created before the run, so the
// loop allocates only when a queue, a flow's in-flight ring or its receive
// bitmap grows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>

#include "event_queue.h"
#include "metrics.h"
#include "sim.h"
#include "workload.h"

namespace doorbell::sim {

namespace {

constexpr uint32_t kNone         = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kInfinite     = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kAckBytes     = 64;  ///< ACK size on the wire
constexpr double   kConvergeBand = 0.1; ///< a new flow converged: within 10 % of its share
constexpr uint64_t kConvergeRtts = 20;  ///< its rate averaged over 20 base RTTs (100 us)
constexpr uint32_t kTailParts    = 5;   ///< Jain after convergence: the last fifth of the run
constexpr double   kArrivalEnd   = 0.8; ///< mixed: arrivals stop at 80 % of the duration

struct Packet {
    uint32_t flow;
    uint32_t port;  ///< port it is queued at or crossing
    uint64_t seq;   ///< data segment number within the flow
    uint64_t tx_id; ///< transmission number within the flow
    uint64_t sent_ns;
    bool     ce;
    uint32_t next_free;
};

struct Port {
    std::deque<uint32_t>  queue;        ///< packet ids, head first
    uint64_t              bytes    = 0; ///< queued, excluding the one on the wire
    uint64_t              reserved = 0; ///< credit: bytes in flight toward this queue
    uint64_t              tx_bytes = 0; ///< bytes sent, cumulative (INT)
    bool                  busy     = false;
    bool                  stalled  = false; ///< credit: head waits for room downstream
    std::vector<uint32_t> waiters;          ///< credit: ports stalled on this queue
};

struct InFlight {
    uint64_t tx_id;
    uint64_t seq;
    uint64_t sent_ns;
    bool     acked;
};

struct Flow {
    uint32_t                       src, dst, spine;
    std::unique_ptr<pacing::Pacer> pacer;
    uint64_t                       next_seq  = 0;
    uint64_t                       limit_seq = kInfinite; ///< segments released for sending
    uint64_t                       size_segs = 0;         ///< mixed: the flow's size; 0 = endless
    uint64_t                       next_tx   = 0;
    std::deque<InFlight>           inflight; ///< in transmission order
    std::deque<uint64_t>           retx;     ///< segments to send again
    bool                           rto_pending = false;
    std::vector<uint8_t>           received;         ///< receiver: segment seen
    uint64_t                       delivered    = 0; ///< unique segments delivered
    uint64_t                       window_bytes = 0; ///< goodput in the statistics window
    uint64_t                       tail_bytes   = 0; ///< goodput in the last fifth
    uint64_t                       base_rtt_ns  = 0;
    uint64_t                       ideal_ns     = 0; ///< mixed: FCT alone on the fabric
    uint64_t                       start_ns     = 0;
    double                         srtt_ns      = 0;     ///< smoothed RTT (allowed rate)
    bool                           on           = true;  ///< on/off traffic
    bool                           active       = false; ///< in its host's list
};

struct Host {
    std::vector<uint32_t> flows;       ///< active flows, served in turn
    uint32_t              rr      = 0; ///< next flow to look at
    uint64_t              wake_at = 0; ///< pending HostWake time, 0 = none
};

struct Sim {
    SimConfig                      cfg;
    double                         C      = 0; ///< link rate, bytes/s
    uint64_t                       ser_ns = 0; ///< serialization of a segment
    uint32_t                       hosts  = 0;
    std::vector<Port>              ports;
    std::vector<Host>              host;
    std::vector<Flow>              flows;
    std::vector<uint32_t>          flow_of_host; ///< allreduce: host -> its sending flow
    std::vector<Packet>            pkts;
    std::vector<pacing::Telemetry> pkt_int; ///< INT records, by packet id (HPCC only)
    bool                           int_on   = false;
    uint32_t                       free_pkt = kNone;
    EventQueue                     ev{1 << 16};
    uint64_t                       now          = 0;
    uint64_t                       events       = 0;
    uint32_t                       monitor_port = 0;
    uint32_t                       receivers    = 0;
    uint64_t                       rto_ns       = 0;
    uint64_t                       tail_ns      = 0; ///< start of the last fifth
    uint32_t                       joiner       = kNone;
    Rng                            rng{1};

    // Statistics.
    Histogram           rtt_hist{10, 400000}; ///< 10 ns bins up to 4 ms
    Histogram           qdelay_hist{10, 400000};
    Welford             rtt_stat;
    uint64_t            drops = 0, sent = 0, retx = 0, ce = 0, stalls = 0;
    uint64_t            win_sent = 0, win_retx = 0, timeouts = 0;
    uint32_t            window_segs = 0;
    uint64_t            bin_bytes   = 0; ///< goodput in the current sample step
    std::vector<Sample> series;
    std::vector<double> slowdowns, sizes; ///< mixed: completed flows
    // Allreduce.
    uint64_t chunk_segs = 0, steps = 0;
    uint32_t ar_done      = 0;
    uint64_t ar_finish_ns = 0;

    uint32_t leaf_of(uint32_t h) const { return h / cfg.hosts_per_leaf; }
    uint32_t p_nic(uint32_t h) const { return h; }
    uint32_t p_down(uint32_t h) const { return hosts + h; }
    uint32_t p_up(uint32_t l, uint32_t s) const { return 2 * hosts + l * cfg.spines + s; }
    uint32_t p_spine(uint32_t s, uint32_t l) const
    {
        return 2 * hosts + cfg.leaves * cfg.spines + s * cfg.leaves + l;
    }
    bool stats_on() const { return now >= cfg.warmup_ns; }

    // The port after `port` for a packet of flow f; kNone = the destination host.
    uint32_t next_port(uint32_t port, const Flow &f) const
    {
        uint32_t dl = leaf_of(f.dst);
        if (port < hosts) // host NIC -> source leaf
            return leaf_of(f.src) == dl ? p_down(f.dst) : p_up(leaf_of(f.src), f.spine);
        if (port < 2 * hosts) // leaf -> host
            return kNone;
        if (port < 2 * hosts + cfg.leaves * cfg.spines) // leaf -> spine
            return p_spine(f.spine, dl);
        return p_down(f.dst); // spine -> leaf -> host port
    }
    uint32_t links(const Flow &f) const { return leaf_of(f.src) == leaf_of(f.dst) ? 2 : 4; }

    uint32_t alloc_pkt()
    {
        if (free_pkt == kNone) {
            pkts.push_back({});
            if (int_on)
                pkt_int.emplace_back();
            return uint32_t(pkts.size() - 1);
        }
        uint32_t id = free_pkt;
        free_pkt    = pkts[id].next_free;
        return id;
    }
    void free_packet(uint32_t id)
    {
        pkts[id].next_free = free_pkt;
        free_pkt           = id;
    }

    // The rate a flow's controller lets it send at: the pacer's, and for a
    // window-based one at most a window per smoothed RTT.
    double allowed_rate(const Flow &f) const
    {
        double r = f.pacer->rate();
        double w = f.pacer->window_bytes();
        if (w > 0 && f.srtt_ns > 0)
            r = std::min(r, w / (f.srtt_ns * 1e-9));
        return r;
    }

    uint32_t add_flow(uint32_t src, uint32_t dst);
    void     setup();
    void     setup_mixed();
    void     run();
    void     start_flow(uint32_t flow);
    void     stop_flow(uint32_t flow);
    bool     ecn_mark(uint64_t queued);
    void     start_tx(uint32_t port);
    void     port_done(uint32_t port);
    void     arrive(uint32_t port, uint32_t pkt);
    void     deliver(uint32_t pkt);
    void     ack(uint32_t pkt);
    void     host_send(uint32_t h);
    void     send_segment(uint32_t flow);
    void     lost(Flow &f, uint64_t seq);
    void     rto(uint32_t flow);
    void     sample();
    void     toggle(uint32_t flow);
    uint64_t exp_ns(double mean)
    {
        double u = (rng.next() >> 11) * 0x1.0p-53;
        return uint64_t(-std::log(1 - u) * mean) + 1;
    }
};

uint32_t Sim::add_flow(uint32_t src, uint32_t dst)
{
    Flow f;
    f.src         = src;
    f.dst         = dst;
    f.spine       = uint32_t(rng.next() % cfg.spines);
    uint32_t hops = links(f);
    f.base_rtt_ns = hops * (ser_ns + cfg.hop_delay_ns) +
                    hops * (cfg.hop_delay_ns + uint64_t(kAckBytes / C * 1e9));
    pacing::Config pc = cfg.cc;
    pc.line_rate_Bps  = C;
    pc.mtu_bytes      = cfg.mtu_bytes;
    // The unloaded RTT connection set-up measured (HPCC's T, Swift's base
    // target, IBRC's first rate).
    pc.base_rtt_ns = f.base_rtt_ns;
    pc.telemetry   = int_on;
    std::string err;
    f.pacer = pacing::make_pacer(pc, &err); // validated in run_sim
    flows.push_back(std::move(f));
    return uint32_t(flows.size() - 1);
}

void Sim::setup()
{
    C      = cfg.link_gbps * 1e9 / 8;
    ser_ns = uint64_t(std::llround(cfg.mtu_bytes / C * 1e9));
    hosts  = cfg.leaves * cfg.hosts_per_leaf;
    ports.resize(2 * hosts + 2 * cfg.leaves * cfg.spines);
    host.resize(hosts);
    flow_of_host.assign(hosts, kNone);
    int_on = cfg.cc.policy == pacing::Policy::kHpcc;
    // Lossless (credit) fabrics drop nothing but queue far deeper under
    // back-pressure: their timer is ms-scale, as on RoCE NICs.
    rto_ns          = cfg.rto_ns ? cfg.rto_ns : (cfg.credit ? 1000 : 20) * base_rtt_ns(cfg);
    uint64_t window = cfg.window_bytes ? cfg.window_bytes :
                                         uint64_t(2 * C * base_rtt_ns(cfg) * 1e-9);
    window_segs     = uint32_t(std::max<uint64_t>(1, window / cfg.mtu_bytes));
    tail_ns         = cfg.duration_ns - cfg.duration_ns / kTailParts;
    rng             = Rng(cfg.seed);
    switch (cfg.scenario) {
    case Scenario::kIncast:
        // Every host on another leaf sends to host 0: the fan-in crosses the
        // spine. The last one joins late when asked (convergence).
        for (uint32_t h = cfg.hosts_per_leaf; h < hosts; h++)
            add_flow(h, 0);
        if (cfg.join && flows.size() > 1)
            joiner = uint32_t(flows.size() - 1);
        receivers = 1;
        break;
    case Scenario::kPermutation: {
        // A random derangement: every host sends to one host and receives from one.
        std::vector<uint32_t> perm(hosts);
        for (uint32_t i = 0; i < hosts; i++)
            perm[i] = i;
        do {
            for (uint32_t i = hosts - 1; i > 0; i--)
                std::swap(perm[i], perm[rng.next() % (i + 1)]);
        } while ([&] {
            for (uint32_t i = 0; i < hosts; i++)
                if (perm[i] == i)
                    return true;
            return false;
        }());
        for (uint32_t h = 0; h < hosts; h++)
            add_flow(h, perm[h]);
        receivers = hosts;
        break;
    }
    case Scenario::kAllreduce:
        // Ring allreduce: reduce-scatter then allgather, 2(n-1) steps of n-th
        // chunks; step s+1 of a host waits for step s from its predecessor.
        for (uint32_t h = 0; h < hosts; h++)
            flow_of_host[h] = add_flow(h, (h + 1) % hosts);
        receivers  = hosts;
        chunk_segs = std::max<uint64_t>(1, (cfg.allreduce_bytes / hosts + cfg.mtu_bytes - 1) /
                                               cfg.mtu_bytes);
        steps      = 2 * (hosts - 1);
        for (Flow &f : flows)
            f.limit_seq = chunk_segs;
        break;
    case Scenario::kMixed:
        setup_mixed();
        receivers = hosts;
        break;
    }
    if (cfg.scenario != Scenario::kMixed) {
        // Starts jittered by up to one segment time so senders are not in
        // phase; the late joiner at its time.
        for (uint32_t i = 0; i < flows.size(); i++) {
            uint64_t t = rng.next() % (ser_ns + 1);
            if (i == joiner)
                t = cfg.join_ns ? cfg.join_ns : cfg.duration_ns / 2;
            flows[i].start_ns = t;
            ev.push(t, EvKind::kFlowStart, i);
        }
    }
    monitor_port = p_down(flows[0].dst);
    ev.push(cfg.sample_ns, EvKind::kSample, 0);
    if (cfg.on_ns && cfg.off_ns && cfg.scenario != Scenario::kAllreduce &&
        cfg.scenario != Scenario::kMixed)
        for (uint32_t i = 0; i < flows.size(); i++)
            ev.push(exp_ns(double(cfg.on_ns)), EvKind::kToggle, i);
}

// Mixed workload: each host starts flows in a Poisson process whose mean
// rate fills `load` of its link with web-search-sized flows, each to a
// random other host. Sizes are whole segments.
void Sim::setup_mixed()
{
    const FlowSizeCdf &cdf  = web_search_cdf();
    double             mean = cdf.mean_bytes();
    double             gap  = mean / (cfg.load * C) * 1e9; // ns between arrivals
    uint64_t           end  = uint64_t(cfg.duration_ns * kArrivalEnd);
    for (uint32_t h = 0; h < hosts; h++) {
        for (uint64_t t = exp_ns(gap); t < end; t += exp_ns(gap)) {
            double   u    = (rng.next() >> 11) * 0x1.0p-53;
            uint64_t size = std::max<uint64_t>(1, uint64_t(cdf.quantile(u)));
            uint32_t dst  = uint32_t(rng.next() % (hosts - 1));
            dst += dst >= h;
            uint32_t fi = add_flow(h, dst);
            Flow    &f  = flows[fi];
            f.start_ns  = t;
            ev.push(t, EvKind::kFlowStart, fi);
            f.size_segs  = (size + cfg.mtu_bytes - 1) / cfg.mtu_bytes;
            f.limit_seq  = f.size_segs;
            uint32_t hop = links(f);
            f.ideal_ns   = hop * (ser_ns + cfg.hop_delay_ns) + (f.size_segs - 1) * ser_ns;
        }
    }
    if (flows.empty()) { // nothing arrived: one idle flow for the monitor port
        add_flow(0, 1);
        flows.back().size_segs = flows.back().limit_seq = 1;
        flows.back().ideal_ns                           = 1;
        flows.back().start_ns                           = cfg.duration_ns;
    }
}

void Sim::start_flow(uint32_t fi)
{
    Flow &f = flows[fi];
    if (f.active || (f.size_segs && f.next_seq >= f.size_segs))
        return;
    f.active = true;
    host[f.src].flows.push_back(fi);
    // A flow of known size (a mixed-workload flow, an allreduce step) is a
    // message whose length its NIC knows; an endless one announces none.
    if (f.limit_seq != kInfinite)
        f.pacer->on_message(now, (f.limit_seq - f.next_seq) * cfg.mtu_bytes);
    host_send(f.src);
}

// A flow with nothing left to send or resend leaves its host's turn.
void Sim::stop_flow(uint32_t fi)
{
    Flow &f  = flows[fi];
    Host &H  = host[f.src];
    auto  it = std::find(H.flows.begin(), H.flows.end(), fi);
    if (it == H.flows.end())
        return;
    H.flows.erase(it);
    if (H.rr >= H.flows.size())
        H.rr = 0;
    f.active = false;
}

// On/off traffic: an OFF flow sends no new data (retransmits still go); its
// pacer keeps its state, as a QP's would between messages.
void Sim::toggle(uint32_t fi)
{
    Flow &f     = flows[fi];
    f.on        = !f.on;
    f.limit_seq = f.on ? kInfinite : f.next_seq;
    ev.push(now + exp_ns(double(f.on ? cfg.on_ns : cfg.off_ns)), EvKind::kToggle, fi);
    if (f.on && f.active)
        host_send(f.src);
}

bool Sim::ecn_mark(uint64_t queued)
{
    if (cfg.ecn_kmax_bytes == 0)
        return queued >= cfg.ecn_bytes;
    if (queued >= cfg.ecn_kmax_bytes)
        return true;
    if (queued <= cfg.ecn_kmin_bytes)
        return false;
    double p = cfg.ecn_pmax * double(queued - cfg.ecn_kmin_bytes) /
               double(cfg.ecn_kmax_bytes - cfg.ecn_kmin_bytes);
    return (rng.next() >> 11) * 0x1.0p-53 < p;
}

void Sim::start_tx(uint32_t port)
{
    Port &p = ports[port];
    if (p.busy || p.stalled || p.queue.empty())
        return;
    uint32_t id = p.queue.front();
    if (cfg.credit) {
        uint32_t nxt = next_port(port, flows[pkts[id].flow]);
        if (nxt != kNone) {
            Port &q = ports[nxt];
            if (q.bytes + q.reserved + cfg.mtu_bytes > cfg.buffer_bytes) {
                p.stalled = true;
                q.waiters.push_back(port);
                stalls++;
                return;
            }
            q.reserved += cfg.mtu_bytes;
        }
    }
    p.queue.pop_front();
    p.bytes -= cfg.mtu_bytes;
    p.busy = true;
    p.tx_bytes += cfg.mtu_bytes;
    if (int_on && port >= hosts) {
        // A switch egress port stamps its INT record as the packet leaves.
        pacing::Telemetry &t = pkt_int[id];
        if (t.hops < pacing::kMaxIntHops)
            t.hop[t.hops++] = {now, p.tx_bytes, uint32_t(p.bytes), C};
    }
    ev.push(now + ser_ns, EvKind::kPortDone, port, id);
    // Room freed here: ports stalled on this queue may go.
    if (cfg.credit && !p.waiters.empty()) {
        std::vector<uint32_t> w;
        w.swap(p.waiters);
        for (uint32_t up : w) {
            ports[up].stalled = false;
            start_tx(up);
        }
    }
}

void Sim::port_done(uint32_t port)
{
    Port &p = ports[port];
    p.busy  = false;
    start_tx(port);
}

void Sim::arrive(uint32_t port, uint32_t id)
{
    Port   &p = ports[port];
    Packet &k = pkts[id];
    if (cfg.credit) {
        p.reserved -= cfg.mtu_bytes;
    } else if (p.bytes + cfg.mtu_bytes > cfg.buffer_bytes) {
        drops++;
        free_packet(id);
        return;
    }
    if (!k.ce && ecn_mark(p.bytes))
        k.ce = true;
    k.port = port;
    p.bytes += cfg.mtu_bytes;
    p.queue.push_back(id);
    start_tx(port);
}

void Sim::deliver(uint32_t id)
{
    Packet &k = pkts[id];
    Flow   &f = flows[k.flow];
    if (f.received.size() <= k.seq)
        f.received.resize(std::max<size_t>(k.seq + 1, f.received.size() * 2), 0);
    if (!f.received[k.seq]) {
        f.received[k.seq] = 1;
        f.delivered++;
        bin_bytes += cfg.mtu_bytes;
        if (stats_on())
            f.window_bytes += cfg.mtu_bytes;
        if (now >= tail_ns)
            f.tail_bytes += cfg.mtu_bytes;
        if (f.size_segs && f.delivered == f.size_segs) {
            slowdowns.push_back(double(now - f.start_ns) / double(f.ideal_ns));
            sizes.push_back(double(f.size_segs) * cfg.mtu_bytes);
        }
        if (cfg.scenario == Scenario::kAllreduce) {
            // In-order completion of a chunk releases the receiver's next step.
            uint64_t done_steps = f.delivered / chunk_segs;
            if (f.delivered % chunk_segs == 0) {
                if (done_steps == steps) {
                    ar_done++;
                    ar_finish_ns = now;
                }
                uint32_t out = flow_of_host[f.dst];
                Flow    &g   = flows[out];
                uint64_t lim = std::min(steps, done_steps + 1) * chunk_segs;
                if (lim > g.limit_seq) {
                    g.pacer->on_message(now, (lim - g.limit_seq) * cfg.mtu_bytes);
                    g.limit_seq = lim;
                    if (g.active)
                        host_send(g.src);
                }
            }
        }
    }
    // The ACK goes back over the reverse path (no queueing).
    uint64_t back = links(f) * (cfg.hop_delay_ns + uint64_t(kAckBytes / C * 1e9));
    ev.push(now + back, EvKind::kAck, k.flow, id);
}

void Sim::lost(Flow &f, uint64_t seq)
{
    f.retx.push_back(seq);
    f.pacer->on_loss(now);
}

void Sim::ack(uint32_t id)
{
    Packet   k   = pkts[id];
    uint32_t fi  = k.flow;
    Flow    &f   = flows[fi];
    uint64_t rtt = now - k.sent_ns;
    if (k.ce)
        ce++;
    pacing::Feedback fb;
    fb.now_ns      = now;
    fb.acked_bytes = cfg.mtu_bytes;
    fb.ce_bytes    = k.ce ? cfg.mtu_bytes : 0;
    fb.rtt_ns      = rtt;
    fb.telemetry   = int_on ? &pkt_int[id] : nullptr;
    f.pacer->on_feedback(fb);
    if (int_on)
        pkt_int[id].hops = 0;
    free_packet(id);
    f.srtt_ns = f.srtt_ns > 0 ? 0.875 * f.srtt_ns + 0.125 * double(rtt) : double(rtt);
    if (stats_on()) {
        rtt_hist.add(rtt);
        qdelay_hist.add(rtt > f.base_rtt_ns ? rtt - f.base_rtt_ns : 0);
        rtt_stat.add(rtt * 1e-3);
    }
    // FIFO path: transmissions before this one that are still unacked were lost.
    if (!f.inflight.empty() && k.tx_id >= f.inflight.front().tx_id) {
        size_t idx = k.tx_id - f.inflight.front().tx_id;
        if (idx < f.inflight.size())
            f.inflight[idx].acked = true;
        while (!f.inflight.empty() &&
               (f.inflight.front().acked || f.inflight.front().tx_id < k.tx_id)) {
            if (!f.inflight.front().acked)
                lost(f, f.inflight.front().seq);
            f.inflight.pop_front();
        }
    }
    if (f.size_segs && f.next_seq >= f.size_segs && f.retx.empty() && f.inflight.empty())
        stop_flow(fi);
    else if (f.active)
        host_send(f.src);
}

void Sim::rto(uint32_t fi)
{
    Flow &f       = flows[fi];
    f.rto_pending = false;
    while (!f.inflight.empty() && f.inflight.front().sent_ns + rto_ns <= now) {
        if (!f.inflight.front().acked) {
            lost(f, f.inflight.front().seq);
            timeouts++;
        }
        f.inflight.pop_front();
    }
    if (!f.inflight.empty()) {
        f.rto_pending = true;
        ev.push(f.inflight.front().sent_ns + rto_ns, EvKind::kRto, fi);
    }
    if (f.active)
        host_send(f.src);
}

// The host NIC, when idle, serves its flows in turn: the first (from the
// last one served) that has something to send, room in its window and its
// pacer's permission sends one segment; otherwise the host wakes when the
// earliest pacer allows.
void Sim::host_send(uint32_t h)
{
    Host &H   = host[h];
    Port &nic = ports[p_nic(h)];
    if (nic.busy || !nic.queue.empty())
        return;
    uint64_t earliest = kInfinite;
    size_t   n        = H.flows.size();
    for (size_t k = 0; k < n; k++) {
        size_t   idx = (H.rr + k) % n;
        uint32_t fi  = H.flows[idx];
        Flow    &f   = flows[fi];
        if (f.retx.empty() && f.next_seq >= f.limit_seq)
            continue;
        if (f.inflight.size() >= window_segs) // the ACK or the timer reopens it
            continue;
        double w = f.pacer->window_bytes();
        if (w > 0 && double(f.inflight.size()) * cfg.mtu_bytes >= w)
            continue;
        uint64_t t = f.pacer->next_send_ns(now, cfg.mtu_bytes);
        if (t > now) {
            earliest = std::min(earliest, t);
            continue;
        }
        H.rr = uint32_t((idx + 1) % n);
        send_segment(fi);
        return;
    }
    if (earliest != kInfinite && (H.wake_at == 0 || earliest < H.wake_at)) {
        H.wake_at = earliest;
        ev.push(earliest, EvKind::kHostWake, h);
    }
}

void Sim::send_segment(uint32_t fi)
{
    Flow    &f = flows[fi];
    uint64_t seq;
    if (!f.retx.empty()) {
        seq = f.retx.front();
        f.retx.pop_front();
        retx++;
        win_retx += stats_on();
    } else {
        seq = f.next_seq++;
    }
    sent++;
    win_sent += stats_on();
    uint32_t id = alloc_pkt();
    Packet  &k  = pkts[id];
    k           = {fi, p_nic(f.src), seq, f.next_tx++, now, false, kNone};
    f.inflight.push_back({k.tx_id, seq, now, false});
    if (!f.rto_pending) {
        f.rto_pending = true;
        ev.push(now + rto_ns, EvKind::kRto, fi);
    }
    f.pacer->on_send(now, cfg.mtu_bytes);
    Port &nic = ports[p_nic(f.src)];
    nic.bytes += cfg.mtu_bytes;
    nic.queue.push_back(id);
    start_tx(p_nic(f.src));
}

void Sim::sample()
{
    double   cap  = C * cfg.sample_ns * 1e-9 * receivers;
    double   mean = 0;
    uint32_t n    = 0;
    for (const Host &H : host)
        for (uint32_t fi : H.flows) {
            mean += allowed_rate(flows[fi]);
            n++;
        }
    double join_rate = joiner != kNone && flows[joiner].active ? allowed_rate(flows[joiner]) : 0;
    series.push_back({now, bin_bytes / cap, uint32_t(ports[monitor_port].bytes),
                      flows[0].active ? allowed_rate(flows[0]) : 0, n ? mean / n : 0, join_rate});
    bin_bytes = 0;
    if (now + cfg.sample_ns <= cfg.duration_ns)
        ev.push(now + cfg.sample_ns, EvKind::kSample, 0);
}

void Sim::run()
{
    while (!ev.empty()) {
        Event e = ev.pop();
        if (e.t > cfg.duration_ns)
            break;
        now = e.t;
        events++;
        switch (e.kind()) {
        case EvKind::kPortDone: {
            uint32_t nxt = next_port(e.a, flows[pkts[e.b].flow]);
            if (nxt == kNone)
                ev.push(now + cfg.hop_delay_ns, EvKind::kDeliver, 0, e.b);
            else
                ev.push(now + cfg.hop_delay_ns, EvKind::kArrive, nxt, e.b);
            port_done(e.a);
            if (e.a < hosts)
                host_send(e.a);
            break;
        }
        case EvKind::kArrive:
            arrive(e.a, e.b);
            break;
        case EvKind::kDeliver:
            deliver(e.b);
            break;
        case EvKind::kAck:
            ack(e.b);
            break;
        case EvKind::kHostWake:
            if (host[e.a].wake_at == now) {
                host[e.a].wake_at = 0;
                host_send(e.a);
            }
            break;
        case EvKind::kRto:
            rto(e.a);
            break;
        case EvKind::kSample:
            sample();
            break;
        case EvKind::kToggle:
            toggle(e.a);
            break;
        case EvKind::kFlowStart:
            start_flow(e.a);
            break;
        }
        if (cfg.scenario == Scenario::kAllreduce && ar_done == flows.size())
            break;
    }
}

// How long the late joiner took to stay within kConvergeBand of its fair
// share C / N (its allowed rate averaged over kConvergeRtts base RTTs);
// -1 = it never did before the end.
double convergence_us(const SimResult &r, uint64_t join_ns, double fair_Bps, uint64_t sample_ns)
{
    size_t              smooth = std::max<size_t>(1, kConvergeRtts * r.base_rtt_ns / sample_ns);
    std::vector<double> v;
    std::vector<double> t;
    for (const Sample &s : r.series)
        if (s.t_ns > join_ns) {
            v.push_back(s.joiner_Bps);
            t.push_back(double(s.t_ns));
        }
    if (v.size() <= smooth)
        return -1;
    // The last sample outside the band (or too early to judge); converged
    // from the one after it, unless that was the run's end.
    double acc      = 0;
    size_t first_in = 0;
    for (size_t i = 0; i < v.size(); i++) {
        acc += v[i];
        if (i >= smooth)
            acc -= v[i - smooth];
        double m = acc / double(std::min(i + 1, smooth));
        if (i + 1 < smooth || std::abs(m / fair_Bps - 1) > kConvergeBand)
            first_in = i + 1;
    }
    if (first_in >= v.size())
        return -1;
    return (t[first_in] - double(join_ns)) * 1e-3;
}

Slowdown slowdown_of(std::vector<double> v)
{
    Slowdown s;
    s.flows = uint32_t(v.size());
    if (v.empty())
        return s;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
        return v[std::min(v.size() - 1, size_t(std::ceil(p * v.size())) - 1)];
    };
    s.p50      = q(0.5);
    s.p99      = q(0.99);
    double sum = 0;
    for (double x : v)
        sum += x;
    s.mean = sum / v.size();
    return s;
}

} // namespace

const char *scenario_name(Scenario s)
{
    switch (s) {
    case Scenario::kIncast:
        return "incast";
    case Scenario::kPermutation:
        return "permutation";
    case Scenario::kAllreduce:
        return "allreduce";
    case Scenario::kMixed:
        return "mixed";
    }
    return "?";
}

bool parse_scenario(const std::string &name, Scenario *s_p)
{
    for (Scenario s :
         {Scenario::kIncast, Scenario::kPermutation, Scenario::kAllreduce, Scenario::kMixed})
        if (name == scenario_name(s)) {
            *s_p = s;
            return true;
        }
    return false;
}

bool apply_host_preset(uint32_t hosts, SimConfig *c_p)
{
    // Non-blocking: as many spine uplinks per leaf as hosts on it.
    if (hosts == 8) {
        c_p->leaves = 2, c_p->hosts_per_leaf = 4, c_p->spines = 4;
    } else if (hosts == 128) {
        c_p->leaves = 8, c_p->hosts_per_leaf = 16, c_p->spines = 16;
    } else if (hosts == 10) { // the seed's small fabric, base RTT 3.2 us
        c_p->leaves = 2, c_p->hosts_per_leaf = 5, c_p->spines = 5;
        c_p->hop_delay_ns = hop_delay_for_rtt(*c_p, 3200);
    } else if (hosts == 100) { // the seed's large fabric, base RTT 6.8 us
        c_p->leaves = 10, c_p->hosts_per_leaf = 10, c_p->spines = 10;
        c_p->hop_delay_ns = hop_delay_for_rtt(*c_p, 6800);
    } else {
        return false;
    }
    return true;
}

uint64_t base_rtt_ns(const SimConfig &c)
{
    double   C   = c.link_gbps * 1e9 / 8;
    uint64_t ser = uint64_t(std::llround(c.mtu_bytes / C * 1e9));
    return 4 * (ser + c.hop_delay_ns) + 4 * (c.hop_delay_ns + uint64_t(kAckBytes / C * 1e9));
}

uint64_t hop_delay_for_rtt(const SimConfig &c, uint64_t rtt_ns)
{
    SimConfig z    = c;
    z.hop_delay_ns = 0;
    uint64_t fixed = base_rtt_ns(z);
    return rtt_ns > fixed ? (rtt_ns - fixed) / 8 : 0;
}

bool run_sim(const SimConfig &config, SimResult *result_p, std::string *error_p)
{
    auto fail = [&](const std::string &m) {
        if (error_p)
            *error_p = m;
        return false;
    };
    SimConfig c = config;
    if (c.leaves < 2 || c.spines < 1 || c.hosts_per_leaf < 1)
        return fail("the fabric needs at least 2 leaves, 1 spine and 1 host per leaf");
    if (c.leaves * c.hosts_per_leaf > 4096)
        return fail("at most 4096 hosts");
    if (!(c.link_gbps > 0) || c.link_gbps > 10000)
        return fail("link rate must be in (0, 10000] Gb/s");
    if (c.mtu_bytes < 256 || c.mtu_bytes > 65536)
        return fail("segment size must be in [256, 65536] bytes");
    if (c.buffer_bytes < 2 * c.mtu_bytes)
        return fail("switch buffer must hold at least 2 segments");
    if (c.ecn_bytes == 0)
        c.ecn_bytes = c.buffer_bytes / 4 * 3;
    if (c.ecn_bytes > c.buffer_bytes)
        return fail("ECN threshold exceeds the buffer");
    if (c.ecn_kmax_bytes &&
        (c.ecn_kmin_bytes >= c.ecn_kmax_bytes || !(c.ecn_pmax > 0 && c.ecn_pmax <= 1)))
        return fail("RED marking needs kmin < kmax and a probability in (0, 1]");
    if (c.duration_ns == 0 || c.duration_ns > 10000000000ull)
        return fail("duration must be in (0, 10 s]");
    if (c.sample_ns == 0 || c.duration_ns / c.sample_ns > 10000000)
        return fail("sample step too small for the duration");
    if (c.warmup_ns == 0)
        c.warmup_ns = c.duration_ns / 10;
    if (c.warmup_ns >= c.duration_ns)
        return fail("warm-up must end before the run does");
    if (c.join_ns >= c.duration_ns)
        return fail("the late sender must join before the run ends");
    if (c.scenario == Scenario::kMixed && !(c.load > 0 && c.load <= 1))
        return fail("load must be in (0, 1]");
    {
        pacing::Config pc = c.cc;
        pc.line_rate_Bps  = c.link_gbps * 1e9 / 8;
        pc.mtu_bytes      = c.mtu_bytes;
        pc.telemetry      = true; // the simulator's switches stamp INT for HPCC
        std::string err;
        if (!pacing::make_pacer(pc, &err))
            return fail("pacer: " + err);
    }

    auto t0  = std::chrono::steady_clock::now();
    auto sim = std::make_unique<Sim>();
    sim->cfg = c;
    sim->setup();
    sim->run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    Sim      &s = *sim;
    SimResult r;
    r.policy = pacing::policy_name(c.cc.policy);
    r.credit = c.credit;
    r.gain   = s.flows[0].pacer->ibrc_gain();
    {
        pacing::Config pc;
        std::string    err;
        pacing::Config in = c.cc;
        in.line_rate_Bps  = s.C;
        in.mtu_bytes      = c.mtu_bytes;
        in.telemetry      = true;
        pacing::resolve_config(in, &pc, &err);
        r.derived_gain = pacing::ibrc_derived_gain(base_rtt_ns(c) + pc.target_delay_ns);
    }
    r.base_rtt_ns                = base_rtt_ns(c);
    r.flows                      = uint32_t(s.flows.size());
    uint64_t            end      = std::min(c.duration_ns, std::max(s.now, c.warmup_ns + 1));
    double              window_s = (end - c.warmup_ns) * 1e-9;
    uint64_t            good     = 0;
    std::vector<double> per_flow, tail;
    for (const Flow &f : s.flows) {
        good += f.window_bytes;
        if (f.size_segs)
            continue; // mixed flows come and go: no fairness figure
        if (f.start_ns <= c.warmup_ns)
            per_flow.push_back(double(f.window_bytes));
        if (f.start_ns <= s.tail_ns)
            tail.push_back(double(f.tail_bytes));
    }
    r.utilization   = good / (s.C * window_s * s.receivers);
    r.rtt_mean_us   = s.rtt_stat.mean();
    r.rtt_std_us    = s.rtt_stat.stddev();
    r.rtt_p99_us    = s.rtt_hist.quantile(0.99) * 1e-3;
    r.qdelay_p99_us = s.qdelay_hist.quantile(0.99) * 1e-3;
    r.drops         = s.drops;
    r.sent_pkts     = s.sent;
    r.retx_pkts     = s.retx;
    r.retx_pct      = s.win_sent ? 100.0 * s.win_retx / s.win_sent : 0;
    r.retx_all_pct  = s.sent ? 100.0 * s.retx / s.sent : 0;
    r.ce_pkts       = s.ce;
    r.timeouts      = s.timeouts;
    r.credit_stalls = s.stalls;
    r.jain_window   = jain_index(per_flow);
    // After convergence: the last fifth; a run that ended before it (an
    // allreduce) has only the window's figure.
    r.jain = s.now >= s.tail_ns ? jain_index(tail) : r.jain_window;
    for (double b : tail)
        r.tail_Bps.push_back(b / ((c.duration_ns - s.tail_ns) * 1e-9));
    r.series = std::move(s.series);
    analyze_series(r, c.warmup_ns, s.C, std::max<uint64_t>(1, 2 * r.base_rtt_ns / c.sample_ns));
    if (s.joiner != kNone) {
        const Flow &j    = s.flows[s.joiner];
        r.join_us        = j.start_ns * 1e-3;
        r.fair_share_Bps = s.C / double(s.flows.size());
        r.converge_us    = convergence_us(r, j.start_ns, r.fair_share_Bps, c.sample_ns);
    }
    if (c.scenario == Scenario::kMixed) {
        std::vector<double> short_v, long_v;
        for (size_t i = 0; i < s.slowdowns.size(); i++)
            (s.sizes[i] <= double(c.short_bytes) ? short_v : long_v).push_back(s.slowdowns[i]);
        r.fct_all        = slowdown_of(s.slowdowns);
        r.fct_short      = slowdown_of(short_v);
        r.fct_long       = slowdown_of(long_v);
        r.fct_unfinished = 0;
        for (const Flow &f : s.flows)
            r.fct_unfinished += f.size_segs && f.delivered < f.size_segs;
        r.slowdowns = std::move(s.slowdowns);
        r.sizes     = std::move(s.sizes);
    }
    if (c.scenario == Scenario::kAllreduce && s.ar_done == s.flows.size())
        r.allreduce_us = s.ar_finish_ns * 1e-3;
    r.events       = s.events;
    r.wall_s       = wall;
    r.events_per_s = wall > 0 ? s.events / wall : 0;
    *result_p      = std::move(r);
    return true;
}

} // namespace doorbell::sim
