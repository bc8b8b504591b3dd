// doorbell-sim: command line. A linear list of passes over one Context:
// parse the arguments, resolve the fabric, run the scenario (or the gain
// sweep), report.
//
//   doorbell-sim [run] [options]      one scenario, one policy (or --compare)
//   doorbell-sim sweep-gain [options] IBRC gain swept a decade either side of
//                                     the derived value, base RTTs 3.2/5.0/6.8 us
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "sim.h"

using namespace doorbell;
using namespace doorbell::sim;

namespace {

static constexpr uint64_t kSweepOnNs  = 200000; ///< sweep-gain: mean ON period
static constexpr uint64_t kSweepOffNs = 50000;  ///< sweep-gain: mean OFF period

struct Context {
    std::string              command = "run";
    SimConfig                cfg;
    uint32_t                 hosts       = 8;
    double                   base_rtt_us = 0; ///< overrides the hop delay when set
    double                   gain_scale  = 0; ///< IBRC gain = scale x derived, when set
    bool                     compare     = false;
    bool                     on_off_set  = false; ///< --on-us/--off-us given
    bool                     json        = false;
    std::string              plot, csv;
    std::vector<double>      sweep_rtts_us = {3.2, 5.0, 6.8};
    std::vector<double>      sweep_scales  = {0.1, 0.2, 0.5, 1, 2, 5, 10};
    std::vector<SimResult>   results;
    std::vector<std::string> labels; ///< sweep: row label
};

// Fatal(ctx) << "message": prints and exits 2 at the end of the statement.
struct Fatal {
    explicit Fatal(Context &) {}
    [[noreturn]] ~Fatal()
    {
        std::cerr << "doorbell-sim: error: " << out.str() << "\n";
        std::exit(2);
    }
    template <class T>
    Fatal &operator<<(const T &v)
    {
        out << v;
        return *this;
    }
    std::ostringstream out;
};

const char *kUsage = R"(usage: doorbell-sim [run|sweep-gain] [options]
  --scenario incast|permutation|allreduce   traffic (default incast)
  --hosts 8|128             fabric preset (8: 2 leaves x 4, 4 spines; 128: 8 x 16, 16 spines)
  --leaves N --spines N --hosts-per-leaf N  explicit fabric
  --link-gbps G             link rate (default 400)
  --hop-delay-ns N          per-hop delay (default 584: base RTT ~5.0 us)
  --base-rtt-us X           set the hop delay for this cross-spine base RTT
  --mtu BYTES               segment size (default 4096)
  --buffer-kib N            switch buffer per egress port (default 512)
  --ecn-kib N               ECN marking threshold (default 75 % of the buffer)
  --credit                  credit-based (lossless) flow control
  --cc ibrc|dcqcn|timely|none   pacing policy (default ibrc)
  --gain auto|X             IBRC gain in 1/s (default auto = derived)
  --gain-scale M            IBRC gain = M x derived
  --target-ns N             queueing-delay target (default auto)
  --init-gbps G             first rate of every flow (default: line rate)
  --duration-us N           simulated time (default 10000)
  --warmup-us N             statistics start (default 10 % of duration)
  --sample-ns N             time-series step (default 1000)
  --allreduce-kib N         allreduce message size (default 4096)
  --on-us N --off-us N      on/off senders: mean ON and OFF periods (exponential);
                            sweep-gain defaults to 200/50, --on-us 0 for a static incast
  --seed N                  ECMP, start-jitter and on/off seed (default 1)
  --compare                 run ibrc, dcqcn, timely and none on the same scenario
  --json                    JSON instead of the table
  --csv FILE                time series of the (first) run as CSV
  --plot FILE.png           plot rate, goodput and queue over time
)";

bool to_u64(const std::string &s, uint64_t *v)
{
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
        return false;
    *v = std::stoull(s);
    return true;
}

bool to_double(const std::string &s, double *v)
{
    char *end = nullptr;
    *v        = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size();
}

