#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "common/host_dtype.h"

namespace gdn {
namespace test {

uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("GDN_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("gdn tests: GDN_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// ------------------------------------------------------------------------------------------
// Cases and inputs

std::string Case::name() const {
  std::ostringstream os;
  os << "N" << lens.size() << "_T";
  int64_t T = 0;
  for (int64_t l : lens) T += l;
  os << T << "_H" << H << "_HV" << HV << "_K" << K << "_V" << V << "_" << dtype_name(dtype)
     << (qk_dtype ? std::string("_qk") + dtype_name(*qk_dtype) : "")
     << (o_dtype ? std::string("_o") + dtype_name(*o_dtype) : "") << (l2norm ? "_l2" : "")
     << (layout == StateLayout::kVMajor ? "_vmajor" : "") << (pool ? "_pool" : "") << (initial_state ? "_h0" : "")
     << (fused_gate ? "_fused" : "") << "_g" << int(gate) << "x" << gate_factor << "_b" << int(beta)
     << (strided ? "_strided" + std::to_string(o_pad) : "") << (sparse_final ? "_sparsefinal" : "")
     << (serving ? "_serving" : "") << (threads ? "_threads" + std::to_string(threads) : "")
     << (state_dtype != DType::kFloat32 ? std::string("_state") + dtype_name(state_dtype) : "")
     << (row_pad ? "_rowpad" + std::to_string(row_pad) : "")
     << (v_scale > 1.0 ? "_vscale" + std::to_string(static_cast<int64_t>(v_scale)) : "")
     << (v_scale < 1.0 ? "_vscale1em" + std::to_string(static_cast<int>(std::lround(-std::log10(v_scale)))) : "");
  return os.str();
}

// State element (k, v) of row `row`, head hv in the case's layout.
static int64_t state_index(const Inputs& in, int64_t row, int hv, int k, int v) {
  const Case& c = in.c;
  const int64_t head = (row * c.HV + hv) * int64_t{c.K} * c.V;
  return head + (c.layout == StateLayout::kKMajor ? int64_t{k} * c.V + v : int64_t{v} * c.K + k);
}

// The initial-state row of sequence n, or -1 (none, the null slot 0 or absent in a serving case).
static int64_t row_of(const Inputs& in, int64_t n) {
  if (in.c.serving) return in.indices[n] == 0 || in.present[n] == 0 ? -1 : in.indices[n];
  return in.c.pool ? in.indices[n] : n;
}

// The final-state row of sequence n: its pool row, or n, or -1 for the odd sequences of a
// sparse_final case.
static int64_t final_row_of(const Inputs& in, int64_t n) {
  if (in.c.sparse_final && n % 2 == 1) return -1;
  if (in.c.serving) return in.final_indices[n] == 0 ? -1 : in.final_indices[n];
  return row_of(in, n);
}

std::vector<double> initial_states(const Inputs& in) {
  const Case& c = in.c;
  const int64_t N = in.dims.N();
  std::vector<double> h0;
  if (!c.initial_state) return h0;
  h0.assign(N * c.HV * c.K * c.V, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = row_of(in, n);
    if (row < 0) continue;
    for (int hv = 0; hv < c.HV; ++hv)
      for (int x = 0; x < c.K; ++x)
        for (int y = 0; y < c.V; ++y)
          h0[((n * c.HV + hv) * c.K + x) * c.V + y] = in.state0[state_index(in, row, hv, x, y)];
  }
  return h0;
}

Expected reference(const Inputs& in) {
  const Case& c = in.c;
  std::vector<double> q = in.qd, k = in.kd, g = in.gd, beta = in.betad;
  if (c.l2norm) {
    ref::l2norm(q, c.K);
    ref::l2norm(k, c.K);
  }
  if (c.fused_gate) {
    std::vector<double> A_log(in.A_log.begin(), in.A_log.end()), dt_bias(in.dt_bias.begin(), in.dt_bias.end());
    ref::fused_gates(in.dims, in.gd, A_log, dt_bias, in.betad, g, beta);
  }
  const std::vector<double> h0 = initial_states(in);
  Expected e;
  const double scale = 1.0 / std::sqrt(double(c.K));
  ref::recurrence(in.dims, q, k, in.vd, g, beta, h0, scale, e.o, e.final_state);
  return e;
}

Problem problem_of(const Case& c) {
  Problem p;
  p.num_seqs = static_cast<int64_t>(c.lens.size());
  for (int64_t l : c.lens) p.num_tokens += l;
  p.num_qk_heads = c.H;
  p.num_v_heads = c.HV;
  p.head_k = c.K;
  p.head_v = c.V;
  p.dtype = c.dtype;
  p.qk_dtype = c.qk_dtype;
  p.o_dtype = c.o_dtype;
  p.gate_dtype = c.gate_in_input_dtype ? c.dtype : DType::kFloat32;
  p.use_qk_l2norm = c.l2norm;
  p.state_layout = c.layout;
  p.state_dtype = c.state_dtype;
  p.fused_gate = c.fused_gate;
  return p;
}

Problem problem_of(const Inputs& in) {
  Problem p = problem_of(in.c);
  p.num_tokens = in.T;
  p.num_seqs = in.dims.N();
  return p;
}

// The pattern of the padding bytes of a padded row stride (not a value any kernel writes: it
// differs from byte to byte).
static uint8_t pad_byte(size_t b) { return static_cast<uint8_t>(0xA5 ^ (b * 29)); }

// `rows` packed fp32 state rows [rows, HV K V] as the case stores them: state_dtype, rows
// HV K V + row_pad elements apart, the padding filled with pad_byte.
static std::vector<uint8_t> encode_states(const Inputs& in, const std::vector<float>& rows_f32, int64_t rows) {
  const Case& c = in.c;
  const int64_t head_elems = int64_t{c.HV} * c.K * c.V, row_stride = head_elems + c.row_pad;
  const size_t es = dtype_size(c.state_dtype);
  std::vector<uint8_t> bytes(std::max<int64_t>(rows, 1) * row_stride * es);
  if (rows_f32.empty()) return bytes;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < head_elems; ++i)
      store_from_float(bytes.data(), r * row_stride + i, c.state_dtype, rows_f32[r * head_elems + i]);
    uint8_t* pad = bytes.data() + (r * row_stride + head_elems) * es;
    for (size_t b = 0; b < c.row_pad * es; ++b) pad[b] = pad_byte(b);
  }
  return bytes;
}

Outputs run(const Inputs& in, Backend backend, Op op, const DecodeCall& decode_call) {
  const Case& c = in.c;
  const int64_t N = in.dims.N(), T = in.T;
  ForwardArgs a;
  a.problem = problem_of(in);
  Problem& p = a.problem;

  // int64 boundaries for odd batch sizes, int32 for even: both index types get exercised.
  const bool cu64 = N % 2 == 1;
  Buffer cu;
  std::vector<int32_t> cu32(in.bounds.begin(), in.bounds.end());
  if (c.varlen) {
    cu = cu64 ? upload_vec(backend, in.bounds) : upload_vec(backend, cu32);
    p.cu_seqlens = cu.data();
    p.cu_seqlens_type = cu64 ? IndexType::kInt64 : IndexType::kInt32;
    p.cu_seqlens_host = cu64 ? static_cast<const void*>(in.bounds.data()) : cu32.data();
  }

  Buffer qb = upload(backend, in.q), kb, vb;
  if (c.strided) {
    const DType d = c.dtype;
    const auto at = [&](int64_t off) { return static_cast<const char*>(qb.data()) + off * dtype_size(d); };
    a.q = {at(in.q_off), in.stride_qk, c.K};
    a.k = {at(in.k_off), in.stride_qk, c.K};
    a.v = {at(in.v_off), in.stride_v, c.V};
  } else {
    kb = upload(backend, in.k);
    vb = upload(backend, in.v);
    a.q.data = qb.data();
    a.k.data = kb.data();
    a.v.data = vb.data();
  }
  Buffer gb = upload(backend, in.g), bb = upload(backend, in.beta);
  a.g.data = gb.data();
  a.beta.data = bb.data();
  Buffer A_log, dt_bias;
  if (c.fused_gate) {
    A_log = upload_vec(backend, in.A_log);
    dt_bias = upload_vec(backend, in.dt_bias);
    a.A_log = A_log.as<float>();
    a.dt_bias = dt_bias.as<float>();
  }

  // o: NaN everywhere (padding of a strided o too), so an unwritten element fails.
  const int64_t o_elems = std::max<int64_t>(T, 1) * in.o_stride_token;
  const DType o_dtype = c.o_dtype.value_or(c.dtype);
  Buffer ob = upload(backend, encode(std::vector<double>(o_elems, std::nan("")), o_dtype));
  a.o = {ob.data(), in.o_stride_token, c.V};

  // States: a pool updated in place, or a dense initial array and a NaN-filled final array, in
  // the case's state dtype with rows row_stride apart (padding: a pattern checked afterwards).
  const int64_t head_elems = int64_t{c.HV} * c.K * c.V;
  Buffer s_in, s_out, idx, final_idx, present;
  std::vector<int32_t> final_rows;
  const std::vector<uint8_t> in_bytes = encode_states(in, in.state0, in.slots);
  const int64_t row_stride = head_elems + c.row_pad;
  auto ref_of = [&](Buffer& b, int64_t rows) {
    StateRef s;
    s.data = b.data();
    s.num_slots = rows;
    s.row_stride = c.row_pad ? row_stride : 0;
    return s;
  };
  if (c.pool) {
    s_in = upload(backend, in_bytes);
    idx = upload_vec(backend, in.indices);
    StateRef pool = ref_of(s_in, in.slots);
    pool.indices = idx.data();
    pool.indices_host = in.indices.data();
    pool.index_type = IndexType::kInt32;
    if (c.serving) pool.null_slot = 0;
    if (c.initial_state) a.initial_state = pool;
    if (c.final_state) a.final_state = pool;
    if (c.serving) {
      present = upload_vec(backend, in.present);
      a.initial_state.present = present.as<uint8_t>();
      a.initial_state.present_host = in.present.data();
      final_idx = upload_vec(backend, in.final_indices);
      a.final_state.indices = final_idx.data();
      a.final_state.indices_host = in.final_indices.data();
    }
  } else {
    if (c.initial_state) {
      s_in = upload(backend, in_bytes);
      a.initial_state = ref_of(s_in, N);
    }
    if (c.final_state) {
      s_out = upload(backend, encode_states(in, std::vector<float>(N * head_elems, std::nanf("")), N));
      a.final_state = ref_of(s_out, N);
    }
    if (c.final_state && c.sparse_final) {
      for (int64_t n = 0; n < N; ++n) final_rows.push_back(static_cast<int32_t>(final_row_of(in, n)));
      final_idx = upload_vec(backend, final_rows);
      a.final_state.indices = final_idx.data();
      a.final_state.indices_host = final_rows.data();
      a.final_state.index_type = IndexType::kInt32;
    }
  }

  Exec exec;
  exec.backend = backend;
  exec.num_threads = c.threads;
  Buffer ws;
  if (op == Op::kChunk) {
    const size_t bytes = chunk_gated_delta_rule_workspace_size(p, exec);
    ws = Buffer(backend, bytes);
    exec.workspace = ws.data();
    exec.workspace_bytes = bytes;
    chunk_gated_delta_rule(a, exec);
  } else {
    const size_t bytes = recurrent_gated_delta_rule_workspace_size(p, exec);
    ws = Buffer(backend, bytes);
    exec.workspace = ws.data();
    exec.workspace_bytes = bytes;
    if (decode_call)
      decode_call(a, exec);
    else
      recurrent_gated_delta_rule(a, exec);
  }
  synchronize(backend);

  Outputs out;
  const std::vector<uint8_t> o_bytes = ob.to_host();
  out.o.resize(T * c.HV * c.V);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < int64_t{c.HV} * c.V; ++i)
      out.o[t * c.HV * c.V + i] = load_as_float(o_bytes.data(), t * in.o_stride_token + i, o_dtype);
  // A strided o's padding must stay untouched (NaN).
  if (c.strided)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = int64_t{c.HV} * c.V; i < in.o_stride_token; ++i)
        if (!std::isnan(load_as_float(o_bytes.data(), t * in.o_stride_token + i, o_dtype)))
          ADD_FAILURE() << "o padding was written at token " << t;
  const Buffer* states = c.pool ? &s_in : &s_out;
  if (c.final_state) {
    const std::vector<uint8_t> bytes = states->to_host();
    const int64_t rows = c.pool ? in.slots : N;
    const size_t es = dtype_size(c.state_dtype);
    out.states.resize(rows * head_elems);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < head_elems; ++i)
        out.states[r * head_elems + i] = load_as_float(bytes.data(), r * row_stride + i, c.state_dtype);
      // The padding of a padded row stride comes back bitwise unchanged.
      const uint8_t* pad = bytes.data() + (r * row_stride + head_elems) * es;
      for (size_t b = 0; b < c.row_pad * es; ++b)
        if (pad[b] != pad_byte(b)) {
          ADD_FAILURE() << "state row " << r << ": padding byte " << b << " was written";
          break;
        }
    }
  }
  return out;
}

