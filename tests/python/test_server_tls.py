"""TLS and mutual TLS with certificates made by openssl at test time (testing_certs.py): a TLS server answers a
client that trusts the CA and refuses a plaintext one; a mutual-TLS server answers a client with a certificate the
CA signed and rejects a client without a certificate and one whose certificate another CA signed.
"""
import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
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
