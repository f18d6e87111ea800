// The HTTP/REST server in-process (ModelManager + HttpServer on a loopback ephemeral port) driven over real
// sockets: request bodies are decoded on the decode workers, not on the event loop, so a photo held in its decode
// does not hold health checks, small requests or another decode; decode errors keep their exact messages; a full
// decode queue is a 503 naming the limit. A test hook holds a decode until the test lets it go: every check is
// on the order of events, none on a duration (the suite also runs under ThreadSanitizer on a loaded machine).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/mutex.h"
#include "kernels/cpu/cpu_device.h"
#include "rapidjson/document.h"
#include "server/http/http_server.h"
#include "server/imaging/image_decoder.h"
#include "server/imaging/image_resize.h"
#include "server/imaging/test_images.h"
#include "server/repository/model_manager.h"
#include "tests/integration/test_repository.h"

namespace convoy {
namespace {

using ::convoy::testing::SimpleCnnConfig;
using ::convoy::testing::TestRepository;

// simple_cnn behind a UINT8 [32, 32, 3] input that also takes photos.
std::string PhotoCnnConfig(const std::string& name) {
  return "name: " + name + "\nformat: convoy\nmax_batch_size: 8\ninputs:\n  - name: images\n    datatype: UINT8\n"
         "    dims: [32, 32, 3]\n    layout: NHWC\n"
         "    preprocessing: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}\n"
         "    encoded_image: {crop_fraction: 0.875}\n"
         "outputs:\n  - name: probabilities\n    datatype: FP32\n    dims: [10]\n    labels: labels.txt\n"
         "dynamic_batching:\n  max_queue_delay_microseconds: 500\n";
}

// Holds the first `hold` decodes that enter until Open (or a minute, so a failing test ends instead of hanging).
class DecodeGate {
 public:
  explicit DecodeGate(int hold) : hold_(hold) {}
  void Enter() {
    convoy::MutexLock lock(&mu_);
    if (entered_++ >= hold_) return;
    mu_.AwaitWithTimeout(absl::Condition(&open_), absl::Minutes(1));
  }
  void Open() {
    convoy::MutexLock lock(&mu_);
    open_ = true;
  }
  bool WaitEntered(int n) {
    convoy::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }

 private:
  const int hold_;
  convoy::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
};

struct HttpAnswer {
  int status = 0;
  std::string headers;
  std::string body;
};

// One request on its own connection (Connection: close), read to the end. A minute's receive timeout ends an
// exchange the server never answers (status 0 then).
HttpAnswer Exchange(int port, const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& headers = "") {
  HttpAnswer answer;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return answer;
  timeval timeout{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return answer;
  }
  const std::string request = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
                                           headers, "Content-Length: ", body.size(), "\r\n\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char chunk[65536];
  for (ssize_t n; (n = recv(fd, chunk, sizeof(chunk), 0)) > 0;) response.append(chunk, static_cast<size_t>(n));
  close(fd);
  const size_t end = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return answer;
  answer.status = std::atoi(response.c_str() + 9);
  answer.headers = response.substr(0, end);
  answer.body = response.substr(end + 4);
  return answer;
}

// The "error" of an {"error": "..."} body ("" when the body is not one).
std::string ErrorMessage(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.c_str(), body.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsString()) return "";
  return d["error"].GetString();
}

// The string entries of outputs[index].data of an infer response ("score:index:label" for a classification).
std::vector<std::string> OutputStrings(const std::string& body, size_t index = 0) {
  rapidjson::Document d;
  d.Parse(body.c_str(), body.size());
  std::vector<std::string> out;
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("outputs")) return out;
  const auto& outputs = d["outputs"];
  if (!outputs.IsArray() || outputs.Size() <= index || !outputs[index].HasMember("data")) return out;
  for (const auto& v : outputs[index]["data"].GetArray()) out.push_back(v.IsString() ? v.GetString() : "?");
  return out;
}

// Two top-k answers ("score:index:label") name the same classes in the same order with scores within 1e-5 (the two
// requests may have run in batches of different sizes).
void ExpectSameClasses(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t ca = a[i].find(':'), cb = b[i].find(':');
    ASSERT_NE(ca, std::string::npos);
    ASSERT_NE(cb, std::string::npos);
    EXPECT_EQ(a[i].substr(ca), b[i].substr(cb));
    EXPECT_NEAR(std::stod(a[i].substr(0, ca)), std::stod(b[i].substr(0, cb)), 1e-5) << a[i] << " vs " << b[i];
  }
}

