// Validation of the chunked forward's prefill checkpoints (Checkpoints, docs/api.md): the
// backend's capability, the boundary stride, the slot map of common/checkpoint_slots.h, and that no
// two writers share a row and no stored row is one the call reads or writes as a state.
#include <algorithm>
#include <cstdint>

#include "common/capabilities.h"
#include "common/checkpoint_slots.h"
#include "common/validate_detail.h"

namespace gdn {
namespace detail {
namespace {

// Tokens of sequence n when the host knows them (a fixed-length batch, or host-readable
// boundaries `cu`), else -1.
int64_t known_len(const Problem& p, const void* cu, int64_t n) {
  if (p.cu_seqlens == nullptr) return p.num_tokens / p.num_seqs;
  if (cu == nullptr) return -1;
  return read_index(cu, n + 1, p.cu_seqlens_type) - read_index(cu, n, p.cu_seqlens_type);
}

// The row that sequence n names in `s` (initial or final state), or -1; `idx` is a host view of
// s.indices (null with s.indices set: unknown, -1).
int64_t pool_row(const StateRef& s, const void* idx, const uint8_t* present, int64_t n) {
  if (s.indices == nullptr) return present && present[n] == 0 ? -1 : n;
  return idx ? named_row(s, idx, present, n) : -1;
}

// No two stored boundaries share a row, and none is a row that the call reads as an initial state
// or writes as a final state of the same pool. A bitmap of 64 Ki rows on the stack (no
// allocation), one pass over the sequences per 64 Ki rows of the pool.
void check_checkpoint_aliasing(const char* op, const ForwardArgs& a, const void* idx, const void* cu, Backend backend) {
  const Checkpoints& ck = a.checkpoints;
  const Problem& p = a.problem;
  const int64_t N = p.num_seqs, S = ck.pool.num_slots;
  const StateRef& init = a.initial_state;
  const StateRef& fin = a.final_state;
  const bool init_shared = init.data == ck.pool.data, fin_shared = fin.data == ck.pool.data;
  const void* init_idx = init_shared && init.indices ? host_view(init.indices, init.indices_host, backend) : nullptr;
  const void* fin_idx = fin_shared && fin.indices ? host_view(fin.indices, fin.indices_host, backend) : nullptr;
  const uint8_t* init_present = static_cast<const uint8_t*>(host_view(init.present, init.present_host, backend));
  const uint8_t* fin_present = static_cast<const uint8_t*>(host_view(fin.present, fin.present_host, backend));
  constexpr int64_t kWindow = int64_t{1} << 16;
  uint64_t seen[kWindow / 64];
  auto marked = [&](int64_t lo, int64_t row) {
    return row >= lo && row < lo + kWindow && ((seen[(row - lo) / 64] >> ((row - lo) % 64)) & 1u);
  };
  for (int64_t lo = 0; lo < S; lo += kWindow) {
    std::fill(seen, seen + (std::min(kWindow, S - lo) + 63) / 64, uint64_t{0});
    for (int64_t n = 0; n < N; ++n) {
      const int64_t count = slots::checkpoint_count(ck, known_len(p, cu, n));
      for (int64_t j = 0; j < count; ++j) {
        const int64_t row = slots::checkpoint_row(ck, idx, n, j);
        if (row < lo || row >= lo + kWindow) continue;
        if (marked(lo, row))
          fail(op, "checkpoints: row ", row, " is written twice (the second time by boundary ", j, " of sequence ", n,
               "); expected distinct rows for the stored checkpoints");
        seen[(row - lo) / 64] |= uint64_t{1} << ((row - lo) % 64);
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      if (init_shared) {
        const int64_t r = pool_row(init, init_idx, init_present, n);
        if (marked(lo, r))
          fail(op, "checkpoints: row ", r, " is sequence ", n,
               "'s initial_state row (the same pool) and a checkpoint row; expected distinct rows");
      }
      if (fin_shared) {
        const int64_t r = pool_row(fin, fin_idx, fin_present, n);
        if (marked(lo, r))
          fail(op, "checkpoints: row ", r, " is sequence ", n,
               "'s final_state row (the same pool) and a checkpoint row; expected distinct rows");
      }
    }
  }
}

}  // namespace

void check_checkpoints_allowed(const char* op, Operation operation, const ForwardArgs& a, Backend backend) {
  if (a.checkpoints.pool.data == nullptr) return;
  if (operation != Operation::kForward)
    fail(op, "checkpoints is given; expected it only with chunk_gated_delta_rule (the chunked forward)");
  if (!capabilities(backend).checkpoints)
    fail(op, "checkpoints is given, but the ", backend_name(backend),
         " backend does not store prefill checkpoints (capabilities(backend).checkpoints is false); expected "
         "checkpoints.pool.data null, or the CPU backend");
}

void check_checkpoints(const char* op, const ForwardArgs& a, Backend backend) {
  const Checkpoints& ck = a.checkpoints;
  const Problem& p = a.problem;
  if (ck.pool.data == nullptr) return;
  if (ck.every_chunks < 1)
    fail(op, "checkpoints.every_chunks is ", ck.every_chunks,
         "; expected >= 1 (a boundary every 64 * every_chunks tokens)");
  if (ck.max_checkpoints < 1) fail(op, "checkpoints.max_checkpoints is ", ck.max_checkpoints, "; expected >= 1");
  if (ck.pool.present != nullptr) fail(op, "checkpoints.pool.present is set; expected null (no mask on checkpoints)");
  if (ck.pool.indices == nullptr && ck.pool.num_slots / ck.max_checkpoints < p.num_seqs)
    fail(op, "checkpoints.pool.num_slots is ", ck.pool.num_slots,
         "; expected at least N * max_checkpoints = ", p.num_seqs, " * ", ck.max_checkpoints,
         " when indices is null (rows n * max_checkpoints + j)");
  const void* idx = host_view(ck.pool.indices, ck.pool.indices_host, backend);
  const void* cu = host_view(p.cu_seqlens, p.cu_seqlens_host, backend);
  if (ck.pool.indices != nullptr && idx != nullptr)
    for (int64_t n = 0; n < p.num_seqs; ++n)
      for (int64_t j = 0; j < ck.max_checkpoints; ++j) {
        const int64_t r = read_index(idx, n * ck.max_checkpoints + j, ck.pool.index_type);
        if (r >= ck.pool.num_slots && r != ck.pool.null_slot)
          fail(op, "checkpoints.pool.indices[", n, "][", j, "] is ", r, "; expected < num_slots = ", ck.pool.num_slots,
               " (or negative / null_slot for none)");
      }
  // The aliasing checks need the rows and the lengths on the host.
  if ((ck.pool.indices != nullptr && idx == nullptr) || (p.cu_seqlens != nullptr && cu == nullptr)) return;
  check_checkpoint_aliasing(op, a, idx, cu, backend);
}

}  // namespace detail
}  // namespace gdn
