// The correctness cases of the device check: every path of the forward (tensor-core D = 64 / 128 /
// 256, exact stages for K != V / any other size), the stage API, and the decode step
// (rows, tiles and general kernels), over layouts, pools with out-of-range indices, padded rows,
// extreme gates and int32 / int64 indices.
#include "check.h"
#include "cuda/chunk/heuristics.h"  // kFp16OperandsD128

namespace gdn {
namespace check {

std::vector<Case> correctness_cases(bool quick) {
  const std::vector<int64_t> mix = {1, 63, 64, 65, 200, 0, 130, 7, 128};
  std::vector<Case> cases;
  {
    Case c;
    c.name = "fast bf16 128 vmajor pool";
    c.lens = mix;
    c.vmajor = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 kmajor plain";
    c.lens = mix;
    c.fused = false;
    c.l2 = false;
    c.gate_in_dtype = true;
    c.pad = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 gates x10";
    c.lens = {300, 17};
    c.fused = false;
    c.gscale = 10.f;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 gates x0.01";
    c.lens = {300, 17};
    c.fused = false;
    c.gscale = 0.01f;
    c.H = 4;
    cases.push_back(c);
  }
  {
    Case c;  // g = 0 (no decay): the state grows the most; issue 11's bf16 target is 2.4e-3 here too
    c.name = "fast bf16 128 g=0";
    c.lens = {2000, 300};
    c.fused = false;
    c.gscale = 0.f;
    // With the resets (g = -1e4 every 89 tokens): chunks whose last quarter or first rows decay
    // weakly take the extra precision too (chain_precise.cuh; the model: 2.73e-3 -> 2.21e-3).
    c.tol = 2.4e-3;
    cases.push_back(c);
    c.tol = 5e-3;
    // Repeated tokens without decay: 4 keys per head, and one key with 5% noise (the inverse's
    // worst case in tools/precision/kkt_inverse.py).
    c.name = "fast bf16 128 repeated keys";
    c.lens = {700, 130};
    c.key_set = 4;
    cases.push_back(c);
    c.name = "fast bf16 128 near-identical keys";
    c.key_set = 1;
    c.key_noise = 0.05f;
    cases.push_back(c);
  }
  // fp16 on the tensor-core path: operands and intermediates in fp16 (issue 11's target 5e-4; SPEC's
  // bound is 1e-3), both head sizes, pool and plain states, gates x10 / x0.01 / g = 0 (with the
  // unfused gates' rare resets); the split below and the fused-o variants at the end.
  constexpr double kFp16Target = 5e-4;
  {
    Case c;
    c.name = "fast fp16 64 vmajor";
    c.lens = mix;
    c.dt = DType::kFloat16;
    c.K = c.V = 64;
    c.vmajor = true;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast fp16 128 kmajor";  // fp16 q, k read in place, fp16 o with the wgmma fwd_h
    c.lens = mix;
    c.dt = DType::kFloat16;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  for (int kd : {64, 128})
    for (float gs : {10.f, 0.01f, 0.f}) {
      Case c;
      c.name = "fast fp16 " + std::to_string(kd) + (gs == 10.f ? " gates x10" : gs == 0.f ? " g=0" : " gates x0.01");
      c.lens = {300, 17};
      c.K = c.V = kd;
      c.dt = DType::kFloat16;
      c.fused = false;
      c.gscale = gs;
      c.pool = kd == 128;
      c.l2 = gs != 0.f;
      c.tol = kFp16Target;
      cases.push_back(c);
    }
  {
    Case c;  // the exact split (chunk/split.cuh): 25 chunks in 4 parts of 8 on an H200
    c.name = "fast bf16 128 split 4 parts";
    c.lens = {1600};
    c.H = 1;
    c.HV = 2;
    cases.push_back(c);
  }
  {
    Case c;  // two unequal parts (47 + 19 chunks at HV = 32): part 0 runs beside the summary pass
    c.name = "fast bf16 128 split 2 parts";
    c.lens = {4200};
    c.H = 16;
    c.HV = 32;
    cases.push_back(c);
  }
  // K = V = 64 on the chain padded to 128 columns (fwd_h_wgmma.cuh's kDK), on an H200: the split
  // (7 parts at HV = 4: the summary pass, the scan, the fused chain), two unequal parts of one
  // sequence (HV = 64: part 0 beside the summary pass), g = 0 through the split (6 parts), and
  // one-chunk sequences in many waves (the serial chain).
  {
    Case c;
    c.name = "fast bf16 64 split many parts";
    c.lens = {3000, 77};
    c.H = 2;
    c.HV = 4;
    c.K = c.V = 64;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 64 split 2 parts vmajor";
    c.lens = {4200};
    c.H = 16;
    c.HV = 64;
    c.K = c.V = 64;
    c.vmajor = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 64 split g=0";
    c.lens = {3000};
    c.H = 1;
    c.HV = 2;
    c.K = c.V = 64;
    c.fused = false;
    c.gscale = 0.f;
    c.gate_extremes = false;
    c.tol = 2.4e-3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast fp16 64 serial 300x64";
    c.lens = std::vector<int64_t>(300, 64);
    c.lens[7] = 0;
    c.lens[100] = 1;
    c.H = 4;
    c.HV = 8;
    c.K = c.V = 64;
    c.dt = DType::kFloat16;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast fp16 128 split vmajor";
    c.lens = {1600};
    c.H = 1;
    c.HV = 2;
    c.dt = DType::kFloat16;
    c.vmajor = true;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  {
    Case c;  // g = 0: nothing decays, the state (and its fp16 h images) grows the most
    c.name = "fast fp16 128 split g=0";
    c.lens = {1600};
    c.H = 1;
    c.HV = 2;
    c.dt = DType::kFloat16;
    c.fused = false;
    c.gscale = 0.f;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  // fp32 inputs with K = V = 128 or 64 run the tensor cores on fp16 copies (backend.cu): held to
  // fp16's bound (SPEC allows 2e-3 where tensor cores run in tf32); other sizes stay exact.
  {
    Case c;
    c.name = "fp32 128";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.tol = 1e-3;
    c.pad = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fp32 64 vmajor";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.K = c.V = 64;
    c.tol = 1e-3;
    c.vmajor = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "exact fp32 96";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.K = c.V = 96;
    c.tol = 1e-4;
    c.pad = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "exact bf16 256";
    c.lens = {70, 5, 129};
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "exact bf16 K128 V64";
    c.lens = {70, 5, 129};
    c.V = 64;
    c.vmajor = true;
    cases.push_back(c);
  }
  // The stage API's G is fp32: after g = -1e4 its small differences keep ~1e-3 absolute error
  // (ulp(1e4)), inherent to that format, hence a looser bound than the forward's 1e-4.
  {
    Case c;
    c.name = "stages fp32 128";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.tol = 5e-4;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fp32 128 extreme gates";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.l2 = false;
    c.fused = false;
    c.tol = 1e-3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fp32 128 g=0";
    c.lens = {1600, 5, 300};
    c.dt = DType::kFloat32;
    c.gscale = 0.f;
    c.tol = 1e-3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "stages bf16 64 vmajor";
    c.lens = mix;
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.K = c.V = 64;
    c.vmajor = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "stages bf16 256";
    c.lens = {70, 129};
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    cases.push_back(c);
  }
  for (int kd : {64, 128, 256})
    for (bool vm : {false, true}) {
      Case c;
      c.name = "decode bf16 " + std::to_string(kd) + (vm ? " vmajor" : " kmajor");
      c.lens = {1, 1, 3, 0, 1, 2, 1};
      c.K = c.V = kd;
      c.vmajor = vm;
      c.decode = true;
      cases.push_back(c);
      // The same on bf16 / fp16 pools with padded rows (the decode kernels' 16-bit paths).
      for (DType sdt : {DType::kBFloat16, DType::kFloat16}) {
        c.name = std::string("decode pool ") + dtype_str(sdt) + " " + std::to_string(kd) + (vm ? " vmajor" : " kmajor");
        c.sdt = sdt;
        c.row_pad = 8;
        cases.push_back(c);
      }
    }
  append_decode_and_pool_cases(cases, mix, quick);
  // More (sequence, head, slice) blocks than SMs, short sequences: the serial fused chain, as the
  // heuristics choose it (the cases above have few blocks: their o is fused by a second warpgroup;
  // the chain storing h and v_new for fwd_o: the " seq" and "unfused" cases below).
  {
    Case c;
    c.name = "fast bf16 128 140 seqs";
    for (int n = 0; n < 140; ++n) c.lens.push_back(1 + (n * 37) % 150);
    c.vmajor = true;
    cases.push_back(c);
  }
  // Prefill checkpoints on every path of the forward: the wgmma chain (o fused on an H200; the
  // chain storing h and v_new for fwd_o: tests/test_checkpoints.cpp), with a bf16 pool, the split's
  // final pass (4 parts of 8 chunks: the boundaries fall in parts 0 and 1), the mma.sync chain with
  // an fp16 pool, the exact stages.
  {
    Case c;
    c.name = "ckpt bf16 128 vmajor oob";
    c.lens = {300, 0, 128, 700, 64, 17};
    c.vmajor = true;
    c.oob = true;
    c.ck_every = 2;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "ckpt bf16 128 pool bf16";
    c.lens = {300, 0, 128, 700, 64, 17};
    c.sdt = DType::kBFloat16;
    c.row_pad = 8;
    c.ck_every = 3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "ckpt bf16 128 split";
    c.lens = {1600};
    c.H = 1;
    c.HV = 2;
    c.ck_every = 3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "ckpt fp16 64 pool fp16 vmajor";
    c.lens = {300, 0, 128, 700, 64, 17};
    c.dt = DType::kFloat16;
    c.K = c.V = 64;
    c.sdt = DType::kFloat16;
    c.row_pad = 8;
    c.vmajor = true;
    c.ck_every = 1;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "ckpt exact fp32 64x100";
    c.lens = {300, 0, 128, 200};
    c.dt = DType::kFloat32;
    c.K = 64;
    c.V = 100;
    c.tol = 1e-4;
    c.ck_every = 1;
    cases.push_back(c);
  }
  // The first two (D = 128, few chains: the heuristics fuse o into the chain) with the chain
  // storing h and v_new and fwd_o after it instead.
  for (int i = 0; i < 2; ++i) {
    Case c = cases[i];
    c.name += " seq";
    c.fwd_o_after = true;
    cases.push_back(c);
  }
  // Every tensor-core case of D = 128 again with o computed in the chain (cfg.fuse_o).
  const size_t listed = cases.size();
  for (size_t i = 0; i < listed; ++i) {
    const Case& base = cases[i];
    // (16-bit pools: the backend copies their rows to fp32 around fast_forward, which these
    // variants call directly; that path is checked by the default cases.)
    if (base.decode || base.stages || base.fwd_o_after || base.K != 128 || base.V != 128 ||
        base.dt == DType::kFloat32 || base.sdt != DType::kFloat32)
      continue;
    Case c = base;
    c.name += " fused";
    c.fuse_o = true;
    cases.push_back(c);
  }
  // (Last in the list: every case before draws the same random inputs as without these two.)
  Case g0_long;
  {
    // g = 0 without the resets above (the state remembers every token, as in the bench's
    // g0-1x32k), o fused (on an H200 the heuristics split this sequence in 6 parts: the summary
    // pass, then the fused chain): issue 11's bf16 target, which only the extra precision on
    // weakly decaying chunks (chunk/chain_precise.cuh) reaches. CPU model
    // (tools/precision/emulate_roundings.py, T = 3008): 3.79e-3 all bf16, 2.60e-3 with W and vs
    // hi + lo (the unfused o), 2.16e-3 with q h_lo too.
    Case c;
    c.name = "fast bf16 128 g=0 long";
    c.lens = {3000};
    c.H = 1;
    c.HV = 2;
    c.fused = false;
    c.gscale = 0.f;
    c.gate_extremes = false;
    c.fuse_o = true;
    c.tol = 2.4e-3;
    cases.push_back(c);
    g0_long = c;
  }
  // g = 0 long with the heuristics' split but the chain storing h and v_new, fwd_o after it. With
  // bf16 operands (W and vs hi + lo, fwd_o's q h from the bf16 h image) the model gave 2.60e-3
  // (H200, session 36: 2.46e-3), held to 3e-3; with fp16 operands (GDN_FP16_OPERANDS_D128) every
  // operand of both kernels carries 11 bits (1.71e-3), held to issue 11's 2.4e-3 like the fused form.
  g0_long.name += " unfused";
  g0_long.fuse_o = false;
  g0_long.fwd_o_after = true;
  g0_long.tol = cuda::kFp16OperandsD128 ? 2.4e-3 : 3.0e-3;
  cases.push_back(g0_long);
  // Gates x2 (~1.6 per token, a model's fast-decaying heads): a chunk's gates span ~100, past the
  // e^+-80 of the factors about the chunk, so P's gates take the second form, about each warp's
  // first row (kkt_solve, chain_o.cuh, fwd_o); the resets among the unfused gates the
  // per-element form. o in the chain (the heuristics' choice here), then in fwd_o.
  {
    Case c;
    c.name = "fast bf16 128 gates x2 fused";
    c.lens = {300, 17, 130};
    c.fused = false;
    c.gscale = 2.f;
    c.fuse_o = true;
    cases.push_back(c);
    c.name = "fast bf16 128 gates x2";
    c.fuse_o = false;
    c.fwd_o_after = true;
    cases.push_back(c);
  }
  // fp16 at g = 0 on a long sequence: issue 11's fp16 target, which the fp16 kernels reach by the
  // lo passes of weakly decaying chunks (chain_precise.cuh; H200: 2.72e-4, 4.75e-4 without them).
  // The CPU model (tools/precision/emulate_roundings.py --gates zero --base fp16): 4.77e-4 at
  // T = 16384 without the lo passes, saturating. Listed after the others: those draw the same inputs.
  {
    Case c;
    c.name = "fast fp16 128 g=0 long";
    c.lens = {8192};
    c.H = 1;
    c.HV = 2;
    c.dt = DType::kFloat16;
    c.fused = false;
    c.gscale = 0.f;
    c.gate_extremes = false;
    c.tol = kFp16Target;
    cases.push_back(c);
  }
  // bf16 at head size 64 and g = 0 (with the unfused gates' resets). Until session 37 D = 64 ran the
  // mma.sync kernels' WY form (u - w h, no A_s applied last), whose roundings built up as long as
  // the state remembers: 3.23e-3 with bf16 operands (H200, session 34; the model, --dim 64 --form wy:
  // 4.0e-3), 1.70e-3 with fp16 ones. Now it runs D = 128's chain (A_s applied last) with fp16
  // operands (heuristics.h; bf16 operands with the lo passes measured 2.32e-3 there, session 37):
  // held to issue 11's bf16 2.4e-3.
  {
    Case c;
    c.name = "fast bf16 64 g=0";
    c.lens = {2000, 300};
    c.K = c.V = 64;
    c.fused = false;
    c.gscale = 0.f;
    c.tol = 2.4e-3;
    cases.push_back(c);
  }
  // One-chunk sequences at g = 0 from initial states (a 256x64-like batch): the heuristics take
  // the serial fused chain (q h with h's lo part, P v_new from the v staging); with fwd_o (its
  // " seq"-like path before session 32's heuristics) q h read the bf16 h image and P v_new the v_new
  // image with its lo part (weakly decaying chunks). The CPU model (emulate_roundings.py --tokens 64
  // --gates zero --set W=hilo,vs=hilo) puts that at 2.39-2.46e-3 without the lo part, 1.73-1.79e-3
  // with it (H200, session 28: 2.40e-3 -> 2.18e-3). Held to issue 11's bf16 2.4e-3.
  {
    Case c;
    c.name = "fast bf16 128 g=0 one-chunk";
    c.lens = std::vector<int64_t>(46, 64);
    c.lens.push_back(40);
    c.lens.push_back(17);
    c.fused = false;
    c.gscale = 0.f;
    c.gate_extremes = false;
    c.tol = 2.4e-3;
    cases.push_back(c);
  }
  // Every case with o in the chain again in the chain's serial form (cfg.fuse_o_serial: one
  // warpgroup per block doing each chunk's chain and then its o; the heuristics take it for short
  // sequences in several waves). Listed last: the cases before draw the same inputs as without them.
  const size_t with_fused = cases.size();
  for (size_t i = 0; i < with_fused; ++i) {
    if (!cases[i].fuse_o) continue;
    Case c = cases[i];
    c.name += " serial";
    c.fuse_o_serial = true;
    cases.push_back(c);
  }
  // K = V = 256 on the storing chain with two chain warpgroups (fwd_h_wgmma.cuh) and fwd_o by V
  // halves (the library's choice at 256; "exact bf16 256" above is its first case): no decay (the
  // lo passes of weakly decaying chunks), fp16 into a V-major pool with checkpoints, GVA with
  // empty, one-token and partial-chunk sequences. Listed after the serial copies: every case before
  // draws the inputs it drew without them.
  {
    Case c;
    c.name = "fast bf16 256 g=0";
    c.lens = {1600, 5, 300};
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    c.gscale = 0.f;
    c.gate_extremes = false;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast fp16 256 vmajor checkpoints";
    c.lens = {300, 1, 130, 64};
    c.dt = DType::kFloat16;
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    c.vmajor = true;
    c.ck_every = 2;
    c.tol = 1e-3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 256 GVA";
    c.lens = {64, 1, 0, 200, 63};
    c.K = c.V = 256;
    c.H = 2;
    c.HV = 8;
    c.idx32 = true;
    c.row_pad = 8;
    cases.push_back(c);
  }
  // K = V = 256 split in two parts (one sequence at HV = 2: 8 chain blocks): 66 chunks as 47 + 19,
  // or 33 + 33 where every head's state decays fast before the middle (the bench's gates); g = 0
  // (the summary pass runs all of part 0, from the initial state); fp16 into a V-major pool with
  // checkpoints across the parts' boundary.
  {
    Case c;
    c.name = "fast bf16 256 split 2 parts";
    c.lens = {4200};
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast bf16 256 split g=0";
    c.lens = {3000};
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    c.gscale = 0.f;
    c.gate_extremes = false;
    c.tol = 2.4e-3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fast fp16 256 split vmajor checkpoints";
    c.lens = {2600};
    c.dt = DType::kFloat16;
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    c.vmajor = true;
    c.ck_every = 4;
    c.tol = 1e-3;
    cases.push_back(c);
  }
  return cases;
}

}  // namespace check
}  // namespace gdn
