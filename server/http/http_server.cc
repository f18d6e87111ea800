#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mutex.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/grpc/model_config_proto.h"
#include "server/http/connection_input.h"
#include "server/http/content_coding.h"
#include "server/http/http_status.h"
#include "server/http/infer_json.h"
#include "server/http/tls_context.h"
#include "server/inference/infer_dispatch.h"
#include "server/repository/model_manager_served_model.h"
#include "server/repository/model_names.h"

namespace convoy::http {

// Tasks other threads hand to the event loop (replies of completed requests). Post is safe from any thread; after
// Close, posted tasks are dropped.
class LoopTasks {
 public:
  explicit LoopTasks(event_base* base) : wake_(event_new(base, -1, 0, &LoopTasks::Run, this)) {}

  void Post(std::function<void()> task) {
    convoy::MutexLock lock(&mu_);
    if (wake_ == nullptr) return;
    tasks_.push_back(std::move(task));
    event_active(wake_, EV_TIMEOUT, 0);
  }

  // Call after the loop has stopped, before the event base is freed.
  void Close() {
    convoy::MutexLock lock(&mu_);
    tasks_.clear();
    if (wake_ != nullptr) event_free(wake_);
    wake_ = nullptr;
  }

 private:
  static void Run(evutil_socket_t, short, void* self) {
    auto* tasks = static_cast<LoopTasks*>(self);
    std::deque<std::function<void()>> batch;
    {
      convoy::MutexLock lock(&tasks->mu_);
      batch.swap(tasks->tasks_);
    }
    for (auto& task : batch) task();
  }

