// gdn: Gated DeltaNet kernels (the chunked gated delta rule), CPU and CUDA.
//
// One framework-free C++ API over raw pointers, element strides and a stream. Nothing here
// allocates behind the caller's back (host or device memory) or synchronizes the device: scratch
// memory comes from the caller (query its size with the *_workspace_size functions, which depend
// only on host-known numbers), and validation reads host arrays in place. (The CPU backend's
// OpenMP runtime starts its worker threads on first use, as OpenMP does.) Every call is validated
// before anything is written, including against the backend's capability table (capabilities()
// below). A rejected call throws gdn::Error whose message names the argument and the expected value.
//
// Definitions (see SPEC.md): per sequence and value head `hv` a fp32 state S [K, V] and, per token,
//   S = exp(g_t) S;  v' = beta_t (v_t - S^T k_t);  S += k_t v'^T;  o_t = scale S^T q_t
// with q/k head hk = hv / (HV / H).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace gdn {

constexpr int kChunkSize = 64;  // C: tokens per chunk of the chunked algorithm

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
enum class IndexType : int { kInt32 = 0, kInt64 = 1 };
// K-major: state [.., K, V] (flash-linear-attention's default). V-major: [.., V, K] (vLLM's cache).
enum class StateLayout : int { kKMajor = 0, kVMajor = 1 };
enum class Backend : int { kCPU = 0, kCUDA = 1 };

// Every rejected call throws this; what() names the argument and what was expected.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);
const char* backend_name(Backend backend);
// True when the library was built with the CUDA backend and a CUDA device is visible.
bool cuda_available();

// A token-major tensor [T, heads, dim] whose innermost dimension is contiguous.
// Strides are in elements; 0 means packed (stride_token = heads * dim, stride_head = dim).
struct ConstTensor {
  const void* data = nullptr;
  int64_t stride_token = 0;
  int64_t stride_head = 0;
};
struct MutTensor {
  void* data = nullptr;
  int64_t stride_token = 0;
  int64_t stride_head = 0;
};

// Recurrent states: [num_slots, HV, K, V] (kKMajor) or [num_slots, HV, V, K], each head's K x V
// block contiguous, rows row_stride elements apart. The element type is Problem::state_dtype (one
// for both pools of a call): fp32, or bf16 / fp16 to halve the memory and the decode step's
// traffic; the arithmetic is fp32 whatever it is (a state row is converted to fp32 when read and
// rounded once, to nearest even, when the final state is written). Sequence n uses row indices[n] (row n when indices
// is null). A negative index means "no state": the sequence starts from zero (initial) or its final state is not
// written (final). For the pool of a serving engine, pass the same data and indices as initial and final state: the
// update happens in place; or the same data with other indices for the final state, to read one slot and write another
// (a row written by one sequence must not be read by another one). Indices must be in [-inf, num_slots) and the ones
// that name a row distinct among the sequences of one call.
//
// Serving engines' padding and new requests:
//   null_slot: an index equal to it means "no state" as a negative index does (vLLM pads its
//     batches with slot 0, NULL_BLOCK_ID); several sequences may name it. -1: no null slot.
//   present: [N] uint8 on the backend's device, optional: 0 = sequence n has no state here
//     whatever its index (initial: it starts from zeros; final: nothing is written), e.g. vLLM's
//     has_initial_state on the initial state of a pool whose final state is the same rows.
// Padding entries (index negative or null_slot in both) touch no state; their o is computed from
// a zero state like any sequence's (a zero-length padding sequence has no o at all).
struct StateRef {
  void* data = nullptr;                // [num_slots, row_stride] of state_dtype; null: no state (zeros in, nothing out)
  int64_t num_slots = 0;               // rows of data; for a dense per-sequence array, N
  const void* indices = nullptr;       // [N] on the backend's device, IndexType below
  const void* indices_host = nullptr;  // optional host copy of indices, for validation (CUDA)
  IndexType index_type = IndexType::kInt32;
  int64_t null_slot = -1;                 // -1 or a row in [0, num_slots) that means "no state"
  const uint8_t* present = nullptr;       // [N] on the backend's device, optional (see above)
  const uint8_t* present_host = nullptr;  // optional host copy of present, for validation (CUDA)
  // Elements between consecutive rows (slots); 0: packed (HV * K * V). Otherwise >= HV * K * V,
  // e.g. an engine's pool whose rows carry other data too. Any value on both backends (rows need
  // not be 16-byte aligned); on CUDA the decode step's tuned kernels (K, V in {64, 128, 256}) run
  // when data and row_stride are multiples of 4 elements, else its general kernel does.
  int64_t row_stride = 0;
};

