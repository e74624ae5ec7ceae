#include "cli/report.h"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "cases.h"
#include "cli/host.h"

namespace gdn {
namespace cli {
namespace {

// "4x8192" for runs of equal lengths, else the lengths one by one: "256,4096,512".
std::string lengths_text(const std::vector<int64_t>& lens) {
  std::string s;
  for (size_t i = 0; i < lens.size();) {
    size_t j = i;
    while (j < lens.size() && lens[j] == lens[i]) ++j;
    s += (s.empty() ? "" : ",") + (j - i > 1 ? std::to_string(j - i) + "x" : "") + std::to_string(lens[i]);
    i = j;
  }
  return s;
}

}  // namespace

void print_case_list() {
  std::printf("%-12s %-6s %4s %4s %-7s %6s %8s  %s\n", "case", "set", "H", "HV", "gates", "seqs", "tokens", "lengths");
  for (const tools::PrefillCase& c : tools::all_cases())
    std::printf("%-12s %-6s %4d %4d %-7s %6zu %8lld  %s\n", c.name.c_str(), c.set.c_str(), c.H, c.HV,
                tools::gates_name(c.gates), c.lens.size(), static_cast<long long>(c.tokens()),
                lengths_text(c.lens).c_str());
  std::printf(
      "K = V = %d, qk l2-norm, fp32 gates and states (bench/cases.txt). gdn runs the spec set unless\n"
      "--cases or --set names others.\n",
      K);
}

void print_table(const std::vector<Result>& results, double gemm_gflops, int threads, int64_t max_tokens) {
  std::printf("%-11s %-9s %-8s %3s %3s %9s %10s %12s %9s %8s %10s %10s\n", "case", "kind", "dtype", "H", "HV", "tokens",
              "ms", "tokens/s", "GFLOP/s", "GB/s", "err(o)", "err(state)");
  bool any_scaled = false;
  for (const Result& r : results) {
    const Job& j = r.job;
    any_scaled |= j.scaled;
    std::printf("%-11s %-9s %-8s %3d %3d %9lld %10.3f %12.0f %9.1f %8.1f %10.2e %10.2e%s\n", j.name.c_str(),
                j.decode ? (j.layout == StateLayout::kVMajor ? "decode-v" : "decode-k") : "prefill",
                dtype_name(j.dtype), j.H, j.HV, static_cast<long long>(r.tokens), r.ms, r.tokens_per_s, r.gflops,
                r.GBps, r.err, r.state_err, j.scaled ? "  (scaled down)" : "");
  }
  if (gemm_gflops > 0) std::printf("OpenBLAS fp32 GEMM: %.1f GFLOP/s on %d threads\n", gemm_gflops, threads);
  if (any_scaled)
    std::printf("(scaled down): the case was cut to %lld tokens for a quick CPU run (--max-tokens all runs it whole)\n",
                static_cast<long long>(max_tokens));
}

void write_json(const std::string& path, const std::vector<Result>& results, Backend backend, int threads,
                double gemm_gflops, double copy_GBps) {
  std::ofstream js(path);
  if (!js) throw std::runtime_error("cannot write " + path);
  const std::time_t t = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  // "shape": the spec set's (the layer the table is about); each case carries its own H and HV.
  js << "{\n  \"backend\": \"" << backend_name(backend) << "\",\n  \"date\": \"" << date
     << "\",\n  \"threads\": " << threads << ",\n  \"gemm_gflops\": " << gemm_gflops
     << ",\n  \"copy_GBps\": " << copy_GBps << ",\n  \"shape\": {\"H\": 16, \"HV\": 32, \"K\": " << K
     << ", \"V\": " << V << "},\n  \"cases\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const Job& j = r.job;
    js << "    {\"name\": \"" << j.name << "\", \"set\": \"" << j.set << "\", \"kind\": \"" << r.kind()
       << "\", \"H\": " << j.H << ", \"HV\": " << j.HV << ", \"gates\": \"" << tools::gates_name(j.gates)
       << "\", \"tokens\": " << r.tokens << ", \"seqs\": " << r.seqs << ", \"dtype\": \"" << dtype_name(j.dtype)
       << "\", \"threads\": " << threads << ", \"layout\": \"" << r.layout()
       << "\", \"scaled\": " << (j.scaled ? "true" : "false") << ", \"ms\": " << r.ms
       << ", \"tokens_per_s\": " << r.tokens_per_s << ", \"gflops\": " << r.gflops << ", \"GBps\": " << r.GBps
       << ", \"err\": " << r.err << ", \"state_err\": " << r.state_err << "}" << (i + 1 < results.size() ? "," : "")
       << "\n";
  }
  js << "  ]\n}\n";
  std::fprintf(stderr, "gdn: wrote %s\n", path.c_str());
}

}  // namespace cli
}  // namespace gdn
