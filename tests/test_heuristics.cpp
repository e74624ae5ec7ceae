// The CUDA chunk forward's choices (chunk_forward_heuristics), checked on the host for an H200's
// 132 SMs: when the exact split cuts sequences into parts and how many; the parts of the split
// cases of test_forward (which run them on the GPU); and that the grids cover every chunk.
// Host code only: runs wherever the CUDA backend is built, GPU or not.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/chunk/heuristics.h"
#include "cuda/chunk/split.cuh"
#include "cuda/decode/recurrent.cuh"

namespace gdn {
namespace test {
namespace {

cuda::DeviceProps h200() {
  cuda::DeviceProps d;
  d.sms = 132;
  return d;
}

Problem problem(int H, int HV, int64_t T, int64_t N, int D = 128) {
  Problem p;
  p.num_qk_heads = H;
  p.num_v_heads = HV;
  p.num_tokens = T;
  p.num_seqs = N;
  p.head_k = p.head_v = D;
  p.dtype = DType::kBFloat16;
  return p;
}

int64_t parts_of(const cuda::ChunkForwardConfig& cfg, int64_t len) {
  return cuda::split_parts_of((len + kChunkSize - 1) / kChunkSize, cfg.split_chunks_per_part, cfg.split_max_parts,
                              cfg.split_first_part_chunks);
}

TEST(Heuristics, SplitOnlyWhenChainsLeaveSMsIdle) {
  // SPEC batches at H = 16, HV = 32: 256+ chain blocks; a split would not pay.
  for (int64_t N : {4, 8, 64, 256})
    EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(16, 32, 32768, N), h200()).split_chunks_per_part) << N;
  // D = 64 splits as 128 does, its chains one 64-wide slice per head: 4 chain blocks, 16 parts.
  const auto d64 = cuda::chunk_forward_heuristics(problem(2, 4, 32768, 1, 64), h200());
  EXPECT_EQ(32, d64.split_chunks_per_part);
  EXPECT_EQ(16, d64.split_max_parts);
  EXPECT_EQ(8, d64.split_scan_cols);
  // ... and 32 value heads on one sequence at D = 64: 32 blocks, 4 parts (128 at D = 128: 2).
  EXPECT_EQ(4, cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1, 64), h200()).split_max_parts);
  // Short sequences: fewer than 3 parts of 8 chunks.
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(1, 2, 1400, 1), h200()).split_chunks_per_part);
  // 64 chain blocks (HV = 32, one sequence): two parts where halves hold 16+ chunks each, o fused;
  // part 0 (beside the summary pass) ~0.71 of the chunks.
  const auto one_32k = cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1), h200());
  EXPECT_EQ(364, one_32k.split_first_part_chunks);
  EXPECT_EQ(256, one_32k.split_even_first_chunks);  // where every head's S_1 comes from a few chunks
  EXPECT_EQ(148, one_32k.split_chunks_per_part);
  EXPECT_EQ(2, one_32k.split_max_parts);
  EXPECT_EQ(2, parts_of(one_32k, 32768));
  EXPECT_EQ(4, one_32k.split_summary_stages);  // 64 summary blocks: part 0's
  EXPECT_TRUE(one_32k.fuse_o);
  const auto one_4k = cuda::chunk_forward_heuristics(problem(16, 32, 4096, 1), h200());
  EXPECT_EQ(46, one_4k.split_first_part_chunks);
  EXPECT_EQ(32, one_4k.split_even_first_chunks);
  EXPECT_EQ(18, one_4k.split_chunks_per_part);
  EXPECT_EQ(2, one_4k.split_max_parts);
  // Halves of 16+ chunks: one prompt of 3k tokens splits (o fused), 1.9k does not.
  const auto one_3k = cuda::chunk_forward_heuristics(problem(16, 32, 3072, 1), h200());
  EXPECT_EQ(35, one_3k.split_first_part_chunks);
  EXPECT_EQ(24, one_3k.split_even_first_chunks);
  EXPECT_EQ(13, one_3k.split_chunks_per_part);
  EXPECT_EQ(2, parts_of(one_3k, 3072));
  EXPECT_TRUE(one_3k.fuse_o);
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(16, 32, 1900, 1), h200()).split_chunks_per_part);
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(16, 32, 65536, 2), h200()).split_chunks_per_part);
  // test_forward's two-part cases.
  const auto one_4200 = cuda::chunk_forward_heuristics(problem(16, 32, 4200, 1), h200());
  EXPECT_EQ(2, parts_of(one_4200, 4200));
  EXPECT_EQ(47, one_4200.split_first_part_chunks);
  EXPECT_EQ(19, one_4200.split_chunks_per_part);
  const auto ragged8 = cuda::chunk_forward_heuristics(problem(4, 8, 16001, 4), h200());
  EXPECT_EQ(32, ragged8.split_chunks_per_part);
  EXPECT_EQ(0, ragged8.split_first_part_chunks);  // several sequences: equal parts (a scan follows)
  EXPECT_EQ(0, ragged8.split_even_first_chunks);
  EXPECT_EQ(5, parts_of(ragged8, 9000));
  EXPECT_EQ(1, parts_of(ragged8, 1000));
  EXPECT_TRUE(ragged8.fuse_o);
  EXPECT_EQ(32, ragged8.split_scan_cols);  // 32 chains: 4 scan blocks each
  const auto two8 = cuda::chunk_forward_heuristics(problem(4, 8, 11000, 2), h200());
  EXPECT_EQ(22, two8.split_chunks_per_part);
  EXPECT_EQ(6, parts_of(two8, 8000));  // parts sized by the average sequence
  EXPECT_EQ(3, parts_of(two8, 3000));
  EXPECT_EQ(16, two8.split_scan_cols);  // 16 chains: 8 scan blocks each
  // test_forward's model-gate cases: the TP4 slice on one sequence in 8 parts of 8 chunks (a
  // scan), two ragged sequences in 5 and 4 parts of 14.
  const auto tp4_4000 = cuda::chunk_forward_heuristics(problem(4, 8, 4000, 1), h200());
  EXPECT_EQ(8, tp4_4000.split_chunks_per_part);
  EXPECT_EQ(8, parts_of(tp4_4000, 4000));
  const auto tp4_two = cuda::chunk_forward_heuristics(problem(4, 8, 7000, 2), h200());
  EXPECT_EQ(14, tp4_two.split_chunks_per_part);
  EXPECT_EQ(5, parts_of(tp4_two, 4000));
  EXPECT_EQ(4, parts_of(tp4_two, 3000));
}

