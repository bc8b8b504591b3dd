// Reading sysfs/procfs under an injectable root. Every path given to Fs is the
// absolute path on a live machine ("/sys/class/infiniband"); Fs prefixes the
// root so a recorded tree reads exactly like the live one, and evidence lines
// show the familiar path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doorbell::doctor {

// A file's contents, or why it could not be read ("No such file or directory").
struct ReadResult {
    bool        ok = false;
    std::string value; ///< trimmed of trailing whitespace
    std::string error; ///< strerror text when !ok
};

class Fs {
public:
    explicit Fs(std::string root = "") : root_(std::move(root)) {}

    // Copies everything this Fs reads into `dir` (files, listed folders, link
    // texts), so the same checks replay on it with --root. Empty: no copy.
    void               record_into(std::string dir) { record_ = std::move(dir); }
    const std::string &recording() const { return record_; }
    // Copies one path (a file, or a folder's plain files) into the recording.
    void record_path(const std::string &path) const;

    // Reads a whole (small) file; trailing newlines and spaces are dropped.
    ReadResult read(const std::string &path) const;

    // Names in a directory, sorted; nullopt when it cannot be opened.
    std::optional<std::vector<std::string>> list(const std::string &dir) const;

    bool exists(const std::string &path) const;
    bool is_dir(const std::string &path) const;

    // Last component of a symlink's target ("0000:01:00.0" for a PCI link).
    std::optional<std::string> link_basename(const std::string &path) const;

    const std::string &root() const { return root_; }
    bool               live() const { return root_.empty(); }

private:
    std::string full(const std::string &path) const { return root_ + path; }
    void        record_file(const std::string &path, const std::string &contents) const;
    void        record_dir(const std::string &path) const;
    void        record_link(const std::string &path, const std::string &target) const;
    std::string root_;
    std::string record_;
};

// Parses an unsigned decimal or 0x-hex integer; nullopt on junk or overflow.
std::optional<uint64_t> parse_u64(const std::string &text);

} // namespace doorbell::doctor
