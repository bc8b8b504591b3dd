// Helpers for the doorbell-doctor tests: load a recorded tree into a Context,
// write small trees on the fly, find findings, validate JSON.
#pragma once

#include "doctor.h"
#include "doctor_main.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

namespace doorbell::doctor::testing {

inline std::string fixture(const std::string &name)
{
    return std::string(DOORBELL_SOURCE_DIR) + "/tests/doctor/fixtures/" + name;
}

// A Context over a recorded tree, as doctor_main builds it; `later` (with
// window_ms) supplies the second counter snapshot.
inline Context load(const std::string &root, const std::string &later = "", int window_ms = 0)
{
    Context ctx;
    ctx.opt.root  = root;
    ctx.fs        = Fs(root);
    ctx.host      = read_hostname(ctx.fs);
    ctx.inv       = take_inventory(ctx.fs);
    ctx.before    = read_counters(ctx.fs, ctx.inv);
    ctx.after     = later.empty() ? ctx.before : read_counters(Fs(later), ctx.inv);
    ctx.window_ms = later.empty() ? 0 : window_ms;
    return ctx;
}

inline Report run(void (*check)(Context &, Report &), Context &ctx)
{
    Report r;
    check(ctx, r);
    return r;
}

// The one finding for `subject`; fails the test when absent.
inline const Finding &find(const Report &r, const std::string &subject)
{
    for (const Finding &f : r)
        if (f.subject == subject)
            return f;
    ADD_FAILURE() << "no finding for " << subject;
    static Finding none;
    return none;
}

inline bool evidence_has(const Finding &f, const std::string &needle)
{
    for (const std::string &e : f.evidence)
        if (e.find(needle) != std::string::npos)
            return true;
    return false;
}

// A scratch tree under the test's temp dir, removed at scope exit.
class TempTree {
public:
    TempTree()
    {
        char        tmpl[] = "/tmp/doorbell-doctor-XXXXXX";
        const char *d      = mkdtemp(tmpl);
        root_              = d ? d : "";
    }
    ~TempTree()
    {
        std::error_code ec;
        std::filesystem::remove_all(root_, ec);
    }
    TempTree(const TempTree &)            = delete;
    TempTree &operator=(const TempTree &) = delete;

    void put(const std::string &path, const std::string &text) const
    {
        std::filesystem::path p = root_ + path;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p) << text << "\n";
    }
    void link(const std::string &path, const std::string &target) const
    {
        std::filesystem::path p = root_ + path;
        std::filesystem::create_directories(p.parent_path());
        std::filesystem::create_symlink(target, p);
    }
    const std::string &root() const { return root_; }

private:
    std::string root_;
};

// A strict RFC 8259 validator: true when `s` is exactly one JSON value.
class JsonValidator {
public:
    explicit JsonValidator(const std::string &s) : s_(s) {}
    bool valid()
    {
        ws();
        if (!value())
            return false;
        ws();
        return i_ == s_.size();
    }

private:
    void ws()
    {
        while (i_ < s_.size() &&
               (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
            i_++;
    }
    bool lit(const char *w)
    {
        size_t n = std::char_traits<char>::length(w);
        if (s_.compare(i_, n, w) != 0)
            return false;
        i_ += n;
        return true;
    }
    bool string()
    {
        if (s_[i_] != '"')
            return false;
        for (i_++; i_ < s_.size(); i_++) {
            unsigned char c = s_[i_];
            if (c == '"') {
                i_++;
                return true;
            }
            if (c < 0x20)
                return false;
            if (c == '\\') {
                if (++i_ >= s_.size())
                    return false;
                char e = s_[i_];
                if (e == 'u') {
                    for (int k = 0; k < 4; k++)
                        if (++i_ >= s_.size() || !isxdigit((unsigned char)s_[i_]))
                            return false;
                } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
                    return false;
                }
            }
        }
        return false;
    }
    bool number()
    {
        size_t start = i_;
        if (s_[i_] == '-')
            i_++;
        while (i_ < s_.size() && (isdigit((unsigned char)s_[i_]) || s_[i_] == '.' ||
                                  s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
            i_++;
        return i_ > start && isdigit((unsigned char)s_[i_ - 1]);
    }
    bool value()
    {
        if (i_ >= s_.size() || ++depth_ > 64)
            return false;
        bool ok;
        char c = s_[i_];
        if (c == '{') {
            i_++;
            ws();
            ok = true;
            if (s_[i_] == '}') {
                i_++;
            } else {
                for (;;) {
                    ws();
                    if (i_ >= s_.size() || !string()) {
                        ok = false;
                        break;
                    }
                    ws();
                    if (i_ >= s_.size() || s_[i_++] != ':') {
                        ok = false;
                        break;
                    }
                    ws();
                    if (!value()) {
                        ok = false;
                        break;
                    }
                    ws();
                    if (i_ < s_.size() && s_[i_] == ',') {
                        i_++;
                        continue;
                    }
                    ok = i_ < s_.size() && s_[i_++] == '}';
                    break;
                }
            }
        } else if (c == '[') {
            i_++;
            ws();
            ok = true;
            if (s_[i_] == ']') {
                i_++;
            } else {
                for (;;) {
                    ws();
                    if (!value()) {
                        ok = false;
                        break;
                    }
                    ws();
                    if (i_ < s_.size() && s_[i_] == ',') {
                        i_++;
                        continue;
                    }
                    ok = i_ < s_.size() && s_[i_++] == ']';
                    break;
                }
            }
        } else if (c == '"') {
            ok = string();
        } else if (c == 't') {
            ok = lit("true");
        } else if (c == 'f') {
            ok = lit("false");
        } else if (c == 'n') {
            ok = lit("null");
        } else {
            ok = number();
        }
        depth_--;
        return ok;
    }
    const std::string &s_;
    size_t             i_     = 0;
    int                depth_ = 0;
};

inline bool json_valid(const std::string &s)
{
    return JsonValidator(s).valid();
}

struct Result {
    int         rc;
    std::string out, err;
};

inline Result doctor(const std::vector<std::string> &args)
{
    Result r;
    r.rc = doctor_main(args, r.out, r.err);
    return r;
}

} // namespace doorbell::doctor::testing