// K = V = 256 runs the storing chain (two chain warpgroups a block) and fwd_o only: no fused o, no
// fp16 operands, whatever the shape; a split only for one sequence (two parts at most: below).
TEST(Heuristics, K256StoresForFwdO) {
  for (int64_t N : {1, 4, 64, 256})
    for (int HV : {4, 32}) {
      const auto cfg = cuda::chunk_forward_heuristics(problem(HV / 2, HV, 32768, N, 256), h200());
      EXPECT_EQ(N == 1 && HV == 4 ? 148 : 0, cfg.split_chunks_per_part) << N << " " << HV;
      EXPECT_FALSE(cfg.fuse_o) << N << " " << HV;
      EXPECT_FALSE(cfg.fuse_o_serial) << N << " " << HV;
      EXPECT_FALSE(cfg.fp16_operands) << N << " " << HV;
    }
  // (The longest-first order stays the general rule's: ragged batches in several waves.)
  Problem p = problem(16, 32, 32768, 4, 256);
  const int32_t cu[] = {0, 1000, 5000, 30000, 32768};  // (device memory to the library: never read here)
  p.cu_seqlens = cu;
  p.cu_seqlens_type = IndexType::kInt32;
  EXPECT_TRUE(cuda::chunk_forward_heuristics(p, h200()).longest_first);
}

