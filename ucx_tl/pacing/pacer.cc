// Pacer: config validation, policy dispatch (static, through std::variant)
// and the token bucket.
#include "pacer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <sstream>

namespace doorbell::pacing {

namespace {

using Controller = std::variant<Ibrc, Dcqcn, Timely, Hpcc, Swift, FixedRate>;

Controller make_controller(const Config &c)
{
    switch (c.policy) {
    case Policy::kIbrc: {
        IbrcParams p{c.line_rate_Bps, c.min_rate_Bps, c.max_rate_Bps, c.init_rate_Bps,
                     c.target_delay_ns, c.gain, c.mtu_bytes, c.base_rtt_ns, c.ce_gain, c.ce_beta,
                     c.probe_step, c.fairness,
                     // The own target pivots at the ceiling on a path with a
                     // target floor (it never falls below the floor).
                     c.target_floor_ns ? 1 : kIbrcFairnessPivot};
        p.min_window_bytes = double(c.min_window_segments) * c.mtu_bytes;
        return Ibrc(p);
    }
    case Policy::kHpcc:
        return Hpcc({c.min_rate_Bps, c.max_rate_Bps, c.base_rtt_ns});
    case Policy::kSwift:
        return Swift({c.min_rate_Bps, c.max_rate_Bps, c.init_rate_Bps, c.mtu_bytes, c.base_rtt_ns,
                      c.target_delay_ns, c.target_delay_ns});
    case Policy::kDcqcn:
        return Dcqcn({c.line_rate_Bps, c.min_rate_Bps, c.max_rate_Bps, c.init_rate_Bps});
    case Policy::kTimely:
        return Timely(
            {c.line_rate_Bps, c.min_rate_Bps, c.max_rate_Bps, c.init_rate_Bps, c.target_delay_ns});
    case Policy::kNone:
        break;
    }
    return FixedRate(c.max_rate_Bps);
}

bool fail(std::string *error_p, const std::string &msg)
{
    if (error_p)
        *error_p = msg;
    return false;
}

bool finite_nonneg(double v)
{
    return std::isfinite(v) && v >= 0;
}

} // namespace

const char *policy_name(Policy policy)
{
    static constexpr const char *kNames[] = {
#define DOORBELL_PACING_POLICY_NAME(upper, camel, name) name,
        DOORBELL_PACING_ALL_POLICIES(DOORBELL_PACING_POLICY_NAME)
#undef DOORBELL_PACING_POLICY_NAME
    };
    size_t i = size_t(policy);
    return i < std::size(kNames) ? kNames[i] : "?";
}

bool parse_policy(std::string_view name, Policy *policy_p, std::string *error_p)
{
    std::string expected; /* "ibrc, dcqcn, timely or none" */
    for (size_t i = 0; i < std::size(kPolicies); ++i) {
        if (name == policy_name(kPolicies[i])) {
            *policy_p = kPolicies[i];
            return true;
        }
        expected += i == 0 ? "" : i + 1 == std::size(kPolicies) ? " or " : ", ";
        expected += policy_name(kPolicies[i]);
    }
    return fail(error_p, "unknown congestion control policy '" + std::string(name) +
                             "' (expected " + expected + ")");
}

bool parse_gain(std::string_view text, double *gain_p, std::string *error_p)
{
    if (text == "auto") {
        *gain_p = 0;
        return true;
    }
    double v       = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v <= 0)
        return fail(error_p, "bad IBRC gain '" + std::string(text) +
                                 "' (expected auto or a positive number, 1/s)");
    *gain_p = v;
    return true;
}

