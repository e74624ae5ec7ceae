// The slot map of TokenStates (gdn.h), written once for validation, the CPU backend and the CUDA
// kernels: the pool row of the state after token t of sequence n, and the row a sequence reads
// through num_accepted. The indices may be unvalidated device data (CUDA without host copies), so
// every result is checked here: a row outside [0, num_slots), a negative or null index, a column
// outside [0, max_tokens) and a num_accepted outside [1, max_tokens] all give -1 ("none").
#pragma once

#include <cstdint>

#include "common/spec_math.h"  // GDN_HOST_DEVICE
#include "gdn/gdn.h"

namespace gdn {
namespace slots {

GDN_HOST_DEVICE inline int64_t load(const void* p, IndexType type, int64_t i) {
  return type == IndexType::kInt64 ? static_cast<const int64_t*>(p)[i]
                                   : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// The raw index that names (n, t) in `indices` (host or device memory; t in [0, max_tokens)).
GDN_HOST_DEVICE inline int64_t raw_index(const TokenStates& ts, const void* indices, int64_t n, int64_t t) {
  return load(indices, ts.pool.index_type, ts.per_token ? n * ts.max_tokens + t : n);
}

// Row of the state after token t (0-based in its sequence) of sequence n, or -1 (not stored).
// `indices` is ts.pool.indices or a host copy of it. Without indices: row n * max_tokens + t.
// The group form (!per_token) checks the group before multiplying, so no product overflows.
GDN_HOST_DEVICE inline int64_t token_row(const TokenStates& ts, const void* indices, int64_t n, int64_t t) {
  if (t < 0 || t >= ts.max_tokens) return -1;
  const int64_t M = ts.max_tokens, S = ts.pool.num_slots;
  if (ts.pool.indices == nullptr) return n < S / M ? n * M + t : -1;
  const int64_t r = raw_index(ts, indices, n, t);
  if (r < 0 || r == ts.pool.null_slot) return -1;
  if (ts.per_token) return r < S ? r : -1;
  return r < S / M ? r * M + t : -1;
}

// The column that sequence n reads (num_accepted[n] - 1), or -1 when it is outside [0, max_tokens).
GDN_HOST_DEVICE inline int64_t read_column(const TokenStates& ts, const void* num_accepted, int64_t n) {
  const int64_t a = load(num_accepted, ts.num_accepted_type, n);
  return a >= 1 && a <= ts.max_tokens ? a - 1 : -1;
}

// EAGLE trees: the row holding the state that token t (0-based, >= 1) of sequence n continues
// from, when that is not the state in hand (the parent is not t - 1); else -1 (keep the chain:
// also for a negative parent, a parent outside [0, t) and a parent whose state is not stored).
GDN_HOST_DEVICE inline int64_t parent_row(const TokenStates& ts, const void* indices, const void* parents, int64_t n,
                                          int64_t t) {
  if (parents == nullptr || t < 1 || t >= ts.max_tokens) return -1;
  const int64_t p = load(parents, ts.parents_type, n * ts.max_tokens + t);
  return p >= 0 && p < t - 1 ? token_row(ts, indices, n, p) : -1;
}

}  // namespace slots
}  // namespace gdn
