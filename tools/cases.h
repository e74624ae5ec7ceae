// The benchmark cases of SPEC.md section 6, shared by the CLI and the CPU benchmark.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gdn {
namespace tools {

struct PrefillCase {
  std::string name;
  std::vector<int64_t> lens;
  int64_t tokens() const {
    int64_t t = 0;
    for (int64_t l : lens) t += l;
    return t;
  }
};

inline std::vector<PrefillCase> spec_prefill_cases() {
  std::vector<PrefillCase> cs = {
      {"1x4k", {4096}},
      {"1x32k", {32768}},
      {"1x128k", {131072}},
      {"4x8k", std::vector<int64_t>(4, 8192)},
      {"8x1k", std::vector<int64_t>(8, 1024)},
      {"mixed", {}},
      {"64x256", std::vector<int64_t>(64, 256)},
      {"256x64", std::vector<int64_t>(256, 64)},
  };
  // 15 lengths from 256 to 4096 (a fixed spread) plus the remainder: 32768 tokens in all.
  std::vector<int64_t>& mixed = cs[5].lens;
  int64_t total = 0;
  for (int i = 0; i < 15; ++i) {
    const int64_t len = 256 + (4096 - 256) * ((i * 7) % 15) / 14;
    mixed.push_back(len);
    total += len;
  }
  mixed.push_back(32768 - total);
  return cs;
}

// Cuts a case down to at most `max_tokens` tokens, keeping its sequence lengths: a batch keeps
// its first sequences, a single sequence is shortened. Returns false when nothing had to change.
inline bool scale_down(PrefillCase& c, int64_t max_tokens) {
  if (c.tokens() <= max_tokens) return false;
  std::vector<int64_t> kept;
  int64_t total = 0;
  for (int64_t l : c.lens) {
    if (total + l > max_tokens) break;
    kept.push_back(l);
    total += l;
  }
  if (kept.empty()) kept.push_back(max_tokens);
  c.lens = kept;
  return true;
}

// Chunked-algorithm FLOPs of one (chunk, value head), counting the triangular products at half
// (what the algorithm needs): kk^T and qk^T C^2 K each, A [bk | bv] C^2 (K + V), P v_new C^2 V,
// w h, q h and the state update 2 C K V each, and solve_tril C^3 / 3.
inline double chunk_flops(int K, int V) {
  const double C = 64;
  return 2 * C * C * K + C * C * (K + V) + C * C * V + 6 * C * K * V + C * C * C / 3;
}

inline double prefill_flops(const std::vector<int64_t>& lens, int HV, int K, int V) {
  double chunks = 0;
  for (int64_t l : lens) chunks += static_cast<double>((l + 63) / 64);
  return chunks * HV * chunk_flops(K, V);
}

}  // namespace tools
}  // namespace gdn
