// The composed chunked forward and the decode step against the double-precision recurrence,
// over the whole case matrix of the CPU backend (and the CUDA backend where a GPU is present).
#include <cmath>
#include <cstring>
#include <functional>

#include "common/host_dtype.h"
#include "harness.h"

namespace gdn {
namespace test {
namespace {

std::vector<Case> forward_cases() {
  std::vector<Case> cs;
  const Case base;  // H=2, HV=4, K=V=64, fp32, l2norm, initial state, K-major
  auto add = [&](std::function<void(Case&)> edit) {
    Case c = base;
    edit(c);
    cs.push_back(c);
  };
  for (int64_t T : {1, 63, 64, 65, 200, 1000}) add([&](Case& c) { c.lens = {T}; });
  add([](Case& c) {
    c.lens = {100, 100, 100};
    c.varlen = false;
  });
  add([](Case& c) { c.lens = {0, 1, 63, 64, 65, 130, 7, 0, 200}; });
  add([](Case& c) { c.lens = {0}; });
  for (int ratio : {1, 2, 4})
    add([&](Case& c) {
      c.H = 2;
      c.HV = 2 * ratio;
      c.lens = {150, 70};
    });
  add([](Case& c) {
    c.K = 128;
    c.V = 128;
    c.lens = {130, 3};
  });
  add([](Case& c) {
    c.K = 64;
    c.V = 128;
    c.lens = {70};
  });
  add([](Case& c) {
    c.K = 128;
    c.V = 64;
    c.lens = {70};
  });
  add([](Case& c) {
    c.K = 96;
    c.V = 80;
    c.lens = {90, 40};
  });  // not powers of two (CUDA: the exact stages and the general decode kernel)
  add([](Case& c) {
    c.l2norm = false;
    c.lens = {129, 5};
  });
  // Gate scales: x1.7 (~1.4 per token) puts a chunk's decays across the subnormal threshold (the
  // CPU backend zeroes factors below 2^-100: cpu/chunk.h, decay_factor), x10 far past it.
  for (double f : {0.01, 1.0, 1.7, 10.0})
    add([&](Case& c) {
      c.gate_factor = f;
      c.lens = {140, 60};
    });
  add([](Case& c) {
    c.gate = GateKind::kZero;
    c.lens = {140, 60};
  });
  add([](Case& c) {
    c.gate = GateKind::kVeryNegative;
    c.lens = {140, 60};
  });
  add([](Case& c) {  // resets inside chunks: fp32 cumulative gates would lose ~1e-3
    c.gate = GateKind::kMixedExtreme;
    c.lens = {200, 70};
  });
  add([](Case& c) {
    c.gate = GateKind::kMixedExtreme;
    c.dtype = DType::kBFloat16;
    c.lens = {130};
  });
  add([](Case& c) {
    c.beta = BetaKind::kZero;
    c.lens = {100};
  });
  add([](Case& c) {
    c.beta = BetaKind::kTwo;
    c.lens = {100, 30};
  });
  add([](Case& c) {
    c.beta = BetaKind::kMixed;
    c.gate = GateKind::kZero;
    c.lens = {100, 30};
  });
  add([](Case& c) {
    c.initial_state = false;
    c.lens = {77, 64};
  });
  add([](Case& c) {
    c.final_state = false;
    c.lens = {77};
  });
  add([](Case& c) {
    c.layout = StateLayout::kVMajor;
    c.lens = {77, 64};
  });
  add([](Case& c) {
    c.pool = true;
    c.lens = {65, 0, 1, 130, 20, 64};
  });
  add([](Case& c) {
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {65, 1, 130, 20};
  });
  add([](Case& c) {
    c.pool = true;
    c.initial_state = false;
    c.lens = {65, 1, 33};
  });
  for (DType d : {DType::kBFloat16, DType::kFloat16}) {
    add([&](Case& c) {
      c.dtype = d;
      c.lens = {200, 33};
    });
    add([&](Case& c) {
      c.dtype = d;
      c.gate_in_input_dtype = true;
      c.lens = {90};
    });
  }
  add([](Case& c) {
    c.fused_gate = true;
    c.lens = {150, 20};
  });
  // Large values in bf16 (the relative error is scale-free): v and the states at 1000x at g = 0
  // (the state grows to ~max|v| there) and 256x with beta = 2 (docs/api.md: the range of v the
  // tensor-core paths carry), on the tuned sizes.
  for (int d : {64, 128}) {
    add([&](Case& c) {
      c.dtype = DType::kBFloat16;
      c.K = c.V = d;
      c.gate = GateKind::kZero;
      c.v_scale = 1000;
      c.lens = {300, 70};
    });
    add([&](Case& c) {
      c.dtype = DType::kBFloat16;
      c.K = c.V = d;
      c.beta = BetaKind::kTwo;
      c.v_scale = 256;
      c.lens = {130, 64};
    });
  }
  // bf16's range at K = V = 128, where bf16 inputs keep it (docs/api.md): v (so v_new and the
  // state) past fp16's 65504, and below its normal range (6.1e-5), through every 16-bit operand
  // the chain and its fused o stage.
  for (double s : {3e5, 1e-6}) {
    add([&](Case& c) {
      c.dtype = DType::kBFloat16;
      c.K = c.V = 128;
      c.v_scale = s;
      c.lens = {200, 64};
    });
  }
  add([](Case& c) {
    c.fused_gate = true;
    c.dtype = DType::kBFloat16;
    c.gate_in_input_dtype = true;
    c.lens = {80};
  });
  add([](Case& c) {
    c.strided = true;
    c.lens = {90, 40};
  });
  add([](Case& c) {
    c.strided = true;
    c.dtype = DType::kBFloat16;
    c.lens = {64, 3};
  });
  add([](Case& c) {  // o rows 2-byte aligned only: the element-wise store path
    c.strided = true;
    c.o_pad = 3;
    c.dtype = DType::kBFloat16;
    c.K = c.V = 128;
    c.lens = {70, 5};
  });
  // Decode-shaped batches: one or a few tokens per sequence, states in a pool, both layouts.
  add([](Case& c) {
    c.pool = true;
    c.lens = std::vector<int64_t>(64, 1);
  });
  add([](Case& c) {
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {2, 3, 1, 4};
    c.dtype = DType::kBFloat16;
  });
  // Sequences without a final-state row beside sequences with one (final index -1 for the odd
  // ones), more (sequence, head) tasks than threads: the CPU decode step works in its workspace
  // (one state per thread) for those.
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    add([&](Case& c) {
      c.sparse_final = true;
      c.threads = 3;
      c.layout = layout;
      c.lens = {5, 1, 70, 3, 2, 9, 1, 64};
    });
  // The Qwen3-Next shape.
  add([](Case& c) {
    c.H = 16;
    c.HV = 32;
    c.K = 128;
    c.V = 128;
    c.dtype = DType::kBFloat16;
    c.lens = {150, 64};
  });
  // The same in fp16 with more sequences: on the GPU, the wgmma fwd_h in its two-blocks-per-SM
  // configuration (N * HV * 2 > SMs, fwd_o after it) and fp16 outputs of fwd_o for D = 128.
  add([](Case& c) {
    c.H = 16;
    c.HV = 32;
    c.K = 128;
    c.V = 128;
    c.dtype = DType::kFloat16;
    c.pool = true;
    c.lens = {300, 1, 64, 129, 7, 65};
  });
  // fp16 on the CUDA tensor-core path (operands and intermediates in fp16, held to SPEC's 1e-3):
  // both head sizes under strong (x10), weak (x0.01) and resetting gates; D = 128 with o fused
  // into the chain (10 sequences x 4 value heads: 80 chain blocks, one wave of one block per SM
  // on an H200), with unaligned o rows (element-wise stores), and split with g = 0 (nothing
  // decays: the state and its fp16 images grow the most).
  for (int d : {64, 128})
    for (double factor : {10.0, 0.01})
      add([&](Case& c) {
        c.dtype = DType::kFloat16;
        c.K = c.V = d;
        c.gate_factor = factor;
        c.layout = d == 64 ? StateLayout::kVMajor : StateLayout::kKMajor;
        c.lens = {300, 17, 64};
      });
  add([](Case& c) {
    c.dtype = DType::kFloat16;
    c.gate = GateKind::kMixedExtreme;
    c.beta = BetaKind::kMixed;
    c.pool = true;
    c.lens = {130, 1, 70};
  });
  add([](Case& c) {
    c.dtype = DType::kFloat16;
    c.K = c.V = 128;
    c.pool = true;
    c.lens = {300, 1, 64, 129, 7, 65, 200, 0, 130, 90};
  });
  add([](Case& c) {
    c.dtype = DType::kFloat16;
    c.K = c.V = 128;
    c.strided = true;
    c.o_pad = 3;
    c.lens = {70, 5};
  });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kFloat16;
    c.gate = GateKind::kZero;
    c.lens = {3000, 700};
  });
  // Serving pools: padding on the null slot 0, separate read and write slots, the present mask
  // on the initial state (harness.h: Case::serving); prefill and decode batches, both layouts.
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
    add([&](Case& c) {
      c.pool = c.serving = true;
      c.layout = layout;
      c.lens = {65, 0, 1, 130, 20, 64, 7, 3};
    });
    add([&](Case& c) {
      c.pool = c.serving = true;
      c.layout = layout;
      c.K = c.V = 128;
      c.dtype = DType::kBFloat16;
      c.lens = {1, 2, 1, 1, 3, 1, 4, 1, 1, 2, 1, 1};
    });
  }
  // bf16 / fp16 state pools and padded row strides (the padding must stay bitwise unchanged):
  // serving pools for prefill and decode batches, both layouts, the decode kernels' two families
  // (K = V = 128: rows; 64 and 256: tiles), dense initial / final arrays, a sparse final array,
  // and the tensor-core forward with its split (CUDA: through the fp32 copy of the rows).
  for (DType sd : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
      const int pad = sd == DType::kFloat32 ? 4 : 8;  // 16 bytes
      add([&](Case& c) {
        c.pool = c.serving = true;
        c.state_dtype = sd;
        c.row_pad = pad;
        c.layout = layout;
        c.lens = {65, 0, 1, 130, 20, 64, 7, 3};
      });
      add([&](Case& c) {
        c.pool = c.serving = true;
        c.state_dtype = sd;
        c.row_pad = 3 * pad;
        c.layout = layout;
        c.K = c.V = 128;
        c.dtype = DType::kBFloat16;
        c.lens = {1, 2, 1, 1, 3, 1, 4, 1, 1, 2, 1, 1};
      });
    }
  // K = V = 256 (CUDA: the tensor-core forward, the storing chain on two chain warpgroups and fwd_o
  // by V halves): ragged lengths with empty, one-token and partial chunks, GVA with V-major pools,
  // no decay, resets and extreme betas, a serving pool of bf16 rows, fp32 inputs (fp16 copies),
  // q, k, v as strided views with aligned and unaligned o rows.
  for (DType d : {DType::kBFloat16, DType::kFloat16})
    add([&](Case& c) {
      c.dtype = d;
      c.H = 1, c.HV = 2, c.K = c.V = 256;
      c.lens = {0, 1, 63, 64, 65, 130, 7};
    });
  add([](Case& c) {
    c.dtype = DType::kFloat16;
    c.H = 2, c.HV = 8, c.K = c.V = 256;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {150, 70};
  });
  add([](Case& c) {
    c.dtype = DType::kBFloat16;
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.gate = GateKind::kZero;
    c.lens = {300, 40};
  });
  add([](Case& c) {
    c.dtype = DType::kBFloat16;
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.gate = GateKind::kMixedExtreme;
    c.beta = BetaKind::kMixed;
    c.lens = {200, 70};
  });
  add([](Case& c) {
    c.pool = c.serving = true;
    c.state_dtype = DType::kBFloat16;
    c.row_pad = 8;
    c.dtype = DType::kBFloat16;
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.lens = {65, 0, 1, 130};
  });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.lens = {100, 30};
  });
  add([](Case& c) {  // q, k, v as views of one fused buffer (TMA maps with its strides), o padded
    c.strided = true;
    c.dtype = DType::kBFloat16;
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.lens = {130, 3};
  });
  add([](Case& c) {  // o rows 2-byte aligned only: fwd_o's element-wise stores at 256
    c.strided = true;
    c.o_pad = 3;
    c.dtype = DType::kFloat16;
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.lens = {70, 65};
  });
  for (int d : {64, 256})
    add([&](Case& c) {
      c.pool = c.serving = true;
      c.state_dtype = DType::kBFloat16;
      c.row_pad = 8;
      c.H = 1, c.HV = 2, c.K = d, c.V = d == 64 ? 256 : 64;
      c.dtype = DType::kBFloat16;
      c.lens = {1, 3, 1, 0, 2, 1};
    });
  add([](Case& c) {
    c.state_dtype = DType::kFloat16;
    c.row_pad = 8;
    c.dtype = DType::kFloat16;
    c.K = c.V = 64;
    c.lens = {70, 1, 0, 3};
  });
  add([](Case& c) {
    c.state_dtype = DType::kBFloat16;
    c.sparse_final = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {5, 1, 70, 3, 2, 9, 1, 64};
  });
  add([](Case& c) {
    c.pool = c.serving = true;
    c.state_dtype = DType::kBFloat16;
    c.row_pad = 8;
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.lens = {6000, 700, 1, 0};
  });
  add([](Case& c) {  // with the split (CUDA): a part 0 from a masked or padded state
    c.pool = c.serving = true;
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.lens = {6000, 700, 1, 0};
  });
  // The exact split of long sequences (CUDA, K = V = 128, few chains: chunk/split.cuh). With 132
  // SMs (H200) the heuristics cut these into parts of 8 chunks (test_heuristics checks the counts):
  // one sequence of 3 and of 8 parts; a ragged batch with 12 parts, 2 parts ending mid-chunk, one
  // token and an empty sequence; g = 0 (nothing decays: M_p is far from 0), resets (g = -1e4),
  // pools in both layouts, fp16 and no initial state.
  for (int64_t T : {1500, 4000})
    add([&](Case& c) {
      c.H = 1, c.HV = 2, c.K = c.V = 128;
      c.dtype = DType::kBFloat16;
      c.lens = {T};
    });
  for (GateKind gate : {GateKind::kLogSigmoid, GateKind::kZero, GateKind::kMixedExtreme})
    add([&](Case& c) {
      c.H = 1, c.HV = 2, c.K = c.V = 128;
      c.dtype = DType::kBFloat16;
      c.gate = gate;
      c.pool = true;
      c.lens = {6000, 700, 1, 0};
    });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kFloat16;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {6000, 700, 1, 0};
  });
  add([](Case& c) {
    c.H = 2, c.HV = 4, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.initial_state = false;
    c.lens = {3000};
  });
  // Qwen3-Next's gates (GateKind::kModel): heads whose history fades within a few chunks beside
  // heads whose history lasts the whole sequence, in one call. The TP4 slice (4 / 8 heads) on one
  // sequence cuts into 8 parts of 8 chunks, where the fast heads find M_p negligible (heads 1, 4,
  // 7 fade by e^-64 within 2-4 chunks) and the slow ones keep it (head 0 needs ~150 chunks); two
  // ragged sequences into a V-major pool (5 and 4 parts of 14 chunks, each ending mid-chunk); 32
  // value heads in two parts (part 1 at the 71% cut: some heads' history reaches the middle).
  add([](Case& c) {
    c.H = 4, c.HV = 8, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.gate = GateKind::kModel;
    c.lens = {4000};
  });
  add([](Case& c) {
    c.H = 4, c.HV = 8, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.gate = GateKind::kModel;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {4000, 3000};
  });
  add([](Case& c) {
    c.H = 16, c.HV = 32, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.gate = GateKind::kModel;
    c.lens = {4200};
  });
  // Without l2norm no chunk's transition is bounded (split.cuh's negligible history needs unit
  // keys): every summary runs in full even on decaying gates; with beta = 0 or 2 among the draws
  // (the bounds' edges) it still cuts.
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.l2norm = false;
    c.lens = {4000};
  });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.beta = BetaKind::kMixed;
    c.lens = {4000};
  });
  // Where only two parts fit (64 chain blocks on 132 SMs): Qwen3-Next's 32 value heads on one
  // sequence, cut into a first part of 47 chunks, which runs beside the summary pass, and a second
  // of 19 ending mid-chunk (also in fp16 at g = 0 with a V-major pool: 5000 tokens, 57 + 22
  // chunks); and 8 value heads over a ragged batch (equal parts of 32 chunks, a scan: 5 for the
  // longest, 1 for the shortest) with g = 0 and a pool.
  add([](Case& c) {
    c.H = 16, c.HV = 32, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.lens = {4200};
  });
  add([](Case& c) {
    c.H = 16, c.HV = 32, c.K = c.V = 128;
    c.dtype = DType::kFloat16;
    c.gate = GateKind::kZero;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {5000};
  });
  add([](Case& c) {
    c.H = 4, c.HV = 8, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.gate = GateKind::kZero;
    c.pool = true;
    c.lens = {9000, 6000, 1000, 1};
  });
  // K = V = 256 split in two parts (one sequence, few chains; test_heuristics): 66 chunks as 47 + 19
  // (or 33 + 33 where the state decays fast before the middle), g = 0 in fp16 into a V-major pool
  // (79 chunks: 57 + 22, the summary pass over all of part 0), resets (47 chunks: 34 + 13), and
  // 4 value heads without an initial state (40 chunks: 29 + 11, the second part ending mid-chunk).
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.dtype = DType::kBFloat16;
    c.lens = {4200};
  });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.dtype = DType::kFloat16;
    c.gate = GateKind::kZero;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {5000};
  });
  add([](Case& c) {
    c.H = 1, c.HV = 2, c.K = c.V = 256;
    c.dtype = DType::kBFloat16;
    c.gate = GateKind::kMixedExtreme;
    c.lens = {3000};
  });
  add([](Case& c) {
    c.H = 2, c.HV = 4, c.K = c.V = 256;
    c.dtype = DType::kBFloat16;
    c.initial_state = false;
    c.lens = {2530};
  });
  // The scan's three column widths (test_heuristics): 8 above (2 to 8 chains: 1 to 4 sequences), 32
  // for the ragged batch at 8 value heads, 16 for two sequences at 8 value heads (parts of 22
  // chunks: 6 for the longer, 3 for the shorter, its last of 3 chunks ending mid-chunk).
  add([](Case& c) {
    c.H = 4, c.HV = 8, c.K = c.V = 128;
    c.dtype = DType::kBFloat16;
    c.lens = {8000, 3000};
  });
  return cs;
}

