// Small, careful file readers: a doctor must never crash on the machine it is
// diagnosing, so every failure becomes a ReadResult with the errno text.
#include "fs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

namespace doorbell::doctor {

static constexpr size_t kMaxFileBytes =
    64 << 20; ///< sysfs files are <= 4 KiB; /proc/interrupts reaches megabytes on 256-CPU hosts

ReadResult Fs::read(const std::string &path) const
{
    ReadResult r;
    int        fd = ::open(full(path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r.error = std::strerror(errno);
        return r;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r.error = std::strerror(errno);
            ::close(fd);
            return r;
        }
        if (n == 0)
            break;
        r.value.append(buf, size_t(n));
        if (r.value.size() > kMaxFileBytes)
            break;
    }
    ::close(fd);
    if (!record_.empty())
        record_file(path, r.value);
    while (!r.value.empty() && (r.value.back() == '\n' || r.value.back() == ' ' ||
                                r.value.back() == '\t' || r.value.back() == '\0'))
        r.value.pop_back();
    r.ok = true;
    return r;
}

std::optional<std::vector<std::string>> Fs::list(const std::string &dir) const
{
    DIR *d = ::opendir(full(dir).c_str());
    if (!d)
        return std::nullopt;
    std::vector<std::string> names;
    while (dirent *e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..")
            names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    if (!record_.empty())
        record_dir(dir);
    return names;
}

bool Fs::exists(const std::string &path) const
{
    struct stat st;
    return ::stat(full(path).c_str(), &st) == 0;
}

bool Fs::is_dir(const std::string &path) const
{
    struct stat st;
    bool        dir = ::stat(full(path).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (dir && !record_.empty())
        record_dir(path);
    return dir;
}

std::optional<std::string> Fs::link_basename(const std::string &path) const
{
    char    buf[4096];
    ssize_t n = ::readlink(full(path).c_str(), buf, sizeof(buf) - 1);
    if (n <= 0)
        return std::nullopt;
    std::string target(buf, size_t(n));
    if (!record_.empty())
        record_link(path, target);
    while (!target.empty() && target.back() == '/')
        target.pop_back();
    size_t slash = target.rfind('/');
    return slash == std::string::npos ? target : target.substr(slash + 1);
}

// Recording never fails the run: a copy that cannot be written is skipped.
void Fs::record_file(const std::string &path, const std::string &contents) const
{
    std::filesystem::path p = record_ + path;
    std::error_code       ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream(p, std::ios::trunc) << contents << "\n";
}

void Fs::record_dir(const std::string &path) const
{
    std::error_code ec;
    std::filesystem::create_directories(record_ + path, ec);
}

// The link text is kept verbatim: readers take its last component only.
void Fs::record_link(const std::string &path, const std::string &target) const
{
    std::filesystem::path p = record_ + path;
    std::error_code       ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::filesystem::remove(p, ec);
    std::filesystem::create_symlink(target, p, ec);
}

void Fs::record_path(const std::string &path) const
{
    if (record_.empty())
        return;
    if (!is_dir(path)) {
        read(path);
        return;
    }
    if (auto names = list(path))
        for (const std::string &n : *names) {
            if (is_dir(path + "/" + n)) // old kernels: msi_irqs/<irq>/mode
                read(path + "/" + n + "/mode");
            else
                read(path + "/" + n);
        }
}

std::optional<uint64_t> parse_u64(const std::string &text)
{
    size_t i = 0;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
        i++;
    int base = 10;
    if (text.compare(i, 2, "0x") == 0 || text.compare(i, 2, "0X") == 0) {
        base = 16;
        i += 2;
    }
    if (i >= text.size())
        return std::nullopt;
    uint64_t v = 0;
    for (; i < text.size(); i++) {
        char c = text[i];
        int  digit;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            digit = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F')
            digit = c - 'A' + 10;
        else if (c == '\n' || c == ' ')
            break;
        else
            return std::nullopt;
        if (v > (std::numeric_limits<uint64_t>::max() - uint64_t(digit)) / uint64_t(base))
            return std::nullopt;
        v = v * uint64_t(base) + uint64_t(digit);
    }
    return v;
}

} // namespace doorbell::doctor
