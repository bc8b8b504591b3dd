/*
 * The pacing seam's policies: the registry of named factories and the
 * built-in ones, which give each QP a Pacer (IBRC, DCQCN, TIMELY) behind the
 * PacingGate seam. The iface's line rate and MTU size the controller; the
 * gain comes from doorbell_iface_params_t::ibrc_gain (0: derived from the
 * measured RTT).
 */
#include "pacing_gate.h"

#include "pacer.h"

#include <map>
#include <mutex>

namespace doorbell::pacing {

namespace {

class PacerGate final : public PacingGate {
public:
    explicit PacerGate(std::unique_ptr<Pacer> pacer) : pacer_(std::move(pacer)) {}

    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes) override
    {
        return pacer_->next_send_ns(now_ns, bytes);
    }
    void on_send(uint64_t now_ns, uint32_t bytes) override { pacer_->on_send(now_ns, bytes); }
    void on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                uint64_t sent_ns) override
    {
        pacer_->on_ack(now_ns, acked_bytes, ce_bytes, rtt_ns, sent_ns);
    }
    void     on_feedback(const Feedback &f) override { pacer_->on_feedback(f); }
    void     on_loss(uint64_t now_ns) override { pacer_->on_loss(now_ns); }
    double   rate() const override { return pacer_->rate(); }
    uint64_t base_rtt_ns() const override { return pacer_->base_rtt_ns(); }
    void     on_idle_message(uint64_t now_ns, uint64_t bytes) override
    {
        pacer_->on_idle_message(now_ns, bytes);
    }
    void end_idle_grant(uint64_t now_ns) override { pacer_->end_idle_grant(now_ns); }
    void set_time_burst(uint64_t burst_ns, uint32_t max_bytes) override
    {
        pacer_->set_time_burst(burst_ns, max_bytes);
    }
    void set_delivery_floor(bool on) override { pacer_->set_delivery_floor(on); }

private:
    std::unique_ptr<Pacer> pacer_;
};

bool pacing_config_for(const PacingContext &ctx, Config *config_p, std::string *error_p)
{
    Config c;
    if (!parse_policy(ctx.policy, &c.policy, error_p)) {
        *error_p = ctx.device + ": " + *error_p;
        return false;
    }
    c.gain                = ctx.gain;
    c.line_rate_Bps       = ctx.line_rate;
    c.mtu_bytes           = ctx.mtu;
    c.target_delay_ns     = ctx.target_delay_ns;
    c.target_floor_ns     = ctx.target_floor_ns;
    c.min_rate_Bps        = ctx.min_rate;
    c.max_rate_Bps        = ctx.max_rate;
    c.ce_gain             = ctx.ce_gain;
    c.ce_beta             = ctx.ce_beta;
    c.probe_step          = ctx.probe_step;
    c.idle_burst_bytes    = ctx.idle_burst_bytes;
    c.min_window_segments = ctx.min_window_segments;
    Config resolved;
    if (!resolve_config(c, &resolved, error_p)) {
        *error_p = ctx.device + ": pacing " + ctx.policy + ": " + *error_p;
        return false;
    }
    *config_p = resolved;
    return true;
}

std::mutex                            g_pacing_mu;
std::map<std::string, PacingFactory> &pacing_registry()
{
    static std::map<std::string, PacingFactory> registry;
    return registry;
}

} // namespace

PacingFactory builtin_pacing_policy(const std::string &policy)
{
    Policy      p;
    std::string err;
    if (!parse_policy(policy, &p, &err) || p == Policy::kNone || !device_policy(p)) {
        return PacingFactory();
    }
    return [](const PacingContext &ctx) -> std::unique_ptr<PacingGate> {
        Config      c;
        std::string err;
        if (!pacing_config_for(ctx, &c, &err)) {
            return nullptr; /* validated at iface open */
        }
        return std::make_unique<PacerGate>(std::make_unique<Pacer>(c));
    };
}

void register_pacing_policy(const std::string &policy, PacingFactory factory)
{
    std::lock_guard lock(g_pacing_mu);
    pacing_registry()[policy] = std::move(factory);
}

/// "auto": ibrc, but nothing on a loopback device (none given: unpaced). A loopback
/// path has no queue but the peer's socket buffer, which the window bounds;
/// what a controller reads there as delay is the peer's CPU copying and being
/// scheduled, and IBRC held 1 MiB UCP messages on lo at 3.8-5.1 GB/s against
/// 5.1-6.9 GB/s unpaced (docs/transport.md).
std::string resolve_pacing_policy(const char *policy, bool loopback)
{
    if (policy == nullptr) {
        return policy_name(Policy::kNone);
    }
    if (std::string_view(policy) == DOORBELL_PACING_AUTO) {
        return policy_name(loopback ? Policy::kNone : Policy::kIbrc);
    }
    return policy;
}

PacingFactory find_pacing_policy(const std::string &policy)
{
    std::lock_guard lock(g_pacing_mu);
    auto            it = pacing_registry().find(policy);
    return it == pacing_registry().end() ? builtin_pacing_policy(policy) : it->second;
}

} // namespace doorbell::pacing