  convoy::Mutex mu_;
  event* wake_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

namespace {

using repository::QuoteClientString;
using repository::ServedModel;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr char kJson[] = "application/json";

void Reply(evhttp_request* req, int code, std::string body, const char* content_type,
           std::optional<size_t> header_length = std::nullopt, const char* allow = nullptr,
           const char* content_encoding = nullptr) {
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  evhttp_add_header(headers, "Content-Type", content_type);
  if (content_encoding != nullptr) {
    evhttp_add_header(headers, "Content-Encoding", content_encoding);
    evhttp_add_header(headers, "Vary", "Accept-Encoding");
  }
  if (header_length.has_value()) {
    evhttp_add_header(headers, "Inference-Header-Content-Length", absl::StrCat(*header_length).c_str());
  }
  if (allow != nullptr) evhttp_add_header(headers, "Allow", allow);
  evbuffer* out = evbuffer_new();
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {  // the length of the answer, without the answer
    evhttp_add_header(headers, "Content-Length", absl::StrCat(body.size()).c_str());
    body.clear();
  }
  auto* owned = new std::string(std::move(body));
  evbuffer_add_reference(
      out, owned->data(), owned->size(),
      [](const void*, size_t, void* s) { delete static_cast<std::string*>(s); }, owned);
  evhttp_send_reply(req, code, HttpReasonPhrase(code), out);
  evbuffer_free(out);
}

void ReplyStatus(evhttp_request* req, const absl::Status& status) {
  Reply(req, HttpStatusCode(status), ErrorJson(status.message()), kJson);
}

void ReplyJson(evhttp_request* req, int code, const rapidjson::StringBuffer& json) {
  Reply(req, code, std::string(json.GetString(), json.GetSize()), kJson);
}

void Key(JsonWriter& w, const char* key, absl::string_view value) {
  w.Key(key);
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

// What a path asks for: a route kind and, under /v2/models/, the model and version.
struct Target {
  enum Kind {
    kNone, kLive, kReady, kServerMetadata, kModelMetadata, kModelReady, kModelConfig, kModelStats, kAllStats, kInfer,
    kRepositoryIndex, kModelLoad, kModelUnload
  } kind = kNone;
  std::string model;
  std::string version;
};

Target Parse(const std::string& path) {
  Target t;
  if (path == "/v2/health/live") t.kind = Target::kLive;
  if (path == "/v2/health/ready") t.kind = Target::kReady;
  if (path == "/v2" || path == "/v2/") t.kind = Target::kServerMetadata;
  if (path == "/v2/models/stats") t.kind = Target::kAllStats;  // as Triton: every model's statistics
  if (path == "/v2/repository/index") t.kind = Target::kRepositoryIndex;
  constexpr absl::string_view kRepositoryModels = "/v2/repository/models/";
  if (t.kind == Target::kNone && absl::StartsWith(path, kRepositoryModels)) {
    std::vector<std::string> parts = absl::StrSplit(absl::string_view(path).substr(kRepositoryModels.size()), '/');
    if (parts.size() == 2 && !parts[0].empty() && (parts[1] == "load" || parts[1] == "unload")) {
      t.model = parts[0];
      t.kind = parts[1] == "load" ? Target::kModelLoad : Target::kModelUnload;
    }
    return t;
  }
  constexpr absl::string_view kModels = "/v2/models/";
  if (t.kind != Target::kNone || !absl::StartsWith(path, kModels)) return t;
  std::vector<std::string> parts = absl::StrSplit(absl::string_view(path).substr(kModels.size()), '/');
  if (parts.empty() || parts[0].empty()) return t;
  t.model = parts[0];
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions" && !parts[2].empty()) {
    t.version = parts[2];
    next = 3;
  }
  if (parts.size() == next) {
    t.kind = Target::kModelMetadata;
  } else if (parts.size() == next + 1) {
    if (parts[next] == "ready") t.kind = Target::kModelReady;
    if (parts[next] == "config") t.kind = Target::kModelConfig;
    if (parts[next] == "stats") t.kind = Target::kModelStats;
    if (parts[next] == "infer") t.kind = Target::kInfer;
  }
  return t;
}

const char* MethodName(evhttp_cmd_type method) {
  switch (method) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
  }
  return "?";
}

void ModelMetadata(evhttp_request* req, repository::ModelManager& manager, const ServedModel& model) {
  rapidjson::StringBuffer json;
  JsonWriter w(json);
  w.StartObject();
  Key(w, "name", model.name());
  w.Key("versions");
  w.StartArray();
  for (const auto& other : manager.ServedModels()) {
    if (other->name() == model.name()) w.String(absl::StrCat(other->version()).c_str());
  }
  w.EndArray();
  Key(w, "platform", grpc_server::PlatformName(model.config()));
  for (const char* side : {"inputs", "outputs"}) {
    w.Key(side);
    w.StartArray();
    for (const runtime::TensorMetadata& t :
         std::strcmp(side, "inputs") == 0 ? model.signature().inputs : model.signature().outputs) {
      w.StartObject();
      Key(w, "name", t.name);
      Key(w, "datatype", DataTypeName(t.datatype));
      w.Key("shape");
      w.StartArray();
      for (int64_t d : t.dims) w.Int64(d);
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  ReplyJson(req, 200, json);
}

void ModelConfig(evhttp_request* req, const ServedModel& model, bool on_gpu) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto printed =
      google::protobuf::util::MessageToJsonString(grpc_server::ToModelConfigProto(model, on_gpu), &json, options);
  if (!printed.ok()) {
    return ReplyStatus(req, absl::InternalError(absl::StrCat("cannot print the config of model '", model.name(),
                                                             "' as JSON: ", printed.ToString())));
  }
  Reply(req, 200, std::move(json), kJson);
}

void Duration(JsonWriter& w, const char* key, const repository::DurationStat& d) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(d.count);
  w.Key("ns");
  w.Uint64(d.ns);
  w.EndObject();
}

// Triton's statistics extension: {"model_stats": [...]} with the fields of gRPC's ModelStatistics (the same
// numbers), counts and nanoseconds as JSON numbers. An empty name: every model; a name: its READY versions (or
// `version`); an unknown model or version is the lookup's error.
void ModelStatistics(evhttp_request* req, repository::ModelManager& manager, const std::string& name,
                     const std::string& version) {
  if (!name.empty()) {
    absl::StatusOr<std::shared_ptr<ServedModel>> served = manager.GetServedModel(name, version);
    if (!served.ok()) return ReplyStatus(req, served.status());
  }
  rapidjson::StringBuffer json;
  JsonWriter w(json);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& model : manager.ServedModels()) {
    if (!name.empty() && model->name() != name) continue;
    if (!version.empty() && absl::StrCat(model->version()) != version) continue;
    const repository::ModelStats s = model->stats();
    w.StartObject();
    Key(w, "name", model->name());
    Key(w, "version", absl::StrCat(model->version()));
    w.Key("last_inference");
    w.Uint64(s.last_inference_ms);
    w.Key("inference_count");
    w.Uint64(s.inference_count);
    w.Key("execution_count");
    w.Uint64(s.execution_count);
    w.Key("inference_stats");
    w.StartObject();
    Duration(w, "success", s.success);
    Duration(w, "fail", s.fail);
    Duration(w, "queue", s.queue);
    Duration(w, "compute_input", s.compute_input);
    Duration(w, "compute_infer", s.compute_infer);
    Duration(w, "compute_output", s.compute_output);
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (const auto& [size, batch] : s.batch_stats) {
      w.StartObject();
      w.Key("batch_size");
      w.Int64(size);
      Duration(w, "compute_input", batch.compute_input);
      Duration(w, "compute_infer", batch.compute_infer);
      Duration(w, "compute_output", batch.compute_output);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  ReplyJson(req, 200, json);
}

// The Inference-Header-Content-Length header: absent, or a non-negative decimal integer.
absl::StatusOr<std::optional<size_t>> HeaderLength(evhttp_request* req) {
  const char* value = evhttp_find_header(evhttp_request_get_input_headers(req), "Inference-Header-Content-Length");
  if (value == nullptr) return std::optional<size_t>();
  uint64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || value[0] == '-' || value[0] == '+') {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length: expected a non-negative "
                                                   "integer, got ", QuoteClientString(value)));
  }
  return std::optional<size_t>(static_cast<size_t>(n));
}