// K = V = 256 at tensor-parallel head counts: one sequence in two parts (no scan at 256: its M_p
// would not fit a block), part 0 the longer (it runs beside the summary pass) unless every head
// decays fast before the middle, the summary pass on 2 stages; none where the chains fill the
// SMs, for batches (a sequence could span more than two parts), or for parts under 16 chunks.
TEST(Heuristics, K256SplitsOneSequenceInTwo) {
  for (int HV : {4, 8, 16}) {
    const auto cfg = cuda::chunk_forward_heuristics(problem(HV / 2, HV, 32768, 1, 256), h200());
    EXPECT_EQ(364, cfg.split_first_part_chunks) << HV;  // 71% of 512 chunks
    EXPECT_EQ(148, cfg.split_chunks_per_part) << HV;
    EXPECT_EQ(2, cfg.split_max_parts) << HV;
    EXPECT_EQ(256, cfg.split_even_first_chunks) << HV;
    EXPECT_EQ(2, cfg.split_summary_stages) << HV;
    EXPECT_FALSE(cfg.fuse_o) << HV;
  }
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1, 256), h200()).split_chunks_per_part);
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(2, 4, 32768, 2, 256), h200()).split_chunks_per_part);
  EXPECT_EQ(0, cuda::chunk_forward_heuristics(problem(2, 4, 1900, 1, 256), h200()).split_chunks_per_part);
  const auto two = cuda::chunk_forward_heuristics(problem(1, 2, 4200, 1, 256), h200());  // test_forward's
  EXPECT_EQ(47, two.split_first_part_chunks);
  EXPECT_EQ(19, two.split_chunks_per_part);
  EXPECT_EQ(2, two.split_max_parts);
}

TEST(Heuristics, TensorParallelSlicesSplit) {
  // TP4 (HV = 8) and TP8 (HV = 4) on one 32k sequence: 16 and 8 chain blocks.
  const auto tp4 = cuda::chunk_forward_heuristics(problem(4, 8, 32768, 1), h200());
  EXPECT_EQ(64, tp4.split_chunks_per_part);
  EXPECT_EQ(8, tp4.split_max_parts);
  EXPECT_TRUE(tp4.fuse_o);  // 128 chain blocks: o in the chain
  const auto tp8 = cuda::chunk_forward_heuristics(problem(2, 4, 32768, 1), h200());
  EXPECT_EQ(32, tp8.split_chunks_per_part);
  EXPECT_EQ(16, tp8.split_max_parts);
  EXPECT_TRUE(tp8.fuse_o);
  // The scan in slices of 8 columns: 128 and 64 blocks.
  EXPECT_EQ(8, tp4.split_scan_cols);
  EXPECT_EQ(8, tp8.split_scan_cols);
}

TEST(Heuristics, FusedOInOneWaveOrFromFourChunks) {
  // Fused in one wave (also with SMs left idle) or, with 4+ chunks per sequence on average, in
  // several.
  const auto tp4_8x4k = cuda::chunk_forward_heuristics(problem(4, 8, 32768, 8), h200());
  EXPECT_TRUE(tp4_8x4k.fuse_o);
  const auto one_1900 = cuda::chunk_forward_heuristics(problem(16, 32, 1900, 1), h200());  // no split: 64 blocks
  EXPECT_TRUE(one_1900.fuse_o);
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1), h200()).fuse_o);    // 2 parts: 128 blocks
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(4, 8, 131072, 1), h200()).fuse_o);     // 8 parts: 128 blocks
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 32768, 4), h200()).fuse_o);    // 4x8k: 2 waves
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 8192, 8), h200()).fuse_o);     // 8x1k
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 16384, 64), h200()).fuse_o);   // 64x256: 4 chunks
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 16384, 256), h200()).fuse_o);  // 256x64: 1 chunk
  // ... both in the serial form (many waves of a few chunks each), the others not.
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 16384, 64), h200()).fuse_o_serial);
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 16384, 256), h200()).fuse_o_serial);
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 8192, 8), h200()).fuse_o_serial);        // 16 chunks
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1), h200()).fuse_o_serial);       // split
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(4, 8, 4096, 16), h200()).fuse_o_serial);         // 256 blocks
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(4, 8, 65536, 16), h200()).fuse_o);                // 256 blocks
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(2, 4, 32768, 8, 64), h200()).fuse_o);             // D = 64: always
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 16384, 256, 64), h200()).fuse_o_serial);  // D = 64
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 0, 0), h200()).fuse_o);                  // no sequence
}