// Multi-token decode (speculative decoding's verify, MTP / EAGLE): the state after every token of
// a sequence, stored into pool rows, and optionally the initial state read from such a row.
// recurrent_gated_delta_rule only. One mechanism, a slot map slot(n, t) over the rows of `pool`,
// serves both engines' conventions:
//   vLLM: pool = the state pool, indices [N, max_tokens] (its 2-D ssm_state_indices), per_token;
//     num_accepted given: sequence n starts from slot(n, num_accepted[n] - 1), the state after its
//     token t goes to slot(n, t); initial_state and final_state null.
//   SGLang / FlashInfer: initial_state = the pool (row per sequence), pool = the intermediate
//     buffer [S, max_tokens, HV, K, V] (num_slots = S * max_tokens) with its per-sequence
//     intermediate_state_indices (per_token false) or none (S = N); final_state = the pool to write
//     the last token's state back, or null for disable_state_update (the pool row untouched).
// The slot map (t: the token's position in its sequence, 0-based):
//   pool.indices null:                     slot(n, t) = n * max_tokens + t
//   pool.indices [N, max_tokens], per_token: slot(n, t) = indices[n * max_tokens + t]
//   pool.indices [N], !per_token:          slot(n, t) = indices[n] * max_tokens + t
// An index that is negative or equals pool.null_slot means "not stored" (and, read through
// num_accepted, "start from zeros"); tokens at t >= max_tokens are not stored. pool.present must
// be null; pool.data, num_slots, index_type and indices_host are as in StateRef, in the problem's
// state layout. No two stored (n, t) may name one row; a row that sequence n reads must not be
// written by another sequence, nor by final_state when that is the same pool.
// EAGLE trees (parents, optional): token t >= 1 of sequence n continues from the state after token
// parents[n][t] (in [0, t), and that token's state must be stored), not from the state after
// token t - 1; a negative entry keeps the chain (column 0 is not read).
// Without host copies (CUDA) the device clamps: a slot outside [0, num_slots) and a
// num_accepted[n] outside [1, max_tokens] mean "none"; a parent outside [0, t) or not stored keeps
// the chain.
struct TokenStates {
  StateRef pool;                            // data null: no per-token states (a plain decode step)
  int64_t max_tokens = 0;                   // T_max >= 1: the columns of 2-D indices, the steps of a buffer group
  bool per_token = true;                    // with pool.indices: [N, max_tokens] (true) or [N] groups (false)
  const void* num_accepted = nullptr;       // [N] on the backend's device, optional (see above)
  const void* num_accepted_host = nullptr;  // optional host copy, for validation (CUDA)
  IndexType num_accepted_type = IndexType::kInt32;
  const void* parents = nullptr;       // [N, max_tokens] on the backend's device, optional (EAGLE trees)
  const void* parents_host = nullptr;  // optional host copy, for validation (CUDA)
  IndexType parents_type = IndexType::kInt32;
};

