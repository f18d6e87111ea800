"""TLS and mutual TLS with certificates made by openssl at test time (testing_certs.py), over gRPC and over HTTP
(the same --tls_cert / --tls_key / --tls_client_ca secure both ports): a TLS server answers a client that trusts the
CA and refuses a plaintext one (over HTTP with a plain-text 400 saying to use https://); a mutual-TLS server answers
a client with a certificate the CA signed and rejects a client without a certificate and one whose certificate
another CA signed.
"""
import functools
import http.client
import json
import ssl
import subprocess

import gevent.ssl
import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import started_server, stop_and_check
from testing_certs import make_certificates

RNG = np.random.default_rng()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def tls_server(tmp_path_factory, certs, mutual):
    tls = {"cert": certs["cert"], "key": certs["key"], "ca": certs["ca"]}
    if mutual:
        tls.update(client_ca=certs["ca"], client_cert=certs["client_cert"], client_key=certs["client_key"])
    return started_server(tmp_path_factory, ["tiny_onnx"], tls=tls, name="mtls" if mutual else "tls")


@pytest.fixture(scope="module")
def tls(tmp_path_factory, certs):
    server = tls_server(tmp_path_factory, certs, mutual=False)
    yield server
    stop_and_check(server)


@pytest.fixture(scope="module")
def mtls(tmp_path_factory, certs):
    server = tls_server(tmp_path_factory, certs, mutual=True)
    yield server
    stop_and_check(server)


def infer_ok(client):
    x = grpcclient.InferInput("x", [2, 3, 8, 8], "FP32")
    x.set_data_from_numpy(RNG.standard_normal((2, 3, 8, 8), dtype=np.float32))
    assert client.infer("tiny_onnx", [x]).as_numpy("logits").shape == (2, 5)


def health_over(channel):
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="readiness"),
                                                     timeout=5).status


def test_tls_client_trusting_the_ca(tls):
    with tls.client() as client:
        assert client.is_server_ready()
        infer_ok(client)


def test_tls_refuses_plaintext(tls):
    with grpc.insecure_channel(tls.url) as ch:
        with pytest.raises(grpc.RpcError) as err:
            health_over(ch)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_tls_client_not_trusting_the_server(tls, certs):
    with grpcclient.InferenceServerClient(tls.url, ssl=True, root_certificates=certs["stranger_cert"]) as client:
        with pytest.raises(InferenceServerException):
            client.is_server_live(client_timeout=60)  # a refused handshake fails at once; the bound is for a hang


def test_mtls_client_with_certificate(mtls):
    with mtls.client() as client:
        assert client.is_server_live()
        infer_ok(client)
    with mtls.channel() as ch:
        assert health_over(ch) == health_pb2.HealthCheckResponse.SERVING


def test_mtls_rejects_client_without_certificate(mtls, certs):
    with grpcclient.InferenceServerClient(mtls.url, ssl=True, root_certificates=certs["ca"]) as client:
        with pytest.raises(InferenceServerException) as err:
            client.is_server_live(client_timeout=60)  # a refused handshake fails at once; the bound is for a hang
    assert "UNAVAILABLE" in str(err.value.status()), err.value


def test_mtls_rejects_certificate_from_another_ca(mtls, certs):
    with grpcclient.InferenceServerClient(mtls.url, ssl=True, root_certificates=certs["ca"],
                                          private_key=certs["stranger_key"],
                                          certificate_chain=certs["stranger_cert"]) as client:
        with pytest.raises(InferenceServerException) as err:
            client.is_server_live(client_timeout=60)  # a refused handshake fails at once; the bound is for a hang
    assert "UNAVAILABLE" in str(err.value.status()), err.value


# ---- HTTP/REST over TLS ----

PLAIN_HTTP_ERROR = "this port serves HTTPS (TLS) and the request came as plain HTTP: use https://"


def https_context(certs, client=None):
    """A client context trusting the test CA, with a client certificate ("client" or "stranger") when given."""
    context = ssl.create_default_context(cafile=certs["ca"])
    if client:
        context.load_cert_chain(certs[f"{client}_cert"], certs[f"{client}_key"])
    return context


def https_get(server, context, path="/v2/health/ready"):
    conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, context=context, timeout=60)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def http_infer_ok(client):
    x = httpclient.InferInput("x", [2, 3, 8, 8], "FP32")
    x.set_data_from_numpy(RNG.standard_normal((2, 3, 8, 8), dtype=np.float32))
    assert client.infer("tiny_onnx", [x]).as_numpy("logits").shape == (2, 5)


def test_https_tritonclient_trusting_the_ca(tls, certs):
    factory = functools.partial(gevent.ssl.create_default_context, cafile=certs["ca"])
    with httpclient.InferenceServerClient(tls.http_url, ssl=True, ssl_context_factory=factory) as client:
        assert client.is_server_live() and client.is_server_ready()
        http_infer_ok(client)


def test_https_curl_with_the_ca(tls, certs):
    run = subprocess.run(["curl", "-sS", "--cacert", certs["ca"], f"https://127.0.0.1:{tls.http_port}/v2/health/ready"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"ready": True}


def test_plain_http_on_the_tls_port_gets_a_clear_400(tls, certs):
    conn = http.client.HTTPConnection("127.0.0.1", tls.http_port, timeout=60)
    try:
        conn.request("GET", "/v2/health/ready")
        r = conn.getresponse()
        status, content_type, body = r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()
    assert (status, content_type) == (400, "application/json")
    assert json.loads(body) == {"error": PLAIN_HTTP_ERROR}
    run = subprocess.run(["curl", "-s", "-d", "{}", f"http://127.0.0.1:{tls.http_port}/v2/models/tiny_onnx/infer"],
                         capture_output=True, text=True, timeout=60)
    assert json.loads(run.stdout) == {"error": PLAIN_HTTP_ERROR}
    assert https_get(tls, https_context(certs)) == (200, b'{"ready":true}')  # still serving


def test_https_client_not_trusting_the_server(tls, certs):
    context = ssl.create_default_context(cafile=certs["stranger_cert"])
    with pytest.raises(ssl.SSLCertVerificationError):
        https_get(tls, context)


def test_https_mtls_client_with_certificate(mtls, certs):
    assert https_get(mtls, https_context(certs, "client")) == (200, b'{"ready":true}')

    def factory():
        context = gevent.ssl.create_default_context(cafile=certs["ca"])
        context.load_cert_chain(certs["client_cert"], certs["client_key"])
        return context

    with httpclient.InferenceServerClient(mtls.http_url, ssl=True, ssl_context_factory=factory) as client:
        http_infer_ok(client)


@pytest.mark.parametrize("client", [None, "stranger"], ids=["no_certificate", "certificate_from_another_ca"])
def test_https_mtls_rejects(mtls, certs, client):
    with pytest.raises(ssl.SSLError):
        https_get(mtls, https_context(certs, client))
    assert https_get(mtls, https_context(certs, "client"))[0] == 200