// The sequences longest first wherever lengths may differ and the chains fill more than one wave:
// not for one sequence, a fixed-length batch, host lengths equal in chunks (64 and 40 tokens: one
// chunk each), or a few chains (all start at once).
TEST(Heuristics, LongestFirstWhereLengthsMayDiffer) {
  auto with_host_lengths = [](std::vector<int32_t> cu) {
    Problem p = problem(16, 32, cu.back(), static_cast<int64_t>(cu.size()) - 1);
    p.cu_seqlens = p.cu_seqlens_host = cu.data();
    p.cu_seqlens_type = IndexType::kInt32;
    return cuda::chunk_forward_heuristics(p, h200()).longest_first;
  };
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 32768, 1), h200()).longest_first);
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 8192, 8), h200()).longest_first);
  EXPECT_FALSE(cuda::chunk_forward_heuristics(problem(16, 32, 4096, 64, 64), h200()).longest_first);
  Problem unknown = problem(16, 32, 8192, 8);
  const int32_t cu[9] = {0, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192};
  unknown.cu_seqlens = cu;  // (device memory for the library: never read on the host)
  unknown.cu_seqlens_type = IndexType::kInt32;
  EXPECT_TRUE(cuda::chunk_forward_heuristics(unknown, h200()).longest_first);
  EXPECT_FALSE(with_host_lengths({0, 64, 104, 168}));
  EXPECT_TRUE(with_host_lengths({0, 64, 129, 193}));
  EXPECT_TRUE(with_host_lengths({0, 0, 64, 128}));  // (an empty sequence: zero chunks)
  EXPECT_FALSE(with_host_lengths({0, 4096}));
  // Ragged sequences whose chains fit one wave (all start at once): two at HV = 4 (16 blocks of 64
  // columns) and at HV = 32 (128); three at HV = 32 (192 blocks, two waves) take the order.
  const int32_t two[3] = {0, 1024, 8192}, three[4] = {0, 1024, 2048, 8192};
  Problem tp = problem(2, 4, 8192, 2);
  tp.cu_seqlens = tp.cu_seqlens_host = two;
  tp.cu_seqlens_type = IndexType::kInt32;
  EXPECT_FALSE(cuda::chunk_forward_heuristics(tp, h200()).longest_first);
  tp.num_qk_heads = 16;
  tp.num_v_heads = 32;
  EXPECT_FALSE(cuda::chunk_forward_heuristics(tp, h200()).longest_first);
  tp.num_seqs = 3;
  tp.cu_seqlens = tp.cu_seqlens_host = three;
  EXPECT_TRUE(cuda::chunk_forward_heuristics(tp, h200()).longest_first);
}

