#include "pinning/nic_port.h"

#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace doorbell::pin {

namespace fs = std::filesystem;

namespace {

// "5" -> 5; anything that is not a whole number > 0 -> 0.
int port_number(std::string_view name)
{
    if (name.empty() || name.size() > 3)
        return 0;
    int n = 0;
    for (char c : name) {
        if (c < '0' || c > '9')
            return 0;
        n = n * 10 + (c - '0');
    }
    return n;
}

} // namespace

NicPort ucx_port_for(const std::string &root, const std::string &nic)
{
    fs::path        dir = fs::path(root) / "sys/class/infiniband" / nic / "ports";
    std::error_code ec;
    int             lowest = 0, active = 0;
    for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
        int n = port_number(e.path().filename().string());
        if (n == 0)
            continue;
        if (lowest == 0 || n < lowest)
            lowest = n;
        std::ifstream f(e.path() / "state");
        std::string   state;
        std::getline(f, state);
        if (state.find("ACTIVE") != std::string::npos && (active == 0 || n < active))
            active = n;
    }
    if (active != 0)
        return {active, "port " + std::to_string(active) + " is ACTIVE"};
    if (lowest != 0)
        return {lowest, "no port ACTIVE; the lowest, " + std::to_string(lowest)};
    return {1, "no ports under " + dir.string() + "; port 1"};
}

} // namespace doorbell::pin
