// The functions that module.cpp binds (forward.cpp, stages.cpp), and the argument lists of the two
// long ones as data: each parameter's name and whether it accepts None, in the order of the C++
// parameters. module.cpp turns each table into the nb::arg annotations (nanobind checks at compile
// time that there is one per parameter) and exports it (gdn._C.forward_args, gdn._C.stage_args);
// python/gdn/_signature.py, which derives the torch op schema and the Python calls from its own
// table, asserts at import that the names and the None-ness agree with these.
#pragma once

#include <cstdint>
#include <string>

#include "args.h"

namespace gdn_py {

struct ArgSpec {
  const char* name;
  bool accepts_none;
};

// The composed forward (chunked, or the recurrence when recurrent=True) over preallocated outputs.
inline constexpr ArgSpec kForwardArgs[] = {
    {"q", false},
    {"k", false},
    {"v", false},
    {"g", false},
    {"beta", false},
    {"o", false},
    {"A_log", true},
    {"dt_bias", true},
    {"initial_state", true},
    {"initial_state_indices", true},
    {"initial_state_indices_cpu", true},
    {"final_state", true},
    {"final_state_indices", true},
    {"final_state_indices_cpu", true},
    {"final_is_initial", false},
    {"initial_state_present", true},
    {"null_slot", false},
    {"token_states", true},
    {"token_state_indices", true},
    {"token_state_indices_cpu", true},
    {"num_accepted_tokens", true},
    {"num_accepted_tokens_cpu", true},
    {"retrieve_parent_token", true},
    {"retrieve_parent_token_cpu", true},
    {"checkpoints", true},
    {"checkpoint_indices", true},
    {"checkpoint_indices_cpu", true},
    {"checkpoint_every_chunks", false},
    {"cu_seqlens", true},
    {"cu_seqlens_cpu", true},
    {"scale", false},
    {"use_qk_l2norm", false},
    {"state_v_first", false},
    {"fused_gate", false},
    {"recurrent", false},
    {"workspace", true},
    {"stream", false},
    {"num_threads", false},
};
void forward(In q, In k, In v, In g, In beta, Out o, In A_log, In dt_bias, In initial_state, In initial_indices,
             In initial_indices_host, Out final_state, In final_indices, In final_indices_host, bool final_is_initial,
             In initial_present, int64_t null_slot, Out token_states, In token_indices, In token_indices_host,
             In num_accepted, In num_accepted_host, In parents, In parents_host, Out checkpoints, In checkpoint_indices,
             In checkpoint_indices_host, int64_t checkpoint_every_chunks, In cu_seqlens, In cu_seqlens_host,
             double scale, bool use_qk_l2norm, bool state_v_first, bool fused_gate, bool recurrent,
             nb::handle workspace, uintptr_t stream, int num_threads);

// One stage of the chunked forward (SPEC.md section 3), named by `which`.
inline constexpr ArgSpec kStageArgs[] = {
    {"which", false},
    {"T", false},
    {"N", false},
    {"H", false},
    {"HV", false},
    {"K", false},
    {"V", false},
    {"scale", false},
    {"state_v_first", false},
    {"cu_seqlens", true},
    {"cu_seqlens_cpu", true},
    {"q", true},
    {"k", true},
    {"v", true},
    {"g", true},
    {"beta", true},
    {"G", true},
    {"L", true},
    {"A", true},
    {"w", true},
    {"u", true},
    {"h", true},
    {"v_new", true},
    {"o", true},
    {"initial_state", true},
    {"initial_state_indices", true},
    {"initial_state_indices_cpu", true},
    {"final_state", true},
    {"final_state_indices", true},
    {"final_state_indices_cpu", true},
    {"final_is_initial", false},
    {"workspace", true},
    {"stream", false},
    {"num_threads", false},
};
void stage(const std::string& which, int64_t T, int64_t N, int64_t H, int64_t HV, int64_t K, int64_t V, double scale,
           bool state_v_first, In cu_seqlens, In cu_seqlens_host, In q, In k, In v, In g, In beta, Out G, Out L, Out A,
           Out w, Out u, Out h, Out v_new, Out o, In initial_state, In initial_indices, In initial_indices_host,
           Out final_state, In final_indices, In final_indices_host, bool final_is_initial, nb::handle workspace,
           uintptr_t stream, int num_threads);

// y = x / sqrt(sum(x^2) + 1e-6) per token and head, in fp32.
void l2norm(In x, Out y, uintptr_t stream, int num_threads);

}  // namespace gdn_py