using Param = std::tuple<Backend, Case>;

class Forward : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    backend_ = std::get<0>(GetParam());
    case_ = std::get<1>(GetParam());
    GDN_SKIP_IF_UNAVAILABLE(backend_);
    // Every test here runs the forward, and the decode step where named: both must be in the table.
    GDN_SKIP_IF_UNSUPPORTED(problem_of(case_), backend_, Operation::kForward);
    GDN_SKIP_IF_UNSUPPORTED(problem_of(case_), backend_, Operation::kDecode);
    rng_.seed(test_seed() ^ std::hash<std::string>()(case_.name()));
  }
  Backend backend_ = Backend::kCPU;
  Case case_;
  std::mt19937_64 rng_;
};

TEST_P(Forward, ChunkedMatchesRecurrence) {
  const Inputs in = make_inputs(case_, rng_);
  const Expected ref = reference(in);
  expect_close(in, ref, run(in, backend_, Op::kChunk), backend_, "chunk_gated_delta_rule");
}

TEST_P(Forward, DecodeMatchesRecurrence) {
  const Inputs in = make_inputs(case_, rng_);
  const Expected ref = reference(in);
  expect_close(in, ref, run(in, backend_, Op::kRecurrent), backend_, "recurrent_gated_delta_rule");
}

// The same inputs twice give bitwise identical outputs (no races, no order-dependent sums).
TEST_P(Forward, Deterministic) {
  const Inputs in = make_inputs(case_, rng_);
  const Outputs a = run(in, backend_, Op::kChunk), b = run(in, backend_, Op::kChunk);
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(double))) << "o differs between runs";
  EXPECT_EQ(a.states.size(), b.states.size());
  EXPECT_EQ(0, std::memcmp(a.states.data(), b.states.data(), a.states.size() * sizeof(float)))
      << "states differ between runs";
}

