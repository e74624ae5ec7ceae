// Validation's internals shared by its files (validate.cpp, validate_token_states.cpp): the
// message helper, host views and index reads. Not part of the library's interface.
#pragma once

#include <cstdint>
#include <sstream>

#include "gdn/gdn.h"

namespace gdn {
namespace detail {

template <typename... Parts>
[[noreturn]] inline void fail(const char* op, const Parts&... parts) {
  std::ostringstream os;
  os << "gdn." << op << ": ";
  (os << ... << parts);
  throw Error(os.str());
}

inline int64_t read_index(const void* base, int64_t i, IndexType type) {
  return type == IndexType::kInt32 ? static_cast<const int32_t*>(base)[i] : static_cast<const int64_t*>(base)[i];
}

// Host-readable copy of a device array: the array itself on the CPU, the optional host copy else.
inline const void* host_view(const void* device_ptr, const void* host_copy, Backend backend) {
  return backend == Backend::kCPU ? device_ptr : host_copy;
}

// The row sequence n names in a pool, or -1 for "no state" (negative, the null slot, or absent).
inline int64_t named_row(const StateRef& s, const void* indices, const uint8_t* present, int64_t n) {
  if (present && present[n] == 0) return -1;
  const int64_t row = read_index(indices, n, s.index_type);
  return row < 0 || row == s.null_slot ? -1 : row;
}

// The per-token states of the decode step (TokenStates): slots, counts, parents and aliasing
// (validate_token_states.cpp).
void check_token_states(const char* op, Operation operation, const ForwardArgs& a, Backend backend);

// The chunked forward's prefill checkpoints (Checkpoints): capability, stride, slots and aliasing
// (validate_checkpoints.cpp). check_checkpoints_allowed first (the operation and the backend's
// capability), then check_checkpoints on the normalized pool.
void check_checkpoints_allowed(const char* op, Operation operation, const ForwardArgs& a, Backend backend);
void check_checkpoints(const char* op, const ForwardArgs& a, Backend backend);

}  // namespace detail
}  // namespace gdn
