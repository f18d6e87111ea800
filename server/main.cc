// convoy_server: the Convoy inference server. Loads the model repository (model_manager.h), serves the KServe v2 /
// Triton gRPC protocol and grpc.health.v1 on --grpc_port (server/grpc/), the KServe v2 HTTP/REST protocol on
// --http_port (server/http/), Prometheus metrics on --metrics_port, and drains gracefully on SIGTERM/SIGINT. docs/server.md describes every flag.
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "kernels/common/mutex.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/algorithm_cache.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"
#include "server/metrics/metrics_registry.h"
#include "server/repository/model_manager.h"
#include "server/repository/model_repository.h"
#include "server/runtime/algorithm_counters.h"
#include "server/tools/flags_help.h"
#ifdef CONVOY_SERVER_WITH_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

ABSL_FLAG(std::string, model_repository, "model_repo", "Path of the model repository.");
ABSL_FLAG(int, grpc_port, 8001, "Port of the KServe v2 gRPC service and the health service; 0 takes a free port.");
ABSL_FLAG(int, http_port, 8000, "Port of the KServe v2 HTTP/REST service; 0 takes a free port, -1 serves none.");
ABSL_FLAG(int64_t, http_max_body_bytes, 0,
          "Largest HTTP request body; 0 derives it: 4x the gRPC message limit (JSON text is larger than binary).");
ABSL_FLAG(int, http_decode_threads, 2,
          "Threads that decode HTTP infer bodies (JSON, binary tensors, photos) off the HTTP event loop.");
ABSL_FLAG(int, http_decode_queue, 64,
          "HTTP infer requests that may wait for a decode thread; more are answered 503 at once.");
ABSL_FLAG(int, metrics_port, 8002, "Port of the Prometheus /metrics endpoint; 0 takes a free port, -1 serves none.");
ABSL_FLAG(std::string, model_control_mode, "none", "none (load all at start), poll (rescan), explicit (on request).");
ABSL_FLAG(bool, strict_readiness, true, "Ready only when every model is READY (else: when one is).");
ABSL_FLAG(int, exit_timeout_seconds, 30, "On SIGTERM/SIGINT, how long queued and in-flight requests may take.");
ABSL_FLAG(int, exit_delay_seconds, 0,
          "On SIGTERM/SIGINT, how long readiness reports NOT_SERVING while new requests are still served, before "
          "the drain: the time a load balancer's health checks need to take the server out of rotation. A second "
          "signal ends it early.");
ABSL_FLAG(std::string, algorithm_cache_file, "", "Kernel algorithm cache loaded at start and saved at exit.");
ABSL_FLAG(std::string, device, "auto", "auto (CUDA when a GPU and the CUDA backend are there, else CPU), cpu, cuda.");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate: serve gRPC and HTTP over TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA bundle: require client certificates it signed (mutual TLS).");
ABSL_FLAG(int, max_message_bytes, 0, "Largest gRPC message; 0 derives it from the largest model input or output at max batch.");
ABSL_FLAG(std::string, grpc_infer_path, "callback",
          "How gRPC's RPCs are served: callback (gRPC's callback API and its threads) or async (every RPC, streams "
          "and health included, on gRPC's completion-queue API with one poller thread of the server's); "
          "docs/server.md.");
ABSL_FLAG(std::vector<std::string>, grpc_channel_args, {},
          "gRPC transport settings as NAME=INTEGER,... (e.g. grpc.http2.lookahead_bytes=1048576), after Convoy's own.");
ABSL_FLAG(int, poll_interval_seconds, 15, "Repository rescan interval with --model_control_mode=poll.");
ABSL_FLAG(std::vector<std::string>, load_model, {}, "Models to load at start with --model_control_mode=explicit.");
ABSL_FLAG(int, log_verbosity, 1,
          "0: warnings, the startup summary and shutdown only; 1: also model state changes and load progress.");

