// Orchestration of the tensor-core forward: plan, q/k/v copies (unaligned rows), prep, h, o.
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/stages/l2norm.cuh"

namespace gdn {
namespace cuda {
namespace {

// E: the 16-bit operand type, EI the inputs' (FastBufs); the sizes are the same for every pair.
template <typename E, typename EI>
size_t carve(const Problem& p, const ChunkForwardConfig& cfg, void* base, FastBufs<E, EI>* b, SplitBufs* sp,
             char** plan_mem) {
  const int64_t T = p.num_tokens, HV = p.num_v_heads, H = p.num_qk_heads, D = p.head_k;
  const int64_t mc = chunk_bound(T, p.num_seqs);
  Carver c(base);
  char* pm = c.take<char>(plan_bytes(T, p.num_seqs));
  EI* qb = c.take<EI>(T * H * D);
  EI* kb = c.take<EI>(T * H * D);
  double* Gt = c.take<double>(T * HV);
  float2* eg = c.take<float2>(T * HV);
  float* rk = c.take<float>(T * H);
  E* w = c.take<E>(fwd_a_image(mc, 0, HV));  // A_s's images (fwd_a_image: [mc, HV, 2, 64, 64])
  E* u = c.take<E>(T * HV * D);              // a copy of v, in EI
  // The per-chunk hand-off to fwd_o (none when the chain computes o itself): one 64-row image per
  // chunk and slice (fwd_v_image), v_new's lo part the same (weakly decaying chunks' only), h.
  const bool to_fwd_o = !cfg.fuse_o;
  E* v_new = c.take<E>(to_fwd_o ? mc * kChunkSize * HV * D : 0);
  E* v_new_lo = c.take<E>(to_fwd_o ? mc * kChunkSize * HV * D : 0);
  E* h = c.take<E>(to_fwd_o ? mc * HV * D * D : 0);
  // The split's part states and summaries (split.cuh): [N, P_max, HV, PW, PW] fp32 each (PW: the
  // chain's width).
  const int64_t PW = chain_width(static_cast<int>(D));
  const int64_t part_elems = cfg.split_chunks_per_part > 0 ? p.num_seqs * cfg.split_max_parts * HV * PW * PW : 0;
  float* part_state = c.take<float>(part_elems);
  float* summary_b = c.take<float>(part_elems);
  float* summary_m = c.take<float>(part_elems);
  float* transition_log_bound = c.take<float>(part_elems > 0 ? mc * HV : 0);
  int* m_negligible = c.take<int>(part_elems > 0 ? p.num_seqs * cfg.split_max_parts * HV : 0);
  if (sp) {
    sp->chunks_per_part = cfg.split_chunks_per_part;
    sp->first_part_chunks = cfg.split_first_part_chunks > 0 ? cfg.split_first_part_chunks : cfg.split_chunks_per_part;
    // (The chain in its store mode keeps the first part fixed at K = V = 128: fwd_h_wgmma.cuh.)
    sp->even_first_chunks = cfg.split_chunks_per_part > 0 && (cfg.fuse_o || D == 256) ? cfg.split_even_first_chunks : 0;
    sp->max_parts = cfg.split_chunks_per_part > 0 ? cfg.split_max_parts : 1;
    sp->part_state = part_state;
    sp->summary_b = summary_b;
    sp->summary_m = summary_m;
    sp->m_negligible = part_elems > 0 ? m_negligible : nullptr;
  }
  if (b) {
    b->T = T;
    b->H = p.num_qk_heads;
    b->HV = p.num_v_heads;
    b->dk = p.head_k;
    b->scale = p.scale;
    b->q = qb;  // the copies; fast_forward points q, k at the caller's rows when it can
    b->k = kb;
    b->q_st = b->k_st = H * D;
    b->q_sh = b->k_sh = D;
    b->l2norm = p.use_qk_l2norm;
    b->rk = rk;
    b->Gt = Gt;
    b->eg = eg;
    b->transition_log_bound = part_elems > 0 ? transition_log_bound : nullptr;
    b->w = w;
    b->u = u;
    b->v_new = v_new;
    b->v_new_lo = to_fwd_o ? v_new_lo : nullptr;
    b->h = h;
    *plan_mem = pm;
  }
  return c.used;
}

void mark(const PhaseEvents* phases, int i, cudaStream_t s) {
  if (phases) check(cudaEventRecord(phases->at[i], s), "cudaEventRecord");
}

// What the kernels can run: an explicit config that asks for anything else is refused here, before
// any launch (an unfused o at K = V = 64, fp16 operands not built, a split whose parts miss chunks).
void check_config(const Problem& p, const ChunkForwardConfig& cfg) {
  if (p.head_k == 64 && !cfg.fuse_o) throw Error("fast_forward: K = V = 64 runs the chain with o fused only (fuse_o)");
  if (p.head_k == 256 && (cfg.fuse_o || cfg.fp16_operands))
    throw Error("fast_forward: K = V = 256 runs the storing chain and fwd_o only (no fuse_o or fp16_operands)");
  if (p.head_k == 256 && cfg.split_chunks_per_part > 0 && (cfg.split_max_parts > 2 || cfg.split_summary_stages != 2))
    throw Error("fast_forward: K = V = 256 splits into 2 parts at most (no scan), its summary pass on 2 stages; got " +
                std::to_string(cfg.split_max_parts) + " parts, " + std::to_string(cfg.split_summary_stages) +
                " stages");
  if (cfg.fp16_operands && p.dtype != DType::kBFloat16)
    throw Error("fast_forward: fp16_operands runs bf16 inputs (their products in fp16)");
  if (cfg.fp16_operands && p.head_k == 128 && !kFp16OperandsD128)
    throw Error("fast_forward: fp16_operands at K = V = 128 is built only with -DGDN_FP16_OPERANDS_D128=ON");
  if (cfg.fuse_o_serial && !cfg.fuse_o) throw Error("fast_forward: fuse_o_serial is a form of fuse_o (set both)");
  if (cfg.split_chunks_per_part < 0)
    throw Error("fast_forward: split_chunks_per_part must be 0 or positive; got " +
                std::to_string(cfg.split_chunks_per_part));
  if (cfg.split_chunks_per_part > 0) {
    const int64_t max_chunks = (p.num_tokens + kChunkSize - 1) / kChunkSize;
    if (cfg.split_max_parts < 1 || cfg.split_first_part_chunks < 0 ||
        (cfg.split_even_first_chunks != 0 &&
         (cfg.split_max_parts != 2 || cfg.split_even_first_chunks < kEvenWindow ||
          cfg.split_even_first_chunks >
              (cfg.split_first_part_chunks > 0 ? cfg.split_first_part_chunks : cfg.split_chunks_per_part))) ||
        split_part_begin(cfg.split_max_parts, cfg.split_chunks_per_part, cfg.split_first_part_chunks) < max_chunks ||
        (cfg.split_summary_stages != 2 && cfg.split_summary_stages != 4) ||
        (cfg.split_scan_cols != 8 && cfg.split_scan_cols != 16 && cfg.split_scan_cols != 32))
      throw Error(
          "fast_forward: a first part of split_first_part_chunks (0: split_chunks_per_part) and "
          "split_max_parts - 1 parts of split_chunks_per_part must cover ceil(T / 64) = " +
          std::to_string(max_chunks) + " chunks, split_summary_stages be 2 or 4 and split_scan_cols 8, 16 or 32; got " +
          std::to_string(cfg.split_first_part_chunks) + " + (" + std::to_string(cfg.split_max_parts) + " - 1) x " +
          std::to_string(cfg.split_chunks_per_part) + ", " + std::to_string(cfg.split_summary_stages) + ", " +
          std::to_string(cfg.split_scan_cols) + " (split_even_first_chunks: 0, or " + std::to_string(kEvenWindow) +
          " .. the first part's chunks with 2 parts; got " + std::to_string(cfg.split_even_first_chunks) + ")");
  }
}

}  // namespace

bool fast_path_supported(const Problem& p) {
  return (p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16) && p.head_k == p.head_v &&
         tensor_core_head(p.head_k);
}

size_t fast_workspace_size(const Problem& p, const ChunkForwardConfig& cfg) {
  return carve<__nv_bfloat16, __nv_bfloat16>(p, cfg, nullptr, nullptr, nullptr, nullptr);
}

namespace {

// The forward with operand type E on inputs of EI = the input dtype (fast_path_supported: bf16 or
// fp16, and takes_fast_path: q, k, o in it too); E = EI, or fp16 on bf16 (cfg.fp16_operands).
template <typename E, typename EI>
void run(const ForwardArgs& f, const Exec& exec, const ChunkForwardConfig& cfg, const PhaseEvents* phases) {
  const Problem& p = f.problem;
  cudaStream_t s = stream_of(exec);
  FastBufs<E, EI> b = {};
  SplitBufs sp;
  char* pm = nullptr;
  carve(p, cfg, exec.workspace, &b, &sp, &pm);
  mark(phases, 0, s);
  b.pl = build_plan(p, pm, s, cfg.longest_first);
  mark(phases, 1, s);
  const int64_t T = p.num_tokens;
  const int H = p.num_qk_heads, D = p.head_k;
  // Rows with 16-byte aligned pieces that TMA can address (for the chain's tensor maps) are read
  // in place; others are copied (not normalized, not converted: q, k and v are in EI) into `copy`
  // ([T, heads, D] in the workspace) first. Returns the rows to read and sets their strides (and,
  // with `map`, encodes it).
  auto rows16 = [&](const ConstTensor& x, int heads, EI* copy, int64_t& st, int64_t& sh,
                    CUtensorMap* map) -> const EI* {
    if (rows_in_16_byte_pieces(x) &&
        (map == nullptr || encode_row_map(map, p.dtype, x.data, T, heads, D, x.stride_token, x.stride_head))) {
      st = x.stride_token;
      sh = x.stride_head;
      return static_cast<const EI*>(x.data);
    }
    convert_rows(p.dtype, p.dtype, x.data, x.stride_token, x.stride_head, copy, int64_t(heads) * D, D, T, heads, D,
                 false, s);
    st = int64_t(heads) * D;
    sh = D;
    if (map != nullptr && !encode_row_map(map, p.dtype, copy, T, heads, D, st, sh))
      throw Error("cuTensorMapEncodeTiled failed on packed rows (the driver lacks TMA support?)");
    return copy;
  };
  const bool maps = T > 0;
  b.q = rows16(f.q, H, const_cast<EI*>(b.q), b.q_st, b.q_sh, maps ? &b.maps.q : nullptr);
  b.k = rows16(f.k, H, const_cast<EI*>(b.k), b.k_st, b.k_sh, maps ? &b.maps.k : nullptr);
  b.v = rows16(f.v, p.num_v_heads, reinterpret_cast<EI*>(b.u), b.v_st, b.v_sh, maps ? &b.maps.v : nullptr);
  mark(phases, 2, s);
  launch_kkt_solve(b, f, s);
  mark(phases, 3, s);
  // The exact split: summaries, the scan (3+ parts), then the chains per part; with at most 2
  // parts the chains' part 0 runs beside the summary pass (split.cuh).
  const bool split = sp.chunks_per_part > 0, scan = split && sp.max_parts > 2;
  // (Phase events: the summary pass's and the scan's own with a scan; with 2 parts no event may sit
  // between the summary pass and its programmatic dependent, the chain, so h holds both.)
  const bool own_phases = !split || scan;
  if (!own_phases) {
    mark(phases, 4, s);
    mark(phases, 5, s);
  }
  if (split) launch_fwd_h_wgmma_summary(b, sp, f, cfg, s);
  if (own_phases) mark(phases, 4, s);
  if (scan) launch_split_scan(b.pl, sp, p.num_seqs, b.HV, D, cfg.split_scan_cols, s);
  if (own_phases) mark(phases, 5, s);
  launch_fwd_h_wgmma(b, sp, f, cfg, s, split && !scan);  // with cfg.fuse_o: o too
  mark(phases, 6, s);
  // (fwd_o with fp16 operands for bf16 inputs: GDN_FP16_OPERANDS_D128 only; K = V = 64 fuses o.)
  if constexpr (std::is_same<E, EI>::value || kFp16OperandsD128) {
    if (!cfg.fuse_o) launch_fwd_o(b, f, s);
  }
  mark(phases, 7, s);
}

}  // namespace

void fast_forward(const ForwardArgs& f, const Exec& exec, const ChunkForwardConfig& cfg, const PhaseEvents* phases) {
  check_config(f.problem, cfg);
  if (f.problem.dtype == DType::kFloat16)
    run<__half, __half>(f, exec, cfg, phases);
  else if (cfg.fp16_operands)
    run<__half, __nv_bfloat16>(f, exec, cfg, phases);
  else
    run<__nv_bfloat16, __nv_bfloat16>(f, exec, cfg, phases);
}

}  // namespace cuda
}  // namespace gdn