// A JSON infer of UINT8 [1, 32, 32, 3] pixels asking for the top 5 classes.
std::string PixelsRequest(const std::vector<uint8_t>& pixels) {
  return absl::StrCat(R"({"inputs":[{"name":"images","datatype":"UINT8","shape":[1,32,32,3],"data":[)",
                      absl::StrJoin(pixels, ","),
                      R"(]}],"outputs":[{"name":"probabilities","parameters":{"classification":5}}]})");
}

// A JSON infer of FP32 [batch, channels, 32, 32] images with random values of two decimals (about 5.5 bytes each:
// one image of one or two channels stays under the 16 KiB inline limit, five of three are far over it).
std::string ImagesRequest(int batch, uint32_t seed, int channels = 3) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-99, 99);
  std::vector<std::string> values(static_cast<size_t>(batch) * channels * 32 * 32);
  for (std::string& v : values) v = absl::StrCat(dist(rng) / 100.0);
  return absl::StrCat(R"({"inputs":[{"name":"images","datatype":"FP32","shape":[)", batch, ",", channels,
                      R"(,32,32],"data":[)", absl::StrJoin(values, ","), "]}]}");
}

class HttpHarness {
 public:
  HttpHarness(const TestRepository& repo, int decode_threads, size_t max_queued, DecodeGate* gate) {
    repository::ModelManager::Options options;
    options.repository_path = repo.path();
    options.control_mode = repository::ModelControlMode::kNone;
    options.device = &CpuDevice::Default();
    options.start_poll_thread = false;
    manager = std::move(repository::ModelManager::Create(options)).value();
    http::HttpServer::Options server_options;
    server_options.host = "127.0.0.1";
    server_options.port = 0;
    server_options.manager = manager.get();
    server_options.decode_threads = decode_threads;
    server_options.max_queued_decodes = max_queued;
    server_options.inline_decode_bytes = 16 << 10;
    if (gate != nullptr) server_options.before_worker_decode = [gate] { gate->Enter(); };
    server = std::move(http::HttpServer::Start(server_options)).value();
  }
  ~HttpHarness() {
    manager->Shutdown(absl::Now() + absl::Seconds(10)).IgnoreError();
    server->Shutdown(absl::Now() + absl::Seconds(10));
  }
  int port() const { return server->port(); }

  std::unique_ptr<repository::ModelManager> manager;
  std::unique_ptr<http::HttpServer> server;
};

std::string Photo(uint32_t seed) {
  return imaging::testing::EncodeJpeg(imaging::testing::RandomImage(120, 90, seed), 90);
}

// The UINT8 [32, 32, 3] pixels the server makes of `photo` (decode, centre crop 0.875, resize).
std::vector<uint8_t> PhotoPixels(const std::string& photo) {
  std::vector<uint8_t> pixels(32 * 32 * 3, 0);
  absl::StatusOr<imaging::RgbImage> image = imaging::DecodeImage(photo);
  EXPECT_TRUE(image.ok()) << image.status();
  if (image.ok()) {
    EXPECT_TRUE(imaging::CenterCropAndResize(*image, 32, 32, 0.875, pixels.data()).ok());
  }
  return pixels;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
    repo_.AddSimpleCnn("photo_cnn", PhotoCnnConfig("photo_cnn"));
  }
  TestRepository repo_;
};

TEST_F(HttpServerTest, APhotoHeldInItsDecodeHoldsNoOtherRequest) {
  DecodeGate gate(/*hold=*/1);
  HttpHarness harness(repo_, /*decode_threads=*/2, /*max_queued=*/8, &gate);
  const std::string photo = Photo(std::random_device{}());
  std::atomic<bool> photo_answered{false};
  HttpAnswer photo_answer;
  std::thread client([&] {
    photo_answer = Exchange(harness.port(), "POST", "/v2/models/photo_cnn/infer", photo,
                            "Content-Type: image/jpeg\r\n");
    photo_answered = true;
  });
  ASSERT_TRUE(gate.WaitEntered(1)) << "the photo never reached a decode worker";

  // While that decode is held: the loop answers health and metadata, decodes a small JSON request itself, and the
  // second worker decodes a large one (a 5-image JSON body, far over the inline limit).
  HttpAnswer live = Exchange(harness.port(), "GET", "/v2/health/live");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, R"({"live":true})");
  EXPECT_EQ(Exchange(harness.port(), "GET", "/v2/health/ready").status, 200);
  EXPECT_EQ(Exchange(harness.port(), "GET", "/v2/models/cnn").status, 200);
  HttpAnswer small = Exchange(harness.port(), "POST", "/v2/models/cnn/infer", ImagesRequest(1, 1, 1));
  EXPECT_EQ(small.status, 400);
  EXPECT_EQ(ErrorMessage(small.body), "input 'images': expected shape [-1,3,32,32], got [1,1,32,32]");
  HttpAnswer large = Exchange(harness.port(), "POST", "/v2/models/cnn/infer", ImagesRequest(5, 2));
  EXPECT_EQ(large.status, 200) << large.body;
  EXPECT_NE(large.body.find(R"("shape":[5,10])"), std::string::npos) << large.body;
  EXPECT_FALSE(photo_answered) << "the photo was answered while its decode was held";

  gate.Open();
  client.join();
  ASSERT_EQ(photo_answer.status, 200) << photo_answer.body;
  // The photo answers the same top 5 as its pixels sent as a tensor.
  const std::vector<std::string> from_photo = OutputStrings(photo_answer.body);
  HttpAnswer pixels = Exchange(harness.port(), "POST", "/v2/models/photo_cnn/infer", PixelsRequest(PhotoPixels(photo)));
  ASSERT_EQ(pixels.status, 200) << pixels.body;
  EXPECT_EQ(from_photo.size(), 5u);
  EXPECT_EQ(from_photo, OutputStrings(pixels.body));
}