// The JSON object of a repository request's body (an empty body is an empty object). `what` names the request in
// the messages, e.g. "load of model 'm'".
absl::StatusOr<rapidjson::Document> RepositoryRequestBody(evhttp_request* req, const std::string& what) {
  rapidjson::Document body;
  body.SetObject();
  evbuffer* in = evhttp_request_get_input_buffer(req);
  const size_t size = evbuffer_get_length(in);
  if (size == 0) return body;
  const char* text = reinterpret_cast<const char*>(evbuffer_pullup(in, -1));
  rapidjson::Document parsed;
  parsed.Parse(text, size);
  if (parsed.HasParseError()) {
    return absl::InvalidArgumentError(absl::StrCat("the body of the ", what, " is not JSON: ",
                                                   rapidjson::GetParseError_En(parsed.GetParseError()),
                                                   " at offset ", parsed.GetErrorOffset()));
  }
  if (!parsed.IsObject()) {
    return absl::InvalidArgumentError(absl::StrCat("the body of the ", what, " must be a JSON object"));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const Options& options) {
  if (options.manager == nullptr) return absl::InvalidArgumentError("HttpServer needs a ModelManager");
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { evthread_use_pthreads(); });
  std::unique_ptr<HttpServer> server(new HttpServer(options));
  WorkerPool::Options workers;
  workers.threads = options.decode_threads;
  workers.max_queued = options.max_queued_decodes;
  workers.name = "HTTP request decoding";
  workers.item = "request";
  workers.limit_flag = "--http_decode_queue";
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Create(workers);
  if (!pool.ok()) return pool.status();
  server->decode_workers_ = std::move(*pool);
  WorkerPool::Options control;
  control.threads = 1;
  control.max_queued = 16;
  control.name = "model control";
  control.item = "load or unload request";
  absl::StatusOr<std::unique_ptr<WorkerPool>> control_pool = WorkerPool::Create(control);
  if (!control_pool.ok()) return control_pool.status();
  server->model_control_ = std::move(*control_pool);
  if (!options.tls_cert_pem.empty() || !options.tls_key_pem.empty() || !options.tls_client_ca_pem.empty()) {
    TlsContext::Options tls;
    tls.cert_pem = options.tls_cert_pem;
    tls.key_pem = options.tls_key_pem;
    tls.client_ca_pem = options.tls_client_ca_pem;
    absl::StatusOr<std::unique_ptr<TlsContext>> context = TlsContext::Create(tls);
    if (!context.ok()) return context.status();
    server->tls_ = std::move(*context);
  }
  server->base_ = event_base_new();
  server->http_ = server->base_ != nullptr ? evhttp_new(server->base_) : nullptr;
  if (server->http_ == nullptr) return absl::InternalError("libevent could not create an event base");
  evhttp* http = server->http_;
  evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                       EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                       EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
  evhttp_set_max_body_size(http, static_cast<ev_ssize_t>(options.max_body_bytes));
  evhttp_set_max_headers_size(http, static_cast<ev_ssize_t>(options.max_header_bytes));
  evhttp_set_timeout(http, static_cast<int>(absl::ToInt64Seconds(options.idle_timeout)));
  evhttp_set_flags(http, EVHTTP_SERVER_LINGERING_CLOSE);
  evhttp_set_default_content_type(http, kJson);
  evhttp_set_gencb(http, &HttpServer::OnRequest, server.get());
  ConnectionInputs::Options inputs;
  inputs.max_read_bytes = options.max_read_bytes;
  server->inputs_ = std::make_unique<ConnectionInputs>(inputs);
  evhttp_set_bevcb(http, &HttpServer::NewConnection, server.get());
  evhttp_bound_socket* bound =
      evhttp_bind_socket_with_handle(http, options.host.c_str(), static_cast<uint16_t>(options.port));
  if (bound == nullptr) {
    return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", options.host, ":", options.port, ": ",
                                               std::strerror(errno)));
  }
  server->bound_ = bound;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    server->port_ = ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                                         : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  server->tasks_ = std::make_shared<LoopTasks>(server->base_);
  server->loop_ = std::thread([base = server->base_] { event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY); });
  return server;
}

HttpServer::HttpServer(const Options& options) : options_(options) {}