// A batch's lengths, given as the host copy of cu_seqlens: the serial form only while no sequence
// would outlast the batch's waves; the workspace's choices (fuse_o, the split) never change.
TEST(Heuristics, SerialFormFromTheHostLengths) {
  auto with_lengths = [](Problem p, const std::vector<int32_t>& cu) {
    p.num_seqs = static_cast<int64_t>(cu.size()) - 1;
    p.num_tokens = cu.back();
    p.cu_seqlens = cu.data();  // (not read on the host)
    p.cu_seqlens_host = cu.data();
    p.cu_seqlens_type = IndexType::kInt32;
    return cuda::chunk_forward_heuristics(p, h200());
  };
  auto cumulative = [](const std::vector<int32_t>& lens) {
    std::vector<int32_t> cu = {0};
    for (int32_t len : lens) cu.push_back(cu.back() + len);
    return cu;
  };
  // 256 x 64 tokens: the same as without the host copy.
  const auto even = with_lengths(problem(16, 32, 0, 0), cumulative(std::vector<int32_t>(256, 64)));
  EXPECT_TRUE(even.fuse_o && even.fuse_o_serial);
  // Ragged short sequences (1-4 chunks, 256 of them; the longest 4 chunks): serial.
  std::vector<int32_t> ragged;
  for (int i = 0; i < 256; ++i) ragged.push_back(1 + (i * 37) % 256);
  const auto short_mix = with_lengths(problem(16, 32, 0, 0), cumulative(ragged));
  EXPECT_TRUE(short_mix.fuse_o && short_mix.fuse_o_serial);
  // 255 x 64 tokens and one of 16k: ~2 chunks a sequence on average, but the long one's 256 chunks
  // would run ~4x the batch's waves serially: kFusedO. Without the host copy, the serial form.
  std::vector<int32_t> tail(255, 64);
  tail.push_back(16384);
  const auto long_tail = with_lengths(problem(16, 32, 0, 0), cumulative(tail));
  EXPECT_TRUE(long_tail.fuse_o);
  EXPECT_FALSE(long_tail.fuse_o_serial);
  const auto unknown = cuda::chunk_forward_heuristics(problem(16, 32, 255 * 64 + 16384, 256), h200());
  EXPECT_TRUE(unknown.fuse_o && unknown.fuse_o_serial);
  EXPECT_EQ(unknown.split_chunks_per_part, long_tail.split_chunks_per_part);
  // At a tensor-parallel slice (HV = 4) the waves are fewer: beside 1023 one-chunk sequences a
  // 2k-token one (32 chunks; the waves 1055 * 4 * 2 / 264 = 32 chunk-times) keeps kFusedO, a
  // 512-token one (8 of 31) the serial form.
  std::vector<int32_t> tp(1023, 64);
  tp.push_back(2048);
  EXPECT_FALSE(with_lengths(problem(2, 4, 0, 0), cumulative(tp)).fuse_o_serial);
  tp.back() = 512;
  EXPECT_TRUE(with_lengths(problem(2, 4, 0, 0), cumulative(tp)).fuse_o_serial);
  // int64 boundaries read alike.
  {
    std::vector<int64_t> cu64 = {0};
    for (int i = 0; i < 255; ++i) cu64.push_back(cu64.back() + 64);
    cu64.push_back(cu64.back() + 16384);
    Problem p = problem(16, 32, cu64.back(), 256);
    p.cu_seqlens = p.cu_seqlens_host = cu64.data();
    p.cu_seqlens_type = IndexType::kInt64;
    const cuda::SequenceChunks sc = cuda::sequence_chunks(p);
    EXPECT_EQ(256, sc.longest);
    EXPECT_EQ(1, sc.shortest);
    EXPECT_EQ(255 + 256, sc.total);
    EXPECT_FALSE(cuda::chunk_forward_heuristics(p, h200()).fuse_o_serial);
  }
  // Zero-length sequences count no chunks.
  std::vector<int32_t> zeros = cumulative(std::vector<int32_t>(256, 64));
  zeros.insert(zeros.begin() + 10, 40, zeros[10]);
  EXPECT_TRUE(with_lengths(problem(16, 32, 0, 0), zeros).fuse_o_serial);
}

