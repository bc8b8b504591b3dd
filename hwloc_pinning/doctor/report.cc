// Rendering a Report: aligned text for people, JSON for scripts. Both carry
// the same fields; the exit status is the worst finding.
#include "doctor.h"

#include <cstdio>

namespace doorbell::doctor {

// Length of the valid UTF-8 sequence starting at s[i], or 0.
static size_t utf8_length(const std::string &s, size_t i)
{
    unsigned char c = s[i];
    size_t        n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (n == 0 || c > 0xf4 || i + n > s.size())
        return 0;
    for (size_t k = 1; k < n; k++)
        if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80)
            return 0;
    return n;
}

// JSON string body: quotes, backslashes and control characters escaped; bytes
// that are not UTF-8 (junk read from a broken device) become U+FFFD.
std::string json_escape(const std::string &s)
{
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t n = utf8_length(s, i);
            if (n == 0) {
                out += "\\ufffd";
            } else {
                out.append(s, i, n);
                i += n - 1;
            }
            continue;
        }
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                out += buf;
            } else {
                out += char(c);
            }
        }
    }
    return out;
}

static std::string source(const Context &ctx)
{
    std::string s = ctx.opt.root.empty() ? "live" : "root " + ctx.opt.root;
    if (!ctx.opt.later_root.empty())
        s += ", later " + ctx.opt.later_root;
    return s;
}

std::string render_text(const Context &ctx, const Report &report)
{
    std::string out = "doorbell-doctor on " + ctx.host + " (" + source(ctx) + "; sampling window " +
                      (ctx.window_ms > 0 ? std::to_string(ctx.window_ms) + " ms" : "none") + ")\n";
    int counts[3] = {0, 0, 0};
    for (const Finding &f : report) {
        counts[int(f.status)]++;
        char head[64];
        std::snprintf(head, sizeof(head), "[%s] %-11s ", status_name(f.status), f.check.c_str());
        out += head + f.subject + ": " + f.summary + "\n";
        for (const std::string &e : f.evidence)
            out += "       " + e + "\n";
        if (!f.fix.empty())
            out += "       fix: " + f.fix + "\n";
    }
    Status w = worst(report);
    out += "summary: " + std::to_string(counts[0]) + " pass, " + std::to_string(counts[1]) +
           " warn, " + std::to_string(counts[2]) + " fail -> " + status_name(w) + "\n";
    return out;
}

std::string render_json(const Context &ctx, const Report &report)
{
    Status      w   = worst(report);
    std::string out = "{\"host\":\"" + json_escape(ctx.host) + "\",\"source\":\"" +
                      json_escape(source(ctx)) +
                      "\",\"window_ms\":" + std::to_string(ctx.window_ms) + ",\"worst\":\"" +
                      status_name(w) + "\",\"exit_status\":" + std::to_string(int(w)) +
                      ",\"findings\":[";
    for (size_t i = 0; i < report.size(); i++) {
        const Finding &f = report[i];
        out += i ? ",\n" : "\n";
        out += "{\"check\":\"" + json_escape(f.check) + "\",\"subject\":\"" +
               json_escape(f.subject) + "\",\"status\":\"" + status_name(f.status) +
               "\",\"summary\":\"" + json_escape(f.summary) + "\",\"evidence\":[";
        for (size_t j = 0; j < f.evidence.size(); j++)
            out += (j ? ",\"" : "\"") + json_escape(f.evidence[j]) + "\"";
        out += "],\"fix\":\"" + json_escape(f.fix) + "\"}";
    }
    out += "\n]}\n";
    return out;
}

} // namespace doorbell::doctor