HttpServer::~HttpServer() {
  Shutdown(absl::Now());
  decode_workers_.reset();  // waits for the decodes running; their replies go to the (stopped) loop's queue
  model_control_.reset();   // waits for a load or unload running; its reply is dropped the same way
  if (tasks_ != nullptr) tasks_->Close();
  if (http_ != nullptr) evhttp_free(http_);
  if (base_ != nullptr) event_base_free(base_);
}

void HttpServer::Shutdown(absl::Time deadline) {
  if (stopped_.exchange(true) || base_ == nullptr || !loop_.joinable()) return;
  tasks_->Post([this] {
    // Stop accepting: new connections are refused while those open finish their requests.
    if (bound_ != nullptr) evhttp_del_accept_socket(http_, bound_);
    bound_ = nullptr;
  });
  while (in_flight_.load() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  // Through the loop's task queue, not event_base_loopbreak directly: a break requested before the loop has
  // started would be forgotten when it starts.
  tasks_->Post([base = base_] { event_base_loopbreak(base); });
  loop_.join();
}

void HttpServer::OnRequest(evhttp_request* req, void* self) { static_cast<HttpServer*>(self)->Route(req); }

// libevent asks for each accepted connection's bufferevent here (then sets its socket, which starts a TLS
// handshake), and its input is watched (connection_input.h). Without an SSL (OpenSSL out of memory) a TLS server
// must not return null: evhttp would then serve the connection in plain text. A bufferevent pair takes no socket,
// so evhttp drops the connection instead.
bufferevent* HttpServer::NewConnection(event_base* base, void* self) {
  auto* server = static_cast<HttpServer*>(self);
  if (server->tls_ == nullptr) {
    bufferevent* connection = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (connection != nullptr) server->inputs_->Watch(connection, /*plain_socket=*/server->options_.max_read_bytes > 0);
    return connection;
  }
  SSL* ssl = server->tls_->NewConnection();
  bufferevent* connection =
      ssl != nullptr ? bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                     : nullptr;
  if (connection == nullptr) {
    bufferevent* pair[2] = {nullptr, nullptr};
    bufferevent_pair_new(base, 0, pair);
    if (pair[1] != nullptr) bufferevent_free(pair[1]);
    return pair[0];
  }
  // A client that closes without TLS's close_notify ends its connection like any other close.
  bufferevent_openssl_set_allow_dirty_shutdown(connection, 1);
  server->inputs_->Watch(connection, /*plain_socket=*/false);
  return connection;
}

void HttpServer::Route(evhttp_request* req) {
  // Replies go out as soon as they are written: without TCP_NODELAY, Nagle's algorithm holds a response behind the
  // client's delayed ACK of the previous segment (tens of ms per request on keep-alive connections).
  const absl::Time received = absl::Now();
  std::optional<absl::Time> first_byte;
  if (evhttp_connection* connection = evhttp_request_get_connection(req); connection != nullptr) {
    const int one = 1;
    bufferevent* bev = evhttp_connection_get_bufferevent(connection);
    setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    first_byte = inputs_->TakeRequestStart(bev);
  }
  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
  const char* raw_path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
  size_t length = 0;
  char* decoded = evhttp_uridecode(raw_path != nullptr ? raw_path : "", 0, &length);
  const std::string path = decoded != nullptr ? std::string(decoded, length) : std::string();
  std::free(decoded);
  const Target target = Parse(path);
  if (target.kind == Target::kNone) {
    return ReplyStatus(req, absl::NotFoundError(absl::StrCat("unknown path ", QuoteClientString(path),
                                                             " (KServe v2: /v2/health/live, /v2/health/ready, /v2, "
                                                             "/v2/models/{model}[/versions/{v}][/ready|/config|"
                                                             "/stats|/infer], /v2/models/stats, "
                                                             "/v2/repository/index, "
                                                             "/v2/repository/models/{model}/load|unload)")));
  }
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  const bool post = target.kind == Target::kInfer || target.kind == Target::kRepositoryIndex ||
                    target.kind == Target::kModelLoad || target.kind == Target::kModelUnload;
  if (post ? method != EVHTTP_REQ_POST : (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD)) {
    const char* allowed = post ? "POST" : "GET, HEAD";
    return Reply(req, 405,
                 ErrorJson(absl::StrCat("method ", MethodName(method), " is not allowed on ", QuoteClientString(path),
                                        "; allowed: ", allowed)),
                 kJson, std::nullopt, allowed);
  }
  repository::ModelManager& manager = *options_.manager;
  rapidjson::StringBuffer json;
  JsonWriter w(json);
  switch (target.kind) {
    case Target::kLive:
      w.StartObject();
      w.Key("live");
      w.Bool(true);
      w.EndObject();
      return ReplyJson(req, 200, json);
    case Target::kReady: {
      const bool ready = manager.IsReady();
      w.StartObject();
      w.Key("ready");
      w.Bool(ready);
      w.EndObject();
      return ReplyJson(req, ready ? 200 : 503, json);
    }
    case Target::kServerMetadata:
      w.StartObject();
      Key(w, "name", "convoy");
      Key(w, "version", options_.server_version);
      w.Key("extensions");
      w.StartArray();
      for (const char* e :
           {"classification", "model_configuration", "model_repository", "binary_tensor_data", "schedule_policy",
            "statistics"}) {
        w.String(e);
      }
      w.EndArray();
      w.EndObject();
      return ReplyJson(req, 200, json);
    case Target::kInfer: return Infer(req, target.model, target.version, first_byte, received);
    case Target::kAllStats: return ModelStatistics(req, manager, "", "");
    case Target::kModelStats: return ModelStatistics(req, manager, target.model, target.version);
    case Target::kRepositoryIndex: return RepositoryIndex(req);
    case Target::kModelLoad: return ModelControl(req, target.model, /*load=*/true);
    case Target::kModelUnload: return ModelControl(req, target.model, /*load=*/false);
    default: break;
  }
  absl::StatusOr<std::shared_ptr<ServedModel>> served = manager.GetServedModel(target.model, target.version);
  if (!served.ok()) return ReplyStatus(req, served.status());
  if (target.kind == Target::kModelMetadata) return ModelMetadata(req, manager, **served);
  if (target.kind == Target::kModelConfig) return ModelConfig(req, **served, options_.on_gpu);
  w.StartObject();
  Key(w, "name", (*served)->name());
  Key(w, "version", absl::StrCat((*served)->version()));
  w.Key("ready");
  w.Bool(true);
  w.EndObject();
  ReplyJson(req, 200, json);
}

// What an infer request carries from the loop thread to wherever it is decoded: what was read from the evhttp
// request, its body, and the parsed request whose views point into the body. The decode task and the completion
// callback share it; `req` is used only on the loop thread.
struct HttpServer::InferCall {
  evhttp_request* req = nullptr;
  std::string model;
  std::string version;
  std::optional<size_t> header_length;
  bool photo = false;               // Content-Type image/jpeg or image/png
  int64_t photo_classification = 5;  // ?classification=K of a photo body
  ContentCoding body_coding = ContentCoding::kIdentity;   // Content-Encoding
  ContentCoding reply_coding = ContentCoding::kIdentity;  // chosen from Accept-Encoding
  std::unique_ptr<evbuffer, void (*)(evbuffer*)> wire{nullptr, &evbuffer_free};  // the body, moved off the request
  std::string inflated;             // the body when it came compressed
  absl::string_view body;           // into the request's input buffer, `wire` or `inflated`
  // A binary-extension body left in `wire`'s chains (ViewBinaryBody): its JSON header in one piece, and the body.
  std::optional<infer::RawBytes> body_pieces;
  absl::string_view json_header;
  std::unique_ptr<HttpInferRequest> request;
  std::optional<absl::Time> first_byte;  // when the request's first bytes arrived (connection_input.h)
  absl::Time received;  // when the loop thread had the whole body: the start of the edge's decode phase
};

// An infer request's answer, written by the loop thread.
struct HttpServer::InferReply {
  int code = 200;
  std::string body;
  const char* content_type = kJson;
  std::optional<size_t> header_length;  // Inference-Header-Content-Length of a binary response
  const char* content_encoding = nullptr;  // gzip or deflate when compressed
  std::string model;    // the version that answered a successful infer (its send phase is timed)
  std::string version;

  static InferReply Error(const absl::Status& status) {
    InferReply reply;
    reply.code = HttpStatusCode(status);
    reply.body = ErrorJson(status.message());
    return reply;
  }
};

namespace {

// A photo body's `?classification=K` (how many top classes each classifier output answers; default 5, 0: the
// tensors).
absl::StatusOr<int64_t> PhotoClassification(evhttp_request* req) {
  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
  const char* query = uri != nullptr ? evhttp_uri_get_query(uri) : nullptr;
  int64_t classification = 5;
  if (query == nullptr) return classification;
  evkeyvalq pairs;
  if (evhttp_parse_query_str(query, &pairs) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("query ", QuoteClientString(query), " cannot be parsed"));
  }
  const char* k = evhttp_find_header(&pairs, "classification");
  const std::string value = k != nullptr ? k : "";
  evhttp_clear_headers(&pairs);
  if (k != nullptr && (!absl::SimpleAtoi(value, &classification) || classification < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("query parameter 'classification': expected an integer >= 0, "
                                                   "got ", QuoteClientString(value)));
  }
  return classification;
}

// A request whose body is a photo: the view of one BYTES element for the model's photo input, answered with the top
// classes of its classifier outputs.
std::unique_ptr<HttpInferRequest> ParsePhotoRequest(absl::string_view body, const std::string& model,
                                                    const std::string& version, int64_t classification) {
  auto request = std::make_unique<HttpInferRequest>();
  request->model = model;
  request->version = version;
  request->view.model = request->model;
  request->view.version = request->version;
  request->view.photo_body = true;
  request->view.photo_classification = classification;
  infer::InputTensorView photo;
  photo.datatype = "BYTES";
  photo.bytes_elements = std::vector<absl::string_view>{body};
  request->view.inputs.push_back(std::move(photo));
  return request;
}

}  // namespace

