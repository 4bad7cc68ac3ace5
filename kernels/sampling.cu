// Sampling on the device: a CTA per row; thresholds for top-k and top-p are
// found by bisection on the probabilities' bit patterns (non-negative floats
// order as their bits), so nothing is sorted. Launcher in sampling.hpp.

#include "kernels/common.cuh"
#include "kernels/sampling.hpp"

#include <cfloat>

namespace troupe::kernels {
namespace {

constexpr int k_threads = 1024;

struct sample_smem {
  float scratch[32];
  int iscratch[32];
};

__device__ auto block_count(int v, int* scratch) -> int {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The lowest id holding the largest value (every thread gets it).
__device__ auto block_argmax(const float* v, int n, float* fs, int* is) -> int {
  float best = -INFINITY;
  int id = n; // none yet
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (v[i] > best || (v[i] == best && i < id)) best = v[i], id = i;
  for (int o = 16; o > 0; o >>= 1) {
    const float b = __shfl_xor_sync(0xffffffffu, best, o);
    const int j = __shfl_xor_sync(0xffffffffu, id, o);
    if (b > best || (b == best && j < id)) best = b, id = j;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) fs[warp] = best, is[warp] = id;
  __syncthreads();
  best = lane < warps ? fs[lane] : -INFINITY;
  id = lane < warps ? is[lane] : n;
  for (int o = 16; o > 0; o >>= 1) {
    const float b = __shfl_xor_sync(0xffffffffu, best, o);
    const int j = __shfl_xor_sync(0xffffffffu, id, o);
    if (b > best || (b == best && j < id)) best = b, id = j;
  }
  return id < n ? id : 0;
}

// In id order, the k-th (1-based) token among those with prob == value: its
// id (tokens at ids up to it are the first k). A block scan over contiguous
// per-thread ranges.
__device__ auto kth_equal(const float* prob, int n, float value, int k, int* is) -> int {
  const int per = (n + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int lo = min(n, static_cast<int>(threadIdx.x) * per), hi = min(n, lo + per);
  int mine = 0;
  for (int i = lo; i < hi; ++i) mine += prob[i] == value;
  // Exclusive scan of the per-thread counts.
  __shared__ int counts[k_threads];
  __syncthreads();
  counts[threadIdx.x] = mine;
  __syncthreads();
  for (int o = 1; o < static_cast<int>(blockDim.x); o <<= 1) {
    const int add = threadIdx.x >= static_cast<unsigned>(o) ? counts[threadIdx.x - o] : 0;
    __syncthreads();
    counts[threadIdx.x] += add;
    __syncthreads();
  }
  const int before = counts[threadIdx.x] - mine;
  __syncthreads();
  if (threadIdx.x == 0) is[0] = n - 1;
  __syncthreads();
  if (before < k && before + mine >= k) {
    int seen = before;
    for (int i = lo; i < hi; ++i)
      if (prob[i] == value && ++seen == k) {
        is[0] = i;
        break;
      }
  }
  __syncthreads();
  return is[0];
}

// Sanitises the row in place and keeps a raw copy; the row's maximum.
__device__ __forceinline__ auto sanitise_row(float* l, float* raw, int n, float* scratch) -> float {
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float x = l[i];
    x = x != x ? -INFINITY : fminf(x, FLT_MAX);
    l[i] = x;
    raw[i] = x;
    mx = fmaxf(mx, x);
  }
  return block_max(mx, scratch);
}

// Sum over the row of exp(l - mx) (every thread gets it).
__device__ __forceinline__ auto row_exp_sum(const float* l, int n, float mx, float* scratch) -> float {
  float se = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) se += __expf(l[i] - mx);
  return block_sum(se, scratch);
}

// Penalties: each listed token once (distinct), by one thread.
__device__ __forceinline__ void apply_penalties(const sampling_params& p, const sampling_row& prm, float* l, int n) {
  for (int j = threadIdx.x; j < prm.penalty_count; j += blockDim.x) {
    const int t = p.penalty_tokens[prm.penalty_first + j];
    if (t < 0 || t >= n) continue;
    const int count = p.penalty_counts[prm.penalty_first + j];
    float x = l[t];
    if (prm.repetition_penalty != 1.0f) x = x > 0.0f ? x / prm.repetition_penalty : x * prm.repetition_penalty;
    if (count > 0) x -= prm.presence_penalty + prm.frequency_penalty * static_cast<float>(count);
    l[t] = x;
  }
}

// The row's maximum (every thread gets it).
__device__ __forceinline__ auto row_max(const float* l, int n, float* scratch) -> float {
  float m2 = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m2 = fmaxf(m2, l[i]);
  return block_max(m2, scratch);
}

// Top-k: sets the kept set to the k best, ties at the cut by lowest id.
__device__ __forceinline__ void keep_top_k(const float* prob, int n, int top_k, int* iscratch, float& cut,
                                           int& tie_last) {
  // The largest value v with at least k tokens >= v (bisect on bits).
  unsigned lo = 0, hi = 0x3f800000u; // [0, 1]
  while (lo < hi) {
    const unsigned mid = lo + (hi - lo + 1) / 2;
    const float v = __uint_as_float(mid);
    int c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) c += prob[i] >= v;
    if (block_count(c, iscratch) >= top_k) lo = mid; else hi = mid - 1;
  }
  const float v = __uint_as_float(lo);
  int above = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) above += prob[i] > v;
  above = block_count(above, iscratch);
  cut = v;
  tie_last = kth_equal(prob, n, v, top_k - above, iscratch);
}

