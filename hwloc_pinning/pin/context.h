// What one doorbell-pin run knows, passed to every step (mold's Context).
#pragma once

#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pinning/irqbalance.h"
#include "pinning/local_rank.h"
#include "pinning/machine.h"
#include "pinning/plan.h"

namespace doorbell::pin {

struct Args {
    std::string              command;          ///< show | plan | apply-irqs | exec | verify
    std::string              topology;         ///< --topology FILE.xml; "" = this machine
    std::vector<std::string> nics;             ///< --nic NAME (repeatable, comma lists)
    std::string              root       = "/"; ///< --root DIR
    bool                     root_given = false;
    int                      ranks      = -1;    ///< --ranks N
    int                      irq_cores  = 0;     ///< --irq-cores N
    int                      local_rank = -1;    ///< --local-rank N
    bool                     json       = false; ///< plan --json
    bool                     dry_run    = false; ///< apply-irqs --dry-run
    std::vector<std::string> argv;               ///< exec: the program and its arguments
};

struct Context {
    Args                     args;
    Machine                  machine;
    std::vector<NicInput>    nics;              ///< the NICs in use with their interrupts
    bool                     irqs_read = false; ///< interrupts were looked up under a root
    std::optional<LocalRank> launcher;
    IrqbalanceState          irqbalance;
    Plan                     plan;
};

// `Fatal(ctx) << "what"` prints "doorbell-pin: error: what" and exits 2.
class Fatal {
public:
    explicit Fatal(Context &) {}
    [[noreturn]] ~Fatal()
    {
        std::cerr << "doorbell-pin: error: " << out_.str() << std::endl;
        std::exit(2);
    }
    template <class T>
    Fatal &operator<<(const T &v)
    {
        out_ << v;
        return *this;
    }

private:
    std::ostringstream out_;
};

void parse_args(Context &ctx, int argc, char **argv);
void cmd_show(Context &ctx);
void cmd_plan(Context &ctx);
int  cmd_apply_irqs(Context &ctx);
int  cmd_exec(Context &ctx);
int  cmd_verify(Context &ctx);

} // namespace doorbell::pin