// A binary-extension body (its JSON header, then the tensors' bytes) is read where libevent's chains hold it: only
// the JSON header is made one piece (copied if it spans chains), and the tensors go from the chains straight into
// the batch's input buffers. False (and nothing changed) for any other body, which is pulled up into one piece.
bool HttpServer::ViewBinaryBody(InferCall* call, size_t length) {
  if (call->photo || call->body_coding != ContentCoding::kIdentity || !call->header_length.has_value() ||
      *call->header_length > length) {
    return false;
  }
  evbuffer* wire = call->wire.get();
  const size_t header = *call->header_length;
  const char* json = header > 0 ? reinterpret_cast<const char*>(evbuffer_pullup(wire, static_cast<ev_ssize_t>(header)))
                                : "";
  const int chains = evbuffer_peek(wire, -1, nullptr, nullptr, 0);
  if (json == nullptr || chains < 0) return false;
  std::vector<evbuffer_iovec> vectors(static_cast<size_t>(chains));
  if (evbuffer_peek(wire, -1, nullptr, vectors.data(), chains) != chains) return false;
  infer::RawBytes body;
  for (const evbuffer_iovec& v : vectors) body.Append(absl::string_view(static_cast<const char*>(v.iov_base), v.iov_len));
  if (body.size() != length) return false;
  call->json_header = absl::string_view(json, header);
  call->body_pieces = std::move(body);
  return true;
}

