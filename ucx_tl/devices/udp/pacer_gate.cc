/*
 * The built-in pacing policies of the UDP device: each QP gets a
 * doorbell::pacing::Pacer (IBRC, DCQCN, TIMELY) behind the PacingGate seam.
 * The iface's line rate and MTU size the controller; the gain comes from
 * doorbell_iface_params_t::ibrc_gain (0: derived from the measured RTT).
 */
#include "pacing_gate.h"

#include "pacer.h"

namespace doorbell::udp {

namespace {

class PacerGate final : public PacingGate {
public:
    explicit PacerGate(std::unique_ptr<pacing::Pacer> pacer) : pacer_(std::move(pacer)) {}

    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes) override
    {
        return pacer_->next_send_ns(now_ns, bytes);
    }
    void on_send(uint64_t now_ns, uint32_t bytes) override { pacer_->on_send(now_ns, bytes); }
    void on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns) override
    {
        pacer_->on_ack(now_ns, acked_bytes, ce_bytes, rtt_ns);
    }
    void     on_loss(uint64_t now_ns) override { pacer_->on_loss(now_ns); }
    double   rate() const override { return pacer_->rate(); }
    uint64_t base_rtt_ns() const override { return pacer_->base_rtt_ns(); }

private:
    std::unique_ptr<pacing::Pacer> pacer_;
};

bool pacing_config_for(const PacingContext &ctx, pacing::Config *config_p, std::string *error_p)
{
    pacing::Config c;
    if (!pacing::parse_policy(ctx.policy, &c.policy, error_p)) {
        *error_p = ctx.device + ": " + *error_p;
        return false;
    }
    c.gain            = ctx.gain;
    c.line_rate_Bps   = ctx.line_rate;
    c.mtu_bytes       = ctx.mtu;
    c.target_delay_ns = ctx.target_delay_ns;
    c.target_floor_ns = ctx.target_floor_ns;
    c.min_rate_Bps    = ctx.min_rate;
    c.max_rate_Bps    = ctx.max_rate;
    c.ce_gain         = ctx.ce_gain;
    c.ce_beta         = ctx.ce_beta;
    c.probe_step      = ctx.probe_step;
    pacing::Config resolved;
    if (!pacing::resolve_config(c, &resolved, error_p)) {
        *error_p = ctx.device + ": pacing " + ctx.policy + ": " + *error_p;
        return false;
    }
    *config_p = resolved;
    return true;
}

} // namespace

PacingFactory builtin_pacing_policy(const std::string &policy)
{
    pacing::Policy p;
    std::string    err;
    if (!pacing::parse_policy(policy, &p, &err) || p == pacing::Policy::kNone) {
        return PacingFactory();
    }
    return [](const PacingContext &ctx) -> std::unique_ptr<PacingGate> {
        pacing::Config c;
        std::string    err;
        if (!pacing_config_for(ctx, &c, &err)) {
            return nullptr; /* validated at iface open */
        }
        return std::make_unique<PacerGate>(std::make_unique<pacing::Pacer>(c));
    };
}

} // namespace doorbell::udp
