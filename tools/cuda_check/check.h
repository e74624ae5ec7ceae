// The device check of the CUDA backend (gdn_cuda_check): shared declarations of its files.
//   check_main.cu   options, the runs and the A/B rows
//   case_list.cu    the correctness cases
//   run_case.cu     one case: random inputs, the backend's run, the fp64 oracle (reference/), errors
//   device_io.cu    host <-> device arrays in a storage dtype (src/common/host_dtype.h)
//   timing.cu       CUDA-graph timings of the prefill cases (tools/cases.h) and of the decode step
//   plan_check.cu   the sequence plan's longest-first order
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cases.h"
#include "gdn/gdn.h"

namespace gdn {
namespace check {

// A CUDA runtime failure ends the check (exit code 2): the device is unusable.
#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

// ---- device_io.cu ----------------------------------------------------------------------------
// x rounded to the storage dtype (the value the device will read).
float round_to(DType dtype, float x);
// The dtype's name and element size (the tool links the CUDA backend alone, not gdn::dtype_name).
inline const char* dtype_str(DType d) {
  return d == DType::kFloat32 ? "float32" : d == DType::kFloat16 ? "float16" : "bfloat16";
}
inline size_t dtype_bytes(DType d) { return d == DType::kFloat32 ? 4 : 2; }
// rows x row_len host floats as dtype on the device, rows `stride` elements apart (the gaps zero).
void* upload(const std::vector<float>& x, DType dtype, int64_t rows, int64_t row_len, int64_t stride);
std::vector<float> download(const void* device, DType dtype, int64_t rows, int64_t row_len, int64_t stride);
// Indices (cu_seqlens, pool rows) as int32 or int64 on the device.
void* upload_indices(const std::vector<int64_t>& x, IndexType type);

// ---- run_case.cu / case_list.cu --------------------------------------------------------------
struct Case {
  std::string name;
  std::vector<int64_t> lens;
  int H = 2, HV = 4, K = 128, V = 128;
  DType dt = DType::kBFloat16;
  bool gate_in_dtype = false;
  bool l2 = true, fused = true, vmajor = false, pool = true, pad = false;
  bool decode = false;          // recurrent_gated_delta_rule instead of the chunked forward
  bool stages = false;          // run the stage API chain (no l2norm / fusion)
  bool idx32 = false;           // int32 cu_seqlens and pool indices (else int64)
  bool oob = false;             // also pool indices >= num_slots (read as zeros / not written)
  bool fwd_o_after = false;     // the tensor-core forward with o by fwd_o after the chain (cfg.fuse_o off)
  bool fuse_o = false;          // the tensor-core forward with o computed in the chain (cfg.fuse_o)
  bool fuse_o_serial = false;   // ... in the chain's serial form (cfg.fuse_o_serial; with fuse_o)
  DType sdt = DType::kFloat32;  // the state pool's element type
  int row_pad = 0;              // pool rows HV K V + row_pad elements apart
  // > 0 (with decode): speculative decoding's verify in vLLM's convention, max_tokens = spec_tokens
  // (lens <= it): the pool's rows named per token by 2-D indices (row 0 the null slot), the state
  // after every token stored, the initial state read through num_accepted; with oob also indices
  // and num_accepted out of range (no host copies: clamped on the device).
  int spec_tokens = 0;
  // > 0 (chunked forward): prefill checkpoints every ck_every chunks (at most kCheckpointsMax per
  // sequence) into a pool of their own (the states' dtype, layout and row stride), rows by a slot
  // map with "none" entries and, with oob, out-of-range ones (no host copies: clamped on the device).
  int ck_every = 0;
  // >= 0 (decode, K = V = 128, a 16-bit pool): the rows kernel's shape kRows16Shapes[rows_shape]
  // (cuda/decode/recurrent.cuh) instead of decode_heuristics' choice (every candidate is checked)
  int rows_shape = -1;
  double tol = 5e-3;
  float gscale = 1.f;
  // Unfused gates (fused = false): also the rare extremes among them (g = 0 and g = -1e4 resets,
  // beta = 0 and beta = 2), which keep a state from remembering for long.
  bool gate_extremes = true;
  // > 0: every head's keys drawn from key_set random vectors (+ key_noise x randn per element),
  // before the l2 norm: repeated tokens, where (I + L)^-1 and v - k S cancel the most.
  int key_set = 0;
  float key_noise = 0.f;
};

constexpr int kCheckpointsMax = 4;

// The correctness cases; `quick` leaves out the large ones.
std::vector<Case> correctness_cases(bool quick);
// case_list_pools.cu: the decode step's and the state pools' cases, appended in correctness_cases.
void append_decode_and_pool_cases(std::vector<Case>& cases, const std::vector<int64_t>& mix, bool quick);
// Runs one case on inputs drawn from `rng` against the fp64 oracle and prints one line; false on a
// failure.
bool run_case(const Case& c, std::mt19937& rng);

// ---- plan_check.cu -----------------------------------------------------------------------------
// The plan's longest-first order on a few batches (ragged, many sequences, counts past the last
// bucket, equal chunk counts, one sequence), a line each; returns the failures.
int check_plan_orders(std::mt19937& rng);

// ---- timing.cu -------------------------------------------------------------------------------
struct BenchOptions {
  bool profile = false;  // also the phases of the tensor-core forward (plain launches)
  FILE* json = nullptr;  // one object per timing, comma-separated
  bool first = true;     // no comma before the next object
  int cut_percent = 0;   // PrefillVariant::kCut: part 0's share of a two-part split, in percent
  int parts = 0;         // PrefillVariant::kParts: the parts of the average sequence
  int scan_cols = 0;     // NAME.../scanNN: the split scan's column slices (8, 16 or 32) forced, any variant
};
// One prefill case of bench/cases.txt (its heads, gates and lengths; K = V = 128, bf16); `label`
// names it in the output. The variant: the library's choices, or the same with o by fwd_o after
// the chain ("NAME/seq"), or with o computed in the chain ("NAME/fused": by its second warpgroup;
// "NAME/serial": by its one warpgroup after each chunk's chain, cfg.fuse_o_serial), or the
// library's choices storing a prefill checkpoint every 16 chunks (a dense fp32 buffer: "NAME/ckpt"),
// or the library's choices without the host copy of
// cu_seqlens ("NAME/nohost": a caller that passes none; the heuristics then cannot know the lengths
// equal, and the chain takes the sequences longest first), or the library's choices on q, k, v and o
// in fp16 or fp32 ("NAME/fp16", "NAME/fp32": fp32 runs the tensor cores on fp16 copies), or the
// library's choices with bf16 operands where they take fp16 ones ("NAME/bf16ops": cfg.fp16_operands
// off, the lo passes on weakly decaying chunks; only a build with GDN_FP16_OPERANDS_D128 differs
// from the default), or the library's choices at K = V = 64 ("NAME/d64"), or the library's
// choices with part 0 of a two-part
// split (one sequence) at NN% of the chunks instead of the heuristics' 71% ("NAME/cutNN": where
// the history before the middle is not negligible, part 1 starts after the summary pass over
// part 0; the device's even cut otherwise, as always), or the exact split into NN equal parts of
// the average sequence's chunks, o fused ("NAME/partsNN": the part count against the summary
// pass's waves where the history is not negligible, a model's slow heads).
enum class PrefillVariant {
  kDefault,
  kOAfter,
  kFusedO,
  kFusedSerial,
  kCheckpoints,
  kNoHostLengths,
  kFp16,
  kFp32,
  kBf16Operands,
  kD64,
  kD256,  // K = V = 256: the storing chain with two chain warpgroups, fwd_o by V halves
  kCut,
  kParts,
  kBf16State,  // the states in a bf16 pool (an engine's 16-bit cache), read and written in place
  kVState,     // the states V-major ([slots, HV, V, K]: vLLM's and SGLang's pools)
  kBf16VState  // both: a bf16 V-major pool, the serving engines' 16-bit cache as they lay it out
};
// One 16 KB exchange through distributed shared memory in a cluster pair, against a block-local
// one (dsmem_bench.cu; --dsmem).
void bench_dsmem_exchange();
void bench_prefill(const tools::PrefillCase& c, const std::string& label, PrefillVariant variant, BenchOptions& o);
// The decode step for N sequences (one token each) of the benchmark shape, against the copy rate,
// on a state pool of `state_dtype` (GB/s counts the state bytes moved: one read and one write of
// every state, in the pool's element size). ref_ms > 0: also prints the speedup ref_ms / time (the
// fp32 pool's time). Returns the median time (ms).
float bench_decode(int64_t N, bool vmajor, DType state_dtype, BenchOptions& o, float ref_ms = 0);
// "{parts,blocks_per_sm,regs|staged}" of kRows16Shapes[i].
std::string rows_shape_name(int i);
// Speculative decoding's verify: N sequences of T tokens with the state after every token stored
// (vLLM: pool rows by 2-D indices, the initial state through num_accepted; sglang: the pool row
// read, a dense buffer written), against the copy rate counting one state read and T writes.
void bench_spec_decode(int64_t N, int T, bool vmajor, bool sglang, BenchOptions& o);

}  // namespace check
}  // namespace gdn