// The loop thread reads what it needs from the evhttp request, then the body is decoded (parsed, validated, copied
// into the batch's buffers, photos decoded) here for a small body, else on a decode worker, so a large body or photo
// never holds up the other connections. The request (and the evbuffer its view points into) lives until the reply:
// libevent keeps a request whose client went away until it is answered.
void HttpServer::Infer(evhttp_request* req, const std::string& model, const std::string& version,
                       std::optional<absl::Time> first_byte, absl::Time received) {
  absl::StatusOr<std::optional<size_t>> header_length = HeaderLength(req);
  if (!header_length.ok()) return ReplyStatus(req, header_length.status());
  auto call = std::make_shared<InferCall>();
  call->first_byte = first_byte;
  call->received = received;
  call->req = req;
  call->model = model;
  call->version = version;
  call->header_length = *header_length;
  evkeyvalq* headers = evhttp_request_get_input_headers(req);
  absl::StatusOr<ContentCoding> body_coding = RequestCoding(evhttp_find_header(headers, "Content-Encoding"));
  if (!body_coding.ok()) {  // RFC 9110: 415 for a content coding the server does not take
    return Reply(req, 415, ErrorJson(body_coding.status().message()), kJson);
  }
  call->body_coding = *body_coding;
  call->reply_coding = ResponseCoding(evhttp_find_header(headers, "Accept-Encoding"));
  const char* content_type = evhttp_find_header(headers, "Content-Type");
  const absl::string_view type = content_type != nullptr ? absl::string_view(content_type) : "";
  call->photo = absl::StartsWith(type, "image/jpeg") || absl::StartsWith(type, "image/png");
  if (call->photo) {
    absl::StatusOr<int64_t> classification = PhotoClassification(req);
    if (!classification.ok()) return ReplyStatus(req, classification.status());
    call->photo_classification = *classification;
  }
  evbuffer* in = evhttp_request_get_input_buffer(req);
  const size_t size = evbuffer_get_length(in);
  ++in_flight_;
  if (!call->photo && call->body_coding == ContentCoding::kIdentity && size <= options_.inline_decode_bytes) {
    call->body = size > 0 ? absl::string_view(reinterpret_cast<const char*>(evbuffer_pullup(in, -1)), size) : "";
    return Decode(call);
  }
  call->wire.reset(evbuffer_new());
  if (call->wire == nullptr || evbuffer_add_buffer(call->wire.get(), in) != 0) {  // moves the chains: no copy
    // Not movable (out of memory): the worker reads the body in the request's own buffer, pulled up here.
    call->wire.reset();
    call->body = size > 0 ? absl::string_view(reinterpret_cast<const char*>(evbuffer_pullup(in, -1)), size) : "";
  }
  absl::Status queued = decode_workers_->Submit([this, call] {
    if (options_.before_worker_decode) options_.before_worker_decode();
    const size_t length = call->wire != nullptr ? evbuffer_get_length(call->wire.get()) : 0;
    if (length > 0 && !ViewBinaryBody(call.get(), length)) {
      call->body = absl::string_view(reinterpret_cast<const char*>(evbuffer_pullup(call->wire.get(), -1)), length);
    }
    Decode(call);
  });
  if (!queued.ok()) {
    --in_flight_;
    ReplyStatus(req, queued);
  }
}