bool resolve_config(const Config &in, Config *out_p, std::string *error_p)
{
    Config             c = in;
    std::ostringstream err;
    if (!std::isfinite(c.line_rate_Bps) || c.line_rate_Bps < 1e3)
        err << "line rate " << c.line_rate_Bps << " B/s must be at least 1000 B/s";
    else if (!finite_nonneg(c.gain))
        err << "gain " << c.gain << " must be 0 (auto) or positive";
    else if (!finite_nonneg(c.min_rate_Bps) || !finite_nonneg(c.max_rate_Bps) ||
             !finite_nonneg(c.init_rate_Bps))
        err << "rates must be finite and non-negative";
    else if (c.mtu_bytes < 64 || c.mtu_bytes > (1u << 20))
        err << "segment size " << c.mtu_bytes << " B out of range [64, 1 MiB]";
    else if (c.target_delay_ns > 1000000000ull)
        err << "target delay " << c.target_delay_ns << " ns exceeds 1 s";
    else if (!(c.ce_gain > 0 && c.ce_gain <= 1))
        err << "CE estimate weight " << c.ce_gain << " outside (0, 1]";
    else if (!(c.ce_beta > 0 && c.ce_beta < 1))
        err << "CE cut " << c.ce_beta << " outside (0, 1)";
    else if (!(c.probe_step >= 0 && c.probe_step < 1))
        err << "probe step " << c.probe_step << " outside [0, 1)";
    else if (!(c.fairness >= 0 && c.fairness <= 16))
        err << "fairness spread " << c.fairness << " outside [0, 16] targets";
    else if (c.min_window_segments > 64)
        err << "smallest window " << c.min_window_segments << " segments above 64";
    else if (!(c.unscheduled_bdp >= 0 && c.unscheduled_bdp <= 16))
        err << "unscheduled budget " << c.unscheduled_bdp << " BDP outside [0, 16]";
    else if (c.base_rtt_ns > 1000000000ull)
        err << "base RTT " << c.base_rtt_ns << " ns exceeds 1 s";
    else if (c.policy == Policy::kHpcc && !c.telemetry)
        err << "hpcc needs in-band telemetry (INT records of the switches) in its ACKs, and this "
               "path carries none";
    if (!err.str().empty())
        return fail(error_p, err.str());

    if (c.max_rate_Bps == 0)
        c.max_rate_Bps = c.line_rate_Bps;
    if (c.min_rate_Bps == 0)
        c.min_rate_Bps = c.line_rate_Bps / 2048;
    if (c.min_rate_Bps > c.max_rate_Bps) {
        err << "min rate " << c.min_rate_Bps << " B/s exceeds max rate " << c.max_rate_Bps
            << " B/s";
        return fail(error_p, err.str());
    }
    if (c.target_delay_ns == 0) {
        // IBRC's own target; the queue allowance the baselines scale with.
        uint64_t auto_ns  = c.policy == Policy::kIbrc ?
                                ibrc_auto_target_ns(c.mtu_bytes, c.line_rate_Bps) :
                                uint64_t(kBaselineAllowanceSegments * c.mtu_bytes / c.line_rate_Bps *
                                         1e9);
        c.target_delay_ns = std::max<uint64_t>({1, c.target_floor_ns, auto_ns});
    }
    if (c.init_rate_Bps == 0) {
        // IBRC starts at one segment per loop time when the base RTT is
        // known before data (else at a fraction of the ceiling) and doubles
        // per loop time while the queue stays below its target; the other
        // policies start at the ceiling as their papers do.
        c.init_rate_Bps = c.policy == Policy::kIbrc ?
                              std::clamp(ibrc_initial_rate(c.mtu_bytes, c.max_rate_Bps,
                                                           c.base_rtt_ns, c.target_delay_ns),
                                         c.min_rate_Bps, c.max_rate_Bps) :
                              c.max_rate_Bps;
    }
    if (c.init_rate_Bps < c.min_rate_Bps || c.init_rate_Bps > c.max_rate_Bps) {
        err << "initial rate " << c.init_rate_Bps << " B/s outside [min, max]";
        return fail(error_p, err.str());
    }
    if (c.burst_bytes == 0)
        c.burst_bytes = 2 * c.mtu_bytes;
    if (c.fairness == 0)
        c.fairness = c.target_floor_ns ? kIbrcHostFairness : kIbrcFairness;
    *out_p = c;
    return true;
}

std::unique_ptr<Pacer> make_pacer(const Config &config, std::string *error_p)
{
    Config c;
    if (!resolve_config(config, &c, error_p))
        return nullptr;
    return std::make_unique<Pacer>(c);
}

