// Each stage of the chunked forward against its definition (SPEC.md section 3), in isolation:
// every stage is fed the double-precision reference's outputs of the stages before it, so an
// error points at one stage. solve_tril is checked against a direct inverse (Gauss-Jordan).
#include <cmath>

#include "harness.h"

namespace gdn {
namespace test {
namespace {

struct StageCase {
  Case c;
  std::string label;
};

std::vector<StageCase> stage_cases() {
  std::vector<StageCase> cs;
  Case base;
  base.l2norm = false;  // stages take q and k as given
  {
    Case c = base;
    c.lens = {200};
    cs.push_back({c, "single"});
  }
  {
    Case c = base;
    c.lens = {0, 1, 63, 64, 65, 130, 0};
    cs.push_back({c, "ragged"});
  }
  {
    Case c = base;
    c.K = 128;
    c.V = 64;
    c.H = 1;
    c.HV = 4;
    c.lens = {100, 28};
    c.layout = StateLayout::kVMajor;
    cs.push_back({c, "gva4_k128_vmajor"});
  }
  {
    Case c = base;
    c.dtype = DType::kBFloat16;
    c.gate_in_input_dtype = true;
    c.pool = true;
    c.lens = {70, 5, 64};
    cs.push_back({c, "bf16_pool"});
  }
  {
    Case c = base;
    c.gate = GateKind::kVeryNegative;
    c.beta = BetaKind::kMixed;
    c.lens = {90};
    cs.push_back({c, "extreme_gates"});
  }
  {
    Case c = base;
    c.K = 96;
    c.V = 48;
    c.lens = {80};
    cs.push_back({c, "k96_v48"});
  }
  // Head sizes without fast kernels (fla's 32, 60, 100) and the edges of [1, 256]: the CPU's
  // zero-padded rows, the CUDA stages' masked columns (fwd_h's last slice, fwd_o's wider layout).
  const int sizes[][2] = {{60, 100}, {100, 60}, {32, 192}, {16, 256}, {256, 16}, {1, 33}, {33, 1}, {200, 130}};
  for (const auto& kv : sizes) {
    Case c = base;
    c.K = kv[0];
    c.V = kv[1];
    c.lens = {70, 0, 64, 3};
    c.layout = kv[0] % 2 ? StateLayout::kVMajor : StateLayout::kKMajor;
    c.pool = kv[0] == 100;
    cs.push_back({c, "k" + std::to_string(kv[0]) + "_v" + std::to_string(kv[1])});
  }
  {
    Case c = base;
    c.K = c.V = 100;
    c.dtype = DType::kBFloat16;
    c.lens = {130, 2};
    cs.push_back({c, "bf16_k100"});
  }
  return cs;
}

double stage_tolerance(Backend b) { return b == Backend::kCUDA ? 5e-3 : 1e-4; }

std::vector<float> to_f32(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }
std::vector<float> nan_f32(size_t n) { return std::vector<float>(n, std::nanf("")); }

// Downloads an fp32 buffer and compares its first `count` values with the reference.
void expect_buffer(const Buffer& b, const std::vector<double>& want, size_t count, double tol, const char* what,
                   const std::string& label) {
  std::vector<float> got(b.bytes() / 4);
  b.download(got.data(), b.bytes());
  std::vector<double> g(got.begin(), got.begin() + count);
  const double err = ref::rel_rms_error(g.data(), want.data(), int64_t(count));
  EXPECT_LE(err, tol) << what << " (" << label << ")";
}

using Param = std::tuple<Backend, StageCase>;

class Stages : public ::testing::TestWithParam<Param> {};

TEST_P(Stages, EachStageMatchesItsDefinition) {
  const Backend be = std::get<0>(GetParam());
  const StageCase sc = std::get<1>(GetParam());
  GDN_SKIP_IF_UNAVAILABLE(be);
  const Case& c = sc.c;
  GDN_SKIP_IF_UNSUPPORTED(problem_of(c), be, Operation::kStages);
  std::mt19937_64 rng(test_seed() ^ std::hash<std::string>()(sc.label));
  const Inputs in = make_inputs(c, rng);
  const ref::Dims& d = in.dims;
  const int64_t T = in.T, N = d.N(), HV = c.HV, K = c.K, V = c.V;

  // The reference chain.
  const std::vector<double> h0 = initial_states(in);
  std::vector<double> G, L, A, w, u, h, v_new, hT, o;
  ref::chunk_local_cumsum(d, in.gd, G);
  ref::chunk_scaled_dot_kkt(d, in.kd, in.betad, G, L);
  ref::solve_tril(d, L, A);
  ref::recompute_w_u(d, in.kd, in.vd, in.betad, G, A, w, u);
  ref::chunk_fwd_h(d, in.kd, w, u, G, h0, h, v_new, hT);
  const double scale = 1.0 / std::sqrt(double(K));
  ref::chunk_fwd_o(d, in.qd, in.kd, v_new, h, G, scale, o);

  Problem p = problem_of(in);  // l2norm off: stages take q and k as given
  std::vector<int32_t> cu32(in.bounds.begin(), in.bounds.end());
  Buffer cu = upload_vec(be, cu32);
  p.cu_seqlens = cu.data();
  p.cu_seqlens_host = cu32.data();

  Buffer qb = upload(be, in.q), kb = upload(be, in.k), vb = upload(be, in.v), gb = upload(be, in.g),
         bb = upload(be, in.beta);
  const int64_t chunks = max_num_chunks(T, N), nc = ref::num_chunks(d);
  // Each stage's output starts as NaN; its inputs are the reference's values.
  Buffer Gout = upload_vec(be, nan_f32(T * HV)), Gin = upload_vec(be, to_f32(G));
  Buffer Lout = upload_vec(be, nan_f32(T * HV * 64)), Lin = upload_vec(be, to_f32(L));
  Buffer Aout = upload_vec(be, nan_f32(T * HV * 64)), Ain = upload_vec(be, to_f32(A));
  Buffer wout = upload_vec(be, nan_f32(T * HV * K)), win = upload_vec(be, to_f32(w));
  Buffer uout = upload_vec(be, nan_f32(T * HV * V)), uin = upload_vec(be, to_f32(u));
  Buffer hout = upload_vec(be, nan_f32(chunks * HV * K * V)), hin = upload_vec(be, to_f32(h));
  Buffer vnout = upload_vec(be, nan_f32(T * HV * V)), vnin = upload_vec(be, to_f32(v_new));
  Buffer oout = upload(be, encode(std::vector<double>(T * HV * V, std::nan("")), c.dtype));
  Buffer s_pool = upload_vec(be, in.state0), s_final = upload_vec(be, nan_f32(N * HV * K * V));
  Buffer idx = c.pool ? upload_vec(be, in.indices) : Buffer();

  StageBuffers base;
  base.q.data = qb.data();
  base.k.data = kb.data();
  base.v.data = vb.data();
  base.g.data = gb.data();
  base.beta.data = bb.data();

  Exec exec;
  exec.backend = be;
  const size_t ws_bytes = stage_workspace_size(p, exec);
  Buffer ws(be, ws_bytes);
  exec.workspace = ws.data();
  exec.workspace_bytes = ws_bytes;
  const double tol = stage_tolerance(be);

  {
    StageBuffers b = base;
    b.G = Gout.as<float>();
    chunk_local_cumsum(p, b, exec);
    synchronize(be);
    expect_buffer(Gout, G, G.size(), tol, "chunk_local_cumsum G", sc.label);
  }
  {
    StageBuffers b = base;
    b.G = Gin.as<float>();
    b.L = Lout.as<float>();
    chunk_scaled_dot_kkt(p, b, exec);
    synchronize(be);
    expect_buffer(Lout, L, L.size(), tol, "chunk_scaled_dot_kkt L", sc.label);
  }
  {
    StageBuffers b = base;
    b.L = Lin.as<float>();
    b.A = Aout.as<float>();
    solve_tril(p, b, exec);
    synchronize(be);
    expect_buffer(Aout, A, A.size(), tol, "solve_tril A", sc.label);
  }
  {
    StageBuffers b = base;
    b.G = Gin.as<float>();
    b.A = Ain.as<float>();
    b.w = wout.as<float>();
    b.u = uout.as<float>();
    recompute_w_u(p, b, exec);
    synchronize(be);
    expect_buffer(wout, w, w.size(), tol, "recompute_w_u w", sc.label);
    expect_buffer(uout, u, u.size(), tol, "recompute_w_u u", sc.label);
  }
  {
    StageBuffers b = base;
    b.G = Gin.as<float>();
    b.w = win.as<float>();
    b.u = uin.as<float>();
    b.h = hout.as<float>();
    b.v_new = vnout.as<float>();
    if (c.initial_state) {
      b.initial_state.data = s_pool.as<float>();
      b.initial_state.num_slots = in.slots;
      if (c.pool) {
        b.initial_state.indices = idx.data();
        b.initial_state.indices_host = in.indices.data();
      }
    }
    b.final_state.data = s_final.as<float>();
    b.final_state.num_slots = N;
    chunk_fwd_h(p, b, exec);
    synchronize(be);
    expect_buffer(hout, h, size_t(nc * HV * K * V), tol, "chunk_fwd_h h", sc.label);
    expect_buffer(vnout, v_new, v_new.size(), tol, "chunk_fwd_h v_new", sc.label);
    // Final states come back in the case's layout: compare after transposing the reference.
    std::vector<double> want(hT.size());
    for (int64_t nh = 0; nh < N * HV; ++nh)
      for (int x = 0; x < K; ++x)
        for (int y = 0; y < V; ++y)
          want[nh * K * V + (c.layout == StateLayout::kKMajor ? x * V + y : y * K + x)] = hT[(nh * K + x) * V + y];
    expect_buffer(s_final, want, want.size(), tol, "chunk_fwd_h final state", sc.label);
  }
  {
    StageBuffers b = base;
    b.G = Gin.as<float>();
    b.h = hin.as<float>();
    b.v_new = vnin.as<float>();
    b.o = {oout.data(), 0, 0};
    chunk_fwd_o(p, b, exec);
    synchronize(be);
    const std::vector<uint8_t> bytes = oout.to_host();
    const std::vector<double> got = decode(bytes.data(), o.size(), c.dtype);
    const double err = ref::rel_rms_error(got.data(), o.data(), int64_t(o.size()));
    EXPECT_LE(err, std::max(tol, tolerance(c.dtype, be))) << "chunk_fwd_o o (" << sc.label << ")";
  }
}

TEST_P(Stages, L2NormMatchesDefinition) {
  const Backend be = std::get<0>(GetParam());
  const StageCase sc = std::get<1>(GetParam());
  GDN_SKIP_IF_UNAVAILABLE(be);
  const Case& c = sc.c;
  if (!capabilities(be).has_head_size(c.K) || !capabilities(be).has_operation(Operation::kL2Norm))
    GTEST_SKIP() << "dim " << c.K << " is not in the " << backend_name(be) << " backend's table";
  std::mt19937_64 rng(test_seed() ^ std::hash<std::string>()(sc.label + "l2"));
  std::normal_distribution<double> nd;
  const int64_t T = 37;
  std::vector<double> x(T * c.H * c.K);
  for (double& v : x) v = 3.0 * nd(rng);
  x = round_to(x, c.dtype);
  // Strided input: every token row padded by 8 elements, which must be skipped.
  const int64_t row = int64_t{c.H} * c.K + 8;
  std::vector<double> padded(T * row, 1e30);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < int64_t{c.H} * c.K; ++i) padded[t * row + i] = x[t * c.H * c.K + i];
  Buffer xb = upload(be, encode(padded, c.dtype));
  Buffer yb = upload(be, encode(std::vector<double>(x.size(), std::nan("")), c.dtype));
  L2NormArgs a;
  a.num_tokens = T;
  a.num_heads = c.H;
  a.dim = c.K;
  a.dtype = c.dtype;
  a.x = {xb.data(), row, c.K};
  a.y = {yb.data(), 0, 0};
  Exec exec;
  exec.backend = be;
  l2norm(a, exec);
  synchronize(be);
  std::vector<double> want = x;
  ref::l2norm(want, c.K);
  const std::vector<uint8_t> bytes = yb.to_host();
  const std::vector<double> got = decode(bytes.data(), x.size(), c.dtype);
  EXPECT_LE(ref::rel_rms_error(got.data(), want.data(), int64_t(want.size())), tolerance(c.dtype, be));
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(backend_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).label;
}

INSTANTIATE_TEST_SUITE_P(CPU, Stages,
                         ::testing::Combine(::testing::Values(Backend::kCPU), ::testing::ValuesIn(stage_cases())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(CUDA, Stages,
                         ::testing::Combine(::testing::Values(Backend::kCUDA), ::testing::ValuesIn(stage_cases())),
                         param_name);

}  // namespace
}  // namespace test
}  // namespace gdn
