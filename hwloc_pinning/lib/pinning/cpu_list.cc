// CPU list parsing and formatting (the kernel's bitmap_parselist format,
// without the ":used/group" stride extension, which sysfs never prints).
#include "pinning/cpu_list.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace doorbell::pin {

static bool parse_int(std::string_view s, int *out_p)
{
    if (s.empty())
        return false;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out_p);
    return ec == std::errc() && ptr == s.data() + s.size();
}

static std::string_view trim(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

Result<std::vector<int>> parse_cpu_list(std::string_view text)
{
    std::vector<int> cpus;
    std::string_view rest = trim(text);
    while (!rest.empty()) {
        size_t           comma = rest.find(',');
        std::string_view item  = trim(rest.substr(0, comma));
        rest        = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        size_t dash = item.find('-');
        int    lo, hi;
        if (dash == std::string_view::npos) {
            if (!parse_int(item, &lo))
                return Error{"bad CPU list item '" + std::string(item) + "' in '" +
                             std::string(trim(text)) + "'"};
            hi = lo;
        } else if (!parse_int(item.substr(0, dash), &lo) ||
                   !parse_int(item.substr(dash + 1), &hi)) {
            return Error{"bad CPU range '" + std::string(item) + "' in '" +
                         std::string(trim(text)) + "'"};
        }
        if (lo < 0 || hi < lo || hi >= kMaxCpu)
            return Error{"CPU range '" + std::string(item) + "' is out of order or out of bounds"};
        for (int c = lo; c <= hi; c++)
            cpus.push_back(c);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::string format_cpu_list(std::vector<int> cpus)
{
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
            j++;
        if (!out.empty())
            out += ',';
        out += std::to_string(cpus[i]);
        if (j > i)
            out += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

} // namespace doorbell::pin