// Parses and queues `call` on the loop thread or a decode worker, encodes the response on the thread that completes
// it, and hands the reply to the loop. Uses `this` only on those two threads (the server outlives both); the
// completion callback reaches the loop through the shared task queue alone, which drops it once the server is gone.
void HttpServer::Decode(const std::shared_ptr<InferCall>& call) {
  const absl::Time received = call->received;
  const std::optional<absl::Time> first_byte = call->first_byte;
  std::shared_ptr<LoopTasks> tasks = tasks_;
  if (call->body_coding != ContentCoding::kIdentity) {
    absl::StatusOr<std::string> inflated =
        Inflate(call->body, call->body_coding, options_.max_body_bytes, "--http_max_body_bytes");
    if (!inflated.ok()) {
      InferReply reply = InferReply::Error(inflated.status());
      if (absl::IsResourceExhausted(inflated.status())) reply.code = 413;  // as libevent answers a raw body too large
      return PostReply(tasks, this, call, std::move(reply));
    }
    call->inflated = std::move(*inflated);
    call->body = call->inflated;
    call->wire.reset();
  }
  if (call->photo) {
    call->request = ParsePhotoRequest(call->body, call->model, call->version, call->photo_classification);
  } else {
    absl::StatusOr<std::unique_ptr<HttpInferRequest>> parsed =
        call->body_pieces.has_value()
            ? ParseInferRequest(call->json_header, *call->body_pieces, call->header_length, call->model,
                                call->version)
            : ParseInferRequest(call->body, call->header_length, call->model, call->version);
    if (!parsed.ok()) return PostReply(tasks, this, call, InferReply::Error(parsed.status()));
    call->request = std::move(*parsed);
  }
  infer::StartInfer(*options_.manager, call->request->view, absl::InfiniteFuture(), nullptr,
                    [server = this, call, tasks, received, first_byte](absl::Status status, const ServedModel* served,
                                                           const std::vector<infer::RequestedOutput>& outputs,
                                                           const repository::InferencePayload* payload) {
                      if (!status.ok()) return PostReply(tasks, server, call, InferReply::Error(status));
                      const absl::Time encoding = absl::Now();
                      absl::StatusOr<std::vector<infer::ResponseTensor>> tensors =
                          infer::ResponseTensors(*served, outputs, *payload);
                      if (!tensors.ok()) return PostReply(tasks, server, call, InferReply::Error(tensors.status()));
                      HttpInferResponse response =
                          EncodeInferResponse(served->name(), served->version(), *call->request, *tensors);
                      InferReply reply;
                      reply.content_type = response.header_length.has_value() ? "application/octet-stream" : kJson;
                      reply.header_length = response.header_length;
                      if (call->reply_coding == ContentCoding::kIdentity) {
                        reply.body = std::move(response.body);
                      } else {
                        absl::StatusOr<std::string> compressed = Compress(response.body, call->reply_coding);
                        if (!compressed.ok()) {
                          return PostReply(tasks, server, call, InferReply::Error(compressed.status()));
                        }
                        reply.body = std::move(*compressed);
                        reply.content_encoding = ContentCodingName(call->reply_coding);
                      }
                      metrics::EdgeTimes times;
                      if (first_byte.has_value()) times.receive = received - *first_byte;
                      times.decode = payload->queued_at - received;
                      times.encode = absl::Now() - encoding;
                      served->RecordEdge(metrics::EdgeProtocol::kHttp, times);
                      reply.model = served->name();
                      reply.version = absl::StrCat(served->version());
                      PostReply(tasks, server, call, std::move(reply));
                    });
}

// Runs on any thread: the reply is written by the loop, which then counts the request as answered. `server` is
// dereferenced only there, while the loop runs (so while the server exists).
void HttpServer::PostReply(const std::shared_ptr<LoopTasks>& tasks, HttpServer* server,
                           const std::shared_ptr<InferCall>& call, InferReply reply) {
  tasks->Post([server, req = call->req, reply = std::move(reply), posted = absl::Now()]() mutable {
    if (!reply.model.empty()) server->TimeSend(req, std::move(reply.model), std::move(reply.version), posted);
    Reply(req, reply.code, std::move(reply.body), reply.content_type, reply.header_length, nullptr,
          reply.content_encoding);
    --server->in_flight_;
  });
}

