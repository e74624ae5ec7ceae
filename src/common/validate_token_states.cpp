// Validation of the decode step's per-token states (TokenStates, docs/api.md): the slot map of
// common/token_slots.h, accepted-token counts, EAGLE parents, and that no two writers share a row.
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/token_slots.h"
#include "common/validate_detail.h"

namespace gdn {
namespace detail {
namespace {

// Tokens of sequence n when the host knows them (a fixed-length batch, or host-readable
// boundaries `cu`), else -1.
int64_t host_len(const Problem& p, const void* cu, int64_t n) {
  if (p.cu_seqlens == nullptr) return p.num_tokens / p.num_seqs;
  if (cu == nullptr) return -1;
  return read_index(cu, n + 1, p.cu_seqlens_type) - read_index(cu, n, p.cu_seqlens_type);
}

// Range checks of the indices that name (n, t), with the message of the form used (2-D or group).
void check_token_index(const char* op, const TokenStates& ts, const void* idx, int64_t n, int64_t t) {
  const int64_t r = slots::raw_index(ts, idx, n, t), S = ts.pool.num_slots, M = ts.max_tokens;
  if (r < 0 || r == ts.pool.null_slot) return;
  if (ts.per_token && r >= S)
    fail(op, "token_states.pool.indices[", n, "][", t, "] is ", r, "; expected < num_slots = ", S,
         " (or negative / null_slot for none)");
  if (!ts.per_token && r >= S / M)
    fail(op, "token_states.pool.indices[", n, "] is ", r, "; its rows [", r, " * ", M, ", +", M,
         ") end past num_slots = ", S, " (expected a group < num_slots / max_tokens = ", S / M, ")");
}

// Which rows each sequence writes and reads, checked against each other with a bitmap of 64 Ki rows
// on the stack (no allocation), one pass over the sequences per 64 Ki rows of the pool: no two
// stored tokens share a row, no sequence reads a row that another one writes, and final_state
// (when it is the same pool) writes no row that a token writes.
void check_token_aliasing(const char* op, const ForwardArgs& a, const void* idx, const void* acc, const void* cu,
                          Backend backend) {
  const TokenStates& ts = a.token_states;
  const Problem& p = a.problem;
  const int64_t N = p.num_seqs, S = ts.pool.num_slots;
  const StateRef& fin = a.final_state;
  const StateRef& init = a.initial_state;
  const bool fin_shared = fin.data == ts.pool.data;
  const bool init_shared = init.data == ts.pool.data && acc == nullptr;
  const void* fin_idx = fin_shared && fin.indices ? host_view(fin.indices, fin.indices_host, backend) : nullptr;
  const void* init_idx = init_shared && init.indices ? host_view(init.indices, init.indices_host, backend) : nullptr;
  const uint8_t* present = static_cast<const uint8_t*>(host_view(init.present, init.present_host, backend));
  constexpr int64_t kWindow = int64_t{1} << 16;
  uint64_t seen[kWindow / 64];
  auto marked = [&](int64_t lo, int64_t row) {
    return row >= lo && row < lo + kWindow && ((seen[(row - lo) / 64] >> ((row - lo) % 64)) & 1u);
  };
  // The row that sequence n reads from this pool, or -1.
  auto read_row = [&](int64_t n) -> int64_t {
    if (acc != nullptr) {
      const int64_t c = slots::read_column(ts, acc, n);
      return c < 0 ? -1 : slots::token_row(ts, idx, n, c);
    }
    if (!init_shared || (init.indices && !init_idx)) return -1;
    return init.indices ? named_row(init, init_idx, present, n) : (present && present[n] == 0 ? -1 : n);
  };
  auto writes = [&](int64_t n, int64_t row) {
    const int64_t len = host_len(p, cu, n);
    for (int64_t t = 0; t < len; ++t)
      if (slots::token_row(ts, idx, n, t) == row) return true;
    return false;
  };
  for (int64_t lo = 0; lo < S; lo += kWindow) {
    std::fill(seen, seen + (std::min(kWindow, S - lo) + 63) / 64, uint64_t{0});
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = host_len(p, cu, n);
      for (int64_t t = 0; t < len; ++t) {
        const int64_t row = slots::token_row(ts, idx, n, t);
        if (row < lo || row >= lo + kWindow) continue;
        if (marked(lo, row))
          fail(op, "token_states: row ", row, " is written twice (the second time by token ", t, " of sequence ", n,
               "); expected distinct rows for the stored tokens");
        seen[(row - lo) / 64] |= uint64_t{1} << ((row - lo) % 64);
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = read_row(n);
      if (marked(lo, r) && !writes(n, r))
        fail(op, "token_states: sequence ", n, " reads row ", r,
             ", which another sequence's token writes in the same call; expected a row no other sequence writes");
      if (fin_shared && (fin_idx || !fin.indices)) {
        const int64_t f = fin.indices ? named_row(fin, fin_idx, nullptr, n) : n;
        if (marked(lo, f))
          fail(op, "final_state row ", f, " of sequence ", n,
               " is also written by token_states (the same pool); expected distinct rows");
      }
    }
  }
}

}  // namespace

void check_token_states(const char* op, Operation operation, const ForwardArgs& a, Backend backend) {
  const TokenStates& ts = a.token_states;
  const Problem& p = a.problem;
  if (ts.pool.data == nullptr) {
    if (ts.num_accepted != nullptr) fail(op, "token_states.num_accepted is given without token_states.pool.data");
    if (ts.parents != nullptr) fail(op, "token_states.parents is given without token_states.pool.data");
    return;
  }
  if (operation != Operation::kDecode)
    fail(op, "token_states is given; expected it only with recurrent_gated_delta_rule (the decode step)");
  if (ts.max_tokens < 1) fail(op, "token_states.max_tokens is ", ts.max_tokens, "; expected >= 1");
  if (ts.pool.present != nullptr) fail(op, "token_states.pool.present is set; expected null (no mask on token states)");
  if (ts.pool.indices == nullptr && ts.pool.num_slots / ts.max_tokens < p.num_seqs)
    fail(op, "token_states.pool.num_slots is ", ts.pool.num_slots, "; expected at least N * max_tokens = ", p.num_seqs,
         " * ", ts.max_tokens, " when indices is null (rows n * max_tokens + t)");
  if (ts.num_accepted != nullptr) {
    if (ts.num_accepted_type != IndexType::kInt32 && ts.num_accepted_type != IndexType::kInt64)
      fail(op, "token_states.num_accepted_type is invalid; expected kInt32 or kInt64");
    if (a.initial_state.data != nullptr)
      fail(op,
           "initial_state is given with token_states.num_accepted; expected null (the initial state is read from "
           "token_states.pool)");
  }
  if (ts.parents != nullptr && ts.parents_type != IndexType::kInt32 && ts.parents_type != IndexType::kInt64)
    fail(op, "token_states.parents_type is invalid; expected kInt32 or kInt64");
  const void* idx = host_view(ts.pool.indices, ts.pool.indices_host, backend);
  const void* acc = host_view(ts.num_accepted, ts.num_accepted_host, backend);
  const void* par = host_view(ts.parents, ts.parents_host, backend);
  const void* cu = host_view(p.cu_seqlens, p.cu_seqlens_host, backend);
  for (int64_t n = 0; n < p.num_seqs; ++n) {
    const int64_t len = host_len(p, cu, n);
    if (len > ts.max_tokens)
      fail(op, "sequence ", n, " has ", len, " tokens; expected at most token_states.max_tokens = ", ts.max_tokens);
    int64_t column = -1;
    if (acc != nullptr) {
      const int64_t na = read_index(acc, n, ts.num_accepted_type);
      if (na < 1 || na > ts.max_tokens)
        fail(op, "token_states.num_accepted[", n, "] is ", na, "; expected in [1, max_tokens = ", ts.max_tokens, "]");
      column = na - 1;
    }
    if (idx != nullptr && ts.pool.indices != nullptr) {
      // Every column when the lengths are unknown (CUDA without cu_seqlens_host).
      for (int64_t t = 0; t < (len < 0 ? ts.max_tokens : len); ++t) check_token_index(op, ts, idx, n, t);
      if (column >= 0) check_token_index(op, ts, idx, n, column);
    }
    // EAGLE trees: a parent precedes its token, and its state is stored (read back from the pool).
    for (int64_t t = 1; par != nullptr && t < len; ++t) {
      const int64_t pt = read_index(par, n * ts.max_tokens + t, ts.parents_type);
      if (pt >= t)
        fail(op, "token_states.parents[", n, "][", t, "] is ", pt, "; expected a token before ", t,
             " (or negative: the previous token)");
      if (pt >= 0 && pt < t - 1 && (ts.pool.indices == nullptr || idx != nullptr) &&
          slots::token_row(ts, idx, n, pt) < 0)
        fail(op, "token_states.parents[", n, "][", t, "] is ", pt, ", but the state after token ", pt, " of sequence ",
             n, " is not stored (its index is none); expected a stored parent");
    }
  }
  // The aliasing checks need the rows and the lengths on the host.
  if ((ts.pool.indices != nullptr && idx == nullptr) || (p.cu_seqlens != nullptr && cu == nullptr)) return;
  check_token_aliasing(op, a, idx, acc, cu, backend);
}

}  // namespace detail
}  // namespace gdn
