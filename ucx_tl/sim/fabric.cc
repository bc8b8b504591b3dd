// The fabric model and its event loop; see sim.h for the model.
//
// Ports are numbered: host NIC h (to its leaf), leaf->host h, leaf l ->
// spine s, spine s -> leaf l. A packet's next port is computed when it
// finishes a hop. Packets live in a pool with a free list; events are PODs
// in a heap; per-flow state is preallocated, so the loop allocates only when
// a flow's in-flight ring or receive bitmap grows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>

#include "event_queue.h"
#include "metrics.h"
#include "sim.h"

namespace doorbell::sim {

namespace {

constexpr uint32_t kNone     = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kInfinite = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kAckBytes = 64; ///< ACK size on the wire

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
    uint64_t                       next_tx   = 0;
    std::deque<InFlight>           inflight;        ///< in transmission order
    std::deque<uint64_t>           retx;            ///< segments to send again
    uint64_t                       wake_at     = 0; ///< pending HostWake time, 0 = none
    bool                           rto_pending = false;
    std::vector<uint8_t>           received;         ///< receiver: segment seen
    uint64_t                       delivered    = 0; ///< unique segments delivered
    uint64_t                       window_bytes = 0; ///< goodput in the statistics window
    uint64_t                       base_rtt_ns  = 0;
    bool                           on           = true; ///< on/off traffic
};

struct Sim {
    SimConfig             cfg;
    double                C      = 0; ///< link rate, bytes/s
    uint64_t              ser_ns = 0; ///< serialization of a segment
    uint32_t              hosts  = 0;
    std::vector<Port>     ports;
    std::vector<Flow>     flows;
    std::vector<uint32_t> flow_of_host; ///< host -> its sending flow or kNone
    std::vector<Packet>   pkts;
    uint32_t              free_pkt = kNone;
    EventQueue            ev{1 << 16};
    uint64_t              now          = 0;
    uint64_t              events       = 0;
    uint32_t              monitor_port = 0;
    uint32_t              receivers    = 0;
    uint64_t              rto_ns       = 0;
    Rng                   rng{1};

    // Statistics.
    Histogram           rtt_hist{10, 400000}; ///< 10 ns bins up to 4 ms
    Histogram           qdelay_hist{10, 400000};
    Welford             rtt_stat;
    uint64_t            drops = 0, sent = 0, retx = 0, ce = 0, stalls = 0;
    uint64_t            win_sent = 0, win_retx = 0, timeouts = 0;
    uint32_t            window_segs = 0;
    uint64_t            bin_bytes   = 0; ///< goodput in the current sample step
    std::vector<Sample> series;
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

