// Finding a NIC's interrupts.
//
// mlx5 names carry the PCI address, never the netdev or IB name
// ("mlx5_comp3@pci:0000:01:00.0"), so the IB device is first mapped to its
// address through sysfs. An IRQ belongs to the NIC when its name carries the
// address, when it starts with one of the NIC's netdev names, or when it is
// one of the device's msi_irqs. Vectors known only from msi_irqs are
// classified as mlnx-tools does: the lowest is the async vector.
#include "pinning/nic_irqs.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace doorbell::pin {

namespace fs = std::filesystem;

int NicIrqs::completion_count() const
{
    int n = 0;
    for (const NicIrq &i : irqs)
        n += i.kind == IrqKind::completion;
    return n;
}

static std::string read_small_file(const fs::path &p, bool *ok_p)
{
    std::ifstream f(p);
    *ok_p = static_cast<bool>(f);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    return s;
}

static bool parse_uint(std::string_view s, int *out_p)
{
    if (s.empty())
        return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    return std::from_chars(s.data(), s.data() + s.size(), *out_p).ec == std::errc();
}

std::string normalize_bdf(std::string_view bdf)
{
    std::string s;
    for (char c : bdf)
        s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // [domain:]bus:dev.fn with hex fields
    size_t dot = s.rfind('.');
    if (dot == std::string::npos)
        return "";
    std::vector<std::string> parts;
    std::string_view         head = std::string_view(s).substr(0, dot);
    while (true) {
        size_t colon = head.find(':');
        parts.emplace_back(head.substr(0, colon));
        if (colon == std::string_view::npos)
            break;
        head = head.substr(colon + 1);
    }
    if (parts.size() == 2)
        parts.insert(parts.begin(), "0000");
    if (parts.size() != 3)
        return "";
    std::string fn  = s.substr(dot + 1);
    auto        hex = [](const std::string &x, size_t maxlen) {
        if (x.empty() || x.size() > maxlen)
            return false;
        return std::all_of(x.begin(), x.end(),
                                  [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    };
    if (!hex(parts[0], 4) || !hex(parts[1], 2) || !hex(parts[2], 2) || !hex(fn, 1))
        return "";
    auto pad = [](std::string x, size_t n) { return std::string(n - x.size(), '0') + x; };
    return pad(parts[0], 4) + ":" + pad(parts[1], 2) + ":" + pad(parts[2], 2) + "." + fn;
}

std::optional<NicIrq> classify_irq_name(std::string_view action, const std::string &bdf,
                                        const std::vector<std::string> &netdevs)
{
    NicIrq out;
    out.name  = std::string(action);
    size_t at = action.rfind('@');
    if (at != std::string_view::npos) {
        std::string_view addr = action.substr(at + 1);
        if (addr.starts_with("pci:"))
            addr.remove_prefix(4);
        if (normalize_bdf(addr) != bdf || bdf.empty())
            return std::nullopt;
        std::string_view base = action.substr(0, at);
        int              v;
        if (base.starts_with("mlx5_comp") && parse_uint(base.substr(9), &v)) {
            out.vector = v;
        } else if (base.starts_with("mlx4-") && parse_uint(base.substr(5), &v)) {
            out.vector = v; // mlx4 completion EQs: "mlx4-<n>@<bdf>"
        } else {
            // mlx5_async<N>, mlx5_async_eq, mlx5_cmd_eq, mlx5_pages_eq, mlx4-async
            out.kind = IrqKind::async;
        }
        return out;
    }
    for (const std::string &nd : netdevs) {
        if (nd.empty() || !action.starts_with(nd) || action.size() <= nd.size() ||
            action[nd.size()] != '-')
            continue;
        std::string_view tail = action.substr(nd.size() + 1);
        if (tail.find("async") != std::string_view::npos || tail == "ctrl" || tail == "misc") {
            out.kind = IrqKind::async;
        } else {
            // "<if>-<n>", "<if>-TxRx-<n>", "<if>-rx-<n>": the trailing number
            size_t d = tail.find_last_not_of("0123456789");
            int    v;
            if (parse_uint(tail.substr(d == std::string_view::npos ? 0 : d + 1), &v))
                out.vector = v;
        }
        return out;
    }
    return std::nullopt;
}

Result<std::vector<MsiIrq>> read_msi_irqs(const std::string &root, const std::string &bdf,
                                          std::string *layout_p)
{
    std::vector<MsiIrq> out;
    fs::path            dir = fs::path(root) / "sys/bus/pci/devices" / bdf / "msi_irqs";
    *layout_p               = "absent";
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return out;
    for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
        MsiIrq m;
        if (!parse_uint(e.path().filename().string(), &m.irq))
            continue;
        bool ok;
        if (e.is_directory(ec)) {
            *layout_p = "directory"; // kernels <= 3.x: <irq>/mode
            m.mode    = read_small_file(e.path() / "mode", &ok);
        } else {
            *layout_p = "file";
            m.mode    = read_small_file(e.path(), &ok);
        }
        out.push_back(m);
    }
    if (ec)
        return Error{"cannot list " + dir.string() + ": " + ec.message()};
    // Numeric order: `ls` sorts lexically and puts 1000 before 999.
    std::sort(out.begin(), out.end(),
              [](const MsiIrq &a, const MsiIrq &b) { return a.irq < b.irq; });
    return out;
}

std::string resolve_bdf(const std::string &root, const Nic &nic)
{
    std::vector<fs::path> links;
    for (const std::string &d : nic.ib_devices)
        links.push_back(fs::path(root) / "sys/class/infiniband" / d / "device");
    for (const std::string &d : nic.netdevs)
        links.push_back(fs::path(root) / "sys/class/net" / d / "device");
    for (const fs::path &l : links) {
        std::error_code ec;
        fs::path        target = fs::read_symlink(l, ec);
        if (!ec) {
            std::string b = normalize_bdf(target.filename().string());
            if (!b.empty())
                return b;
        }
    }
    return normalize_bdf(nic.bdf);
}

Result<NicIrqs> find_nic_irqs(const std::string &root, const Nic &nic)
{
    NicIrqs out;
    out.bdf = resolve_bdf(root, nic);
    if (out.bdf != normalize_bdf(nic.bdf))
        out.notes.push_back(nic.name + ": sysfs puts it at " + out.bdf + " (topology says " +
                            nic.bdf + "); using sysfs");
    Result<std::vector<MsiIrq>> msi = read_msi_irqs(root, out.bdf, &out.msi_layout);
    if (!msi.ok())
        return Error{nic.name + ": " + msi.error()};

    fs::path    ipath = fs::path(root) / "proc/interrupts";
    bool        ok;
    std::string text = read_small_file(ipath, &ok);
    if (!ok)
        return Error{nic.name + ": cannot read " + ipath.string()};
    Result<InterruptsTable> table = parse_interrupts(text);
    if (!table.ok())
        return Error{nic.name + ": " + ipath.string() + ": " + table.error()};

    std::map<int, NicIrq> found;
    std::map<int, bool>   in_msi;
    for (const MsiIrq &m : *msi)
        in_msi[m.irq] = true;
    for (const IrqLine &line : table->irqs) {
        for (const std::string &a : line.actions) {
            if (std::optional<NicIrq> c = classify_irq_name(a, out.bdf, nic.netdevs)) {
                c->irq = line.irq;
                found.emplace(line.irq, *c);
                break;
            }
        }
        if (!found.count(line.irq) && in_msi.count(line.irq)) {
            NicIrq c;
            c.irq  = line.irq;
            c.name = line.actions.empty() ? "" : line.actions.front();
            c.kind = line.irq == msi->front().irq ? IrqKind::async : IrqKind::completion;
            found.emplace(line.irq, c);
            out.notes.push_back(
                nic.name + ": IRQ " + std::to_string(line.irq) + " ('" + c.name +
                "') is one of its msi_irqs; its name does not say its role, taken as " +
                (c.kind == IrqKind::async ? "the async vector (lowest MSI-X IRQ)" :
                                            "a completion vector"));
        }
    }
    for (const MsiIrq &m : *msi)
        if (!found.count(m.irq))
            out.notes.push_back(nic.name + ": msi_irqs lists IRQ " + std::to_string(m.irq) +
                                " but " + ipath.string() + " does not; left alone");
    for (auto &[irq, i] : found)
        out.irqs.push_back(i);
    // Completion vectors by queue index (IRQ number breaks ties), then async.
    std::stable_sort(out.irqs.begin(), out.irqs.end(), [](const NicIrq &a, const NicIrq &b) {
        if (a.kind != b.kind)
            return a.kind == IrqKind::completion;
        if (a.vector != b.vector) // unknown indexes (-1) last
            return static_cast<unsigned>(a.vector) < static_cast<unsigned>(b.vector);
        return a.irq < b.irq;
    });
    return out;
}

} // namespace doorbell::pin
