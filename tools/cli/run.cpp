#include "cli/run.h"

#include <algorithm>

#include "cli/device.h"
#include "cli/host.h"

namespace gdn {
namespace cli {

Result run_job(const Job& job, Backend be, int threads, uint64_t seed) {
  const HostProblem hp = make_problem(job.lens, job.H, job.HV, job.gates, job.dtype, seed);
  const bool decode = job.decode;
  const int H = hp.H, HV = hp.HV;
  const size_t head_state = size_t(HV) * K * V;  // floats of one sequence's states
  Mem q(be, hp.q.size()), k(be, hp.k.size()), v(be, hp.v.size()), g(be, hp.g.size() * 4), b(be, hp.beta.size() * 4);
  Mem o(be, size_t(hp.T) * HV * V * dtype_size(hp.dtype)), cu(be, hp.bounds.size() * 8);
  q.put(hp.q.data(), hp.q.size());
  k.put(hp.k.data(), hp.k.size());
  v.put(hp.v.data(), hp.v.size());
  g.put(hp.g.data(), hp.g.size() * 4);
  b.put(hp.beta.data(), hp.beta.size() * 4);
  cu.put(hp.bounds.data(), hp.bounds.size() * 8);

  ForwardArgs a;
  Problem& p = a.problem;
  p.num_tokens = hp.T;
  p.num_seqs = hp.N;
  p.num_qk_heads = H;
  p.num_v_heads = HV;
  p.head_k = K;
  p.head_v = V;
  p.dtype = hp.dtype;
  p.gate_dtype = DType::kFloat32;
  p.use_qk_l2norm = true;
  p.state_layout = job.layout;
  p.cu_seqlens = cu.p;
  p.cu_seqlens_host = hp.bounds.data();
  p.cu_seqlens_type = IndexType::kInt64;
  a.q.data = q.p;
  a.k.data = k.p;
  a.v.data = v.p;
  a.g.data = g.p;
  a.beta.data = b.p;
  a.o.data = o.p;

  // States in the layout asked for: the prefill reads a dense initial array and writes a
  // separate final one (so timed repeats see the same inputs); the decode step updates rows
  // N..2N-1 of a pool of 2N slots in place.
  std::vector<float> h0 = hp.h0;
  if (job.layout == StateLayout::kVMajor)
    for (int64_t n = 0; n < hp.N * HV; ++n)
      for (int x = 0; x < K; ++x)
        for (int y = 0; y < V; ++y) h0[n * K * V + y * K + x] = hp.h0[n * K * V + x * V + y];
  const int64_t slots = decode ? 2 * hp.N : hp.N;
  Mem s_in(be, slots * head_state * 4), s_out(be, hp.N * head_state * 4), idx(be, hp.N * 8);
  std::vector<int64_t> rows(hp.N);
  for (int64_t n = 0; n < hp.N; ++n) rows[n] = decode ? hp.N + n : n;
  idx.put(rows.data(), rows.size() * 8);
  StateRef in_ref, out_ref;
  in_ref.data = static_cast<float*>(s_in.p);
  in_ref.num_slots = slots;
  in_ref.indices = idx.p;
  in_ref.indices_host = rows.data();
  in_ref.index_type = IndexType::kInt64;
  if (decode) {
    // Pool rows N..2N-1 hold the sequences' states (rows 0..N-1 are other sequences' slots).
    s_in.put(h0.data(), h0.size() * 4, hp.N * head_state * 4);
    out_ref = in_ref;
  } else {
    s_in.put(h0.data(), h0.size() * 4);
    out_ref.data = static_cast<float*>(s_out.p);
    out_ref.num_slots = hp.N;
  }
  a.initial_state = in_ref;
  a.final_state = out_ref;

  Exec exec;
  exec.backend = be;
  exec.num_threads = threads;
  const size_t ws_bytes =
      decode ? recurrent_gated_delta_rule_workspace_size(p, exec) : chunk_gated_delta_rule_workspace_size(p, exec);
  Mem ws(be, ws_bytes);
  exec.workspace = ws.p;
  exec.workspace_bytes = ws_bytes;

  // The checked run comes first (the decode step then moves the pool on; timing after that
  // measures the same work on other state values).
  auto call = [&](void* stream) {
    Exec e = exec;
    e.stream = stream;
    if (decode)
      recurrent_gated_delta_rule(a, e);
    else
      chunk_gated_delta_rule(a, e);
  };
  call(nullptr);
  synchronize(be);
  std::vector<uint8_t> out_o(size_t(hp.T) * HV * V * dtype_size(hp.dtype));
  o.get(out_o.data(), out_o.size());
  std::vector<float> out_states(size_t(hp.N) * head_state);
  if (decode) {
    s_in.get(out_states.data(), out_states.size() * 4, hp.N * head_state * 4);
  } else {
    s_out.get(out_states.data(), out_states.size() * 4);
  }

  Result res;
  res.job = job;
  res.tokens = hp.T;
  res.seqs = hp.N;
  const int heads[2] = {0, HV - 1};
  const int check_heads = hp.T > 40000 ? 1 : 2;
  for (int i = 0; i < check_heads; ++i) {
    double se = 0;
    res.err = std::max(res.err, check_head(hp, heads[i], out_o, out_states, job.layout, &se));
    res.state_err = std::max(res.state_err, se);
  }
  res.ms = time_ms(be, call);
  res.tokens_per_s = hp.T / (res.ms * 1e-3);
  if (decode) {
    res.GBps = 2.0 * double(hp.N) * HV * K * V * 4 / (res.ms * 1e-3) / 1e9;
  } else {
    res.gflops = tools::prefill_flops(job.lens, HV, K, V) / (res.ms * 1e-3) / 1e9;
  }
  return res;
}

}  // namespace cli
}  // namespace gdn
