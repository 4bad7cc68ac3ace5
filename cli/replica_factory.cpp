#include "cli/replica_factory.hpp"

#include "engine/cpu/cpu_executor.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/zero_executor.hpp"

namespace troupe::cli {
namespace {

// An executor that keeps `weights` alive as long as it lives.
auto holding(std::shared_ptr<executor> ex, std::shared_ptr<model_weights> weights) -> std::shared_ptr<executor> {
  auto* raw = ex.get();
  return std::shared_ptr<executor>(raw, [ex = std::move(ex), weights = std::move(weights)](executor*) mutable {
    ex.reset(); // (the executor first, then what it reads)
    weights.reset();
  });
}

auto cuda_executor_of(const server_config& cfg, const model_setup& m, std::int32_t num_host_blocks)
    -> std::shared_ptr<executor> {
  auto weights = std::make_shared<model_weights>(load_model_weights(m));
  cuda::cuda_executor_options co;
  co.device = *parse_device(cfg.engine.devices.front());
  for (const auto& d : cfg.engine.devices) co.devices.push_back(*parse_device(d));
  co.block_size = cfg.scheduler.block_size;
  co.num_kv_blocks = m.num_blocks;
  co.act = cfg.engine.dtype == "bfloat16" ? dtype::bf16 : dtype::f32;
  co.cuda_graphs = cfg.engine.cuda_graphs;
  co.max_num_seqs = cfg.scheduler.max_num_seqs;
  co.max_num_batched_tokens = cfg.scheduler.max_num_batched_tokens;
  co.max_model_len = m.max_model_len;
  co.num_host_blocks = num_host_blocks;
  co.num_sampled_ids = m.tok->vocab_size(); // never a padding row: it has no text
  return holding(load_cuda_executor(*weights, co), weights);
}

} // namespace

auto make_executors(const server_config& cfg, const model_setup& m, int count, std::int32_t num_host_blocks)
    -> std::vector<std::shared_ptr<executor>> {
  std::vector<std::shared_ptr<executor>> out;
  if (cfg.engine.executor == "zero") {
    for (int d = 0; d < count; ++d) out.push_back(std::make_shared<zero_executor>(m.zero));
  } else if (parse_device(cfg.engine.devices.front())) {
    out.push_back(cuda_executor_of(cfg, m, num_host_blocks));
  } else {
    auto weights = std::make_shared<model_weights>(load_cpu_weights(cfg, m));
    auto eo = m.cpu;
    eo.num_host_blocks = num_host_blocks;
    for (int d = 0; d < count; ++d) out.push_back(holding(std::make_shared<cpu_executor>(*weights, eo), weights));
  }
  return out;
}

auto start_replica(caf::actor_system& sys, const server_config& cfg, replica_options options,
                   const executor_actor& exec, const memory_manager_actor& mm, server_metrics* metrics,
                   server_status* status) -> scheduler_actor {
  auto lease = first_lease(sys, mm, static_cast<std::int32_t>(options.share));
  if (!cfg.engine.step_log.empty()) {
    const auto r = options.replica;
    options.step_log = std::make_shared<step_log::writer>(
        r == 0 ? cfg.engine.step_log : cfg.engine.step_log + "." + std::to_string(r),
        step_log::setup{options.scheduling, options.limits, options.kv, options.share, options.eos_ids});
  }
  return spawn_scheduler(sys, options, std::move(lease), exec, mm, metrics, status);
}

} // namespace troupe::cli