namespace convoy {
namespace {

constexpr char kServerVersion[] = "0.1.0";

void Log(const std::string& line) {
  std::fprintf(stderr, "%s %s\n", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               line.c_str());
}

std::string Quote(const std::string& text) { return absl::StrCat("\"", text, "\""); }

// The device the models run on, and why it was chosen.
struct SelectedDevice {
  std::unique_ptr<Device> owned;
  Device* device = nullptr;
  std::string name;
  std::string reason;
  bool gpu = false;
};

absl::StatusOr<SelectedDevice> SelectDevice(const std::string& wanted) {
  if (wanted != "auto" && wanted != "cpu" && wanted != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--device: expected auto, cpu or cuda, got '", wanted, "'"));
  }
  SelectedDevice selected;
  std::string no_gpu = "this binary was built without the CUDA backend";
#ifdef CONVOY_SERVER_WITH_CUDA
  if (wanted != "cpu") {
    absl::StatusOr<std::vector<cuda::GpuInfo>> gpus = cuda::ListGpus();
    if (gpus.ok() && !gpus->empty()) {
      cuda::CudaDevice::Options options;
      auto gpu = cuda::CudaDevice::Create(options);
      if (gpu.ok()) {
        selected.name = "cuda";
        selected.reason = (*gpus)[0].ToString();
        selected.gpu = true;
        selected.owned = std::move(*gpu);
        selected.device = selected.owned.get();
        return selected;
      }
      no_gpu = std::string(gpu.status().message());
    } else {
      no_gpu = gpus.ok() ? "no CUDA device" : std::string(gpus.status().message());
    }
  }
#endif
  if (wanted == "cuda") return absl::UnavailableError(absl::StrCat("--device=cuda: ", no_gpu));
  selected.name = "cpu";
  selected.reason = wanted == "cpu" ? "--device=cpu" : absl::StrCat("auto: ", no_gpu);
  selected.device = &CpuDevice::Default();
  return selected;
}

size_t DataTypeBytes(repository::TensorDataType type) {
  switch (type) {
    case repository::TensorDataType::kFp16:
    case repository::TensorDataType::kBf16: return 2;
    case repository::TensorDataType::kUint8: return 1;
    case repository::TensorDataType::kInt64: return 8;
    case repository::TensorDataType::kInt32: return 4;
    default: return 4;
  }
}

// The largest message a repository's model takes or answers at max batch (its inputs, an encoded_image input at
// its max_bytes when that is larger than the pixels; or its outputs as served), doubled, plus 1 MiB; at least 16 MiB,
// at most 1 GiB. A segmentation model's scores are far larger than its input.
int DerivedMaxMessageBytes(const std::string& repository_path) {
  size_t largest = 0;
  absl::StatusOr<repository::RepositoryScan> scan = repository::ScanModelRepository(repository_path);
  if (scan.ok()) {
    auto tensor_bytes = [](const repository::TensorConfig& tensor) {
      size_t n = DataTypeBytes(tensor.data_type);
      for (int64_t d : tensor.dims) n *= static_cast<size_t>(std::max<int64_t>(d, 1));
      if (tensor.encoded_image.has_value()) {
        n = std::max(n, static_cast<size_t>(std::max<int64_t>(tensor.encoded_image->max_bytes, 0)));
      }
      return n;
    };
    for (const repository::ScannedModel& model : scan->models) {
      if (!model.status.ok()) continue;
      size_t request = 0, response = 0;
      for (const repository::TensorConfig& input : model.config.inputs) request += tensor_bytes(input);
      for (const repository::TensorConfig& output : model.config.outputs) response += tensor_bytes(output);
      largest = std::max(largest, std::max(request, response) *
                                      static_cast<size_t>(std::max<int64_t>(model.config.max_batch_size, 1)));
    }
  }
  const size_t derived = std::max<size_t>(16u << 20, 2 * largest + (1u << 20));
  return static_cast<int>(std::min<size_t>(derived, 1u << 30));
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Loads --algorithm_cache_file; a missing, corrupt or mismatched file is a warning, never fatal.
int64_t LoadAlgorithmCache(const std::string& path) {
  if (path.empty()) return 0;
  std::ifstream probe(path);
  if (!probe) {
    Log(absl::StrCat("level=info event=algorithm_cache_missing file=", Quote(path), " note=\"saved at exit\""));
    return 0;
  }
  absl::StatusOr<int> loaded = AlgorithmCache::Global().Load(path);
  if (!loaded.ok()) {
    Log(absl::StrCat("level=warning event=algorithm_cache_ignored file=", Quote(path), " reason=",
                     Quote(std::string(loaded.status().message()))));
    return 0;
  }
  Log(absl::StrCat("level=info event=algorithm_cache_loaded file=", Quote(path), " entries=", *loaded));
  return *loaded;
}

// Logs each model version state change (a listener of the manager).
class StateLogger {
 public:
  explicit StateLogger(repository::ModelManager* manager) : manager_(manager) {}
  void Refresh() {
    convoy::MutexLock lock(&mu_);
    for (const repository::ModelVersionStatus& s : manager_->Index()) {
      const std::string key = absl::StrCat(s.model, "/", s.version);
      const std::string value = absl::StrCat(repository::ModelStateName(s.state), "|", s.reason);
      if (last_[key] == value) continue;
      last_[key] = value;
      Log(absl::StrCat("level=", s.state == repository::ModelState::kUnavailable && !s.reason.empty() &&
                                         s.reason != "unloaded" ? "warning" : "info",
                       " event=model_state model=", s.model, " version=", s.version, " state=",
                       repository::ModelStateName(s.state), s.reason.empty() ? "" : " reason=",
                       s.reason.empty() ? "" : Quote(s.reason)));
    }
  }

 private:
  repository::ModelManager* const manager_;
  convoy::Mutex mu_;
  std::map<std::string, std::string> last_ ABSL_GUARDED_BY(mu_);
};

void PrintSummary(const SelectedDevice& device, const repository::ModelManager& manager, int grpc_port, bool tls,
                  bool mtls, int http_port, int metrics_port, const std::string& cache_file, int64_t cache_entries,
                  absl::Duration startup) {
  std::string text = absl::StrFormat("convoy_server %s ready in %.2f s\n", kServerVersion,
                                     absl::ToDoubleSeconds(startup));
  absl::StrAppend(&text, "  device:          ", device.name, " (", device.reason, ")\n");
  absl::StrAppend(&text, "  grpc:            0.0.0.0:", grpc_port, tls ? (mtls ? " (mutual TLS)" : " (TLS)") : " (plaintext)",
                  "\n");
  absl::StrAppend(&text, "  http:            ",
                  http_port > 0 ? absl::StrCat(tls ? "https" : "http", "://0.0.0.0:", http_port, "/v2",
                                               tls ? (mtls ? " (mutual TLS)" : " (TLS)") : " (plaintext)")
                                : "off",
                  "\n");
  absl::StrAppend(&text, "  metrics:         ",
                  metrics_port > 0 ? absl::StrCat("http://0.0.0.0:", metrics_port, "/metrics") : "off", "\n");
  absl::StrAppend(&text, "  algorithm cache: ",
                  cache_file.empty() ? "none" : absl::StrCat(cache_file, " (", cache_entries, " entries loaded)"),
                  "\n");
  absl::StrAppend(&text, "  server ready:    ", manager.IsReady() ? "yes" : "no", "\n  models:\n");
  for (const repository::ModelVersionStatus& s : manager.Index()) {
    absl::StrAppend(&text, absl::StrFormat("    %-20s version %-3s %-11s", s.model,
                                           s.version > 0 ? absl::StrCat(s.version) : "-",
                                           repository::ModelStateName(s.state)));
    if (s.state == repository::ModelState::kReady) {
      absl::StrAppend(&text, absl::StrFormat(" loaded in %.2f s", absl::ToDoubleSeconds(s.load_time)));
    } else if (!s.reason.empty()) {
      absl::StrAppend(&text, " ", s.reason);
    }
    absl::StrAppend(&text, "\n");
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Waits up to `timeout` for one of the blocked `signals`; returns its number, or 0 when the time ran out.
int WaitForSignal(const sigset_t& signals, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = until - absl::Now();
    if (left <= absl::ZeroDuration()) return 0;
    const timespec wait = absl::ToTimespec(left);
    const int got = sigtimedwait(&signals, nullptr, &wait);
    if (got > 0) return got;
    if (errno != EINTR && errno != EAGAIN) return 0;
  }
}

int Run() {
  const absl::Time started = absl::Now();
  // A client that closes its connection while a reply is being written must not end the server: writes to such a
  // socket (libevent's evbuffer_write does plain write/writev) then fail with EPIPE instead of raising SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  // SIGTERM/SIGINT are taken by sigwait below; block them before any thread starts so none of them gets one.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto fail = [](const absl::Status& status) {
    Log(absl::StrCat("level=error event=startup_failed reason=", Quote(status.ToString())));
    return 1;
  };
  absl::StatusOr<repository::ModelControlMode> mode =
      repository::ParseModelControlMode(absl::GetFlag(FLAGS_model_control_mode));
  if (!mode.ok()) return fail(mode.status());
  if (absl::GetFlag(FLAGS_exit_delay_seconds) < 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat("--exit_delay_seconds: expected 0 or more seconds, got ",
                                                        absl::GetFlag(FLAGS_exit_delay_seconds))));
  }
  absl::StatusOr<SelectedDevice> device = SelectDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return fail(device.status());
  Log(absl::StrCat("level=info event=device_selected device=", device->name, " reason=", Quote(device->reason)));
  const std::string cache_file = absl::GetFlag(FLAGS_algorithm_cache_file);
  const int64_t cache_entries = LoadAlgorithmCache(cache_file);