    uint32_t alloc_pkt()
    {
        if (free_pkt == kNone) {
            pkts.push_back({});
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

    void     setup();
    void     run();
    void     start_tx(uint32_t port);
    void     port_done(uint32_t port);
    void     arrive(uint32_t port, uint32_t pkt);
    void     deliver(uint32_t pkt);
    void     ack(uint32_t pkt);
    void     try_send(uint32_t flow);
    void     lost(Flow &f, uint64_t seq);
    void     rto(uint32_t flow);
    void     sample();
    void     toggle(uint32_t flow);
    uint64_t exp_ns(uint64_t mean)
    {
        double u = (rng.next() >> 11) * 0x1.0p-53;
        return uint64_t(-std::log(1 - u) * mean) + 1;
    }
};

void Sim::setup()
{
    C      = cfg.link_gbps * 1e9 / 8;
    ser_ns = uint64_t(std::llround(cfg.mtu_bytes / C * 1e9));
    hosts  = cfg.leaves * cfg.hosts_per_leaf;
    ports.resize(2 * hosts + 2 * cfg.leaves * cfg.spines);
    flow_of_host.assign(hosts, kNone);
    // Lossless (credit) fabrics drop nothing but queue far deeper under
    // back-pressure: their timer is ms-scale, as on RoCE NICs.
    rto_ns          = cfg.rto_ns ? cfg.rto_ns : (cfg.credit ? 1000 : 20) * base_rtt_ns(cfg);
    uint64_t window = cfg.window_bytes ? cfg.window_bytes :
                                         uint64_t(2 * C * base_rtt_ns(cfg) * 1e-9);
    window_segs     = uint32_t(std::max<uint64_t>(1, window / cfg.mtu_bytes));
    rng             = Rng(cfg.seed);

    auto add_flow = [&](uint32_t src, uint32_t dst) {
        Flow f;
        f.src             = src;
        f.dst             = dst;
        f.spine           = uint32_t(rng.next() % cfg.spines);
        pacing::Config pc = cfg.cc;
        pc.line_rate_Bps  = C;
        pc.mtu_bytes      = cfg.mtu_bytes;
        std::string err;
        f.pacer        = pacing::make_pacer(pc, &err); // validated in run_sim
        bool     cross = leaf_of(src) != leaf_of(dst);
        uint32_t hops  = cross ? 4 : 2;
        f.base_rtt_ns  = hops * (ser_ns + cfg.hop_delay_ns) +
                        hops * (cfg.hop_delay_ns + uint64_t(kAckBytes / C * 1e9));
        flow_of_host[src] = uint32_t(flows.size());
        flows.push_back(std::move(f));
    };

    switch (cfg.scenario) {
    case Scenario::kIncast:
        // Every host on another leaf sends to host 0: the fan-in crosses the spine.
        for (uint32_t h = cfg.hosts_per_leaf; h < hosts; h++)
            add_flow(h, 0);
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
            add_flow(h, (h + 1) % hosts);
        receivers  = hosts;
        chunk_segs = std::max<uint64_t>(1, (cfg.allreduce_bytes / hosts + cfg.mtu_bytes - 1) /
                                               cfg.mtu_bytes);
        steps      = 2 * (hosts - 1);
        for (Flow &f : flows)
            f.limit_seq = chunk_segs;
        break;
    }
    monitor_port = p_down(flows[0].dst);
    // Starts jittered by up to one segment time so senders are not in phase.
    for (uint32_t i = 0; i < flows.size(); i++)
        ev.push(rng.next() % (ser_ns + 1), EvKind::kHostWake, i);
    for (Flow &f : flows)
        f.wake_at = kInfinite; // the start event is not a pacing wake
    ev.push(cfg.sample_ns, EvKind::kSample, 0);
    if (cfg.on_ns && cfg.off_ns && cfg.scenario != Scenario::kAllreduce)
        for (uint32_t i = 0; i < flows.size(); i++)
            ev.push(exp_ns(cfg.on_ns), EvKind::kToggle, i);
}

// On/off traffic: an OFF flow sends no new data (retransmits still go); its
// pacer keeps its state, as a QP's would between messages.
void Sim::toggle(uint32_t fi)
{
    Flow &f     = flows[fi];
    f.on        = !f.on;
    f.limit_seq = f.on ? kInfinite : f.next_seq;
    ev.push(now + exp_ns(f.on ? cfg.on_ns : cfg.off_ns), EvKind::kToggle, fi);
    if (f.on)
        try_send(fi);
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
    if (p.bytes >= cfg.ecn_bytes && !k.ce) {
        k.ce = true;
    }
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
                    g.limit_seq = lim;
                    try_send(out);
                }
            }
        }
    }
    // The ACK goes back over the reverse path (no queueing).
    bool     cross = leaf_of(f.src) != leaf_of(f.dst);
    uint32_t hops  = cross ? 4 : 2;
    uint64_t back  = hops * (cfg.hop_delay_ns + uint64_t(kAckBytes / C * 1e9));
    ev.push(now + back, EvKind::kAck, k.flow, id);
}

void Sim::lost(Flow &f, uint64_t seq)
{
    f.retx.push_back(seq);
    f.pacer->on_loss(now);
}

void Sim::ack(uint32_t id)
{
    Packet k = pkts[id];
    free_packet(id);
    uint32_t fi  = k.flow;
    Flow    &f   = flows[fi];
    uint64_t rtt = now - k.sent_ns;
    if (k.ce)
        ce++;
    f.pacer->on_ack(now, cfg.mtu_bytes, k.ce ? cfg.mtu_bytes : 0, rtt);
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
    try_send(fi);
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
    try_send(fi);
}

