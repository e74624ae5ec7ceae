// gdn: the main job. Runs the benchmark cases of SPEC.md section 6 (bench/cases.txt; the spec set
// unless told otherwise) on the best backend present, checks one or two value heads of each
// against the double-precision recurrence, and prints a table (and JSON with --json).
// `gdn --help` lists the options and explains the columns; `gdn --list` prints the cases.
//
// The pieces: cli/options (the command line), cli/host (inputs and the check), cli/device
// (memory, timing, reference rates), cli/run (one row), cli/report (table, JSON, case list).
#include <omp.h>

#include <cstdio>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "cases.h"
#include "cli/device.h"
#include "cli/host.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/run.h"
#include "gdn/gdn.h"

namespace gdn {
namespace cli {
namespace {

// The prefill jobs: the cases named by --cases and --set (the spec set without either), in file
// order, for every dtype; cut to max_tokens when positive.
std::vector<Job> prefill_jobs(const Options& opt, int64_t max_tokens) {
  std::set<std::string> names(opt.cases.begin(), opt.cases.end());
  std::set<std::string> sets(opt.sets.begin(), opt.sets.end());
  if (names.empty() && sets.empty()) sets.insert("spec");
  const bool all = names.count("all") > 0;
  std::vector<Job> jobs;
  for (DType dtype : opt.dtypes)
    for (tools::PrefillCase c : tools::all_cases()) {
      if (!all && names.count(c.name) == 0 && sets.count(c.set) == 0) continue;
      Job j;
      j.name = c.name;
      j.set = c.set;
      j.H = c.H;
      j.HV = c.HV;
      j.gates = c.gates;
      j.dtype = dtype;
      j.scaled = max_tokens > 0 && tools::scale_down(c, max_tokens);
      j.lens = c.lens;
      jobs.push_back(j);
    }
  return jobs;
}

// Decode batches of one-token sequences in the layer shape (H = 16, HV = 32), both layouts. A pool
// of 2N states of 2 MiB each (HV x K x V fp32) is 16 GiB at N = 4096, so the CPU stops at 256.
std::vector<Job> decode_jobs(const Options& opt, Backend backend) {
  std::vector<int64_t> batch_sizes = {1, 64, 256, 1024, 4096};
  if (backend == Backend::kCPU) batch_sizes = {1, 64, 256};
  std::vector<Job> jobs;
  if (!opt.decode) return jobs;
  for (int64_t n : batch_sizes)
    for (StateLayout layout : {StateLayout::kVMajor, StateLayout::kKMajor}) {
      Job j;
      j.name = "decode";
      j.set = "decode";
      j.lens = std::vector<int64_t>(n, 1);
      j.dtype = opt.dtypes.front();
      j.decode = true;
      j.layout = layout;
      jobs.push_back(j);
    }
  return jobs;
}

// SPEC section 4's bound for the relative RMS error.
double error_bound(DType dtype, Backend backend) {
  if (dtype != DType::kFloat32) return 5e-3;
  return backend == Backend::kCUDA ? 2e-3 : 1e-4;
}

int run_main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  if (opt.list) {
    print_case_list();
    return 0;
  }
  if (opt.backend == "cuda" && !cuda_available())
    usage_error("--backend cuda: no CUDA device (or gdn was built without CUDA)");
  const Backend backend =
      opt.backend == "cuda" || (opt.backend == "auto" && cuda_available()) ? Backend::kCUDA : Backend::kCPU;
  const int threads = backend == Backend::kCPU ? (opt.threads > 0 ? opt.threads : omp_get_max_threads()) : 0;
  const int64_t max_tokens = opt.max_tokens >= 0 ? opt.max_tokens : (backend == Backend::kCPU ? 8192 : 0);

  std::fprintf(stderr, "gdn: backend %s%s, K=%d V=%d, qk l2norm on, fp32 states\n", backend_name(backend),
               backend == Backend::kCPU ? (" (" + std::to_string(threads) + " threads)").c_str() : "", K, V);
  const double gemm = backend == Backend::kCPU ? blas_gemm_gflops(threads) : 0.0;
  const double copy = copy_bandwidth_GBps(backend);
  if (gemm > 0) std::fprintf(stderr, "gdn: OpenBLAS fp32 GEMM (2048^3, %d threads): %.1f GFLOP/s\n", threads, gemm);
  if (copy > 0) std::fprintf(stderr, "gdn: device copy bandwidth: %.0f GB/s\n", copy);

  std::vector<Job> jobs = prefill_jobs(opt, max_tokens);
  for (const Job& j : decode_jobs(opt, backend)) jobs.push_back(j);
  std::vector<Result> results;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    std::fprintf(stderr, "\r[%zu/%zu] %-11s %-8s %s ...        ", i + 1, jobs.size(), job.name.c_str(),
                 dtype_name(job.dtype), job.decode ? (job.layout == StateLayout::kVMajor ? "v-major" : "k-major") : "");
    std::fflush(stderr);
    results.push_back(run_job(job, backend, threads, 1234 + i));
  }
  std::fprintf(stderr, "\r%80s\r", "");

  print_table(results, gemm, threads, max_tokens);
  if (!opt.json.empty()) write_json(opt.json, results, backend, threads, gemm, copy);
  // The check is part of the job: fail when a sample is off the SPEC bound.
  for (const Result& r : results) {
    const double bound = error_bound(r.job.dtype, backend);
    if (!(r.err <= bound) || !(r.state_err <= bound)) {
      std::fprintf(stderr, "gdn: %s (%s) is off the reference: err %.3e, state err %.3e > %.0e\n", r.job.name.c_str(),
                   dtype_name(r.job.dtype), r.err, r.state_err, bound);
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace cli
}  // namespace gdn

int main(int argc, char** argv) {
  try {
    return gdn::cli::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdn: %s\n", e.what());
    return 1;
  }
}
