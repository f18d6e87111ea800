// TlsContext: the OpenSSL server context of the HTTP edge's TLS, made from the same PEM files as gRPC's
// (--tls_cert, --tls_key, and --tls_client_ca for mutual TLS), so one set of flags secures both protocols. The
// HTTP server hands each accepted connection an SSL from it through libevent's OpenSSL bufferevents.
//
//   TlsContext::Options options;
//   options.cert_pem = ...; options.key_pem = ...;        // options.client_ca_pem for mutual TLS
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<TlsContext> tls, TlsContext::Create(options));
//   SSL* ssl = tls->NewConnection();                      // owned by the bufferevent made with it
//
// TLS 1.2 or newer. A client that speaks plain HTTP to the TLS port is not just dropped: OpenSSL recognises the
// request line (its "http request" handshake error), and the connection gets one plain-text answer before it
// closes, `400 Bad Request` with {"error": "this port serves HTTPS ..."}, so the client sees why.
#ifndef CONVOY_SERVER_HTTP_TLS_CONTEXT_H_
#define CONVOY_SERVER_HTTP_TLS_CONTEXT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace convoy::http {

class TlsContext {
 public:
  struct Options {
    std::string cert_pem;       // the server certificate, then any intermediate certificates
    std::string key_pem;        // its private key
    std::string client_ca_pem;  // when set: clients must present a certificate one of these CAs signed
  };

  // INVALID_ARGUMENT naming the flag (--tls_cert, --tls_key, --tls_client_ca) and OpenSSL's reason when a PEM
  // cannot be read, when the key does not match the certificate, or when only one of certificate and key is given.
  static absl::StatusOr<std::unique_ptr<TlsContext>> Create(const Options& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A server-side SSL for one accepted connection; nullptr only when OpenSSL is out of memory.
  SSL* NewConnection() const;
  bool mutual() const { return mutual_; }

  // The plain-HTTP answer a client that sent HTTP to the TLS port gets (status line, headers, JSON body).
  static const std::string& PlainHttpAnswer();

 private:
  TlsContext(SSL_CTX* ctx, bool mutual) : ctx_(ctx), mutual_(mutual) {}
  SSL_CTX* const ctx_;
  const bool mutual_;
};

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_TLS_CONTEXT_H_