// Top-p: narrows the kept set to its best-first prefix holding top_p of its mass.
__device__ __forceinline__ void keep_top_p(const float* prob, int n, float top_p, float* scratch, int* iscratch,
                                           float& cut, int& tie_last) {
  const auto kept = [&](int i) { return prob[i] > cut || (prob[i] == cut && i <= tie_last); };
  // Of the kept mass, the best-first prefix holding top_p of it: the
  // largest v with mass(kept, >= v) >= target, then ties by id.
  float total = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) total += kept(i) ? prob[i] : 0.0f;
  total = block_sum(total, scratch);
  const float target = top_p * total;
  unsigned lo = 0, hi = 0x3f800000u;
  while (lo < hi) {
    const unsigned mid = lo + (hi - lo + 1) / 2;
    const float v = __uint_as_float(mid);
    float m = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m += kept(i) && prob[i] >= v ? prob[i] : 0.0f;
    if (block_sum(m, scratch) >= target) lo = mid; else hi = mid - 1;
  }
  const float v = __uint_as_float(lo);
  if (v >= cut) { // (at cut: only the ties top-k kept count, the lowest ids)
    float above = 0.0f;
    int equal = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      above += kept(i) && prob[i] > v ? prob[i] : 0.0f;
      equal += kept(i) && prob[i] == v;
    }
    above = block_sum(above, scratch);
    equal = block_count(equal, iscratch);
    // Ties at v in id order until the mass is reached.
    int need = v > 0.0f ? static_cast<int>(ceilf((target - above) / v)) : equal;
    need = max(1, min(need, equal));
    tie_last = kth_equal(prob, n, v, need, iscratch);
    cut = v;
  }
}

// Inclusive scan of the per-thread masses, in place in masses.
__device__ __forceinline__ void scan_masses(float* masses, float mine) {
  __syncthreads();
  masses[threadIdx.x] = mine;
  __syncthreads();
  for (int o = 1; o < static_cast<int>(blockDim.x); o <<= 1) {
    const float add = threadIdx.x >= static_cast<unsigned>(o) ? masses[threadIdx.x - o] : 0.0f;
    __syncthreads();
    masses[threadIdx.x] += add;
    __syncthreads();
  }
}

