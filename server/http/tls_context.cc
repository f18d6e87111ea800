#include "server/http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace convoy::http {
namespace {

// OpenSSL's queued errors as one line (and the queue emptied), or `otherwise` when there are none.
std::string OpenSslErrors(const char* otherwise) {
  std::string text;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(e, line, sizeof(line));
    absl::StrAppend(&text, text.empty() ? "" : "; ", line);
  }
  return text.empty() ? otherwise : text;
}

absl::Status PemError(const char* flag, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("HTTP TLS: ", flag, ": ", what, " (",
                                                 OpenSslErrors("no PEM block found"), ")"));
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
std::unique_ptr<BIO, BioDeleter> ReadOnlyBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The certificate chain of --tls_cert: the first certificate is the server's, the rest its intermediates.
absl::Status UseCertificateChain(SSL_CTX* ctx, const std::string& pem) {
  auto bio = ReadOnlyBio(pem);
  X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr) return PemError("--tls_cert", "holds no PEM certificate");
  const int used = SSL_CTX_use_certificate(ctx, leaf);
  X509_free(leaf);
  if (used != 1) return PemError("--tls_cert", "the certificate cannot be used");
  while (X509* intermediate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, intermediate) != 1) {  // takes ownership on success only
      X509_free(intermediate);
      return PemError("--tls_cert", "an intermediate certificate cannot be used");
    }
  }
  ERR_clear_error();  // the end of the PEM text reads as an error
  return absl::OkStatus();
}

absl::Status UsePrivateKey(SSL_CTX* ctx, const std::string& pem) {
  auto bio = ReadOnlyBio(pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return PemError("--tls_key", "holds no PEM private key");
  const int used = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return PemError("--tls_key", "the private key does not belong to the certificate of --tls_cert");
  }
  return absl::OkStatus();
}

// Mutual TLS: every certificate of --tls_client_ca is trusted to sign clients, and a client must present one.
absl::Status RequireClientCertificates(SSL_CTX* ctx, const std::string& pem) {
  auto bio = ReadOnlyBio(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    const bool added = X509_STORE_add_cert(store, ca) == 1 && SSL_CTX_add_client_CA(ctx, ca) == 1;
    X509_free(ca);
    if (!added) return PemError("--tls_client_ca", "a CA certificate cannot be used");
    ++count;
  }
  if (count == 0) return PemError("--tls_client_ca", "holds no PEM certificate");
  ERR_clear_error();
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return absl::OkStatus();
}

// OpenSSL's handshake progress callback. When a handshake fails because the client sent a plain HTTP request
// (OpenSSL checks the first record for "GET ", "POST ", "HEAD ", "PUT "; no TLS alert is sent then), the socket gets
// the plain-text answer before libevent closes it. The rest of the request is read and dropped first, so that the
// close is a FIN after the answer rather than a reset that could discard it at the client.
void AnswerPlainHttp(const SSL* ssl, int where, int ret) {
  if ((where & SSL_CB_EXIT) == 0 || ret > 0) return;
  const unsigned long error = ERR_peek_last_error();
  if (ERR_GET_LIB(error) != ERR_LIB_SSL || ERR_GET_REASON(error) != SSL_R_HTTP_REQUEST) return;
  const int fd = SSL_get_fd(ssl);
  if (fd < 0) return;
  const std::string& answer = TlsContext::PlainHttpAnswer();
  if (send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return;
  char discard[4096];
  while (recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0) {
  }
  shutdown(fd, SHUT_WR);
}

}  // namespace

const std::string& TlsContext::PlainHttpAnswer() {
  static const std::string* const answer = [] {
    const std::string body =
        R"({"error":"this port serves HTTPS (TLS) and the request came as plain HTTP: use https://"})";
    return new std::string(absl::StrCat("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                                        "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
  }();
  return *answer;
}

absl::StatusOr<std::unique_ptr<TlsContext>> TlsContext::Create(const Options& options) {
  if (options.cert_pem.empty() || options.key_pem.empty()) {
    return absl::InvalidArgumentError(
        "HTTP TLS: both a server certificate and its key are needed (--tls_cert, --tls_key)");
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("HTTP TLS: ", OpenSslErrors("SSL_CTX_new failed")));
  std::unique_ptr<TlsContext> context(new TlsContext(ctx, !options.client_ca_pem.empty()));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Resumed sessions of mutual-TLS clients need an id context (OpenSSL refuses them without one).
  static constexpr unsigned char kSessionContext[] = "convoy-http";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  SSL_CTX_set_info_callback(ctx, &AnswerPlainHttp);
  absl::Status status = UseCertificateChain(ctx, options.cert_pem);
  if (status.ok()) status = UsePrivateKey(ctx, options.key_pem);
  if (status.ok() && context->mutual_) status = RequireClientCertificates(ctx, options.client_ca_pem);
  if (!status.ok()) return status;
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

SSL* TlsContext::NewConnection() const { return SSL_new(ctx_); }

}  // namespace convoy::http
