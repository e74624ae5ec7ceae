// The slot map of Checkpoints (gdn.h), written once for validation and the backends: the pool row
// of boundary j of sequence n. The indices may be unvalidated device data (CUDA without host
// copies), so every result is checked here: a row outside [0, num_slots), a negative or null
// index and a column outside [0, max_checkpoints) all give -1 ("not stored").
#pragma once

#include <cstdint>

#include "common/token_slots.h"  // slots::load, GDN_HOST_DEVICE
#include "gdn/gdn.h"

namespace gdn {
namespace slots {

// Row of boundary j (after (j + 1) * every_chunks chunks) of sequence n, or -1. `indices` is
// ck.pool.indices or a host copy of it. Without indices: row n * max_checkpoints + j.
GDN_HOST_DEVICE inline int64_t checkpoint_row(const Checkpoints& ck, const void* indices, int64_t n, int64_t j) {
  if (j < 0 || j >= ck.max_checkpoints) return -1;
  const int64_t M = ck.max_checkpoints, S = ck.pool.num_slots;
  if (ck.pool.indices == nullptr) return n < S / M ? n * M + j : -1;
  const int64_t r = load(indices, ck.pool.index_type, n * M + j);
  return r < 0 || r == ck.pool.null_slot || r >= S ? -1 : r;
}

// The boundaries of a sequence of `len` tokens that are stored: j in [0, count).
GDN_HOST_DEVICE inline int64_t checkpoint_count(const Checkpoints& ck, int64_t len) {
  const int64_t per = ck.every_chunks * kChunkSize, n = per > 0 ? len / per : 0;
  return n < ck.max_checkpoints ? n : ck.max_checkpoints;
}

}  // namespace slots
}  // namespace gdn
