// The latency of the chain's wgmma groups (fwd_h_wgmma.cuh), each issued and waited for alone,
// and of the orders a look-ahead U would issue them in (docs/perf.md, "Session 51"): the numbers a
// model of the chain's per-chunk dependent path needs, which ncu's stall samples give only as
// shares. Not part of the library; built and run by scripts/device.sh's `probe` step:
//   nvcc -std=c++17 -arch=sm_90a -O3 -I include -I src tools/wgmma_probe/wgmma_probe.cu -o probe
//   ./probe            one block (one warpgroup) per SM, then two per SM; cycles per group
// Every product reads shared memory of small random values in the chain's SW128 layouts; the
// groups are the chain's own (the same wrappers, the same k-steps), the data independent of the
// results (timing only).
#include <cuda_runtime.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "cuda/core/fragments.cuh"  // pack2
#include "cuda/ptx/wgmma.cuh"

using namespace gdn::cuda;
using E = __nv_bfloat16;

namespace {

constexpr int kIters = 2000;
constexpr int kSmem = 64 * 1024;  // four 16 KB tiles: B of U / the update (k), A_s, kk, A of kk's SS

// The groups. Each test's body runs once per iteration; `kTests` names them for the report.
enum Test {
  kU,            // -U^T = -E(S^T) k^T: 8 x m64n64k16, A from registers, B K-major
  kVNew,         // v_new^T = W^T A_s^T: 12 x m64n32k16 (two accumulators)
  kUpdate,       // S^T += vs^T k: 4 x m64n128k16, B MN-major
  kCorr,         // the look-ahead's correction vs^T (k_c k_{c+1}^T): 4 x m64n64k16, B MN-major
  kCorrHiLo,     // the same with kk's lo part: 8
  kKK,           // k_{c+1} k_c^T: 8 x m64n64k16, both from shared memory
  kPathToday,    // U, wait, v_new, wait, update, wait: today's tensor path, no ALU
  kUpdThenCorr,  // the update and then the correction issued as two groups; time to the correction's end
  kPathAhead,    // corr, wait, v_new, wait (the look-ahead's path) with the update + U behind v_new
  // The chunk's schedules with the chain's ALU stretches emulated (alu(): independent FFMA, about
  // the instructions a warp issues there in today's SASS: W 82, vs 49, E(S) staging 40, the row
  // factors 34 in U's shadow, the update's decays 64 in v_new's; __syncthreads for the barrier):
  kChunkToday,      // U | factors | wait | W | v_new | decays | wait | vs | update | wait | E(S) | barrier
  kChunkAhead,      // corr, update_{c-1} | wait<1> | W | v_new | wait<1> | E(S) | U_{c+1}, kk | wait<1> | vs
  kChunkAheadNoKK,  // the same without kk's product (kk formed elsewhere)
  kTests
};
const char* kNames[kTests] = {"U (8 m64n64k16 rs)",
                              "v_new (12 m64n32k16 rs)",
                              "update (4 m64n128k16 tb)",
                              "corr (4 m64n64k16 tb)",
                              "corr hi+lo (8)",
                              "kk (8 m64n64k16 ss)",
                              "path today: U|vnew|upd",
                              "upd then corr: corr done",
                              "ahead: corr|vnew, upd+U behind",
                              "chunk today (ALU emulated)",
                              "chunk ahead (ALU emulated)",
                              "chunk ahead, no kk"};

template <int kTest>
__global__ void __launch_bounds__(128, 1) probe_kernel(long long* cycles, float* sink, uint32_t mask) {
  extern __shared__ __align__(16) char smem_raw[];
  const uint32_t base = smem_u32(smem_raw) + align_1024_offset(smem_raw);
  const int tid = threadIdx.x;
  // Small random values (the tensor cores' time does not depend on them; zeros might save power).
  for (int i = tid; i < kSmem / 2; i += 128) {
    const float x = ((i * 2654435761u) >> 20) * (1.f / 4096.f) - 0.5f;
    const __nv_bfloat16 h = __float2bfloat16(x);
    asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(base + 2 * i), "h"(*reinterpret_cast<const unsigned short*>(&h)));
  }
  __syncthreads();
  const uint32_t k_s = base, a_s = base + 16384, kk_s = base + 32768, q_s = base + 49152;
  uint32_t fa[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) fa[i] = pack2<E>(0.01f * (tid + i), -0.02f * i);
  float acc[32], acc2[32], left[16], right[16], st[64];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = acc2[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) left[i] = right[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) st[i] = 0.f;
  const WgTile kt = wg_tile(k_s, 16, 1024), at = wg_tile(a_s, 16, 1024), kkt = wg_tile(kk_s, 8192, 1024);
  const WgTile ktb = wg_tile(k_s, 8192, 1024), qt = wg_tile(q_s, 16, 1024);
  auto issue_u = [&] {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
      wgmma_m64n64_rs<E, true>(acc, &fa[4 * (ks % 4)], kt.at((ks / 4) * 8192 + (ks % 4) * 32), ks > 0);
  };
  auto issue_u2 = [&] {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
      wgmma_m64n64_rs<E, true>(acc2, &fa[4 * (ks % 4)], kt.at((ks / 4) * 8192 + (ks % 4) * 32), ks > 0);
  };
  auto pin_acc = [&] {
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(acc[i]);
  };
  auto issue_vnew = [&] {
#pragma unroll
    for (int lo = 0; lo < 2; ++lo) {
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) wgmma_m64n32_rs<E>(left, &fa[4 * ks], at.at(lo * 8192 + ks * 32), lo + ks > 0);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_m64n32_rs<E>(right, &fa[4 * ks], at.at(lo * 8192 + 4096 + ks * 32), lo + ks > 0);
    }
  };
  auto issue_update = [&] {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_m64n128_tb<E>(st, &fa[4 * ks], ktb.at(ks * 2048));
  };
  auto issue_corr = [&](int parts) {
    for (int p = 0; p < parts; ++p)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_tb<E>(acc, &fa[4 * ks], kkt.at(p * 8192 + ks * 2048));
  };
  auto issue_kk = [&] {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
      wgmma_m64n64_ss<E, 0>(acc, qt.at((ks / 4) * 8192 + (ks % 4) * 32), kt.at((ks / 4) * 8192 + (ks % 4) * 32),
                            ks > 0);
  };
  // n instructions of ALU work a warp, as the chain's stretches between its wgmma groups issue,
  // on data dependences that ptxas keeps (pins order only nvcc's code): the stretch starts from
  // `seed` (a value the wait before it completed) and, with `feed`, the A fragments of every later
  // product depend on its result (mask is 0 at run time: the values do not change).
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = 0.001f * (tid + i);
  auto alu = [&](auto n, float seed, bool feed) {
    x[0] += seed;
#pragma unroll
    for (int i = 0; i < decltype(n)::value; ++i) x[i % 8] = fmaf(x[i % 8], x[(i + 1) % 8], 1e-7f);
    if (feed) {
#pragma unroll
      for (int i = 0; i < 16; ++i) fa[i] ^= __float_as_uint(x[i % 8]) & mask;
    }
  };
  using A34 = std::integral_constant<int, 34>;
  using A40 = std::integral_constant<int, 40>;
  using A49 = std::integral_constant<int, 49>;
  using A64 = std::integral_constant<int, 64>;
  using A82 = std::integral_constant<int, 82>;
  long long t0 = 0;
  for (int it = -16; it < kIters; ++it) {  // (16 warm-up iterations)
    if (it == 0) {
      __syncwarp();
      t0 = clock64();
    }
    wgmma_fence();
    if constexpr (kTest == kU) {
      issue_u(), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kVNew) {
      issue_vnew(), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kUpdate) {
      issue_update(), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kCorr) {
      issue_corr(1), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kCorrHiLo) {
      issue_corr(2), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kKK) {
      issue_kk(), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kPathToday) {
      issue_u(), wgmma_commit(), wgmma_wait<0>();
      wgmma_fence(), issue_vnew(), wgmma_commit(), wgmma_wait<0>();
      wgmma_fence(), issue_update(), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kUpdThenCorr) {
      issue_update(), wgmma_commit();
      issue_corr(1), wgmma_commit(), wgmma_wait<0>();
    } else if constexpr (kTest == kPathAhead) {
      // The look-ahead's one-warpgroup order per chunk: the correction, waited for; v_new issued;
      // the update of the chunk before and the next chunk's U product behind it; v_new waited
      // for (wait<1>: the update and U still in flight), the rest waited for before the next
      // correction's issue.
      // (U into its own accumulator: no register of an in-flight group is touched before its wait)
      wgmma_wait<0>();
      wgmma_fence(), issue_corr(1), wgmma_commit(), wgmma_wait<0>();
      pin_acc();
      wgmma_fence(), issue_vnew(), wgmma_commit();
      issue_update(), issue_u2(), wgmma_commit(), wgmma_wait<1>();
#pragma unroll
      for (int i = 0; i < 16; ++i) pin(left[i]), pin(right[i]);
    }
    if constexpr (kTest == kChunkToday) {
      issue_u(), wgmma_commit();
      alu(A34{}, 0.f, false);  // the row factors (no dependence on the products)
      wgmma_wait<0>(), pin_acc();
      alu(A82{}, acc[0], true);  // W
      wgmma_fence(), issue_vnew(), wgmma_commit();
      alu(A64{}, 0.f, false);  // the decays
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 16; ++i) pin(left[i]), pin(right[i]);
      alu(A49{}, left[0] + right[0], true);  // vs
      wgmma_fence(), issue_update(), wgmma_commit(), wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) pin(st[i]);
      alu(A40{}, st[0], true);  // E(S)
      __syncthreads();
    } else if constexpr (kTest == kChunkAhead || kTest == kChunkAheadNoKK) {
      // (U_{c+1} into acc2; kk into acc, dead once W is formed: a third accumulator made ptxas
      // serialize every wgmma, C7512, and the kernel has less room still)
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 32; ++i) pin(acc2[i]);
      alu(A34{}, acc2[0], false);            // acc = exp(G_last) U_{c+1} (32 FMUL)
      if constexpr (kTest == kChunkAhead) {  // kk -> hi + lo -> its shared-memory image, fenced
        alu(A82{}, acc[0], false);
        if ((__float_as_uint(x[0]) & mask) != 0u) sink[0] = x[1];  // (the image's stores)
        fence_proxy_async();
        __syncwarp();
      }
      acc[0] += x[0] * __uint_as_float(mask);  // (the correction accumulates on what they formed)
      wgmma_fence(), issue_corr(1), wgmma_commit();
      issue_update(), wgmma_commit();
      alu(A34{}, 0.f, false);  // the row factors
      wgmma_wait<1>(), pin_acc();
      alu(A82{}, acc[0], true);  // W
      wgmma_fence(), issue_vnew(), wgmma_commit();
      alu(A64{}, 0.f, false);  // the decays
      wgmma_wait<1>();
