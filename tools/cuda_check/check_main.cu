// Standalone device check of the CUDA backend (no GoogleTest, no API layer): runs the composed
// forward, the stage chain and the decode step on random inputs against the fp64 oracle of
// reference/, and with --bench times the prefill cases of tools/cases.h and the decode step with
// CUDA graphs. Exit code 1 on any failure, 2 on bad options or a CUDA error.
// Beside the defaults it runs and times alternatives as explicit configs: the tensor-core forward
// with o by fwd_o after the chain where the heuristics fuse it (" seq" cases, "/seq" timings), and every
// candidate shape of the decode rows kernel for 16-bit pools (" shape {..}" cases and timings,
// with the speedup over the fp32 pool); and the default forward storing a prefill checkpoint every
// 16 chunks ("/ckpt" timings).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "backend.h"
#include "cases.h"
#include "check.h"
#include "cuda/decode/recurrent.cuh"

namespace {

const char* kUsage =
    "usage: gdn_cuda_check [--quick] [--only A,B] [--decode] [--bench [--no-check] [--profile] [--case NAME] [--json "
    "FILE]]\n"
    "  --quick      leave out the large correctness cases\n"
    "  --only A,B   only the correctness cases whose names contain A or B (e.g. under a sanitizer)\n"
    "  --decode     only the decode step: its correctness cases, and with --bench its timings\n"
    "  --bench      time the prefill cases (CUDA graphs, median of 20) and the decode step\n"
    "  --no-check   no correctness cases (timings only)\n"
    "  --profile    with --bench: also the phases of the tensor-core forward (plan, pack, prep, sum, scan,\n"
    "               h, o; sum and scan: the split's summary pass and scan, with 3+ parts only)\n"
    "  --case NAME  with --bench: time that prefill case only (e.g. under ncu); NAME/seq, NAME/fused,\n"
    "               NAME/serial, NAME/ckpt, NAME/split2, NAME/nohost, NAME/fp16, NAME/fp32, NAME/bf16ops,\n"
    "               NAME/d64, NAME/d256, NAME/cutNN, NAME/partsNN, NAME/bf16state, NAME/vstate,\n"
    "               NAME/bf16vstate: its A/B rows\n"
    "               (/seq: o by fwd_o after the chain; /fused: o in the chain by its second warpgroup;\n"
    "               /serial: by its one warpgroup after each chunk's chain; /ckpt: a checkpoint every 16\n"
    "               chunks; /split2: /parts2 (below); /nohost: without the host copy\n"
    "               of cu_seqlens; /fp16, /fp32: q, k, v and o in that dtype; /bf16ops: bf16 operands\n"
    "               where the library takes fp16 ones for bf16 inputs; /d64, /d256: K = V = 64, 256;\n"
    "               /cutNN: part 0 of a two-part split at NN% of the chunks; /partsNN: the exact split\n"
    "               into NN equal parts, o fused; /bf16state: the states in\n"
    "               a bf16 pool, read and written in place; /vstate: a V-major pool; /bf16vstate: both;\n"
    "               any of them then /scanNN: the split scan's column slices forced to NN, 8, 16 or 32)\n"
    "  --json FILE  with --bench: the timings as a JSON array\n"
    "  --dsmem      only: time a 16 KB exchange between the two CTAs of a cluster (dsmem_bench.cu)\n";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "gdn_cuda_check: %s\n%s", what.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gdn;
  bool bench = false, quick = false, decode_only = false, no_check = false, dsmem = false;
  check::BenchOptions bo;
  std::string only_case, json, only_names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--bench")
      bench = true;
    else if (a == "--quick")
      quick = true;
    else if (a == "--decode")
      decode_only = true;
    else if (a == "--no-check")
      no_check = true;
    else if (a == "--profile")
      bo.profile = true;
    else if (a == "--dsmem")
      dsmem = true;
    else if (a == "--case" && has_value)
      only_case = argv[++i];
    else if (a == "--json" && has_value)
      json = argv[++i];
    else if (a == "--only" && has_value)
      only_names = argv[++i];
    else if (a == "--help" || a == "-h")
      return std::printf("%s", kUsage), 0;
    else
      return usage_error("unknown option or missing value: " + a);
  }
  const std::vector<tools::PrefillCase>& prefill = tools::all_cases();
  auto find_case = [&](const std::string& name) {
    return std::find_if(prefill.begin(), prefill.end(), [&](const tools::PrefillCase& c) { return c.name == name; });
  };
  // --case NAME or NAME/<variant> (the A/B rows).
  const std::string seq_suffix = "/seq", fused_suffix = "/fused", ckpt_suffix = "/ckpt";
  // The variants timed when asked for by name only (NAME/<suffix>; kUsage says what each does).
  using PV = check::PrefillVariant;
  const std::pair<const char*, PV> by_name_only[] = {{seq_suffix.c_str(), PV::kOAfter},
                                                     {"/serial", PV::kFusedSerial},
                                                     {"/nohost", PV::kNoHostLengths},
                                                     {"/fp16", PV::kFp16},
                                                     {"/fp32", PV::kFp32},
                                                     {"/bf16ops", PV::kBf16Operands},
                                                     {"/d64", PV::kD64},
                                                     {"/d256", PV::kD256},
                                                     {"/bf16state", PV::kBf16State},
                                                     {"/vstate", PV::kVState},
                                                     {"/bf16vstate", PV::kBf16VState}};
  auto base_name = [](const std::string& label) { return label.substr(0, label.find('/')); };
  // NN of --case NAME<prefix>NN, or nothing when only_case is not of that form.
  auto numbered = [&](const std::string& name, const char* prefix) -> std::optional<int> {
    const std::string head = name + prefix;
    if (only_case.rfind(head, 0) != 0 || only_case.size() <= head.size()) return std::nullopt;
    return std::atoi(only_case.c_str() + head.size());
  };
  // --case LABEL/scanNN: LABEL (any of the above) with the split scan's column slices forced to NN.
  if (const size_t at = only_case.rfind("/scan"); at != std::string::npos && at + 5 < only_case.size()) {
    bo.scan_cols = std::atoi(only_case.c_str() + at + 5);
    only_case.resize(at);
  }
  if (!only_case.empty() && find_case(base_name(only_case)) == prefill.end())
    return usage_error("--case " + only_case + ": no such prefill case (tools/cases.h)");
  auto timed = [&](const std::string& label) { return only_case.empty() || only_case == label; };
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if the run is cut short
  if (!cuda::device_available()) {
    std::printf("no sm_90 CUDA device: skipped\n");
    return 0;
  }
  if (dsmem) return check::bench_dsmem_exchange(), 0;

  int failures = 0;
  if (!no_check) {
    std::vector<check::Case> cases = check::correctness_cases(quick);
    if (decode_only)
      cases.erase(std::remove_if(cases.begin(), cases.end(), [](const check::Case& c) { return !c.decode; }),
                  cases.end());
    if (!only_names.empty()) {  // --only a,b: the cases whose name contains a or b
      auto wanted = [&](const check::Case& c) {
        size_t from = 0;
        while (from <= only_names.size()) {
          const size_t to = std::min(only_names.find(',', from), only_names.size());
          const std::string part = only_names.substr(from, to - from);
          if (!part.empty() && c.name.find(part) != std::string::npos) return true;
          from = to + 1;
        }
        return false;
      };
      cases.erase(std::remove_if(cases.begin(), cases.end(), [&](const check::Case& c) { return !wanted(c); }),
                  cases.end());
    }
    std::mt19937 rng(12345);
    for (const check::Case& c : cases)
      if (!check::run_case(c, rng)) ++failures;
    // (After the cases: their lines keep their places for comparisons with earlier runs.)
    if (!decode_only && (only_names.empty() || only_names.find("plan") != std::string::npos))
      failures += check::check_plan_orders(rng);
  }
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);

  if (bench) {
    if (!json.empty() && !(bo.json = std::fopen(json.c_str(), "w")))
      return usage_error("--json " + json + ": cannot write");
    if (bo.json) std::fprintf(bo.json, "[");
    if (!decode_only) {
      // A/B in the same run: o by fwd_o after the chain (/seq) where the heuristics fuse it into
      // the chain with SMs left idle (1x4k, 1x32k) and in two waves (4x8k).
      // (--case NAME/seq: any case.)
      for (const char* name : {"1x4k", "1x32k", "4x8k"}) {
        const auto c = find_case(name);
        if (c != prefill.end() && only_case.empty())
          check::bench_prefill(*c, c->name + seq_suffix, check::PrefillVariant::kOAfter, bo);
      }
      for (const tools::PrefillCase& c : prefill) {
        if (timed(c.name)) check::bench_prefill(c, c.name, check::PrefillVariant::kDefault, bo);
        if (timed(c.name + fused_suffix))  // o computed in the chain (cfg.fuse_o), beside the default
          check::bench_prefill(c, c.name + fused_suffix, check::PrefillVariant::kFusedO, bo);
        // A checkpoint every 16 chunks (issue 12: at most 10% over the default), on one SPEC case
        // and on the split + fused path.
        if ((c.name == "1x32k" || c.name == "tp4-1x32k") && timed(c.name + ckpt_suffix))
          check::bench_prefill(c, c.name + ckpt_suffix, check::PrefillVariant::kCheckpoints, bo);
        // The by-name variants: the serial fused chain (the default where the heuristics take it),
        // no host copy of cu_seqlens, fp16 / fp32 inputs, bf16 operands
        // where the library takes fp16 ones, K = V = 64 / 256, bf16 and V-major state pools.
        for (const auto& [suffix, variant] : by_name_only)
          if (only_case == c.name + suffix) check::bench_prefill(c, only_case, variant, bo);
        // Part 0 of a two-part split at NN% (NAME/cutNN), the exact split into NN equal parts
        // (NAME/partsNN); by name only.
        if (const std::optional<int> pct = numbered(c.name, "/cut")) {
          bo.cut_percent = *pct;
          check::bench_prefill(c, only_case, check::PrefillVariant::kCut, bo);
        }
        if (const std::optional<int> parts = numbered(c.name, "/parts")) {
          bo.parts = *parts;
          check::bench_prefill(c, only_case, check::PrefillVariant::kParts, bo);
        }
        if (only_case == c.name + "/split2") {  // (the older scripts' name of /parts2)
          bo.parts = 2;
          check::bench_prefill(c, only_case, check::PrefillVariant::kParts, bo);
        }
      }
    }
    if (only_case.empty())
      for (int64_t n : {1, 64, 256, 1024, 4096})
        for (bool vm : {true, false}) {
          const float fp32_ms = check::bench_decode(n, vm, DType::kFloat32, bo);
          // bf16 pools (issue 12: >= 1.8x faster than fp32 at N >= 256).
          if (n >= 256) check::bench_decode(n, vm, DType::kBFloat16, bo, fp32_ms);
        }
    if (only_case.empty())
      for (bool sglang : {false, true})
        for (bool vm : {true, false}) check::bench_spec_decode(256, 4, vm, sglang, bo);
    if (bo.json) {
      std::fprintf(bo.json, "]\n");
      std::fclose(bo.json);
    }
  }
  return failures ? 1 : 0;
}
