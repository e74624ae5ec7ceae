#include "cli/options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cases.h"

namespace gdn {
namespace cli {
namespace {

const char* const kHelp = R"(gdn: the main job. Runs the benchmark cases of SPEC.md section 6 (bench/cases.txt) with
the layer shape K = V = 128, qk l2-norm and fp32 states, on the best backend present; checks one
or two value heads of each against the double-precision recurrence; prints a table. The exit code
is 1 when a check is off its SPEC bound, 2 for a bad command line.

usage: gdn [options]

options:
  --backend auto|cpu|cuda  where to run (default auto: CUDA when a device is present, else CPU)
  --threads N              CPU worker threads, N >= 1 (default: OpenMP's: OMP_NUM_THREADS, else
                           all cores)
  --dtypes LIST            storage dtypes of q, k, v and o, comma-separated: bf16, fp16, fp32
                           (default bf16); the decode rows use the first
  --cases LIST             the cases to run, comma-separated names (see --list), or `all`
  --set LIST               the case sets to run, comma-separated: spec, tp, exact, model, short,
                           mix
                           (without --cases and --set: the spec set, SPEC's main table)
  --max-tokens N|all       cut longer cases to N tokens, keeping their sequence lengths (default:
                           8192 on the CPU, all on CUDA); `all` runs every case whole
  --no-decode              skip the decode rows
  --json FILE              also write the results to FILE as JSON
  --list                   print the cases (set, heads, gates, sequences, tokens, lengths), exit
  -h, --help               print this help, exit

table columns:
  case        the case name (bench/cases.txt), or `decode` for a decode batch
  kind        prefill: the chunked forward (chunk_gated_delta_rule) on the case's sequences;
              decode-v / decode-k: one decode step (recurrent_gated_delta_rule) on a batch of
              one-token sequences whose states sit in a pool, V-major / K-major
  dtype       storage dtype of q, k, v and o (gates and states are fp32)
  H, HV       q/k heads and value heads (K = V = 128)
  tokens      tokens in the call (all sequences); for decode, the batch size
  ms          time of one call: CPU the median wall time of >= 3 runs; CUDA the median of 30
              CUDA-graph replays
  tokens/s    tokens / time
  GFLOP/s     prefill: the chunked algorithm's FLOPs / time (triangular products counted at half)
  GB/s        decode: state bytes read and written (2 x N x HV x K x V x 4) / time
  err(o)      relative RMS error of o against the fp64 recurrence (checked value heads)
  err(state)  the same for the final states
  A case marked (scaled down) was cut by --max-tokens.
)";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A whole number in [1, max]; anything else is a usage error naming the option and `expected`.
int64_t parse_positive(const std::string& option, const std::string& text, int64_t max, const std::string& expected) {
  int64_t v = 0;
  size_t used = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1 || v > max)
    usage_error(option + " '" + text + "': expected " + expected);
  return v;
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::kBFloat16;
  if (s == "fp16" || s == "float16") return DType::kFloat16;
  if (s == "fp32" || s == "float32") return DType::kFloat32;
  usage_error("unknown dtype '" + s + "'; known: bf16, fp16, fp32 (or bfloat16, float16, float32)");
}

// "spec, tp, exact, model, short, mix": the sets of bench/cases.txt in file order.
std::string known_sets() {
  std::vector<std::string> sets;
  for (const tools::PrefillCase& c : tools::all_cases())
    if (std::find(sets.begin(), sets.end(), c.set) == sets.end()) sets.push_back(c.set);
  std::string s;
  for (const std::string& set : sets) s += (s.empty() ? "" : ", ") + set;
  return s;
}

}  // namespace

void usage_error(const std::string& why) {
  std::fprintf(stderr, "gdn: %s\n(gdn --help lists the options)\n", why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool has_value = false;
    // --option=value is the same as --option value.
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    auto no_value = [&]() {
      if (has_value) usage_error(arg + " takes no value");
    };
    if (arg == "--backend") {
      o.backend = next();
      if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
        usage_error("unknown backend '" + o.backend + "'; known: auto, cpu, cuda");
    } else if (arg == "--threads") {
      o.threads = static_cast<int>(parse_positive(arg, next(), 4096, "a whole number in [1, 4096]"));
    } else if (arg == "--dtypes") {
      o.dtypes.clear();
      for (const std::string& d : split(next())) o.dtypes.push_back(parse_dtype(d));
      if (o.dtypes.empty()) usage_error("--dtypes needs at least one dtype");
    } else if (arg == "--cases") {
      const std::vector<std::string> names = split(next());
      if (names.empty()) usage_error("--cases needs at least one case name");
      for (const std::string& name : names) {
        std::vector<tools::PrefillCase> found;
        std::string error;
        if (name != "all" && !tools::find_cases({name}, &found, &error)) usage_error(error + " (or all)");
        o.cases.push_back(name);
      }
    } else if (arg == "--set") {
      const std::vector<std::string> sets = split(next());
      if (sets.empty()) usage_error("--set needs at least one set name");
      for (const std::string& set : sets) {
        if (tools::cases_in_set(set).empty()) usage_error("unknown set '" + set + "'; known: " + known_sets());
        o.sets.push_back(set);
      }
    } else if (arg == "--max-tokens") {
      const std::string v = next();
      o.max_tokens = v == "all" ? 0 : parse_positive(arg, v, int64_t{1} << 40, "a whole number >= 1, or all");
    } else if (arg == "--no-decode") {
      no_value();
      o.decode = false;
    } else if (arg == "--json") {
      o.json = next();
      if (o.json.empty()) usage_error("--json needs a file name");
    } else if (arg == "--list") {
      no_value();
      o.list = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    } else if (arg.rfind("-", 0) == 0) {
      usage_error("unknown option '" + arg + "'");
    } else {
      usage_error("unexpected argument '" + arg + "'");
    }
  }
  return o;
}

}  // namespace cli
}  // namespace gdn
