// doorbell-doctor: finds firmware mismatches, missing GPUDirect modules,
// degraded PCIe links, misplaced interrupts, heat and congestion.
#include "doctor_main.h"

#include <cstdio>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string out, err;
  int rc = doorbell::doctor::doctor_main(args, out, err);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return rc;
}