// Prefill checkpoints for prefix caching: the chunked forward also stores the state at chunk
// boundaries, so an engine can cache a prefix and resume from it (pass the stored row as the
// initial state of a later call). chunk_gated_delta_rule only. Boundary j (0-based) of sequence n
// lies after (j + 1) * every_chunks chunks, at token b_j = (j + 1) * every_chunks * 64 counted from
// the sequence's start; it is stored when b_j <= the sequence's length (a boundary at the very end
// is stored too) and j < max_checkpoints. The stored state is bitwise equal to the final state that
// a separate call on the prefix [start, start + b_j) with the same inputs and options returns on
// the same backend (one rounding into state_dtype, like a final state). CUDA: bitwise when neither
// call takes the exact split of long sequences (chunk/heuristics.h: few long chains on many SMs),
// whose parts start from a scan of part summaries; there it agrees within the forward's tolerance.
// The slot map (rows of `pool`):
//   pool.indices null:                  slot(n, j) = n * max_checkpoints + j
//   pool.indices [N, max_checkpoints]:  slot(n, j) = indices[n * max_checkpoints + j]
// An index that is negative or equals pool.null_slot means "not stored". pool.present must be
// null; pool.data, num_slots, index_type, indices_host and row_stride are as in StateRef, in the
// problem's state layout and state_dtype. No two stored boundaries may name one row, and when the
// pool is the initial- or final-state pool, no stored row may be one that the call reads as an
// initial state or writes as a final state. capabilities(backend).checkpoints says which backends
// run it (both do).
struct Checkpoints {
  StateRef pool;                // data null: no checkpoints
  int64_t every_chunks = 0;     // n >= 1: a boundary every 64 * n tokens
  int64_t max_checkpoints = 0;  // >= 1: the columns of the slot map
};

// What a call computes, shared by the forward, the decode step and the stages.
struct Problem {
  int64_t num_tokens = 0;              // T: tokens of all sequences, packed
  int64_t num_seqs = 0;                // N
  int num_qk_heads = 0;                // H
  int num_v_heads = 0;                 // HV, a multiple of H
  int head_k = 0;                      // K: any in capabilities(backend) [min_head_size, max_head_size]
  int head_v = 0;                      // V: likewise, independently of K
  DType dtype = DType::kBFloat16;      // v (and q, k, o unless qk_dtype / o_dtype are set)
  DType gate_dtype = DType::kFloat32;  // g and beta: kFloat32 or dtype
  float scale = 0.0f;                  // 0: K^-0.5
  bool use_qk_l2norm = false;          // q, k <- x / sqrt(sum(x^2) + 1e-6) in fp32
  StateLayout state_layout = StateLayout::kKMajor;
  // Gate fusion: g holds `a` and beta holds `b` (pre-sigmoid); then
  // g = -exp(A_log[hv]) * softplus(a + dt_bias[hv]) and beta = sigmoid(b).
  bool fused_gate = false;
  // [N + 1] sequence boundaries on the backend's device (cumulative, starting at 0, ending at T).
  // Null: a fixed-length batch of N sequences of T / N tokens.
  const void* cu_seqlens = nullptr;
  // Optional host copy of cu_seqlens (same IndexType). The CPU backend validates cu_seqlens
  // itself; the CUDA backend validates this copy when given and otherwise clamps on the device,
  // so that malformed boundaries can never cause an out-of-bounds access (see docs/api.md). The
  // CUDA forward's choices also read it (the lengths it knows equal skip the longest-first order).
  const void* cu_seqlens_host = nullptr;
  IndexType cu_seqlens_type = IndexType::kInt32;
  // q and k when they come in another dtype than v (fla's tests pass fp32 q/k with fp16 v).
  // Unset: dtype. Each backend reads q/k in their own dtype and computes in fp32: nothing is
  // rounded to another dtype on the way in, but where the CUDA forward runs the tensor cores on
  // 16-bit copies (docs/api.md: "fp32 inputs on CUDA", "Mixed dtypes").
  std::optional<DType> qk_dtype;
  // o when it is written in another dtype than v (fla's chunked forward returns o in q's dtype).
  // Unset: dtype. o is rounded once, to this dtype, when it is written.
  std::optional<DType> o_dtype;
  // Element type of the state pools (initial, final and token states): see
  // capabilities(backend).state_dtypes. Here rather than in StateRef because one call has one
  // state type, which picks its kernels (the CUDA tensor-core forward reads and writes bf16 / fp16
  // pool rows in place, converted on read and rounded once on write).
  DType state_dtype = DType::kFloat32;
};
// The dtype of q and k: problem.qk_dtype, or problem.dtype when it is unset.
inline DType qk_dtype_of(const Problem& problem) { return problem.qk_dtype.value_or(problem.dtype); }
// The dtype of o: problem.o_dtype, or problem.dtype when it is unset.
inline DType o_dtype_of(const Problem& problem) { return problem.o_dtype.value_or(problem.dtype); }