// The inverse-CDF draw over the kept set; -1 where rounding left nothing.
__device__ __forceinline__ auto draw_kept(const float* prob, int n, const sampling_row& prm, float cut, int tie_last,
                                          float* masses, int* iscratch) -> int {
  const auto kept = [&](int i) { return prob[i] > cut || (prob[i] == cut && i <= tie_last); };
  // Inverse CDF in id order over the kept tokens with prob >= min_p:
  // contiguous ranges per thread, a scan of their masses.
  const int per = (n + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int lo = min(n, static_cast<int>(threadIdx.x) * per), hi = min(n, lo + per);
  const auto weight = [&](int i) { return kept(i) && prob[i] >= prm.min_p && prob[i] > 0.0f ? prob[i] : 0.0f; };
  float mine = 0.0f;
  for (int i = lo; i < hi; ++i) mine += weight(i);
  scan_masses(masses, mine);
  const float total = masses[blockDim.x - 1];
  const float target = prm.uniform * total;
  // The owner of the target: the range whose inclusive sum passes it and
  // whose exclusive sum does not (sums as the scan made them, so the
  // ranges tile [0, total) exactly). Its walk stops at the target, or at
  // its last kept id where its own rounding falls short.
  const float before = threadIdx.x == 0 ? 0.0f : masses[threadIdx.x - 1];
  if (threadIdx.x == 0) iscratch[0] = -1, iscratch[1] = -1;
  __syncthreads();
  if (mine > 0.0f) {
    int hit = -1, last = -1;
    float mass = before;
    const bool owner = before <= target && target < masses[threadIdx.x];
    for (int i = lo; i < hi; ++i) {
      const float w = weight(i);
      if (w <= 0.0f) continue;
      last = i;
      mass += w;
      if (owner && mass > target) {
        hit = i;
        break;
      }
    }
    if (owner) atomicMax(&iscratch[0], hit >= 0 ? hit : last);
    atomicMax(&iscratch[1], last); // the last kept id: for a target at the total
  }
  __syncthreads();
  return iscratch[0] >= 0 ? iscratch[0] : iscratch[1];
}

__global__ void __launch_bounds__(k_threads) sample_kernel(sampling_params p) {
  __shared__ sample_smem sm;
  const int row = blockIdx.x;
  const int n = static_cast<int>(p.vocab); // ids past n (a padded vocabulary) are never read
  const std::int64_t stride = p.row_stride > 0 ? p.row_stride : p.vocab;
  const sampling_row prm = p.row_params[row];
  float* l = p.logits + static_cast<std::int64_t>(row) * stride;
  float* raw = p.raw + static_cast<std::int64_t>(row) * stride;

  // Sanitise, keep the raw logits, log-sum-exp for the logprob.
  const float mx = sanitise_row(l, raw, n, sm.scratch);
  if (mx == -INFINITY) {
    if (threadIdx.x == 0) p.tokens[row] = 0, p.logprobs[row] = -INFINITY;
    return;
  }
  const float log_sum_exp = mx + logf(row_exp_sum(l, n, mx, sm.scratch));

  __syncthreads();
  apply_penalties(p, prm, l, n);
  __syncthreads();

  int token;
  if (prm.temperature < 1e-5f) {
    token = block_argmax(l, n, sm.scratch, sm.iscratch);
  } else {
    const float m2 = row_max(l, n, sm.scratch);
    if (!(m2 > -INFINITY)) {
      token = block_argmax(l, n, sm.scratch, sm.iscratch);
    } else {
      // Probabilities relative to the best (which has 1), in place.
      const float inv_t = 1.0f / prm.temperature;
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x) l[i] = __expf((l[i] - m2) * inv_t);
      __syncthreads();
      float* prob = l;
      // The kept set: prob > cut, plus ties at cut with id <= tie_last.
      float cut = -1.0f; // everything
      int tie_last = -1;
      const bool top_k_on = prm.top_k > 0 && prm.top_k < n;
      if (top_k_on) keep_top_k(prob, n, prm.top_k, sm.iscratch, cut, tie_last);
      if (prm.top_p < 1.0f) keep_top_p(prob, n, prm.top_p, sm.scratch, sm.iscratch, cut, tie_last);
      __shared__ float masses[k_threads];
      token = draw_kept(prob, n, prm, cut, tie_last, masses, sm.iscratch);
      if (token < 0) token = block_argmax(raw, n, sm.scratch, sm.iscratch); // rounding left nothing
    }
  }
  if (threadIdx.x == 0) {
    p.tokens[row] = token;
    p.logprobs[row] = raw[token] - log_sum_exp;
  }
}

} // namespace

void sample(const sampling_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  sample_kernel<<<static_cast<unsigned>(p.rows), k_threads, 0, stream>>>(p);
}

} // namespace troupe::kernels
