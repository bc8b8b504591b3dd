// Entry point of doorbell-doctor, callable in-process (tests) and from main().
#pragma once

#include "doctor.h"

#include <string>
#include <vector>

namespace doorbell::doctor {

static constexpr int kExitUsage = 3; ///< 0/1/2 are the worst finding (pass/warn/fail)

enum class ParseResult {
    kOk,
    kHelp,
    kError
};

// Parses argv[1..]; on kError, `error` says what was wrong.
ParseResult parse_options(const std::vector<std::string> &args, Options &opt, std::string &error);
std::string usage_text();

// Runs the selected checks; returns the exit status and fills `out` (report)
// and `err` (usage errors).
int doctor_main(const std::vector<std::string> &args, std::string &out, std::string &err);

} // namespace doorbell::doctor