// Pass 1: arguments into the Context.
void parse_args(Context &ctx, int argc, char **argv)
{
    int i = 1;
    if (i < argc && argv[i][0] != '-')
        ctx.command = argv[i++];
    if (ctx.command != "run" && ctx.command != "sweep-gain")
        Fatal(ctx) << "unknown command '" << ctx.command << "' (run, sweep-gain)";
    bool explicit_fabric = false;
    for (; i < argc; i++) {
        std::string a     = argv[i];
        auto        value = [&]() -> std::string {
            if (i + 1 >= argc)
                Fatal(ctx) << a << ": missing value";
            return argv[++i];
        };
        auto u64 = [&]() {
            std::string v = value();
            uint64_t    x;
            if (!to_u64(v, &x))
                Fatal(ctx) << a << ": '" << v << "' is not a non-negative integer";
            return x;
        };
        auto dbl = [&]() {
            std::string v = value();
            double      x;
            if (!to_double(v, &x) || !(x > 0))
                Fatal(ctx) << a << ": '" << v << "' is not a positive number";
            return x;
        };
        SimConfig &c = ctx.cfg;
        if (a == "-h" || a == "--help") {
            std::cout << kUsage;
            std::exit(0);
        } else if (a == "--scenario") {
            std::string v = value();
            if (!parse_scenario(v, &c.scenario))
                Fatal(ctx) << "--scenario: unknown '" << v << "' (incast, permutation, allreduce)";
        } else if (a == "--hosts") {
            ctx.hosts = uint32_t(u64());
            if (!apply_host_preset(ctx.hosts, &c))
                Fatal(ctx)
                    << "--hosts: presets are 8 and 128; use --leaves/--spines/--hosts-per-leaf";
        } else if (a == "--leaves") {
            c.leaves = uint32_t(u64()), explicit_fabric = true;
        } else if (a == "--spines") {
            c.spines = uint32_t(u64()), explicit_fabric = true;
        } else if (a == "--hosts-per-leaf") {
            c.hosts_per_leaf = uint32_t(u64()), explicit_fabric = true;
        } else if (a == "--link-gbps") {
            c.link_gbps = dbl();
        } else if (a == "--hop-delay-ns") {
            c.hop_delay_ns = u64();
        } else if (a == "--base-rtt-us") {
            ctx.base_rtt_us = dbl();
        } else if (a == "--mtu") {
            c.mtu_bytes = uint32_t(u64());
        } else if (a == "--buffer-kib") {
            c.buffer_bytes = uint32_t(u64() * 1024);
        } else if (a == "--ecn-kib") {
            c.ecn_bytes = uint32_t(u64() * 1024);
        } else if (a == "--credit") {
            c.credit = true;
        } else if (a == "--cc") {
            std::string v = value(), err;
            if (!pacing::parse_policy(v, &c.cc.policy, &err))
                Fatal(ctx) << "--cc: " << err;
        } else if (a == "--gain") {
            std::string v = value(), err;
            if (!pacing::parse_gain(v, &c.cc.gain, &err))
                Fatal(ctx) << "--gain: " << err;
        } else if (a == "--gain-scale") {
            ctx.gain_scale = dbl();
        } else if (a == "--init-gbps") {
            c.cc.init_rate_Bps = dbl() * 1e9 / 8;
        } else if (a == "--target-ns") {
            c.cc.target_delay_ns = u64();
        } else if (a == "--duration-us") {
            c.duration_ns = u64() * 1000;
        } else if (a == "--warmup-us") {
            c.warmup_ns = u64() * 1000;
        } else if (a == "--sample-ns") {
            c.sample_ns = u64();
        } else if (a == "--allreduce-kib") {
            c.allreduce_bytes = u64() * 1024;
        } else if (a == "--on-us") {
            c.on_ns = u64() * 1000, ctx.on_off_set = true;
        } else if (a == "--off-us") {
            c.off_ns = u64() * 1000, ctx.on_off_set = true;
        } else if (a == "--seed") {
            c.seed = u64();
        } else if (a == "--compare") {
            ctx.compare = true;
        } else if (a == "--json") {
            ctx.json = true;
        } else if (a == "--csv") {
            ctx.csv = value();
        } else if (a == "--plot") {
            ctx.plot = value();
        } else {
            Fatal(ctx) << "unknown option '" << a << "' (see --help)";
        }
    }
    if (explicit_fabric)
        ctx.hosts = ctx.cfg.leaves * ctx.cfg.hosts_per_leaf;
}

// The IBRC gain for a config: derived x scale when --gain-scale is given.
void apply_gain_scale(SimConfig &c, double scale)
{
    if (scale <= 0)
        return;
    pacing::Config pc = c.cc, r;
    pc.line_rate_Bps  = c.link_gbps * 1e9 / 8;
    pc.mtu_bytes      = c.mtu_bytes;
    pc.gain           = 0;
    std::string err;
    if (pacing::resolve_config(pc, &r, &err))
        c.cc.gain = scale * pacing::ibrc_derived_gain(base_rtt_ns(c) + r.target_delay_ns);
}

void run_one(Context &ctx, const SimConfig &c)
{
    SimResult   r;
    std::string err;
    if (!run_sim(c, &r, &err))
        Fatal(ctx) << err;
    ctx.results.push_back(std::move(r));
}

