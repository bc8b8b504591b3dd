// NIC and GPU temperatures from hwmon (/sys/bus/pci/devices/<bdf>/hwmon/*):
// temp<i>_input against the throttling threshold temp<i>_crit (else
// temp<i>_max), all in millidegrees Celsius. A NIC that overheats throttles or
// resets its link long before anything logs an error. At or above the
// threshold is a FAIL; within kMarginMilliC of it, or above temp<i>_max, a
// WARN.
#include "doctor.h"

namespace doorbell::doctor {

static constexpr int64_t kMarginMilliC = 5000; ///< 5 degrees C of head-room before the threshold

struct Sensor {
    std::string            path;      ///< .../hwmonN/temp1
    int64_t                input = 0; ///< millidegrees C
    std::optional<int64_t> crit, max;
};

static std::optional<int64_t> read_milli(const Fs &fs, const std::string &path)
{
    ReadResult r = fs.read(path);
    if (!r.ok)
        return std::nullopt;
    bool neg = !r.value.empty() && r.value[0] == '-';
    auto v   = parse_u64(neg ? r.value.substr(1) : r.value);
    if (!v || *v > 1000000)
        return std::nullopt;
    return neg ? -int64_t(*v) : int64_t(*v);
}

static std::vector<Sensor> read_sensors(const Fs &fs, const std::string &bdf)
{
    std::vector<Sensor> sensors;
    std::string         dir    = "/sys/bus/pci/devices/" + bdf + "/hwmon";
    auto                hwmons = fs.list(dir);
    if (!hwmons)
        return sensors;
    for (const std::string &h : *hwmons) {
        auto files = fs.list(dir + "/" + h);
        if (!files)
            continue;
        for (const std::string &file : *files) {
            // temp<i>_input
            if (file.rfind("temp", 0) != 0 || file.size() < 11 ||
                file.compare(file.size() - 6, 6, "_input") != 0)
                continue;
            std::string stem  = dir + "/" + h + "/" + file.substr(0, file.size() - 6);
            auto        input = read_milli(fs, stem + "_input");
            if (!input)
                continue;
            sensors.push_back(Sensor{stem, *input, read_milli(fs, stem + "_crit"),
                                     read_milli(fs, stem + "_max")});
        }
    }
    return sensors;
}

static std::string celsius(int64_t milli)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f C", double(milli) / 1000.0);
    return buf;
}

static void check_device(Context &ctx, const std::string &bdf, const std::string &label, bool gpu,
                         Report &out)
{
    std::vector<Sensor> sensors = read_sensors(ctx.fs, bdf);
    if (sensors.empty()) {
        std::string dir = "/sys/bus/pci/devices/" + bdf + "/hwmon";
        Finding    &f   = add_finding(
                 out, "thermal", label, Status::kWarn, "no hwmon temperature sensor",
            gpu ?
                     "the NVIDIA driver reports GPU temperature through NVML: nvidia-smi -q -d TEMPERATURE" :
                     "use a kernel whose NIC driver exports hwmon (mlx5: Linux >= 6.10) or mget_temp -d " +
                    bdf);
        f.evidence.push_back(dir + (ctx.fs.is_dir(dir) ? ": no readable temp*_input" : ": absent"));
        return;
    }
    Status                   s = Status::kPass;
    std::string              summary;
    std::vector<std::string> ev;
    for (const Sensor &x : sensors) {
        std::optional<int64_t> limit = x.crit ? x.crit : x.max;
        std::string            line  = x.path + "_input: " + celsius(x.input);
        if (x.crit)
            line += ", _crit: " + celsius(*x.crit);
        if (x.max)
            line += ", _max: " + celsius(*x.max);
        ev.push_back(line);
        Status here = Status::kPass;
        if (limit && x.input >= *limit)
            here = Status::kFail;
        else if ((limit && x.input + kMarginMilliC >= *limit) || (x.max && x.input >= *x.max))
            here = Status::kWarn;
        if (here > s || summary.empty()) {
            s       = std::max(s, here);
            summary = celsius(x.input) +
                      (limit ? " (threshold " + celsius(*limit) + ")" : " (no threshold exposed)");
        }
    }
    const char *what = s == Status::kFail ? ": at or above the throttling threshold" :
                       s == Status::kWarn ? ": close to the throttling threshold" :
                                            "";
    Finding    &f    = add_finding(
              out, "thermal", label, s, summary + what,
        s == Status::kPass ?
                  "" :
                  "improve airflow to the card (fan profile, blanking panels, inlet temperature); check the heatsink");
    f.evidence = ev;
}

void check_thermal(Context &ctx, Report &out)
{
    if (ctx.inv.nics.empty() && ctx.inv.gpus.empty()) {
        warn_host(out, "thermal", "no RDMA NIC and no NVIDIA GPU: no temperature to check",
                  "nothing to fix unless this node should have them", no_nic_or_gpu(ctx.inv));
        return;
    }
    for (const PciFunction &n : ctx.inv.nics) {
        std::string label = n.bdf + " (NIC)";
        for (const RdmaDevice &d : ctx.inv.rdma)
            if (d.bdf == n.bdf)
                label = n.bdf + " (" + d.name + ")";
        check_device(ctx, n.bdf, label, false, out);
    }
    for (const PciFunction &g : ctx.inv.gpus)
        check_device(ctx, g.bdf, g.bdf + " (GPU)", true, out);
}

} // namespace doorbell::doctor