// SPEC section 4's bounds: fp32 1e-4 (2e-3 where tensor cores run in tf32), bf16 5e-3, fp16 1e-3
// (the CUDA tensor-core path keeps fp16 operands and intermediates for fp16 inputs).
double tolerance(DType dtype, Backend backend) {
  switch (dtype) {
    case DType::kBFloat16:
      return 5e-3;
    case DType::kFloat16:
      return 1e-3;
    case DType::kFloat32:
      break;
  }
  return backend == Backend::kCUDA ? 2e-3 : 1e-4;
}

double tolerance(const Case& c, Backend backend) {
  double tol = tolerance(c.dtype, backend);
  for (const std::optional<DType>& d : {c.qk_dtype, c.o_dtype})
    if (d) tol = std::max(tol, tolerance(*d, backend));
  return tol;
}

double state_tolerance(const Case& c, Backend backend) {
  return std::max(tolerance(c, backend), tolerance(c.state_dtype, Backend::kCPU));
}

void expect_close(const Inputs& in, const Expected& ref, const Outputs& out, Backend backend, const char* what) {
  const Case& c = in.c;
  const double tol = tolerance(c, backend);
  const double err_o = ref::rel_rms_error(out.o.data(), ref.o.data(), static_cast<int64_t>(ref.o.size()));
  EXPECT_LE(err_o, tol) << what << " o on " << backend_name(backend) << ", case " << c.name();
  if (!c.final_state) return;
  const int64_t N = in.dims.N();
  std::vector<double> got, want;
  std::vector<bool> owned(in.slots, false);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = final_row_of(in, n);
    if (row < 0) continue;
    owned[row] = true;
    for (int hv = 0; hv < c.HV; ++hv)
      for (int x = 0; x < c.K; ++x)
        for (int y = 0; y < c.V; ++y) {
          got.push_back(out.states[state_index(in, row, hv, x, y)]);
          want.push_back(ref.final_state[((n * c.HV + hv) * c.K + x) * c.V + y]);
        }
  }
  if (!want.empty()) {
    const double err_s = ref::rel_rms_error(got.data(), want.data(), static_cast<int64_t>(want.size()));
    EXPECT_LE(err_s, state_tolerance(c, backend))
        << what << " final state on " << backend_name(backend) << ", case " << c.name();
  }
  // Final rows that no sequence writes stay as they were: NaN in a sparse final array.
  if (c.sparse_final) {
    const int64_t head_elems = int64_t{c.HV} * c.K * c.V;
    for (int64_t r = 0; r < N; ++r) {
      if (owned[r]) continue;
      bool untouched = true;
      for (int64_t i = 0; i < head_elems; ++i) untouched &= std::isnan(out.states[r * head_elems + i]);
      EXPECT_TRUE(untouched) << what << ": final row " << r << " was written though its sequence has index -1";
    }
  }
  // Pool rows that no sequence writes (including those of index -1 sequences) stay as they were.
  if (c.pool) {
    const int64_t head_elems = int64_t{c.HV} * c.K * c.V;
    for (int64_t r = 0; r < in.slots; ++r) {
      if (owned[r]) continue;
      const bool same = std::memcmp(&out.states[r * head_elems], &in.state0[r * head_elems], head_elems * 4) == 0;
      EXPECT_TRUE(same) << what << ": pool row " << r << " was written though no sequence owns it";
    }
  }
}

void expect_rounded_once(const Outputs& lo, const Outputs& hi, DType state_dtype, const std::string& what) {
  ASSERT_EQ(lo.o.size(), hi.o.size());
  EXPECT_EQ(0, std::memcmp(lo.o.data(), hi.o.data(), lo.o.size() * sizeof(double)))
      << what << ": o differs from the fp32 pool's";
  ASSERT_EQ(lo.states.size(), hi.states.size());
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < lo.states.size(); ++i) {
    float bits = 0;  // room for any dtype's element
    store_from_float(&bits, 0, state_dtype, hi.states[i]);
    const float want = load_as_float(&bits, 0, state_dtype);
    const bool same = std::memcmp(&want, &lo.states[i], sizeof(float)) == 0 ||
                      (std::isnan(want) && std::isnan(lo.states[i]));  // NaN-filled rows nobody writes
    if (!same && mismatches++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " state elements differ from the fp32 pool's rounded"
                           << " final states (first at " << first << ")";
}

}  // namespace test
}  // namespace gdn
