// The sequence plan's longest-first order (Plan::longest_first, src/cuda/core/plan.cu), checked
// directly: the forward's results cannot show a wrong order (which block computes a sequence
// changes nothing it computes) unless a sequence is lost or computed twice.
#include <algorithm>
#include <numeric>

#include "check.h"
#include "cuda/core/common.cuh"

namespace gdn {
namespace check {
namespace {

// The order's bucket of a sequence of `chunks` chunks (plan.cu: counts past 1023 share a bucket).
int64_t bucket_of(int64_t chunks) { return std::min<int64_t>(chunks, 1023); }

// One batch: the plan built with the order, downloaded and checked; true when it holds.
bool check_one(const std::string& name, const std::vector<int64_t>& lens) {
  const int64_t N = static_cast<int64_t>(lens.size());
  std::vector<int64_t> cu(N + 1, 0);
  std::vector<int64_t> first_chunk(N + 1, 0);
  for (int64_t n = 0; n < N; ++n) {
    cu[n + 1] = cu[n] + lens[n];
    first_chunk[n + 1] = first_chunk[n] + (lens[n] + kChunkSize - 1) / kChunkSize;
  }
  Problem p;
  p.num_tokens = cu[N];
  p.num_seqs = N;
  p.cu_seqlens = upload_indices(cu, IndexType::kInt64);
  p.cu_seqlens_type = IndexType::kInt64;
  void* ws = nullptr;
  CK(cudaMalloc(&ws, cuda::plan_bytes(p.num_tokens, N)));
  const cuda::Plan without = cuda::build_plan(p, ws, nullptr, false);
  const cuda::Plan pl = cuda::build_plan(p, ws, nullptr, true);
  std::vector<cuda::OrderedSeq> entries(N);
  CK(cudaMemcpy(entries.data(), pl.longest_first, N * sizeof(cuda::OrderedSeq), cudaMemcpyDeviceToHost));
  std::vector<int32_t> order(N);
  std::string why;
  for (int64_t i = 0; i < N; ++i) {
    const cuda::OrderedSeq& e = entries[i];
    order[i] = static_cast<int32_t>(e.seq);
    const int64_t n = e.seq;
    // (Each entry carries its sequence's tokens and first chunk: the plan's bounds and offsets.)
    if (why.empty() && (n < 0 || n >= N || e.tb != cu[n] || e.te != cu[n + 1] || e.c0 != first_chunk[n]))
      why = "entry " + std::to_string(i) + ": not its sequence's tokens and first chunk";
  }
  CK(cudaFree(ws));
  CK(cudaFree(const_cast<void*>(p.cu_seqlens)));
  auto chunks = [&](int64_t n) { return (lens[n] + kChunkSize - 1) / kChunkSize; };
  std::vector<int32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(N);
  std::iota(all.begin(), all.end(), 0);
  bool one_bucket = true;
  for (int64_t n = 1; n < N; ++n) one_bucket &= bucket_of(chunks(n)) == bucket_of(chunks(0));
  if (why.empty() && without.longest_first != nullptr) why = "an order where none was asked for";
  if (why.empty() && sorted != all) why = "not a permutation of the sequences";
  if (why.empty() && one_bucket && order != all) why = "not the identity for one bucket";
  for (int64_t i = 1; why.empty() && i < N; ++i)
    if (bucket_of(chunks(order[i])) > bucket_of(chunks(order[i - 1])))
      why = "position " + std::to_string(i) + " longer than the one before";
  std::printf("%-4s plan order %-28s N=%-6lld %s\n", why.empty() ? "ok" : "FAIL", name.c_str(),
              static_cast<long long>(N), why.c_str());
  return why.empty();
}

}  // namespace

int check_plan_orders(std::mt19937& rng) {
  int failures = 0;
  std::uniform_int_distribution<int64_t> len(0, 5000);
  std::vector<int64_t> ragged(300);
  for (auto& l : ragged) l = len(rng);
  ragged[17] = 0;  // empty sequences: zero chunks, last
  ragged[200] = 0;
  std::vector<int64_t> many(3000);  // several sequences per thread of the plan
  for (auto& l : many) l = len(rng) % 700;
  std::vector<int64_t> huge = {64, 70000, 64 * 1100, 1, 129};  // two past the last bucket
  std::vector<int64_t> equal_chunks = {64, 40, 1, 63, 64};     // one chunk each: the identity
  failures += !check_one("ragged", ragged);
  failures += !check_one("many sequences", many);
  failures += !check_one("past the last bucket", huge);
  failures += !check_one("equal chunk counts", equal_chunks);
  failures += !check_one("one sequence", {4096});
  return failures;
}

}  // namespace check
}  // namespace gdn