// The send phase of a successful infer: from the reply handed to the loop (`posted`) to libevent's write of its
// last byte (the request's completion callback). A request whose connection fails before that never completes:
// its entry is dropped once more than kMaxTimedSends wait, if it is older than a minute.
void HttpServer::TimeSend(evhttp_request* req, std::string model, std::string version, absl::Time posted) {
  constexpr size_t kMaxTimedSends = 1024;
  if (sending_.size() >= kMaxTimedSends) {
    const absl::Time now = absl::Now();
    for (auto it = sending_.begin(); it != sending_.end();) {
      it = now - it->second.posted > absl::Minutes(1) ? sending_.erase(it) : std::next(it);
    }
    if (sending_.size() >= kMaxTimedSends) return;
  }
  sending_[req] = PendingSend{std::move(model), std::move(version), posted};
  evhttp_request_set_on_complete_cb(req, &HttpServer::OnReplySent, this);
}

void HttpServer::OnReplySent(evhttp_request* req, void* self) {
  auto* server = static_cast<HttpServer*>(self);
  auto it = server->sending_.find(req);
  if (it == server->sending_.end()) return;
  const absl::Duration send = absl::Now() - it->second.posted;
  absl::StatusOr<std::shared_ptr<ServedModel>> model =
      server->options_.manager->GetServedModel(it->second.model, it->second.version);
  if (model.ok()) (*model)->RecordEdgeSend(metrics::EdgeProtocol::kHttp, send);
  server->sending_.erase(it);
}

// Triton's repository extension over HTTP, the same as gRPC's RepositoryIndex: a JSON array of every model version
// the repository knows ({"name", "version" when known, "state", "reason" when there is one}); `{"ready": true}` in the
// body keeps the READY ones only.
void HttpServer::RepositoryIndex(evhttp_request* req) {
  absl::StatusOr<rapidjson::Document> body = RepositoryRequestBody(req, "repository index request");
  if (!body.ok()) return ReplyStatus(req, body.status());
  bool ready_only = false;
  if (auto ready = body->FindMember("ready"); ready != body->MemberEnd()) {
    if (!ready->value.IsBool()) {
      return ReplyStatus(req, absl::InvalidArgumentError("repository index request: 'ready' must be true or false"));
    }
    ready_only = ready->value.GetBool();
  }
  rapidjson::StringBuffer json;
  JsonWriter w(json);
  w.StartArray();
  for (const repository::ModelVersionStatus& status : options_.manager->Index()) {
    if (ready_only && status.state != repository::ModelState::kReady) continue;
    w.StartObject();
    Key(w, "name", status.model);
    if (status.version > 0) Key(w, "version", absl::StrCat(status.version));
    Key(w, "state", repository::ModelStateName(status.state));
    if (!status.reason.empty()) Key(w, "reason", status.reason);
    w.EndObject();
  }
  w.EndArray();
  ReplyJson(req, 200, json);
}

// POST /v2/repository/models/{model}/load or /unload: the model manager's LoadModel / UnloadModel (which refuse
// both unless the server runs with --model_control_mode=explicit), on the model-control thread; 200 with an empty
// body when done, else the error as JSON. A load's "parameters" (Triton's config and file overrides) are refused:
// Convoy loads the files the repository holds.
void HttpServer::ModelControl(evhttp_request* req, const std::string& model, bool load) {
  const std::string what = absl::StrCat(load ? "load" : "unload", " of model ", QuoteClientString(model));
  absl::StatusOr<rapidjson::Document> body = RepositoryRequestBody(req, what);
  if (!body.ok()) return ReplyStatus(req, body.status());
  if (auto parameters = body->FindMember("parameters"); load && parameters != body->MemberEnd()) {
    if (!parameters->value.IsObject()) {
      return ReplyStatus(req, absl::InvalidArgumentError(absl::StrCat(what, ": 'parameters' must be a JSON object")));
    }
    if (parameters->value.MemberCount() > 0) {
      return ReplyStatus(
          req, absl::InvalidArgumentError(absl::StrCat(
                   what, ": load parameters are not supported (got ",
                   QuoteClientString(parameters->value.MemberBegin()->name.GetString()),
                   "); Convoy loads the model's config.yaml and files as the repository holds them")));
    }
  }
  ++in_flight_;
  std::shared_ptr<LoopTasks> tasks = tasks_;
  repository::ModelManager* manager = options_.manager;
  absl::Status queued = model_control_->Submit([tasks, manager, server = this, req, model, load] {
    const absl::Status status = load ? manager->LoadModel(model) : manager->UnloadModel(model);
    tasks->Post([server, req, status] {
      if (status.ok()) {
        Reply(req, 200, std::string(), kJson);
      } else {
        ReplyStatus(req, status);
      }
      --server->in_flight_;
    });
  });
  if (!queued.ok()) {
    --in_flight_;
    ReplyStatus(req, queued);
  }
}

}  // namespace convoy::http
