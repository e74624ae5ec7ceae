// Argument checks shared by every backend (SPEC.md section 5), and the normalization that lets
// backends trust what they get: explicit strides, a set scale.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdn/gdn.h"

namespace gdn {

// Validates the problem description itself: sizes, what the backend's capability table
// (common/capabilities.h) allows for `operation` (head sizes, dtypes, layout), and the boundaries
// when a host copy is readable. `op` prefixes every message.
void validate_problem(const char* op, const Problem& p, Backend backend, Operation operation);

// Validates and normalizes the arguments of the forward (Operation::kForward) or the decode step
// (kDecode). Returns the normalized copy.
ForwardArgs validate_forward(const char* op, Operation operation, const ForwardArgs& args, const Exec& exec);

// Stage checks: `needs` lists the buffers that the stage reads or writes.
enum StageBuffer : unsigned {
  kNeedQ = 1u << 0,
  kNeedK = 1u << 1,
  kNeedV = 1u << 2,
  kNeedG = 1u << 3,
  kNeedBeta = 1u << 4,
  kNeedGcum = 1u << 5,
  kNeedL = 1u << 6,
  kNeedA = 1u << 7,
  kNeedW = 1u << 8,
  kNeedU = 1u << 9,
  kNeedH = 1u << 10,
  kNeedVNew = 1u << 11,
  kNeedO = 1u << 12,
  kNeedStates = 1u << 13,
};
StageBuffers validate_stage(const char* op, const Problem& p, const StageBuffers& b, unsigned needs, const Exec& exec);
Problem normalize_problem(const Problem& p);

L2NormArgs validate_l2norm(const L2NormArgs& args, const Exec& exec);

void validate_exec(const char* op, const Exec& exec, size_t workspace_needed);

}  // namespace gdn
