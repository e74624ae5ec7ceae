// The CLI's options: parsed from argv, with an error (exit code 2) for anything it does not know.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gdn/gdn.h"

namespace gdn {
namespace cli {

struct Options {
  std::string backend = "auto";  // auto | cpu | cuda
  int threads = 0;               // CPU worker threads; 0: OpenMP's default
  std::vector<DType> dtypes = {DType::kBFloat16};
  std::vector<std::string> cases;  // case names from --cases ("all": every case)
  std::vector<std::string> sets;   // sets from --set; with neither --cases nor --set: "spec"
  int64_t max_tokens = -1;         // -1: the backend's default (CPU: 8192, CUDA: no limit); 0: no limit
  bool decode = true;
  bool list = false;  // --list: print the cases and exit
  std::string json;   // write the results as JSON here
};

// Parses the command line. --help prints the help and exits 0; a bad argument prints
// "gdn: <what is wrong>" and a hint, and exits 2.
Options parse_options(int argc, char** argv);

// Prints "gdn: <why>" and the usage hint to stderr and exits with code 2.
[[noreturn]] void usage_error(const std::string& why);

}  // namespace cli
}  // namespace gdn