Pacer::Pacer(const Config &resolved) :
    config_(resolved),
    ctrl_(make_controller(resolved)),
    // A path's first send is one segment; the rest follows at the rate (a
    // full bucket at every start would put two segments per flow on the
    // wire at once, which a synchronized incast of many flows cannot take).
    bucket_(resolved.init_rate_Bps, resolved.burst_bytes, resolved.mtu_bytes)
{
    // One BDP at the ceiling, with the base RTT known before data: without
    // it the path's size is unknown, and nothing goes unscheduled.
    if (resolved.policy == Policy::kIbrc)
        unsched_budget_ = uint64_t(resolved.unscheduled_bdp * resolved.max_rate_Bps *
                                   resolved.base_rtt_ns * 1e-9);
}

void Pacer::on_message(uint64_t, uint64_t bytes)
{
    auto *ibrc = std::get_if<Ibrc>(&ctrl_);
    if (ibrc == nullptr || !ibrc->starting() || bytes == 0 ||
        unsched_out_ + bytes > unsched_budget_)
        return;
    unsched_left_ += bytes;
    unsched_out_ += bytes;
}

void Pacer::on_idle_message(uint64_t, uint64_t bytes)
{
    uint64_t grant = std::min<uint64_t>(bytes, config_.idle_burst_bytes);
    if (grant == 0)
        return;
    unsched_left_ = std::max(unsched_left_, grant);
    idle_grant_   = true;
}

void Pacer::end_idle_grant(uint64_t)
{
    if (idle_grant_) {
        unsched_left_ = 0;
        idle_grant_   = false;
    }
}

bool Pacer::starting() const
{
    const auto *ibrc = std::get_if<Ibrc>(&ctrl_);
    return counters_.rtt_samples == 0 || (ibrc != nullptr && ibrc->starting());
}

bool Pacer::in_idle_burst(uint64_t sent_ns) const
{
    // Before any burst both bounds are 0: nothing is inside.
    return sent_ns != 0 && sent_ns + kSentSlackNs >= burst_from_ns_ &&
           (burst_left_ > 0 || sent_ns < burst_clear_ns_);
}

void Pacer::apply_rate(uint64_t now_ns)
{
    double r = std::visit([](auto &c) { return c.rate(); }, ctrl_);
    if (r != bucket_.rate()) {
        bucket_.set_rate(now_ns, r);
        if (burst_ns_ != 0)
            bucket_.set_depth(depth_at(r));
    }
}

double Pacer::depth_at(double rate_Bps) const
{
    double timed = std::min<double>(rate_Bps * double(burst_ns_) * 1e-9, burst_max_bytes_);
    return std::max<double>(config_.burst_bytes, timed);
}

void Pacer::set_time_burst(uint64_t burst_ns, uint32_t max_bytes)
{
    burst_ns_        = burst_ns;
    burst_max_bytes_ = max_bytes;
    bucket_.set_depth(depth_at(bucket_.rate()));
}

void Pacer::on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                   uint64_t sent_ns)
{
    Feedback f;
    f.now_ns      = now_ns;
    f.acked_bytes = acked_bytes;
    f.ce_bytes    = ce_bytes;
    f.rtt_ns      = rtt_ns;
    f.sent_ns     = sent_ns;
    on_feedback(f);
}