  std::unique_ptr<metrics::MetricsRegistry> metrics;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    metrics::MetricsRegistry::Options options;
    options.listen_address = absl::StrCat("0.0.0.0:", absl::GetFlag(FLAGS_metrics_port));
    auto created = metrics::MetricsRegistry::Create(options);
    if (!created.ok()) return fail(created.status());
    metrics = std::move(*created);
    metrics->SetAlgorithmCacheSource(&runtime::KernelAlgorithmCounters);
  }

  repository::ModelManager::Options manager_options;
  manager_options.repository_path = absl::GetFlag(FLAGS_model_repository);
  manager_options.control_mode = *mode;
  manager_options.poll_interval = absl::Seconds(absl::GetFlag(FLAGS_poll_interval_seconds));
  manager_options.startup_models = absl::GetFlag(FLAGS_load_model);
  manager_options.strict_readiness = absl::GetFlag(FLAGS_strict_readiness);
  manager_options.drain_timeout = absl::Seconds(absl::GetFlag(FLAGS_exit_timeout_seconds));
  manager_options.device = device->device;
  manager_options.metrics = metrics.get();
  if (absl::GetFlag(FLAGS_log_verbosity) >= 1) {
    manager_options.load_log = [](const std::string& model, int64_t version, const std::string& line) {
      Log(absl::StrCat("level=info event=model_load model=", model, " version=", version, " detail=", Quote(line)));
    };
  }
  absl::StatusOr<std::unique_ptr<repository::ModelManager>> manager =
      repository::ModelManager::Create(manager_options);
  if (!manager.ok()) return fail(manager.status());
  StateLogger state_logger(manager->get());
  if (absl::GetFlag(FLAGS_log_verbosity) >= 1) {
    state_logger.Refresh();
    (*manager)->AddListener([&state_logger] { state_logger.Refresh(); });
  }
  // On every return (a start-up failure below included) the manager shuts down, notifying its listeners, while
  // state_logger still exists; after the orderly drain at the end this finds it shut down and does nothing.
  struct ShutdownOnReturn {
    repository::ModelManager* manager;
    ~ShutdownOnReturn() { manager->Shutdown(absl::Now()).IgnoreError(); }
  } shutdown_on_return{manager->get()};