TEST(Heuristics, PartsOfTheSplitTestCases) {
  const auto one_1500 = cuda::chunk_forward_heuristics(problem(1, 2, 1500, 1), h200());
  EXPECT_EQ(8, one_1500.split_chunks_per_part);
  EXPECT_EQ(3, parts_of(one_1500, 1500));
  const auto one_4000 = cuda::chunk_forward_heuristics(problem(1, 2, 4000, 1), h200());
  EXPECT_EQ(8, parts_of(one_4000, 4000));
  const auto ragged = cuda::chunk_forward_heuristics(problem(1, 2, 6701, 4), h200());
  EXPECT_EQ(8, ragged.split_chunks_per_part);
  EXPECT_EQ(12, parts_of(ragged, 6000));
  EXPECT_EQ(2, parts_of(ragged, 700));
  EXPECT_EQ(1, parts_of(ragged, 1));
  EXPECT_EQ(1, parts_of(ragged, 0));
  EXPECT_TRUE(ragged.fuse_o);  // 224 chain blocks, 27 chunks per sequence: o in the chain
  const auto four_heads = cuda::chunk_forward_heuristics(problem(2, 4, 3000, 1), h200());
  EXPECT_EQ(6, parts_of(four_heads, 3000));
}

TEST(Heuristics, GridsCoverTheLongestSequence) {
  for (int HV : {2, 4, 8, 16, 32})
    for (int64_t N : {1, 2, 3})
      for (int64_t T : {1536, 5000, 32768, 131072, 1000003}) {
        const auto cfg = cuda::chunk_forward_heuristics(problem(1, HV, T, N), h200());
        if (cfg.split_chunks_per_part == 0) continue;
        const int64_t max_chunks = (T + kChunkSize - 1) / kChunkSize;  // one sequence holding all tokens
        const int64_t first = cfg.split_first_part_chunks > 0 ? cfg.split_first_part_chunks : cfg.split_chunks_per_part;
        EXPECT_GE(first + int64_t(cfg.split_max_parts - 1) * cfg.split_chunks_per_part, max_chunks);
        EXPECT_EQ(cfg.split_max_parts, parts_of(cfg, T));
        EXPECT_GE(cfg.split_chunks_per_part, 8);
      }
}

// The decode step's kernel for each pair of head sizes: decode_rows_kernel at K = V = 128, the
// tiles kernel for the other pairs of 64, 128, 256, the general kernel (a block per 32 columns)
// for every other size in [1, 256].
TEST(DecodeHeuristics, EveryHeadSizeHasAKernel) {
  const int general[][2] = {{60, 100}, {100, 60}, {1, 1}, {256, 17}, {32, 256}, {64, 100}, {255, 64}};
  for (const auto& kv : general) {
    Problem p = problem(2, 4, 12, 12, kv[0]);
    p.head_v = kv[1];
    const cuda::DecodeConfig c = cuda::decode_heuristics(p, h200());
    EXPECT_EQ(c.kernel, cuda::DecodeKernel::kGeneral) << kv[0] << "x" << kv[1];
    EXPECT_EQ(c.warps, 8);
    EXPECT_EQ(c.grid, 12 * 4 * ((kv[1] + 31) / 32)) << kv[0] << "x" << kv[1];
  }
  EXPECT_EQ(cuda::decode_heuristics(problem(2, 4, 12, 12, 128), h200()).kernel, cuda::DecodeKernel::kRows);
  const int tiles[][2] = {{64, 64}, {256, 256}, {64, 256}, {256, 64}, {128, 64}};
  for (const auto& kv : tiles) {
    Problem p = problem(2, 4, 12, 12, kv[0]);
    p.head_v = kv[1];
    EXPECT_EQ(cuda::decode_heuristics(p, h200()).kernel, cuda::DecodeKernel::kTiles) << kv[0] << "x" << kv[1];
  }
  Problem big = problem(2, 4, 12, 12, 257);
  EXPECT_THROW(cuda::decode_heuristics(big, h200()), Error);
}