// A bf16 / fp16 pool computes in fp32 and rounds once, on write: the call on the 16-bit pool gives
// bitwise the o of the same call on an fp32 pool holding the same (rounded) initial states, and
// final states that are exactly those fp32 final states rounded to the pool's dtype. (Any rounding
// between tokens or chunks, or a second rounding, would break the equality.)
TEST_P(Forward, LowPrecisionPoolRoundsOnce) {
  if (case_.state_dtype == DType::kFloat32) GTEST_SKIP() << "an fp32 pool";
  const Inputs in = make_inputs(case_, rng_);  // state0 already rounded to the pool's dtype
  Inputs in32 = in;
  in32.c.state_dtype = DType::kFloat32;
  in32.c.row_pad = 0;
  for (Op op : {Op::kChunk, Op::kRecurrent}) {
    const char* what = op == Op::kChunk ? "chunk_gated_delta_rule" : "recurrent_gated_delta_rule";
    expect_rounded_once(run(in, backend_, op), run(in32, backend_, op), case_.state_dtype, what);
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return test_param_name(backend_name(std::get<0>(info.param)), info.index, std::get<1>(info.param).name());
}

INSTANTIATE_TEST_SUITE_P(CPU, Forward,
                         ::testing::Combine(::testing::Values(Backend::kCPU), ::testing::ValuesIn(forward_cases())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(CUDA, Forward,
                         ::testing::Combine(::testing::Values(Backend::kCUDA), ::testing::ValuesIn(forward_cases())),
                         param_name);

// The CPU decode step with sequences that have no final-state row (their state lives in the
// workspace, one K x V state per worker thread) beside sequences that have one, on 1 to 4
// threads, against the oracle; the rows without a sequence stay unwritten (NaN).
TEST(CPUDecode, SequencesWithoutFinalRowUseTheWorkspace) {
  for (int threads : {1, 2, 4})
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
      Case c;
      c.H = 2, c.HV = 4, c.K = 64, c.V = 32;
      c.layout = layout;
      c.sparse_final = true;
      c.threads = threads;
      c.lens = {3, 1, 2, 1, 4, 1, 1, 2, 5};
      std::mt19937_64 rng(test_seed() ^ std::hash<std::string>()(c.name()));
      const Inputs in = make_inputs(c, rng);
      const Outputs out = run(in, Backend::kCPU, Op::kRecurrent);
      expect_close(in, reference(in), out, Backend::kCPU, "recurrent_gated_delta_rule, sparse final rows");
      // The check itself: the odd sequences' final rows are really absent.
      const int64_t head_elems = int64_t{c.HV} * c.K * c.V;
      EXPECT_TRUE(std::isnan(out.states[1 * head_elems])) << "final row 1 (index -1) was written";
      EXPECT_FALSE(std::isnan(out.states[0])) << "final row 0 was not written";
    }
}

// CPU and CUDA agree within tolerance on the same inputs.
TEST(CrossBackend, CpuAndCudaAgree) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  std::mt19937_64 rng(test_seed() ^ 0x5eed);
  Case c;
  c.H = 16, c.HV = 32, c.K = 128, c.V = 128, c.dtype = DType::kBFloat16, c.lens = {300, 1, 64, 129};
  const Inputs in = make_inputs(c, rng);
  const Outputs cpu = run(in, Backend::kCPU, Op::kChunk), gpu = run(in, Backend::kCUDA, Op::kChunk);
  EXPECT_LE(ref::rel_rms_error(gpu.o.data(), cpu.o.data(), static_cast<int64_t>(cpu.o.size())), 5e-3);
  std::vector<double> sc(cpu.states.begin(), cpu.states.end()), sg(gpu.states.begin(), gpu.states.end());
  EXPECT_LE(ref::rel_rms_error(sg.data(), sc.data(), static_cast<int64_t>(sc.size())), 5e-3);
}

}  // namespace
}  // namespace test
}  // namespace gdn