  grpc_server::GrpcServer::Options server_options;
  server_options.address = absl::StrCat("0.0.0.0:", absl::GetFlag(FLAGS_grpc_port));
  server_options.manager = manager->get();
  server_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes) > 0
                                         ? absl::GetFlag(FLAGS_max_message_bytes)
                                         : DerivedMaxMessageBytes(manager_options.repository_path);
  server_options.server_version = kServerVersion;
  server_options.on_gpu = device->gpu;
  absl::StatusOr<std::vector<std::pair<std::string, int>>> channel_args =
      grpc_server::ParseChannelArgs(absl::GetFlag(FLAGS_grpc_channel_args));
  if (!channel_args.ok()) return fail(channel_args.status());
  server_options.channel_args = *channel_args;
  absl::StatusOr<grpc_server::InferPath> infer_path = grpc_server::ParseInferPath(absl::GetFlag(FLAGS_grpc_infer_path));
  if (!infer_path.ok()) return fail(infer_path.status());
  server_options.infer_path = *infer_path;
  for (auto [flag, path, out] : {std::make_tuple("tls_cert", absl::GetFlag(FLAGS_tls_cert), &server_options.tls_cert_pem),
                                 std::make_tuple("tls_key", absl::GetFlag(FLAGS_tls_key), &server_options.tls_key_pem),
                                 std::make_tuple("tls_client_ca", absl::GetFlag(FLAGS_tls_client_ca),
                                                 &server_options.tls_client_ca_pem)}) {
    absl::StatusOr<std::string> pem = ReadPem(path, flag);
    if (!pem.ok()) return fail(pem.status());
    *out = *pem;
  }
  absl::StatusOr<std::unique_ptr<grpc_server::GrpcServer>> server = grpc_server::GrpcServer::Start(server_options);
  if (!server.ok()) return fail(server.status());
  std::unique_ptr<http::HttpServer> http_server;
  if (absl::GetFlag(FLAGS_http_port) >= 0) {
    http::HttpServer::Options http_options;
    http_options.port = absl::GetFlag(FLAGS_http_port);
    http_options.manager = manager->get();
    http_options.server_version = kServerVersion;
    http_options.on_gpu = device->gpu;
    const int64_t body_flag = absl::GetFlag(FLAGS_http_max_body_bytes);
    http_options.max_body_bytes = body_flag > 0 ? static_cast<size_t>(body_flag)
                                                : 4 * static_cast<size_t>(server_options.max_message_bytes);
    for (auto [flag, value] : {std::make_pair("--http_decode_threads", absl::GetFlag(FLAGS_http_decode_threads)),
                               std::make_pair("--http_decode_queue", absl::GetFlag(FLAGS_http_decode_queue))}) {
      if (value < 1) return fail(absl::InvalidArgumentError(absl::StrCat(flag, " must be >= 1, got ", value)));
    }
    http_options.tls_cert_pem = server_options.tls_cert_pem;  // the same files as gRPC's TLS
    http_options.tls_key_pem = server_options.tls_key_pem;
    http_options.tls_client_ca_pem = server_options.tls_client_ca_pem;
    http_options.decode_threads = absl::GetFlag(FLAGS_http_decode_threads);
    http_options.max_queued_decodes = static_cast<size_t>(absl::GetFlag(FLAGS_http_decode_queue));
    absl::StatusOr<std::unique_ptr<http::HttpServer>> started_http = http::HttpServer::Start(http_options);
    if (!started_http.ok()) return fail(started_http.status());
    http_server = std::move(*started_http);
  }
  const int http_port = http_server != nullptr ? http_server->port() : -1;
  PrintSummary(*device, **manager, (*server)->port(), (*server)->tls(), !server_options.tls_client_ca_pem.empty(),
               http_port, metrics != nullptr ? metrics->port() : -1, cache_file, cache_entries,
               absl::Now() - started);
  Log(absl::StrCat("level=info event=serving grpc_port=", (*server)->port(), " http_port=", http_port,
                   " metrics_port=",
                   metrics != nullptr ? metrics->port() : -1, " max_message_bytes=", server_options.max_message_bytes));

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  const char* signal_name = signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
  const int exit_delay_seconds = absl::GetFlag(FLAGS_exit_delay_seconds);
  if (exit_delay_seconds > 0) {
    (*manager)->WithdrawReadiness();
    Log(absl::StrCat("level=info event=readiness_withdrawn signal=", signal_name,
                     " exit_delay_seconds=", exit_delay_seconds, " note=\"still serving until the delay ends\""));
    const int second = WaitForSignal(signals, absl::Seconds(exit_delay_seconds));
    if (second != 0) {
      Log(absl::StrCat("level=info event=exit_delay_cut_short signal=", second == SIGTERM ? "SIGTERM" : "SIGINT"));
    }
  }
  const absl::Duration exit_timeout = absl::Seconds(absl::GetFlag(FLAGS_exit_timeout_seconds));
  const absl::Time deadline = absl::Now() + exit_timeout;
  Log(absl::StrCat("level=info event=shutdown_started signal=", signal_name,
                   " exit_timeout_seconds=", absl::ToInt64Seconds(exit_timeout)));
  absl::Status drained = (*manager)->Shutdown(deadline);  // readiness NOT_SERVING first, then drain
  if (!drained.ok()) {
    Log(absl::StrCat("level=warning event=drain_incomplete reason=", Quote(std::string(drained.message()))));
  }
  if (http_server != nullptr) http_server->Shutdown(deadline);
  (*server)->Shutdown(deadline);
  if (!cache_file.empty()) {
    absl::Status saved = AlgorithmCache::Global().Save(cache_file);
    Log(saved.ok() ? absl::StrCat("level=info event=algorithm_cache_saved file=", Quote(cache_file), " entries=",
                                  AlgorithmCache::Global().stats().entries)
                   : absl::StrCat("level=warning event=algorithm_cache_not_saved reason=",
                                  Quote(std::string(saved.message()))));
  }
  http_server.reset();
  server->reset();
  manager->reset();
  Log("level=info event=shutdown_complete");
  return 0;
}

}  // namespace
}  // namespace convoy

constexpr char kUsage[] = R"(usage: convoy_server [--flag=value ...]
Serves the models of --model_repository over the KServe v2 / Triton gRPC protocol and grpc.health.v1 on
--grpc_port, the KServe v2 HTTP/REST protocol on --http_port, Prometheus metrics at
http://HOST:--metrics_port/metrics; SIGTERM or SIGINT drains and exits 0 (after --exit_delay_seconds of NOT_SERVING
readiness while still serving, when set).
  convoy_server --model_repository=model_repo                 # HTTP :8000, gRPC :8001, metrics :8002, CPU if no GPU
  convoy_server --model_repository=/models --device=cpu --grpc_port=0 --http_port=0 --metrics_port=0   # free ports
docs/server.md describes every flag, docs/model_config.md a model's config.yaml.)";

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (convoy::tools::PrintHelpIfAsked(argc, argv, kUsage, std::cout)) return 0;
  absl::ParseCommandLine(argc, argv);
  return convoy::Run();
}