// A configuration that names no compiled kernel for the problem is an Error before any launch.
TEST(DecodeHeuristics, ExplicitConfigMustMatchAKernel) {
  ForwardArgs f;
  f.problem = problem(2, 4, 12, 12, 60);
  f.problem.head_v = 100;
  Exec exec;
  exec.backend = Backend::kCUDA;
  cuda::DecodeConfig c = cuda::decode_heuristics(f.problem, h200());
  c.grid += 1;  // the general kernel's grid is one block per (sequence, head, 32 columns)
  EXPECT_THROW(cuda::recurrent_gated_delta_rule(f, exec, c), Error);
  c = cuda::decode_heuristics(problem(2, 4, 12, 12, 64), h200());  // a tiles configuration
  EXPECT_THROW(cuda::recurrent_gated_delta_rule(f, exec, c), Error);
}

// The rows kernel's shape (K = V = 128): fp32 pools the whole fp32 state in registers, 2 blocks per
// SM; bf16 / fp16 pools the chosen entry of kRows16Shapes. A shape that is not compiled for the
// pool's element type is an Error before any launch.
TEST(DecodeHeuristics, RowsShapeByPoolType) {
  Problem p = problem(2, 4, 12, 12, 128);
  cuda::DecodeConfig c = cuda::decode_heuristics(p, h200());
  EXPECT_EQ(c.parts, cuda::kRowsShapeF32.parts);
  EXPECT_EQ(c.blocks_per_sm, cuda::kRowsShapeF32.blocks_per_sm);
  EXPECT_EQ(c.staged, cuda::kRowsShapeF32.staged);
  const cuda::RowsShape& chosen = cuda::kRows16Shapes[cuda::kRows16Choice];
  for (DType sd : {DType::kBFloat16, DType::kFloat16}) {
    p.state_dtype = sd;
    c = cuda::decode_heuristics(p, h200());
    EXPECT_EQ(c.kernel, cuda::DecodeKernel::kRows);
    EXPECT_EQ(c.parts, chosen.parts);
    EXPECT_EQ(c.blocks_per_sm, chosen.blocks_per_sm);
    EXPECT_EQ(c.staged, chosen.staged);
  }
  ForwardArgs f;
  f.problem = problem(2, 4, 12, 12, 128);
  Exec exec;
  exec.backend = Backend::kCUDA;
  // Rejected by the configuration check itself (not by a failed launch on a machine without a GPU).
  auto expect_no_kernel = [&](const cuda::DecodeConfig& cfg, const char* what) {
    try {
      cuda::recurrent_gated_delta_rule(f, exec, cfg);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no decode kernel of the CUDA backend matches"), std::string::npos)
          << what << ": " << e.what();
    }
  };
  c = cuda::decode_heuristics(f.problem, h200());  // fp32 pool: no 16-bit shape
  const cuda::RowsShape& other = cuda::kRows16Shapes[0];
  c.parts = other.parts, c.blocks_per_sm = other.blocks_per_sm, c.staged = other.staged;
  if (other.parts != cuda::kRowsShapeF32.parts || other.blocks_per_sm != cuda::kRowsShapeF32.blocks_per_sm ||
      other.staged != cuda::kRowsShapeF32.staged)
    expect_no_kernel(c, "a 16-bit shape on an fp32 pool");
  f.problem.state_dtype = DType::kBFloat16;
  c = cuda::decode_heuristics(f.problem, h200());
  c.parts = 3;
  expect_no_kernel(c, "3 parts");
  c = cuda::decode_heuristics(f.problem, h200());
  c.staged = !c.staged;
  c.parts = 1;  // {1, ., !staged} with the chosen blocks per SM: not in kRows16Shapes
  expect_no_kernel(c, "1 part");
}