void Sim::try_send(uint32_t fi)
{
    Flow &f   = flows[fi];
    Port &nic = ports[p_nic(f.src)];
    if (nic.busy || !nic.queue.empty())
        return;
    if (f.retx.empty() && f.next_seq >= f.limit_seq)
        return;
    if (f.inflight.size() >= window_segs) // the ACK or the timer reopens it
        return;
    uint64_t t = f.pacer->next_send_ns(now, cfg.mtu_bytes);
    if (t > now) {
        if (f.wake_at == 0 || t < f.wake_at) {
            f.wake_at = t;
            ev.push(t, EvKind::kHostWake, fi);
        }
        return;
    }
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
    nic.bytes += cfg.mtu_bytes;
    nic.queue.push_back(id);
    start_tx(p_nic(f.src));
}

void Sim::sample()
{
    double cap  = C * cfg.sample_ns * 1e-9 * receivers;
    double mean = 0;
    for (const Flow &f : flows)
        mean += f.pacer->rate();
    mean /= flows.size();
    series.push_back(
        {now, bin_bytes / cap, uint32_t(ports[monitor_port].bytes), flows[0].pacer->rate(), mean});
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
            if (e.a < hosts && flow_of_host[e.a] != kNone)
                try_send(flow_of_host[e.a]);
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
            if (flows[e.a].wake_at == kInfinite || flows[e.a].wake_at == now) {
                flows[e.a].wake_at = 0;
                try_send(e.a);
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
        }
        if (cfg.scenario == Scenario::kAllreduce && ar_done == flows.size())
            break;
    }
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
    }
    return "?";
}

bool parse_scenario(const std::string &name, Scenario *s_p)
{
    for (Scenario s : {Scenario::kIncast, Scenario::kPermutation, Scenario::kAllreduce})
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
    if (c.duration_ns == 0 || c.duration_ns > 10000000000ull)
        return fail("duration must be in (0, 10 s]");
    if (c.sample_ns == 0 || c.duration_ns / c.sample_ns > 10000000)
        return fail("sample step too small for the duration");
    if (c.warmup_ns == 0)
        c.warmup_ns = c.duration_ns / 10;
    if (c.warmup_ns >= c.duration_ns)
        return fail("warm-up must end before the run does");
    {
        pacing::Config pc = c.cc;
        pc.line_rate_Bps  = c.link_gbps * 1e9 / 8;
        pc.mtu_bytes      = c.mtu_bytes;
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
    r.gain   = s.flows[0].pacer->ibrc_gain();
    {
        pacing::Config pc;
        std::string    err;
        pacing::Config in = c.cc;
        in.line_rate_Bps  = s.C;
        in.mtu_bytes      = c.mtu_bytes;
        pacing::resolve_config(in, &pc, &err);
        r.derived_gain = pacing::ibrc_derived_gain(base_rtt_ns(c) + pc.target_delay_ns);
    }
    r.base_rtt_ns                = base_rtt_ns(c);
    r.flows                      = uint32_t(s.flows.size());
    uint64_t            end      = std::min(c.duration_ns, std::max(s.now, c.warmup_ns + 1));
    double              window_s = (end - c.warmup_ns) * 1e-9;
    uint64_t            good     = 0;
    std::vector<double> per_flow;
    for (const Flow &f : s.flows) {
        good += f.window_bytes;
        per_flow.push_back(double(f.window_bytes));
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
    r.jain          = jain_index(per_flow);
    r.series        = std::move(s.series);
    analyze_series(r, c.warmup_ns, s.C, std::max<uint64_t>(1, 2 * r.base_rtt_ns / c.sample_ns));
    if (c.scenario == Scenario::kAllreduce && s.ar_done == s.flows.size())
        r.allreduce_us = s.ar_finish_ns * 1e-3;
    r.events       = s.events;
    r.wall_s       = wall;
    r.events_per_s = wall > 0 ? s.events / wall : 0;
    *result_p      = std::move(r);
    return true;
}

} // namespace doorbell::sim