void Pacer::on_feedback(const Feedback &feedback)
{
    Feedback f = feedback;
    // An idle burst's own queue is no congestion signal (on_idle_message());
    // but a controller still in its start takes the samples: the start ends
    // on round trips, and a path whose messages all leave as bursts would
    // otherwise keep its first rate for good (a message behind a burst is
    // paced at it: 4 x 1 allreduce, cross-spine QPs at 4.8 MB/s).
    if (f.rtt_ns != 0 && in_idle_burst(f.sent_ns) && !starting()) {
        counters_.burst_samples++;
        f.rtt_ns = 0;
    }
    if (burst_left_ > 0) {
        burst_left_ -= std::min(burst_left_, f.acked_bytes);
        if (burst_left_ == 0) {
            burst_clear_ns_ = f.now_ns;
            note_delivered(f.now_ns);
        }
    }
    counters_.acks++;
    counters_.acked_bytes += f.acked_bytes;
    counters_.ce_bytes += f.ce_bytes;
    counters_.rtt_samples += f.rtt_ns != 0;
    unsched_out_ -= std::min(unsched_out_, f.acked_bytes);
    bool windowed = window_bytes() > 0;
    std::visit(
        [&](auto &c) {
            if constexpr (requires { c.on_feedback(f); })
                c.on_feedback(f);
            else
                c.on_ack(f.now_ns, f.acked_bytes, f.ce_bytes, f.rtt_ns);
        },
        ctrl_);
    apply_rate(f.now_ns);
    // A window that has just opened (IBRC's first segment answered): the
    // tokens the rate accrued while the path waited are not a licence to
    // burst; from here the rate paces from one segment.
    if (windowed && window_bytes() == 0)
        bucket_.cap(f.now_ns, config_.mtu_bytes);
}

double Pacer::window_bytes() const
{
    if (unsched_left_ > 0)
        return 0; // an unscheduled message goes whole
    return std::visit(
        [](const auto &c) -> double {
            if constexpr (requires { c.window_bytes(); })
                return c.window_bytes();
            else
                return 0;
        },
        ctrl_);
}

void Pacer::on_loss(uint64_t now_ns)
{
    counters_.losses++;
    std::visit([&](auto &c) { c.on_loss(now_ns); }, ctrl_);
    apply_rate(now_ns);
}

uint64_t Pacer::next_send_ns(uint64_t now_ns, uint32_t bytes)
{
    if (unsched_left_ > 0)
        return now_ns;
    return bucket_.next_send_ns(now_ns, bytes);
}

void Pacer::on_send(uint64_t now_ns, uint32_t bytes)
{
    counters_.sent_bytes += bytes;
    std::visit([&](auto &c) { c.on_send(now_ns, bytes); }, ctrl_);
    apply_rate(now_ns);
    if (unsched_left_ > 0) {
        // Unscheduled bytes take no tokens: the rate paces what follows.
        uint64_t n = std::min<uint64_t>(unsched_left_, bytes);
        if (idle_grant_) {
            // The burst's window opens at its first send (or stays open
            // while an earlier burst is still unacknowledged).
            if (burst_left_ == 0) {
                burst_from_ns_ = now_ns;
                burst_bytes_   = 0;
            }
            burst_left_ += n;
            burst_bytes_ += n;
        }
        unsched_left_ -= n;
        if (unsched_left_ == 0)
            idle_grant_ = false;
        counters_.unscheduled += n;
        bytes -= uint32_t(n);
    }
    if (bytes)
        bucket_.consume(now_ns, bytes);
}

void Pacer::note_delivered(uint64_t now_ns)
{
    if (burst_bytes_ < uint64_t(kDeliveredMinSegments) * config_.mtu_bytes ||
        now_ns <= burst_from_ns_)
        return;
    double rate = double(burst_bytes_) * 1e9 / double(now_ns - burst_from_ns_);
    if (auto *i = std::get_if<Ibrc>(&ctrl_))
        i->note_delivered(now_ns, rate);
}

void Pacer::set_delivery_floor(bool on)
{
    if (auto *i = std::get_if<Ibrc>(&ctrl_))
        i->set_delivery_floor(on);
}

double Pacer::ibrc_gain() const
{
    if (auto *i = std::get_if<Ibrc>(&ctrl_))
        return i->gain();
    return 0;
}

uint64_t Pacer::base_rtt_ns() const
{
    if (auto *i = std::get_if<Ibrc>(&ctrl_))
        return i->base_rtt_ns();
    if (auto *t = std::get_if<Timely>(&ctrl_))
        return t->min_rtt_ns();
    if (std::holds_alternative<Hpcc>(ctrl_) || std::holds_alternative<Swift>(ctrl_))
        return config_.base_rtt_ns;
    return 0;
}

} // namespace doorbell::pacing
