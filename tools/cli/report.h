// What the CLI prints: the case list (--list), the results table, and the JSON file.
#pragma once

#include <string>
#include <vector>

#include "cli/run.h"

namespace gdn {
namespace cli {

// Every case of bench/cases.txt: set, H, HV, gates, sequences, tokens and lengths.
void print_case_list();

// The results table on stdout; the notes under it for a GEMM rate and scaled-down cases.
void print_table(const std::vector<Result>& results, double gemm_gflops, int threads, int64_t max_tokens);

// The results as JSON (bench/fla_side.py reads it: name, layout, ms, err, ... per case).
void write_json(const std::string& path, const std::vector<Result>& results, Backend backend, int threads,
                double gemm_gflops, double copy_GBps);

}  // namespace cli
}  // namespace gdn