// Where and how a call runs.
struct Exec {
  Backend backend = Backend::kCPU;
  void* stream = nullptr;     // cudaStream_t for kCUDA; null = the default stream
  void* workspace = nullptr;  // caller-provided scratch, at least *_workspace_size bytes
  size_t workspace_bytes = 0;
  int num_threads = 0;  // kCPU: worker threads; 0 = OpenMP's default (OMP_NUM_THREADS, else all cores)
};

// ---------------------------------------------------------------------------------------------
// Capabilities: what each backend runs. One table (src/common/capabilities.h) that validation
// reads (a call outside it is rejected before anything runs, naming the argument and the table's
// values), and that callers and tests can query instead of restating it.

enum class Operation : int {
  kForward = 0,  // chunk_gated_delta_rule (and its workspace query)
  kDecode = 1,   // recurrent_gated_delta_rule (and its workspace query)
  kStages = 2,   // chunk_local_cumsum ... chunk_fwd_o, stage_workspace_size
  kL2Norm = 3,   // l2norm: its `dim` takes the head sizes below
};
const char* operation_name(Operation op);

struct Capabilities {
  Backend backend = Backend::kCPU;
  bool built = false;  // compiled into this library (whether a device is present: cuda_available())
  // Head sizes K and V (independently): every integer in [min_head_size, max_head_size]. Some
  // sizes have fast kernels (see src/common/capabilities.h); the others run a general path at the
  // same accuracy (SPEC section 4).
  int min_head_size = 0;
  int max_head_size = 0;
  bool dtypes[3] = {};          // by DType: q, k, v and o storage
  bool mixed_dtypes = false;    // q/k and o may come in other dtypes of `dtypes` than v (qk_dtype, o_dtype)
  bool gates_in_dtype = false;  // g and beta may come in the input dtype (float32 always works)
  bool state_layouts[2] = {};   // by StateLayout
  bool state_dtypes[3] = {};    // by DType: Problem::state_dtype, the state pools' element type
  bool operations[4] = {};      // by Operation
  bool checkpoints = false;     // chunk_gated_delta_rule stores ForwardArgs::checkpoints

  bool has_head_size(int d) const { return d >= min_head_size && d <= max_head_size; }
  bool has_dtype(DType d) const { return static_cast<unsigned>(d) < 3u && dtypes[static_cast<int>(d)]; }
  bool has_state_layout(StateLayout l) const {
    return static_cast<unsigned>(l) < 2u && state_layouts[static_cast<int>(l)];
  }
  bool has_state_dtype(DType d) const { return static_cast<unsigned>(d) < 3u && state_dtypes[static_cast<int>(d)]; }
  bool has_operation(Operation op) const { return static_cast<unsigned>(op) < 4u && operations[static_cast<int>(op)]; }
};

// The backend's entry of the table (an invalid backend gets an empty entry).
const Capabilities& capabilities(Backend backend);

// True when `backend` can run `op` on problems of this kind: it is built in, and the head sizes,
// dtypes (inputs, gates, states) and state layout are in its table (for kStages also:
// use_qk_l2norm and fused_gate off, and q, k, o in dtype).
// Otherwise false, with the reason in *why (when given) in the words a rejected call would use.
// Counts, boundaries and pointers are not looked at: the call itself validates those.
bool supports(const Problem& problem, Backend backend, Operation op = Operation::kForward, std::string* why = nullptr);

// ---------------------------------------------------------------------------------------------
// The composed forward and the decode step.

struct ForwardArgs {
  Problem problem;
  ConstTensor q;                   // [T, H, K]   qk_dtype (dtype when unset)
  ConstTensor k;                   // [T, H, K]   qk_dtype (dtype when unset)
  ConstTensor v;                   // [T, HV, V]  dtype
  ConstTensor g;                   // [T, HV]     gate_dtype: log decay <= 0 (or `a` with fused_gate)
  ConstTensor beta;                // [T, HV]     gate_dtype: in [0, 2] (or `b` with fused_gate)
  const float* A_log = nullptr;    // [HV] fp32, fused_gate only
  const float* dt_bias = nullptr;  // [HV] fp32, fused_gate only
  MutTensor o;                     // [T, HV, V]  o_dtype (dtype when unset)
  StateRef initial_state;
  StateRef final_state;
  TokenStates token_states;  // the decode step only: per-token states (speculative decoding's verify)
  Checkpoints checkpoints;   // the chunked forward only: states at chunk boundaries (prefix caching)
};

