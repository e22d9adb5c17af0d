// GetServerInfo: the device, the settings and the usage of the queue, store and result buffer.
#include "server/observability/server_info.h"

#include <string>

#include "common/str.h"
#include "server/store/redis_store.h"

namespace glimpse::server {

constexpr char kVersion[] = GLIMPSE_VERSION;  // the CMake project version

void FillServerInfo(GpuWorker& worker, const ServiceLimits& limits, RedisStore* redis,
                    const Access* access, const RateLimiter* rate,
                    std::chrono::steady_clock::duration uptime, v1::ServerInfo* response) {
  const gpu::DeviceInfo& d = worker.device();
  response->set_version(kVersion);
  response->set_device_platform(d.platform);
  response->set_vendor(d.vendor);
  response->set_renderer(d.renderer);
  response->set_gl_version(d.version);
  response->set_software(d.software);
  v1::DeviceLimits* l = response->mutable_limits();
  l->set_max_texture_size(uint32_t(d.limits.max_texture_size));
  l->set_max_storage_block_bytes(uint64_t(d.limits.max_storage_block_bytes));
  l->set_max_shared_memory_bytes(uint32_t(d.limits.max_shared_memory_bytes));
  l->set_max_invocations(uint32_t(d.limits.max_invocations));
  l->set_int64(d.limits.int64);
  l->set_subgroup_ballot(d.limits.subgroup_ballot);
  l->set_subgroup_size(uint32_t(d.limits.subgroup_size));
  for (std::string_view f : gpu::SubgroupFeatureNames(d.limits.subgroup_features)) {
    l->add_subgroup_features(std::string(f));
  }
  l->set_thread_shuffle(d.limits.thread_shuffle);
  response->set_max_queue(uint32_t(worker.max_queue()));
  response->set_max_image_pixels(limits.max_image_pixels);
  response->set_max_upload_bytes(limits.max_upload_bytes);
  response->set_max_message_bytes(limits.max_message_bytes);
  const StoreUsage usage = worker.store().Usage();
  response->set_store_budget_bytes(usage.budget);
  response->set_image_ttl_s(uint64_t(worker.store().ttl().count()));
  const WorkerStats stats = worker.Stats();
  response->set_queue_length(uint32_t(stats.queue_length));
  response->set_stored_images(usage.images);
  response->set_stored_bytes(usage.bytes);
  response->set_jobs_run(stats.jobs_run);
  response->set_jobs_dropped(stats.jobs_dropped);
  response->set_jobs_rejected(stats.jobs_rejected);
  response->set_images_evicted(usage.evicted);
  response->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(uptime).count());
  for (const std::string& name : Kernels::Available()) {
    response->add_analyses(name);
    v1::AnalysisInfo* a = response->add_analysis_info();
    a->set_name(name);
    for (const std::string& v : Kernels::Variants(name, d)) a->add_variants(v);
  }
  const ResultBufferUsage results = worker.results().Usage();
  response->set_result_buffer_bytes(results.budget);
  response->set_result_buffer_used_bytes(results.used);
  response->set_result_buffer_peak_bytes(results.peak);
  response->set_jobs_waiting_for_results(uint32_t(stats.jobs_waiting_for_results));
  response->set_staging_bytes(stats.staging_bytes);
  response->set_staging_used_bytes(stats.staging_used_bytes);
  response->set_staging_full(stats.staging_full);
  response->set_staging_mapped_bytes(stats.staging_mapped_bytes);
  response->set_programs_built(uint32_t(stats.programs_built));
  response->set_warm_up_ms(
      uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(stats.warm_up).count()));
  response->set_access_control(access != nullptr && access->enabled());
  response->set_tenant_store_bytes(worker.store().tenant_budget());
  response->set_batch_in_flight(limits.batch_in_flight);
  v1::SchedulerInfo* scheduler = response->mutable_scheduler();
  scheduler->set_policy(std::string(PolicyName(worker.scheduler())));
  scheduler->set_tenant_max_queued(uint32_t(worker.tenant_max_queued()));
  scheduler->set_active_tenants(uint32_t(stats.active_tenants));
  if (rate != nullptr && rate->enabled()) {
    scheduler->set_tenant_rate(rate->rate());
    scheduler->set_tenant_burst(rate->burst());
    scheduler->set_tenant_rate_shared(rate->shared());
  }
  if (redis != nullptr) {
    response->set_shared_store(StrCat("redis ", redis->address()));
    response->set_shared_store_reachable(redis->reachable());
  }
}

}  // namespace glimpse::server