TEST_F(HttpServerTest, DecodeErrorsOnTheWorkersKeepTheirMessages) {
  HttpHarness harness(repo_, /*decode_threads=*/2, /*max_queued=*/8, nullptr);
  const std::string photo = Photo(std::random_device{}());
  const std::string truncated = photo.substr(0, photo.size() / 2);
  absl::StatusOr<imaging::RgbImage> decoded = imaging::DecodeImage(truncated);
  ASSERT_FALSE(decoded.ok());
  HttpAnswer answer = Exchange(harness.port(), "POST", "/v2/models/photo_cnn/infer", truncated,
                               "Content-Type: image/jpeg\r\n");
  EXPECT_EQ(answer.status, 400);
  EXPECT_EQ(ErrorMessage(answer.body), absl::StrCat("input 'images': batch item 0: ", decoded.status().message()));

  answer = Exchange(harness.port(), "POST", "/v2/models/cnn/infer", photo, "Content-Type: image/jpeg\r\n");
  EXPECT_EQ(answer.status, 400);
  EXPECT_EQ(ErrorMessage(answer.body),
            "model 'cnn' does not take a photo as the request body: that needs exactly one input, with "
            "encoded_image in its config (docs/model_config.md); it has inputs ['images'] without encoded_image");

  // The same wrong shape gets the same answer decoded on the loop (small body) and on a worker (large body).
  for (int batch : {1, 6}) {
    SCOPED_TRACE(batch);
    answer = Exchange(harness.port(), "POST", "/v2/models/cnn/infer", ImagesRequest(batch, 3, 2));
    EXPECT_EQ(answer.status, 400);
    EXPECT_EQ(ErrorMessage(answer.body),
              absl::StrCat("input 'images': expected shape [-1,3,32,32], got [", batch, ",2,32,32]"));
  }
  answer = Exchange(harness.port(), "POST", "/v2/models/nope/infer", ImagesRequest(6, 4));
  EXPECT_EQ(answer.status, 404);
  EXPECT_EQ(ErrorMessage(answer.body), "unknown model 'nope'");
}

TEST_F(HttpServerTest, AFullDecodeQueueAnswers503AndServingGoesOn) {
  DecodeGate gate(/*hold=*/1);
  HttpHarness harness(repo_, /*decode_threads=*/1, /*max_queued=*/1, &gate);
  const std::string photo = Photo(std::random_device{}());
  HttpAnswer first;
  std::thread held([&] {
    first = Exchange(harness.port(), "POST", "/v2/models/photo_cnn/infer", photo, "Content-Type: image/jpeg\r\n");
  });
  ASSERT_TRUE(gate.WaitEntered(1));
  // The one thread is held: of the next two photos one waits in the queue and the other is refused at once.
  convoy::Mutex mu;
  std::vector<HttpAnswer> answers;
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([&] {
      HttpAnswer a =
          Exchange(harness.port(), "POST", "/v2/models/photo_cnn/infer", photo, "Content-Type: image/jpeg\r\n");
      convoy::MutexLock lock(&mu);
      answers.push_back(std::move(a));
    });
  }
  {
    convoy::MutexLock lock(&mu);
    auto one = [&]() { return !answers.empty(); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one), absl::Minutes(1)));
    EXPECT_EQ(answers[0].status, 503);
    EXPECT_EQ(ErrorMessage(answers[0].body),
              "HTTP request decoding is busy: 1 request waits for its 1 thread (the limit, --http_decode_queue); "
              "try again");
  }
  EXPECT_EQ(Exchange(harness.port(), "GET", "/v2/health/live").status, 200);
  gate.Open();
  held.join();
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].status, 200) << answers[1].body;
  ExpectSameClasses(OutputStrings(answers[1].body), OutputStrings(first.body));
}

}  // namespace
}  // namespace convoy
