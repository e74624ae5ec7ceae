// The device check's cases of the decode step and of state pools (split from case_list.cu, in the
// same order): the 16-bit rows kernel's shapes, 16-bit pools on the chunked forward, pool rows off
// 16-byte alignment, many items per warp, head sizes without a tuned kernel, speculative decoding's
// verify (per-token states) and the large decode batches.
#include "check.h"
#include "cuda/decode/recurrent.cuh"

namespace gdn {
namespace check {

void append_decode_and_pool_cases(std::vector<Case>& cases, const std::vector<int64_t>& mix, bool quick) {
  // Every candidate shape of the rows kernel for 16-bit pools (kRows16Shapes), not only the
  // heuristics' choice: both layouts and dtypes, padded rows, empty and multi-token sequences, and
  // vLLM's verify on a bf16 pool (each token's state stored, part by part).
  for (int i = 0; i < int(sizeof(cuda::kRows16Shapes) / sizeof(cuda::RowsShape)); ++i)
    for (bool vm : {false, true}) {
      const std::string tail = std::string(vm ? " vmajor" : " kmajor") + " shape " + rows_shape_name(i);
      for (DType sdt : {DType::kBFloat16, DType::kFloat16}) {
        Case c;
        c.name = std::string("decode pool ") + dtype_str(sdt) + " 128" + tail;
        c.lens = {1, 1, 3, 0, 1, 2, 1};
        c.vmajor = vm;
        c.decode = true;
        c.sdt = sdt;
        c.row_pad = 8;
        c.rows_shape = i;
        cases.push_back(c);
      }
      {  // many one-token blocks (80 x 32: about 5 waves of an H200's 528 block slots), padded rows
        Case c;
        c.name = "decode pool bfloat16 128 many" + tail;
        c.lens.assign(80, 1);
        c.H = 16, c.HV = 32;
        c.vmajor = vm;
        c.decode = true;
        c.sdt = DType::kBFloat16;
        c.row_pad = 8;
        c.rows_shape = i;
        cases.push_back(c);
      }
      Case c;
      c.name = "verify pool bfloat16 128" + tail;
      for (int n = 0; n < 40; ++n) c.lens.push_back(n % 9 == 4 ? 0 : 1 + n % 4);
      c.vmajor = vm;
      c.decode = true;
      c.spec_tokens = 4;
      c.sdt = DType::kBFloat16;
      c.row_pad = 8;
      c.idx32 = vm;
      c.rows_shape = i;
      cases.push_back(c);
    }
  // bf16 / fp16 pools on the chunked forward: the tensor-core path through its fp32 copy of the
  // rows (D = 128 wgmma, D = 64 mma), and the exact stages (K != V) natively.
  for (DType sdt : {DType::kBFloat16, DType::kFloat16})
    for (int kd : {64, 128}) {
      Case c;
      c.name = std::string("prefill pool ") + dtype_str(sdt) + " " + std::to_string(kd);
      c.lens = {70, 1, 0, 200};
      c.K = c.V = kd;
      c.sdt = sdt;
      c.row_pad = 8;
      c.vmajor = kd == 64;
      cases.push_back(c);
    }
  {
    Case c;
    c.name = "prefill pool bfloat16 exact 64x128";
    c.lens = {70, 3};
    c.K = 64;
    c.V = 128;
    c.sdt = DType::kBFloat16;
    c.row_pad = 8;
    cases.push_back(c);
  }
  // Pool rows off 16-byte alignment: odd row strides at the tuned sizes (the decode step's general
  // kernel, the tensor-core forward's element-wise state accesses and its 16-bit copy), verify on
  // such a pool, and small heads whose packed rows are 8 bytes (K = V = 1, HV = 2) or 60 (3 x 5).
  for (int kd : {128, 64}) {
    Case c;
    c.name = "decode pool odd stride " + std::to_string(kd);
    c.lens = {1, 1, 3, 0, 1, 2, 1};
    c.K = c.V = kd;
    c.vmajor = kd == 64;
    c.row_pad = 1;
    c.decode = c.oob = true;
    cases.push_back(c);
    c.name = "verify pool odd stride " + std::to_string(kd);
    c.spec_tokens = 3;
    cases.push_back(c);
    c.name = "prefill pool odd stride " + std::to_string(kd);
    c.lens = {70, 1, 0, 200};
    c.decode = c.oob = false;
    c.spec_tokens = 0;
    cases.push_back(c);
    c.name = "prefill pool bfloat16 odd stride " + std::to_string(kd);
    c.sdt = DType::kBFloat16;
    c.row_pad = 3;
    cases.push_back(c);
  }
  for (bool decode : {false, true})
    for (const auto& kv : {std::pair<int, int>{1, 1}, {3, 5}}) {
      Case c;
      c.name = std::string(decode ? "decode" : "prefill") + " fp32 small heads " + std::to_string(kv.first) + "x" +
               std::to_string(kv.second);
      c.lens = decode ? std::vector<int64_t>{1, 2, 0, 1} : std::vector<int64_t>{70, 1, 0, 130};
      c.K = kv.first;
      c.V = kv.second;
      c.H = 1;
      c.HV = kv.first == 1 ? 2 : 1;
      c.dt = DType::kFloat32;
      c.decode = decode;
      c.vmajor = kv.first == 3;
      c.tol = 1e-4;
      cases.push_back(c);
    }
  {
    Case c;
    c.name = "decode fp32 128 plain";
    c.lens = {1, 4, 1};
    c.dt = DType::kFloat32;
    c.decode = true;
    c.fused = false;
    c.tol = 1e-5;
    cases.push_back(c);
  }
  // Many items per warp (the rings wrap around many times), GVA 4, 0-3 tokens per sequence, pool
  // indices out of range on both sides, int32 and int64 indices.
  for (bool vm : {false, true}) {
    Case c;
    c.name = std::string("decode bf16 128 ") + (vm ? "vmajor" : "kmajor") + " many";
    for (int n = 0; n < 160; ++n) c.lens.push_back(n % 5 == 0 ? 0 : 1 + n % 3);
    c.H = 4;
    c.HV = 16;
    c.vmajor = vm;
    c.decode = true;
    c.oob = true;
    c.idx32 = !vm;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "decode fp32 128 vmajor plain many";
    for (int n = 0; n < 64; ++n) c.lens.push_back(n % 4);
    c.H = c.HV = 8;
    c.dt = DType::kFloat32;
    c.vmajor = true;
    c.decode = true;
    c.fused = false;
    c.l2 = false;
    c.oob = true;
    c.tol = 1e-5;
    cases.push_back(c);
  }
  // Head sizes without a tuned kernel (fla's 32, 60, 100; the edges 1 and 256): the exact stages
  // with masked columns and the general decode kernel, pools with out-of-range indices.
  for (bool vm : {false, true}) {
    Case c;
    c.name = std::string("exact bf16 60x100 ") + (vm ? "vmajor" : "kmajor");
    c.lens = mix;
    c.K = 60;
    c.V = 100;
    c.vmajor = vm;
    c.oob = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "stages fp32 100x33";
    c.lens = mix;
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.dt = DType::kFloat32;
    c.K = 100;
    c.V = 33;
    c.tol = 5e-4;  // the stage API's fp32 G, as "stages fp32 128" (1.02e-4 measured at 00db5bb)
    cases.push_back(c);
  }
  for (const auto& kv : {std::pair<int, int>{100, 60}, {32, 256}, {1, 33}, {256, 17}})
    for (bool vm : {false, true}) {
      Case c;
      c.name =
          "decode bf16 " + std::to_string(kv.first) + "x" + std::to_string(kv.second) + (vm ? " vmajor" : " kmajor");
      for (int n = 0; n < 40; ++n) c.lens.push_back(n % 5 == 0 ? 0 : 1 + n % 3);
      c.K = kv.first;
      c.V = kv.second;
      c.vmajor = vm;
      c.decode = true;
      c.oob = true;
      c.idx32 = vm;
      cases.push_back(c);
    }
  // Speculative decoding's verify (per-token states), both kernels and layouts, padding rows (the
  // null slot 0), zero-length sequences, and (oob) unchecked indices clamped on the device.
  for (int kd : {128, 64})
    for (bool vm : {false, true}) {
      Case c;
      c.name = "verify bf16 " + std::to_string(kd) + (vm ? " vmajor" : " kmajor");
      for (int n = 0; n < 40; ++n) c.lens.push_back(n % 9 == 4 ? 0 : 1 + n % 4);
      c.K = c.V = kd;
      c.vmajor = vm;
      c.decode = true;
      c.spec_tokens = 4;
      c.oob = kd == 64;
      c.idx32 = vm;
      cases.push_back(c);
    }
  for (bool vm : {false, true}) {  // the general decode kernel's per-token states
    Case c;
    c.name = std::string("verify bf16 100x60 ") + (vm ? "vmajor" : "kmajor");
    for (int n = 0; n < 40; ++n) c.lens.push_back(n % 9 == 4 ? 0 : 1 + n % 4);
    c.K = 100;
    c.V = 60;
    c.vmajor = vm;
    c.decode = true;
    c.spec_tokens = 4;
    c.oob = vm;
    c.idx32 = !vm;
    cases.push_back(c);
  }
  if (!quick) {
    {
      Case c;
      c.name = "fast bf16 T=131072";
      c.lens = {131072};
      c.H = 1;
      c.HV = 2;
      c.pool = false;
      cases.push_back(c);
    }
    {
      Case c;
      c.name = "fast bf16 4096 seqs HV=32";
      c.H = 16;
      c.HV = 32;
      c.K = c.V = 64;
      c.pool = false;
      for (int n = 0; n < 4096; ++n) c.lens.push_back(1 + (n * 37) % 16);
      cases.push_back(c);
    }
    {
      Case c;
      c.name = "decode 4096 pool 8192";
      c.decode = true;
      c.H = 8;
      c.HV = 16;
      c.K = c.V = 64;
      c.lens.assign(4096, 1);
      cases.push_back(c);
    }
  }
}

}  // namespace check
}  // namespace gdn
