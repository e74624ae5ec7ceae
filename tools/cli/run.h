// One row of the CLI's table: a job (a prefill case or a decode batch), run on a backend, checked
// against the oracle and timed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cases.h"
#include "gdn/gdn.h"

namespace gdn {
namespace cli {

struct Job {
  std::string name;  // case name, or "decode"
  std::string set;   // the case's set ("decode" for decode batches)
  std::vector<int64_t> lens;
  int H = 16, HV = 32;
  tools::CaseGates gates = tools::CaseGates::kNormal;
  DType dtype = DType::kBFloat16;
  bool decode = false;  // the decode step in place on a pool, else the chunked forward
  StateLayout layout = StateLayout::kKMajor;
  bool scaled = false;  // cut down by --max-tokens
};

struct Result {
  Job job;
  int64_t tokens = 0, seqs = 0;
  double ms = 0, tokens_per_s = 0, gflops = 0, GBps = 0;
  double err = 0, state_err = 0;  // rel. RMS errors of o and the final states (checked heads)
  const char* kind() const { return job.decode ? "decode" : "prefill"; }
  const char* layout() const { return job.layout == StateLayout::kKMajor ? "k-major" : "v-major"; }
};

// Runs the job once for the check (value heads 0 and HV - 1, or only head 0 past 40000 tokens,
// where the fp64 recurrence gets slow), then times it.
Result run_job(const Job& job, Backend backend, int threads, uint64_t seed);

}  // namespace cli
}  // namespace gdn
