// doorbell-sim: command line. A linear list of passes over one Context:
// parse the arguments, resolve the fabric, run the scenario (or the gain
// sweep), report.
//
//   doorbell-sim [run] [options]      one scenario, one policy (or --compare:
//                                     every policy, lossy and lossless)
//   doorbell-sim sweep-gain [options] IBRC gain swept a decade either side of
//                                     the derived value on the seed's two
//                                     fabrics (10 hosts at 3.2 us, 100 at 6.8)
#include <algorithm>
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
static constexpr uint32_t kSweepSeeds = 16;     ///< sweep-gain: seeds averaged per row

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
    bool                     hosts_set     = false; ///< --hosts or an explicit fabric given
    bool                     ecn_set       = false; ///< the marking was given
    std::vector<double>      sweep_rtts_us = {3.2, 5.0, 6.8};
    std::vector<double>      sweep_scales  = {0.1, 0.2, 0.5, 1, 2, 5, 10};
    uint32_t                 sweep_seeds   = kSweepSeeds; ///< runs averaged per sweep row
    std::vector<SimResult>   results;
    std::vector<std::string> labels; ///< sweep: row label
    std::vector<char>        marks;  ///< sweep: '*' the best row of its block, '=' a tie with it
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
  --scenario incast|permutation|allreduce|mixed   traffic (default incast)
  --hosts 8|10|100|128      fabric preset (8: 2 leaves x 4, 4 spines; 128: 8 x 16, 16 spines;
                            the seed's 10: 2 x 5, 5 spines, 3.2 us; 100: 10 x 10, 10 spines, 6.8 us)
  --leaves N --spines N --hosts-per-leaf N  explicit fabric
  --link-gbps G             link rate (default 400)
  --hop-delay-ns N          per-hop delay (default 584: base RTT ~5.0 us)
  --base-rtt-us X           set the hop delay for this cross-spine base RTT
  --mtu BYTES               segment size (default 4096)
  --buffer-kib N            switch buffer per egress port (default 512)
  --ecn-kib N               ECN step marking threshold (default 75 % of the buffer)
  --red KMIN_KIB,KMAX_KIB,PMAX   RED marking instead (DCQCN's switches; --compare gives
                            dcqcn its paper's, scaled to the link rate)
  --credit                  credit-based (lossless) flow control
  --cc ibrc|dcqcn|timely|hpcc|swift|none   pacing policy (default ibrc)
  --gain auto|X             IBRC gain in 1/s (default auto = derived)
  --gain-scale M            IBRC gain = M x derived
  --target-ns N             queueing-delay target (default auto)
  --fairness F              IBRC own-target spread, in targets (default auto)
  --init-gbps G             first rate of every flow (default: the policy's)
  --duration-us N           simulated time (default 10000)
  --warmup-us N             statistics start (default 10 % of duration)
  --sample-ns N             time-series step (default 1000)
  --allreduce-kib N         allreduce message size (default 4096)
  --join-us N               incast: the last sender joins then (default half the duration)
  --no-join                 incast: every sender starts at once
  --load F                  mixed: offered load per host link (default 0.5)
  --on-us N --off-us N      on/off senders: mean ON and OFF periods (exponential);
                            sweep-gain defaults to 200/50, --on-us 0 for a static incast
  --seed N                  ECMP, start-jitter, marking and arrival seed (default 1)
  --seeds N                 sweep-gain: average each row over seeds seed..seed+N-1 (default 16)
  --scales M,M,...          sweep-gain: fixed gains, in multiples of the design point's,
                            beside the derived law's row (auto) (default 0.1,0.2,0.5,1,2,5,10)
  --compare                 every policy on the same scenario, lossy and lossless
  --json                    JSON instead of the table
  --csv FILE                time series of the (first) run as CSV
  --plot FILE.png           plot every run's time series (and slowdowns)
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
            ctx.hosts = uint32_t(u64()), ctx.hosts_set = true;
            if (!apply_host_preset(ctx.hosts, &c))
                Fatal(ctx) << "--hosts: presets are 8, 10, 100 and 128; use "
                              "--leaves/--spines/--hosts-per-leaf";
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
            c.ecn_bytes = uint32_t(u64() * 1024), ctx.ecn_set = true;
        } else if (a == "--red") {
            std::string v = value();
            double      kmin, kmax, pmax;
            char        tail;
            if (std::sscanf(v.c_str(), "%lf,%lf,%lf%c", &kmin, &kmax, &pmax, &tail) != 3 ||
                !(kmin >= 0 && kmax > kmin && pmax > 0 && pmax <= 1))
                Fatal(ctx) << "--red: '" << v << "' is not KMIN_KIB,KMAX_KIB,PMAX";
            c.ecn_kmin_bytes = uint32_t(kmin * 1024), c.ecn_kmax_bytes = uint32_t(kmax * 1024);
            c.ecn_pmax = pmax, ctx.ecn_set = true;
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
        } else if (a == "--fairness") {
            c.cc.fairness = dbl();
        } else if (a == "--duration-us") {
            c.duration_ns = u64() * 1000;
        } else if (a == "--warmup-us") {
            c.warmup_ns = u64() * 1000;
        } else if (a == "--sample-ns") {
            c.sample_ns = u64();
        } else if (a == "--allreduce-kib") {
            c.allreduce_bytes = u64() * 1024;
        } else if (a == "--join-us") {
            c.join_ns = u64() * 1000, c.join = true;
        } else if (a == "--no-join") {
            c.join = false;
        } else if (a == "--load") {
            c.load = dbl();
        } else if (a == "--on-us") {
            c.on_ns = u64() * 1000, ctx.on_off_set = true;
        } else if (a == "--off-us") {
            c.off_ns = u64() * 1000, ctx.on_off_set = true;
        } else if (a == "--seed") {
            c.seed = u64();
        } else if (a == "--seeds") {
            uint64_t n = u64();
            if (n < 1 || n > 64)
                Fatal(ctx) << "--seeds must be in [1, 64]";
            ctx.sweep_seeds = uint32_t(n);
        } else if (a == "--scales") {
            std::string        v = value(), item;
            std::istringstream in(v);
            ctx.sweep_scales.clear();
            while (std::getline(in, item, ',')) {
                double m = 0;
                if (!to_double(item, &m) || !(m > 0) || m > 1000)
                    Fatal(ctx) << "--scales: '" << item << "' is not a scale in (0, 1000]";
                ctx.sweep_scales.push_back(m);
            }
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
        ctx.hosts = ctx.cfg.leaves * ctx.cfg.hosts_per_leaf, ctx.hosts_set = true;
}

// DCQCN's switches mark by RED: Kmin 5 KB, Kmax 200 KB, Pmax 1 % at 40 Gb/s
// (Zhu et al., Sec. 5), thresholds scaled with the link rate and Kmax kept
// within the step threshold the other policies get (75 % of the buffer).
void apply_dcqcn_marking(SimConfig &c)
{
    double scale     = c.link_gbps / 40;
    double step      = c.ecn_bytes ? c.ecn_bytes : c.buffer_bytes / 4 * 3;
    c.ecn_kmin_bytes = uint32_t(5000 * scale);
    c.ecn_kmax_bytes = uint32_t(std::min(200000 * scale, step));
    c.ecn_pmax       = 0.01;
    if (c.ecn_kmin_bytes >= c.ecn_kmax_bytes)
        c.ecn_kmax_bytes = 0; // a buffer too small for RED: the step
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

// The mean of runs that differ only in their seed (ECMP, start jitter,
// on/off periods): one run's ranking of gains a few per cent apart is the
// seed's as much as the gain's. Counts are summed, figures averaged.
SimResult mean_of(const std::vector<SimResult> &runs)
{
    SimResult m   = runs[0];
    double    n   = double(runs.size());
    auto      avg = [&](auto field) {
        double s = 0;
        for (const SimResult &r : runs)
            s += r.*field;
        return s / n;
    };
    m.utilization   = avg(&SimResult::utilization);
    m.rtt_mean_us   = avg(&SimResult::rtt_mean_us);
    m.rtt_std_us    = avg(&SimResult::rtt_std_us);
    m.rtt_p99_us    = avg(&SimResult::rtt_p99_us);
    m.qdelay_p99_us = avg(&SimResult::qdelay_p99_us);
    m.retx_pct      = avg(&SimResult::retx_pct);
    m.retx_all_pct  = avg(&SimResult::retx_all_pct);
    m.dip_period_us = avg(&SimResult::dip_period_us);
    m.jain          = avg(&SimResult::jain);
    m.jain_window   = avg(&SimResult::jain_window);
    m.dips = 0, m.drops = 0, m.events = 0, m.wall_s = 0;
    for (const SimResult &r : runs) {
        m.queue_max_kib = std::max(m.queue_max_kib, r.queue_max_kib);
        m.dips += r.dips;
        m.drops += r.drops;
        m.events += r.events;
        m.wall_s += r.wall_s;
    }
    m.events_per_s = m.wall_s > 0 ? m.events / m.wall_s : 0;
    return m;
}

void run_one(Context &ctx, const SimConfig &c)
{
    SimResult   r;
    std::string err;
    if (!run_sim(c, &r, &err))
        Fatal(ctx) << err;
    ctx.results.push_back(std::move(r));
}

// Pass 2: one scenario (or every policy on it).
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
    // Every policy on the lossy fabric, then on the lossless one (where
    // DCQCN and HPCC are deployed), each with its own switch marking; the
    // unpaced fabric last, as the reference.
    std::vector<pacing::Policy> order;
    for (pacing::Policy p : pacing::kPolicies)
        if (p != pacing::Policy::kNone)
            order.push_back(p);
    order.push_back(pacing::Policy::kNone);
    for (bool credit : {false, true})
        for (pacing::Policy p : order) {
            SimConfig k = c;
            k.cc.policy = p;
            k.credit    = credit;
            if (p == pacing::Policy::kDcqcn && !ctx.ecn_set)
                apply_dcqcn_marking(k);
            run_one(ctx, k);
        }
}

// A sweep block's spreads and marks. Each row is compared with the derived
// gain's row and with the best one seed by seed (same seed, same ECMP,
// jitter and on/off periods): the best has the most mean power, and a row
// whose deficit to it is within kSweepTieStdErrors standard errors of its
// paired mean is a tie, a lead the seeds do not resolve.
void mark_block(Context &ctx, size_t first, const std::vector<std::vector<SimResult>> &rows)
{
    std::vector<std::vector<double>> powers;
    for (const std::vector<SimResult> &runs : rows) {
        powers.emplace_back();
        for (const SimResult &r : runs)
            powers.back().push_back(power(r));
    }
    size_t derived = 0; // the derived law's row comes first
    size_t best    = 0;
    for (size_t i = 0; i < rows.size(); i++) {
        ctx.results[first + i].spread = seed_spread(rows[i], powers[derived]);
        if (ctx.results[first + i].spread.power > ctx.results[first + best].spread.power)
            best = i;
    }
    for (size_t i = 0; i < rows.size(); i++)
        ctx.marks.push_back(i == best                                  ? '*' :
                            paired_diff(powers[i], powers[best]).tie() ? '=' :
                                                                         ' ');
}

// Pass 2 (sweep-gain): the seed's experiment, IBRC at a fixed ECN threshold,
// on the seed's two fabrics (10 hosts at 3.2 us, 100 at 6.8 us) or on the
// one given at 3.2 / 5.0 / 6.8 us. Senders come and go (ON 200 us / OFF 50
// us on average unless given): a gain shows itself in how the loop refills
// and drains, which a static incast, once settled, hides.
void sweep_gain(Context &ctx)
{
    if (!ctx.on_off_set)
        ctx.cfg.on_ns = kSweepOnNs, ctx.cfg.off_ns = kSweepOffNs;
    ctx.cfg.join = false;
    std::vector<std::pair<uint32_t, double>> blocks; // hosts (0 = as given), base RTT
    if (!ctx.hosts_set)
        blocks = {{10, 3.2}, {100, 6.8}};
    else if (ctx.base_rtt_us > 0)
        blocks = {{0, ctx.base_rtt_us}};
    else
        for (double rtt : ctx.sweep_rtts_us)
            blocks.push_back({0, rtt});
    for (auto [hosts, rtt] : blocks) {
        SimConfig base = ctx.cfg;
        if (hosts)
            apply_host_preset(hosts, &base);
        base.hop_delay_ns                         = hop_delay_for_rtt(base, uint64_t(rtt * 1000));
        size_t                              first = ctx.results.size();
        std::vector<std::vector<SimResult>> rows;
        std::vector<double>                 scales = {0}; // 0: the derived law
        scales.insert(scales.end(), ctx.sweep_scales.begin(), ctx.sweep_scales.end());
        for (double m : scales) {
            SimConfig c = base;
            c.cc.policy = pacing::Policy::kIbrc;
            c.cc.gain   = 0;
            apply_gain_scale(c, m);
            std::vector<SimResult> runs;
            for (uint32_t i = 0; i < ctx.sweep_seeds; i++) {
                SimConfig k = c;
                k.seed      = c.seed + i;
                run_one(ctx, k);
                runs.push_back(std::move(ctx.results.back()));
                ctx.results.pop_back();
                runs.back().series.clear();
            }
            ctx.results.push_back(mean_of(runs));
            rows.push_back(std::move(runs));
            char label[64];
            if (m > 0)
                std::snprintf(label, sizeof label, "%5u %6.2f %5.1fx", c.leaves * c.hosts_per_leaf,
                              base_rtt_ns(c) * 1e-3, m);
            else
                std::snprintf(label, sizeof label, "%5u %6.2f  auto", c.leaves * c.hosts_per_leaf,
                              base_rtt_ns(c) * 1e-3);
            ctx.labels.push_back(label);
        }
        mark_block(ctx, first, rows);
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
            "gain sweep: %s, ECN at %u KiB of %u KiB, senders ON %.0f / OFF %.0f us; "
            "each row the mean of %u seeds (drops, dips summed); power = utilization / "
            "(base RTT + p99 queueing delay), mean over the seeds, sd%% its spread; "
            "vs_auto%% = power against the derived law's (auto), seed by seed, +- its standard "
            "error; * = best of its block, = within %.0f standard errors of it\n",
            scenario_name(ctx.cfg.scenario),
            (ctx.cfg.ecn_bytes ? ctx.cfg.ecn_bytes : ctx.cfg.buffer_bytes / 4 * 3) >> 10,
            ctx.cfg.buffer_bytes >> 10, ctx.cfg.on_ns * 1e-3, ctx.cfg.off_ns * 1e-3,
            ctx.sweep_seeds, kSweepTieStdErrors);
        std::printf("hosts rtt_us  scale   %s %8s %5s %11s %11s %14s\n", line.c_str(), "power%/us",
                    "sd%", "util%range", "qd99_range", "vs_auto%");
        while (std::getline(in, line)) {
            const SeedSpread &d = ctx.results[row].spread;
            std::printf("%s %c %s %9.3f %5.2f %5.1f-%5.1f %5.2f-%5.2f %+7.2f+-%5.2f\n",
                        ctx.labels[row].c_str(), ctx.marks[row], line.c_str(), 100 * d.power,
                        d.power_sd_pct, 100 * d.util_min, 100 * d.util_max, d.qd99_min_us,
                        d.qd99_max_us, d.vs_derived.mean_pct, d.vs_derived.se_pct);
            row++;
        }
    } else {
        const SimResult &r = ctx.results[0];
        std::printf(
            "scenario %s, %u hosts, %u flows, base RTT %.2f us, derived IBRC gain %.4g 1/s\n",
            scenario_name(ctx.cfg.scenario), ctx.hosts, r.flows, r.base_rtt_ns * 1e-3,
            r.derived_gain);
        std::cout << format_table(ctx.results);
        if (ctx.cfg.scenario == Scenario::kMixed) {
            std::printf("flow completion time slowdown (FCT / FCT alone), web-search sizes at "
                        "%.0f %% load; short: up to %llu bytes\n",
                        100 * ctx.cfg.load, (unsigned long long)ctx.cfg.short_bytes);
            std::cout << format_fct_table(ctx.results);
        }
        for (const SimResult &x : ctx.results)
            if (x.allreduce_us > 0)
                std::printf("%s %s: allreduce of %llu KiB done at %.2f us\n", x.policy.c_str(),
                            x.credit ? "credit" : "lossy",
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
        if (!write_plot(ctx.results, ctx.plot, &err))
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