// The tuned decode kernels move state rows in 4-element pieces (float4 / uint2): a call whose pool
// rows start elsewhere (an odd row_stride, data one element in) takes the general kernel, and an
// explicit tuned configuration for it is an Error before any launch. Small heads whose packed rows
// are not 16-byte multiples (K = V = 1, HV = 2) take it anyway. The pointers are never read.
TEST(DecodeHeuristics, UnalignedPoolRowsTakeTheGeneralKernel) {
  alignas(16) static float pool[64];
  for (int D : {128, 64})
    for (DType sd : {DType::kFloat32, DType::kBFloat16}) {
      ForwardArgs f;
      f.problem = problem(2, 4, 12, 12, D);
      f.problem.state_dtype = sd;
      f.initial_state.data = f.final_state.data = pool;
      const cuda::DecodeKernel tuned = D == 128 ? cuda::DecodeKernel::kRows : cuda::DecodeKernel::kTiles;
      EXPECT_TRUE(cuda::decode_pools_in_pieces(f));
      EXPECT_EQ(cuda::decode_heuristics(f, h200()).kernel, tuned);
      f.final_state.row_stride = 4 * D * D + 4;  // 4 elements: still whole pieces
      EXPECT_EQ(cuda::decode_heuristics(f, h200()).kernel, tuned);
      for (int64_t pad : {1, 2, 3}) {
        f.final_state.row_stride = 4 * D * D + pad;
        EXPECT_FALSE(cuda::decode_pools_in_pieces(f)) << pad;
        const cuda::DecodeConfig c = cuda::decode_heuristics(f, h200());
        EXPECT_EQ(c.kernel, cuda::DecodeKernel::kGeneral) << D << " " << pad;
        EXPECT_EQ(c.grid, 12 * 4 * (D / 32));
      }
      f.final_state.row_stride = 0;
      f.token_states.pool.data = pool + 1;  // a token-state pool one element in
      EXPECT_EQ(cuda::decode_heuristics(f, h200()).kernel, cuda::DecodeKernel::kGeneral);
      f.token_states.pool.data = pool + 4;  // 16 bytes of fp32, 8 of bf16: whole pieces
      EXPECT_EQ(cuda::decode_heuristics(f, h200()).kernel, tuned);
      f.initial_state.data = reinterpret_cast<char*>(pool) + 8;  // 2 fp32 elements, 4 bf16 elements in
      EXPECT_EQ(cuda::decode_heuristics(f, h200()).kernel,
                sd == DType::kFloat32 ? cuda::DecodeKernel::kGeneral : tuned);
    }
  ForwardArgs small;
  small.problem = problem(1, 2, 3, 3, 1);
  small.initial_state.data = pool;
  EXPECT_FALSE(cuda::decode_pools_in_pieces(small));
  EXPECT_EQ(cuda::decode_heuristics(small, h200()).kernel, cuda::DecodeKernel::kGeneral);
}

// bf16 inputs take fp16 operands at D = 64 always, at D = 128 only where the experimental
// GDN_FP16_OPERANDS_D128 is built; fp16 inputs keep their own.
TEST(Heuristics, Fp16OperandsForBf16Inputs) {
  EXPECT_TRUE(cuda::chunk_forward_heuristics(problem(16, 32, 4096, 1, 64), h200()).fp16_operands);
  EXPECT_EQ(cuda::kFp16OperandsD128, cuda::chunk_forward_heuristics(problem(16, 32, 4096, 1), h200()).fp16_operands);
  for (int D : {64, 128}) {
    Problem p = problem(16, 32, 4096, 1, D);
    p.dtype = DType::kFloat16;
    EXPECT_FALSE(cuda::chunk_forward_heuristics(p, h200()).fp16_operands) << D;
  }
}

TEST(DecodeHeuristics, TunedConfigNeedsRowsInPieces) {
  alignas(16) static float pool[64];
  ForwardArgs f;
  f.problem = problem(2, 4, 12, 12, 128);
  f.initial_state.data = f.final_state.data = pool;
  f.final_state.row_stride = 4 * 128 * 128 + 2;
  Exec exec;
  exec.backend = Backend::kCUDA;
  try {
    cuda::recurrent_gated_delta_rule(f, exec, cuda::decode_heuristics(f.problem, h200()));  // kRows
    ADD_FAILURE() << "a rows configuration ran on a pool with rows off the 4-element pieces";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected DecodeKernel::kGeneral"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace test
}  // namespace gdn
