// /proc/interrupts parser. Leading spaces are not trusted (copies of the file
// lose them), so a row is: first token "<digits>:", then counts, then the
// rest split at the flow-handler token.
#include "pinning/interrupts.h"

#include <cctype>
#include <charconv>
#include <sstream>

namespace doorbell::pin {

namespace {

bool all_digits(std::string_view s)
{
    if (s.empty())
        return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    return true;
}

std::vector<std::string_view> split_ws(std::string_view line, std::vector<size_t> *starts_p)
{
    std::vector<std::string_view> out;
    size_t                        i = 0;
    while (i < line.size()) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
            i++;
        size_t b = i;
        while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])))
            i++;
        if (i > b) {
            out.push_back(line.substr(b, i - b));
            starts_p->push_back(b);
        }
    }
    return out;
}

// Flow handler names printed after the '-' (irq_chip flow names).
bool is_flow(std::string_view s)
{
    static constexpr std::string_view kFlows[] = {"edge",   "fasteoi",      "level", "simple",
                                                  "percpu", "percpu_devid", "eoi",   "untracked"};
    for (std::string_view f : kFlows)
        if (s == f)
            return true;
    return false;
}

std::string trim(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return std::string(s);
}

} // namespace

Result<InterruptsTable> parse_interrupts(std::string_view text)
{
    InterruptsTable    table;
    std::istringstream in{std::string(text)};
    std::string        line;
    int                lineno = 0;
    while (std::getline(in, line)) {
        lineno++;
        std::vector<size_t>           starts;
        std::vector<std::string_view> tok = split_ws(line, &starts);
        if (tok.empty())
            continue;
        if (tok[0].starts_with("CPU")) {
            table.cpus.clear();
            for (std::string_view t : tok) {
                int cpu;
                if (!t.starts_with("CPU") ||
                    std::from_chars(t.data() + 3, t.data() + t.size(), cpu).ec != std::errc())
                    return Error{"/proc/interrupts line " + std::to_string(lineno) +
                                 ": bad header token '" + std::string(t) + "'"};
                table.cpus.push_back(cpu);
            }
            continue;
        }
        // "98:" or "98:" glued to the first count when a space was lost.
        size_t colon = tok[0].find(':');
        if (colon == std::string_view::npos || !all_digits(tok[0].substr(0, colon)))
            continue; // NMI:, LOC:, ERR: ... or a stray line
        IrqLine row;
        std::from_chars(tok[0].data(), tok[0].data() + colon, row.irq);
        std::vector<std::string_view> rest(tok.begin() + 1, tok.end());
        std::vector<size_t>           rest_starts(starts.begin() + 1, starts.end());
        if (colon + 1 < tok[0].size()) {
            rest.insert(rest.begin(), tok[0].substr(colon + 1));
            rest_starts.insert(rest_starts.begin(), starts[0] + colon + 1);
        }
        size_t i    = 0;
        size_t want = table.cpus.empty() ? SIZE_MAX : table.cpus.size();
        while (i < rest.size() && i < want && all_digits(rest[i])) {
            uint64_t v = 0;
            std::from_chars(rest[i].data(), rest[i].data() + rest[i].size(), v);
            row.counts.push_back(v);
            i++;
        }
        if (want != SIZE_MAX && row.counts.size() != want)
            return Error{"/proc/interrupts line " + std::to_string(lineno) + " (IRQ " +
                         std::to_string(row.irq) + "): " + std::to_string(row.counts.size()) +
                         " counts for " + std::to_string(want) + " CPU columns"};
        // The chip runs until the token "<x>-<flow>"; x is the hwirq when it is
        // numeric and the chip ends before it, else the chip's own tail
        // ("PCI-MSI-edge" on 3.x kernels).
        size_t chip_begin = i;
        size_t flow_tok   = SIZE_MAX;
        for (size_t k = i; k < rest.size(); k++) {
            size_t dash = rest[k].rfind('-');
            if (dash != std::string_view::npos && is_flow(rest[k].substr(dash + 1))) {
                flow_tok = k;
                break;
            }
        }
        if (flow_tok == SIZE_MAX) {
            // No recognisable flow: take the chip as one token and the rest as
            // names, which is what the kernel prints for chips without a domain.
            if (i < rest.size())
                row.chip = std::string(rest[i++]);
            if (i < rest.size())
                flow_tok = i - 1;
        } else {
            std::string_view ft   = rest[flow_tok];
            size_t           dash = ft.rfind('-');
            row.flow              = std::string(ft.substr(dash + 1));
            std::string_view head = ft.substr(0, dash);
            std::string      chip;
            for (size_t k = chip_begin; k < flow_tok; k++)
                chip += (chip.empty() ? "" : " ") + std::string(rest[k]);
            if (all_digits(head) && !chip.empty()) {
                row.hwirq = std::string(head);
            } else if (!head.empty()) {
                chip += (chip.empty() ? "" : " ") + std::string(head);
            }
            row.chip = chip;
        }
        if (flow_tok != SIZE_MAX && flow_tok + 1 < rest.size()) {
            size_t           from  = rest_starts[flow_tok + 1];
            std::string      names = trim(std::string_view(line).substr(from));
            std::string_view nv    = names;
            while (!nv.empty()) {
                size_t      comma = nv.find(',');
                std::string a     = trim(nv.substr(0, comma));
                if (!a.empty())
                    row.actions.push_back(a);
                nv = comma == std::string_view::npos ? std::string_view() : nv.substr(comma + 1);
            }
        }
        table.irqs.push_back(std::move(row));
    }
    return table;
}

} // namespace doorbell::pin
