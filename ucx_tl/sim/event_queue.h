// Event queue of the simulator: a binary min-heap of 24-byte POD events in
// one reserved vector (no allocation per event). Ties at equal time go in
// insertion order (the seq field), so a run is deterministic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace doorbell::sim {

enum class EvKind : uint8_t {
    kPortDone,  ///< a port finished serializing its head packet (a = port)
    kArrive,    ///< packet b reaches the switch owning egress port a
    kDeliver,   ///< packet b reaches its destination host
    kAck,       ///< the ACK of packet b reaches its sender
    kHostWake,  ///< host a may send (a pacer of one of its flows allows it)
    kRto,       ///< retransmit timer of flow a
    kSample,    ///< periodic sample of the monitored port and throughput
    kToggle,    ///< on/off traffic: flow a starts or stops
    kFlowStart, ///< flow a begins (joins its host's turn)
};

struct Event {
    uint64_t t;        ///< ns
    uint64_t seq_kind; ///< insertion order << 8 | kind
    uint32_t a;
    uint32_t b;
    EvKind   kind() const { return EvKind(seq_kind & 0xff); }
};
static_assert(sizeof(Event) == 24);

class EventQueue {
public:
    explicit EventQueue(size_t reserve) { heap_.reserve(reserve); }

    void push(uint64_t t, EvKind kind, uint32_t a, uint32_t b = 0)
    {
        heap_.push_back({t, (seq_++ << 8) | uint64_t(kind), a, b});
        std::push_heap(heap_.begin(), heap_.end(), later);
    }
    Event pop()
    {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        Event e = heap_.back();
        heap_.pop_back();
        return e;
    }
    bool   empty() const { return heap_.empty(); }
    size_t size() const { return heap_.size(); }

private:
    static bool later(const Event &x, const Event &y)
    {
        return x.t != y.t ? x.t > y.t : x.seq_kind > y.seq_kind;
    }
    std::vector<Event> heap_;
    uint64_t           seq_ = 0;
};

} // namespace doorbell::sim