// The chunked forward (prefill). Returns o and (if final_state.data) the final states.
size_t chunk_gated_delta_rule_workspace_size(const Problem& problem, const Exec& exec);
void chunk_gated_delta_rule(const ForwardArgs& args, const Exec& exec);

// The decode step: the token-by-token recurrence, for one or a few tokens per sequence (any
// length works; the chunked forward is faster past a few tokens). Updates pool rows in place
// when initial_state and final_state are the same pool; with args.token_states also stores the
// state after every token (speculative decoding's verify, see TokenStates). The CPU backend needs
// a workspace (one K x V state per worker thread, for sequences without a final-state row); the
// CUDA backend none.
size_t recurrent_gated_delta_rule_workspace_size(const Problem& problem, const Exec& exec);
void recurrent_gated_delta_rule(const ForwardArgs& args, const Exec& exec);

// ---------------------------------------------------------------------------------------------
// The stages of the chunked forward, each callable on its own (SPEC.md section 3). They take q/k
// as given (run l2norm first when needed; problem.use_qk_l2norm must be false) and plain g/beta
// (problem.fused_gate must be false). Intermediates are fp32 and packed. Chunks are numbered
// globally: sequence n's chunk c is chunk chunk_offset(n) + c, where chunk_offset(n) sums
// ceil(len_m / 64) over the sequences m < n; max_num_chunks(T, N) bounds their count.

int64_t max_num_chunks(int64_t num_tokens, int64_t num_seqs);

struct StageBuffers {
  ConstTensor q, k, v, g, beta;  // as in ForwardArgs
  float* G = nullptr;            // [T, HV]            chunk-local cumulative sum of g (natural log)
  float* L = nullptr;            // [T, HV, 64]        row i of its chunk: beta_i (k_i.k_j) exp(G_i-G_j), j<i
  float* A = nullptr;            // [T, HV, 64]        row i of (I + L)^-1 of its chunk
  float* w = nullptr;            // [T, HV, K]         A (beta exp(G) k)
  float* u = nullptr;            // [T, HV, V]         A (beta v)
  float* h = nullptr;            // [max_num_chunks, HV, K, V]  state at each chunk's start (K-major)
  float* v_new = nullptr;        // [T, HV, V]         u - w h
  MutTensor o;                   // [T, HV, V] dtype
  StateRef initial_state;        // read by chunk_fwd_h
  StateRef final_state;          // written by chunk_fwd_h when data is set
};

// Stage 0: y = x / sqrt(sum(x^2) + 1e-6) per token and head, computed in fp32.
struct L2NormArgs {
  int64_t num_tokens = 0;
  int num_heads = 0;
  int dim = 0;
  DType dtype = DType::kBFloat16;
  ConstTensor x;  // [T, heads, dim]
  MutTensor y;    // [T, heads, dim], same dtype
};
void l2norm(const L2NormArgs& args, const Exec& exec);

void chunk_local_cumsum(const Problem& p, const StageBuffers& b, const Exec& exec);    // g -> G
void chunk_scaled_dot_kkt(const Problem& p, const StageBuffers& b, const Exec& exec);  // k, beta, G -> L
void solve_tril(const Problem& p, const StageBuffers& b, const Exec& exec);            // L -> A
void recompute_w_u(const Problem& p, const StageBuffers& b, const Exec& exec);         // A, k, v, beta, G -> w, u
// k, w, u, G, initial_state -> h, v_new, final_state. Workspace: stage_workspace_size.
void chunk_fwd_h(const Problem& p, const StageBuffers& b, const Exec& exec);
void chunk_fwd_o(const Problem& p, const StageBuffers& b, const Exec& exec);  // q, k, v_new, h, G -> o
// Scratch that the stages need: the chunk offset of each sequence, and on the CPU per-thread
// chunk buffers (sized for exec.num_threads).
size_t stage_workspace_size(const Problem& problem, const Exec& exec);

}  // namespace gdn
