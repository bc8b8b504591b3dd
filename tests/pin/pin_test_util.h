// Helpers shared by the pinning tests: fixture paths, a scratch copy of a
// fake procfs/sysfs root, and running the doorbell-pin binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace pin_test {

namespace fs = std::filesystem;

inline std::string shared_fixtures()
{
    return DOORBELL_SHARED_DIR "/fixtures";
}
inline std::string own_fixtures()
{
    return PIN_FIXTURES;
}

inline std::string read_file(const fs::path &p)
{
    std::ifstream     f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline void write_file(const fs::path &p, const std::string &s)
{
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s;
}

// A fresh directory, removed with the object.
class ScratchDir {
public:
    ScratchDir()
    {
        std::string tmpl = (fs::temp_directory_path() / "doorbell-pin-XXXXXX").string();
        path_            = mkdtemp(tmpl.data());
    }
    ~ScratchDir()
    {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir &)                = delete;
    ScratchDir     &operator=(const ScratchDir &) = delete;
    const fs::path &path() const { return path_; }

    // Copies fixture tree `name` (symlinks kept as links) and returns its path.
    std::string copy_root(const std::string &name) const
    {
        fs::path dst = path_ / name;
        fs::copy(fs::path(own_fixtures()) / name, dst,
                 fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        return dst.string();
    }

private:
    fs::path path_;
};

struct RunResult {
    int         rc = -1;
    std::string out; ///< stdout and stderr together
};

// Runs a shell command line, capturing its output and exit status.
inline RunResult run(const std::string &cmd)
{
    RunResult r;
    FILE     *p = popen((cmd + " 2>&1").c_str(), "r");
    if (p == nullptr)
        return r;
    char   buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
        r.out.append(buf, n);
    int st = pclose(p);
    r.rc   = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

} // namespace pin_test