#pragma unroll
      for (int i = 0; i < 64; ++i) pin(st[i]);
      alu(A40{}, st[0], true);  // E(S_c): U_{c+1}'s A
      wgmma_fence(), issue_u2();
      if constexpr (kTest == kChunkAhead) issue_kk();
      wgmma_commit();
      wgmma_wait<1>();
#pragma unroll
      for (int i = 0; i < 16; ++i) pin(left[i]), pin(right[i]);
      alu(A49{}, left[0] + right[0], true);  // vs: the next correction's and update's A
    }
    if constexpr (kTest < kPathAhead) {
      pin_acc();
#pragma unroll
      for (int i = 0; i < 16; ++i) pin(left[i]), pin(right[i]);
#pragma unroll
      for (int i = 0; i < 64; ++i) pin(st[i]);
    }
  }
  wgmma_wait<0>();
  const long long t1 = clock64();
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) s += acc[i] + acc2[i];
#pragma unroll
  for (int i = 0; i < 8; ++i) s += x[i];
#pragma unroll
  for (int i = 0; i < 16; ++i) s += left[i] + right[i];
#pragma unroll
  for (int i = 0; i < 64; ++i) s += st[i];
  sink[blockIdx.x * 128 + tid] = s;
}

template <int kTest>
void run(int sms, int per_sm, int clock_khz) {
  const int blocks = sms * per_sm;
  long long* cycles;
  float* sink;
  cudaMalloc(&cycles, blocks * sizeof(long long));
  cudaMalloc(&sink, blocks * 128 * sizeof(float));
  const int smem = kSmem + 1024;
  cudaFuncSetAttribute(probe_kernel<kTest>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  probe_kernel<kTest><<<blocks, 128, smem>>>(cycles, sink, 0u);  // warm-up
  cudaEventRecord(a);
  probe_kernel<kTest><<<blocks, 128, smem>>>(cycles, sink, 0u);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, a, b);
  std::vector<long long> c(blocks);
  cudaMemcpy(c.data(), cycles, blocks * sizeof(long long), cudaMemcpyDeviceToHost);
  long long mx = 0, sum = 0;
  for (long long x : c) mx = x > mx ? x : mx, sum += x;
  const double per = double(sum) / blocks / kIters;
  std::printf("%-34s %d/SM  %7.1f cycles/iter (max block %7.1f)  %6.3f us/iter by events  (err: %s)\n", kNames[kTest],
              per_sm, per, double(mx) / kIters, 1e3 * ms / kIters, cudaGetErrorString(cudaGetLastError()));
  (void)clock_khz;
  cudaFree(cycles), cudaFree(sink);
}

template <int... kT>
void run_all(int sms, int per_sm, int clock_khz, std::integer_sequence<int, kT...>) {
  (run<kT>(sms, per_sm, clock_khz), ...);
}

}  // namespace

int main() {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf("%s, %d SMs, clock %d MHz (reported); %d iterations a block\n", p.name, p.multiProcessorCount,
              clock_khz / 1000, kIters);
  for (int per_sm : {1, 2})
    run_all(p.multiProcessorCount, per_sm, clock_khz, std::make_integer_sequence<int, kTests>{});
  return 0;
}
