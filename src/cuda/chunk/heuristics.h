// Every tuning choice of the tensor-core chunked forward, made in one place from the problem and the
// device. The library calls chunk_forward_heuristics for each call; tools that time alternatives
// pass their own ChunkForwardConfig to fast_forward instead (fast_forward checks it).
#pragma once

#include <cstdint>

#include "common/validate_detail.h"
#include "cuda/chunk/split.cuh"
#include "cuda/core/device.h"
#include "gdn/gdn.h"

namespace gdn {
namespace cuda {

// Whether bf16 inputs take fp16 operands (ChunkForwardConfig::fp16_operands; the CMake option
// GDN_FP16_OPERANDS_D128, off: those kernels are not compiled; named when only K = V = 128 ran on
// the wgmma chain, it now covers K = V = 64 too).
#ifdef GDN_FP16_OPERANDS_D128
constexpr bool kFp16OperandsD128 = true;
#else
constexpr bool kFp16OperandsD128 = false;
#endif

// fwd_h, the sequential part (wgmma, fwd_h_wgmma.cuh), has no choices of its own: each block
// carries one (sequence part, value head, 64-wide V slice) chain (64: the wgmma M) on a ring of 2
// stages where it stores h and v_new, 3 where it fuses o, 1 in its serial form.
struct ChunkForwardConfig {
  // Exact split of long sequences into parts of split_chunks_per_part chunks (chunk/split.cuh);
  // 0: none. split_max_parts: the parts per sequence the grids cover (at least
  // ceil(chunks of the longest possible sequence / split_chunks_per_part)); the summary pass runs
  // its chains with split_summary_stages ring stages.
  int split_chunks_per_part = 0;
  int split_max_parts = 1;
  // The first part's chunks (0: split_chunks_per_part): longer for two parts of one sequence,
  // where part 0 of the chain runs beside the summary pass (split.cuh).
  int split_first_part_chunks = 0;
  // Two parts of one sequence: the first part's chunks where every value head's state decays
  // fast enough before it (split.cuh, SplitBufs::even_first_chunks); 0: always
  // split_first_part_chunks.
  int split_even_first_chunks = 0;
  int split_summary_stages = 2;
  // The scan's blocks (split_scan.cu) each carry split_scan_cols (8, 16 or 32) columns of V.
  int split_scan_cols = 16;
  // o computed inside the chain kernel by a second warpgroup (chain_o.cuh) instead of by fwd_o: h
  // and v_new never reach global memory. The chain then runs 3 ring stages (one block of three
  // warpgroups per SM). Otherwise fwd_o runs after the chain (D = 128 only: K = V = 64 always
  // fuses).
  bool fuse_o = false;
  // With fuse_o: its serial form (ChainMode::kFusedSerial): one warpgroup per block computes each
  // chunk's chain and then its o, on one ring stage (~108 KB: two blocks per SM), for sequences of
  // a few chunks in several waves, where one block per SM ran each item's load, chain, o and
  // store back to back with nothing beside them.
  bool fuse_o_serial = false;
  // The sequential kernels (the chain) take the sequences longest first (the plan's counting sort,
  // Plan::longest_first), so that a batch's long sequences start in the first wave instead of
  // trailing its short ones. Off where it cannot matter: one sequence, lengths the host knows equal
  // in chunks, or chains that fit one wave of one block per SM (all start at once): the sort's
  // ~1 us and the chain's dependent load of its sequence saved.
  bool longest_first = false;
  // bf16 inputs on fp16 operands (fwd_fast.cuh): the tensor-core products in fp16; A_s's image is
  // fp16, o is stored in bf16; the wgmma chain converts q and k in its ring, and no chunk takes the
  // lo passes (chain_precise.cuh). K = V = 64 always (err_o ~1.7e-3 against bf16 operands'
  // 2.3-2.4e-3); K = V = 128 only with GDN_FP16_OPERANDS_D128 (kFp16OperandsD128: experimental).
  // Session 36 measured it at 128
  // against bf16 operands: model-1x32k -8.6%, g0-1x32k -7%, 256x64 -4%, err_o 2.2-2.5e-3 ->
  // 1.7e-3, but the SPEC's gates +5.5% on every kFusedO case (1x128k would fall behind
  // FlashQLA's). Every mode of a head size takes the same operands (a checkpoint row stays
  // bitwise a prefix call's final state whichever mode each call takes). The range of v and the
  // state's operands becomes fp16's (docs/api.md).
  bool fp16_operands = false;
};

// Chunks per sequence on average, rounded up (0 without sequences).
inline int64_t average_chunks(const Problem& p) {
  return p.num_seqs > 0 ? (p.num_tokens + p.num_seqs * kChunkSize - 1) / (p.num_seqs * kChunkSize) : 0;
}

// The sequences' chunk counts where the host knows them: a fixed-length batch, or the caller's host
// copy of cu_seqlens (p.cu_seqlens_host, validated before any launch; lengths clamped to [0, T]
// here all the same). Unknown: longest = -1.
struct SequenceChunks {
  int64_t longest = -1;   // the longest sequence's chunks
  int64_t shortest = -1;  // the shortest's
  int64_t total = -1;     // the chunks of all sequences
};
inline SequenceChunks sequence_chunks(const Problem& p) {
  SequenceChunks sc;
  if (p.num_seqs <= 0) return sc;
  if (p.cu_seqlens == nullptr) {
    sc.longest = sc.shortest = (p.num_tokens / p.num_seqs + kChunkSize - 1) / kChunkSize;
    sc.total = sc.longest * p.num_seqs;
    return sc;
  }
  if (p.cu_seqlens_host == nullptr) return sc;
  sc.longest = sc.total = 0;
  sc.shortest = INT64_MAX;
  int64_t prev = detail::read_index(p.cu_seqlens_host, 0, p.cu_seqlens_type);
  for (int64_t n = 1; n <= p.num_seqs; ++n) {
    const int64_t next = detail::read_index(p.cu_seqlens_host, n, p.cu_seqlens_type);
    int64_t len = next - prev;
    len = len < 0 ? 0 : len > p.num_tokens ? p.num_tokens : len;
    const int64_t chunks = (len + kChunkSize - 1) / kChunkSize;
    sc.longest = chunks > sc.longest ? chunks : sc.longest;
    sc.shortest = chunks < sc.shortest ? chunks : sc.shortest;
    sc.total += chunks;
    prev = next;
  }
  return sc;
}

// The split's config for parts of q chunks after a first part of `first` (0: q), the rest of it
// derived: the parts the grids cover, the summary pass's ring stages, the scan's column slices.
// (choose_split below; the check tool's NAME/partsNN variant.)
inline void set_split_parts(const Problem& p, const DeviceProps& dev, ChunkForwardConfig& cfg, int64_t q,
                            int64_t first) {
  const int64_t blocks = p.num_seqs * p.num_v_heads * (p.head_v / 64);  // chain blocks without a split
  // Any one sequence has at most ceil(T / 64) chunks.
  const int64_t max_chunks = (p.num_tokens + kChunkSize - 1) / kChunkSize;
  cfg.split_chunks_per_part = static_cast<int>(q);
  cfg.split_first_part_chunks = static_cast<int>(first);
  cfg.split_max_parts =
      static_cast<int>(split_parts_of(max_chunks, cfg.split_chunks_per_part, INT32_MAX, cfg.split_first_part_chunks));
  // The summary pass's live blocks: part 0's chains (S_1) and two per middle part (M_p, B_p).
  const int64_t summary_blocks = blocks * (2 * cfg.split_max_parts - 3);
  cfg.split_summary_stages = summary_blocks <= dev.sms && p.head_v != 256 ? 4 : 2;
  // The scan (3+ parts): the narrowest column slices that still fit one block per SM; its steps
  // are serial, each 128 x cols x 128 multiply-adds per block (H200, fp32 fma then, 16 columns
  // instead of 32: tp8-1x32k's scan 135 -> 61 us, 14 steps; tf32 mma since session 49).
  const int64_t chains = p.num_seqs * p.num_v_heads;
  cfg.split_scan_cols = chains * (p.head_v / 8) <= dev.sms ? 8 : chains * (p.head_v / 16) <= dev.sms ? 16 : 32;
}

// The split: worth it when the (sequence, head) chains leave SMs idle (the summary pass doubles
// the chain work of all parts but the last, so the chain's latency shrinks by about parts / 2),
// with at least 3 parts of at least 8 chunks (a part's fixed cost: loading and storing its state,
// the ring's fill) and at most 16 parts (the scan over the parts is serial), or exactly 2 parts
// of at least 32 chunks where only 2 fit. K = V = 256: one sequence in 2 parts at most (no scan:
// its M_p, 256 KB, fits no block's shared memory; in a batch a sequence could span more parts than
// two), its summary pass on 2 ring stages (a 256-wide stage is ~60 KB).
inline void choose_split(const Problem& p, const DeviceProps& dev, ChunkForwardConfig& cfg) {
  const int64_t blocks = p.num_seqs * p.num_v_heads * (p.head_v / 64);  // chain blocks without a split
  if (p.num_seqs <= 0 || blocks <= 0 || (p.head_v == 256 && p.num_seqs != 1)) return;
  const int64_t max_parts = p.head_v == 256 ? 2 : 16;
  const int64_t parts_fit = dev.sms / blocks;
  if (parts_fit < 2) return;
  const int64_t parts = parts_fit < max_parts ? parts_fit : max_parts;
  const int64_t avg_chunks = average_chunks(p);
  int64_t q = (avg_chunks + parts - 1) / parts;
  int64_t first = 0;
  if (parts == 2) {
    // Two parts (H200, HV = 32, one sequence; o fused): 1x4k 0.175 -> 0.173 ms, 1x32k 1.184 ->
    // 1.111, 1x128k 4.696 -> 4.312 (session 19, before the summary pass skipped negligible
    // history). Only for halves of at least 16 chunks (sequences of ~2k tokens and more): the
    // summary pass runs part 0's chain on its own first where the gates decay slowly, and a
    // shorter part cannot repay it. (Session 23: was 32; 1x3k and g0-1x3k predicted faster
    // split, their o fused.)
    if (q < 16) return;
    // One sequence: no scan, so part 0 of the chain runs beside the summary pass, and part 1
    // starts when that ends. Part 0 of a chunks then ends at r_f a, part 1 at r_s a + r_f (n - a)
    // (r_f ~2.2 us per chunk for the fused chain, r_s ~1.3 for the store-free summary: H200,
    // sessions 18-19); equal at a = n r_f / (2 r_f - r_s) ~ 0.71 n. Measured (H200, session 20):
    // 1x32k's chain 0.88 -> 0.79 ms; two equal parts with the same overlap: 1.122 ms against 1.039.
    if (p.num_seqs == 1) {
      first = (avg_chunks * 71 + 99) / 100;
      q = avg_chunks - first;
      // Where every head's S_1 comes from the few chunks before the middle (the summary pass
      // skips the rest: split.cuh), equal parts finish first.
      cfg.split_even_first_chunks = static_cast<int>(avg_chunks / 2);
    }
  } else {
    if (q < 8) q = 8;
    if (avg_chunks < 3 * q) return;  // fewer than 3 parts: the summary pass would cost what it saves
  }
  set_split_parts(p, dev, cfg, q, first);
}

inline ChunkForwardConfig chunk_forward_heuristics(const Problem& p, const DeviceProps& dev) {
  ChunkForwardConfig cfg;
  const int64_t chains = p.num_seqs * p.num_v_heads;  // (sequence, value head) pairs
  const int64_t slices = p.head_v / 64;               // 64-wide V slices per chain (K = V = 64 or 128)
  // Measured (H200, session 33): mixed 0.780 -> 0.709 ms, tail-16k 1.544 -> 1.322 (its 16k prompt
  // had started last); applied to equal lengths it cost 1.7-3% (8x1k 0.203 -> 0.207 ms).
  // The host's lengths (a loop over cu_seqlens_host) only where a choice reads them: both need the
  // chains in more than one wave (the serial form's test below implies it).
  const bool several_waves = chains * slices > dev.sms;
  const SequenceChunks lengths = several_waves ? sequence_chunks(p) : SequenceChunks{};
  cfg.longest_first = p.num_seqs > 1 && several_waves && (lengths.longest < 0 || lengths.longest != lengths.shortest);
  // K = V = 256: the storing chain (two chain warpgroups a block, one per half of K) and fwd_o
  // only (o fused would need both halves of h), split in two parts at most (choose_split).
  if (p.head_v == 256) {
    choose_split(p, dev, cfg);
    return cfg;
  }
  // (The chain storing h and v_new for fwd_o runs only in several waves, below: where its blocks
  // fit one wave, o is fused. Its 2 stages, 107.5 KB, let two blocks share an SM, each hiding the
  // other's latency.)
  choose_split(p, dev, cfg);
  // Fused o wherever the blocks fill at most one wave of one block per SM or the sequences
  // average at least 4 chunks; also with SMs left idle (session 23: the o warpgroup mostly waits
  // for the chain on the chain's SM, ncu of session 22, where fwd_o beside it read h in bf16:
  // g = 0 err_o ~2.6e-3 against the fused o's 2.18e-3).
  // Measured on an H200 (docs/perf.md, v14 and session 18): tp4-8x4k (128 blocks) 0.340 -> 0.233
  // ms, tp4-1x32k (split, 128) 0.526 -> 0.423; in several waves 4x8k (256 blocks) 1.228 ->
  // 0.861, 8x1k (512) 0.338 -> 0.252, 64x256 (4096, 4 chunks each) 0.704 -> 0.571; with SMs
  // left idle too (1x4k: 64 blocks; session 23: tp8-1x4k 1.07x). The SPEC's mixed case (16
  // sequences, 32 chunks on average) falls under the rule, unmeasured fused. One-chunk sequences in many
  // waves (256x64) stay unfused: there the state's load and store dominate, and the unfused chain
  // runs two blocks per SM (H200, session 22: 0.901 ms unfused, 0.996 fused).
  // K = V = 64 always fuses (its chain runs k and q padded to 128 columns, which fwd_o does not).
  const int64_t chain_blocks = chains * slices * (cfg.split_chunks_per_part > 0 ? cfg.split_max_parts : 1);
  if (chain_blocks > 0 && (chain_blocks <= dev.sms || average_chunks(p) >= 4 || p.head_v == 64)) cfg.fuse_o = true;
  // Short sequences in several waves of two blocks per SM (no split there): the serial fused
  // chain, two blocks per SM hiding each other's loads (256x64 and 64x256 in the SPEC's cases).
  // Measured (H200, session 32): 256x64 0.872 -> 0.756 ms, 64x256 0.490 -> 0.475; forced onto
  // longer sequences it loses (8x1k 0.210 -> 0.223, 4x8k 0.701 -> 0.787): its chunk takes the
  // chain and then o, ~6 us against kFusedO's ~3.7. So where the lengths are known, a sequence
  // whose chunks alone would take more than half of the batch's time in waves (its total
  // chunk-blocks over two blocks per SM) keeps the batch on kFusedO: one long prompt among
  // many short ones. (Both fused forms take the same workspace: what the caller's host copy of
  // cu_seqlens decides here never changes the workspace size.)
  if (chain_blocks > 2 * dev.sms && average_chunks(p) <= 4 && cfg.split_chunks_per_part == 0) {
    const bool long_tail =
        lengths.longest >= 0 && lengths.longest * 4 * dev.sms > lengths.total * p.num_v_heads * slices;
    cfg.fuse_o = true;
    cfg.fuse_o_serial = !long_tail;
  }
  cfg.fp16_operands = p.dtype == DType::kBFloat16 && (p.head_v == 64 || kFp16OperandsD128);
  return cfg;
}

}  // namespace cuda
}  // namespace gdn