// Pass 2: one scenario (or the four policies on it).
void run_scenarios(Context &ctx)
{
    SimConfig c = ctx.cfg;
    if (ctx.base_rtt_us > 0)
        c.hop_delay_ns = hop_delay_for_rtt(c, uint64_t(ctx.base_rtt_us * 1000));
    apply_gain_scale(c, ctx.gain_scale);
    if (!ctx.compare) {
        run_one(ctx, c);
        return;
    }
    for (pacing::Policy p : pacing::kPolicies) {
        SimConfig k = c;
        k.cc.policy = p;
        run_one(ctx, k);
    }
}

// Pass 2 (sweep-gain): the seed's experiment, IBRC at a fixed ECN threshold.
// Senders come and go (ON 200 us / OFF 50 us on average unless given): a
// gain shows itself in how the loop refills and drains, which a static
// incast, once settled, hides.
void sweep_gain(Context &ctx)
{
    if (!ctx.on_off_set)
        ctx.cfg.on_ns = kSweepOnNs, ctx.cfg.off_ns = kSweepOffNs;
    for (double rtt : ctx.sweep_rtts_us) {
        for (double m : ctx.sweep_scales) {
            SimConfig c    = ctx.cfg;
            c.cc.policy    = pacing::Policy::kIbrc;
            c.hop_delay_ns = hop_delay_for_rtt(c, uint64_t(rtt * 1000));
            apply_gain_scale(c, m);
            run_one(ctx, c);
            char label[64];
            std::snprintf(label, sizeof label, "%5.2f %5.1fx", base_rtt_ns(c) * 1e-3, m);
            ctx.labels.push_back(label);
        }
    }
}

// Pass 3: report.
void report(Context &ctx)
{
    if (ctx.json) {
        std::cout << format_json(ctx.results);
    } else if (ctx.command == "sweep-gain") {
        std::string        t = format_table(ctx.results);
        std::istringstream in(t);
        std::string        line;
        size_t             row = 0;
        std::getline(in, line);
        std::printf(
            "gain sweep: %s, %u hosts, ECN at %u KiB of %u KiB, senders ON %.0f / OFF %.0f us\n",
            scenario_name(ctx.cfg.scenario), ctx.hosts,
            (ctx.cfg.ecn_bytes ? ctx.cfg.ecn_bytes : ctx.cfg.buffer_bytes / 4 * 3) >> 10,
            ctx.cfg.buffer_bytes >> 10, ctx.cfg.on_ns * 1e-3, ctx.cfg.off_ns * 1e-3);
        std::cout << "rtt_us  scale  " << line << "\n";
        while (std::getline(in, line))
            std::cout << ctx.labels[row++] << "  " << line << "\n";
    } else {
        const SimResult &r = ctx.results[0];
        std::printf(
            "scenario %s, %u hosts, %u flows, base RTT %.2f us, derived IBRC gain %.4g 1/s\n",
            scenario_name(ctx.cfg.scenario), ctx.hosts, r.flows, r.base_rtt_ns * 1e-3,
            r.derived_gain);
        std::cout << format_table(ctx.results);
        for (const SimResult &x : ctx.results)
            if (x.allreduce_us > 0)
                std::printf("%s: allreduce of %llu KiB done at %.2f us\n", x.policy.c_str(),
                            (unsigned long long)(ctx.cfg.allreduce_bytes >> 10), x.allreduce_us);
        uint64_t ev   = 0;
        double   wall = 0;
        for (const SimResult &x : ctx.results)
            ev += x.events, wall += x.wall_s;
        std::printf("%llu events in %.2f s (%.2f M events/s)\n", (unsigned long long)ev, wall,
                    wall > 0 ? ev / wall * 1e-6 : 0);
    }
    if (!ctx.csv.empty()) {
        std::ofstream f(ctx.csv);
        f << format_csv(ctx.results[0]);
        if (!f)
            Fatal(ctx) << "--csv: cannot write " << ctx.csv;
    }
    if (!ctx.plot.empty()) {
        std::string err;
        if (!write_plot(ctx.results[0], ctx.plot, &err))
            Fatal(ctx) << "--plot: " << err;
    }
}

} // namespace

int main(int argc, char **argv)
{
    Context ctx;
    apply_host_preset(ctx.hosts, &ctx.cfg);
    // Read the command line.
    parse_args(ctx, argc, argv);
    // Simulate: one scenario, or the gain sweep.
    if (ctx.command == "sweep-gain")
        sweep_gain(ctx);
    else
        run_scenarios(ctx);
    // Print the table or JSON; write the CSV and plot when asked.
    report(ctx);
    return 0;
}
