"""Test certificates made with the openssl command line at test time: a CA, a server certificate for 127.0.0.1
(IP SAN, and DNS localhost) and a client certificate, all signed by the CA, plus a second, unrelated CA whose client
certificate a mutual-TLS server must reject. Nothing is kept between runs.
"""
import pathlib
import shutil
import subprocess


def _openssl(*args, cwd):
    openssl = shutil.which("openssl")
    assert openssl, "openssl not found: install the Debian package openssl (tools/setup.sh)"
    proc = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"openssl {' '.join(args)} failed:\n{proc.stderr}"


def _ca(directory, name):
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=directory)


def _signed(directory, ca, name, extensions):
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=directory)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)


def make_certificates(directory):
    """Writes the files into `directory`; returns their paths by role."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _signed(d, "ca", "server", "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
                               "extendedKeyUsage = serverAuth\n")
    _signed(d, "ca", "client", "extendedKeyUsage = clientAuth\n")
    _ca(d, "other_ca")
    _signed(d, "other_ca", "stranger", "extendedKeyUsage = clientAuth\n")
    return {k: str(d / v) for k, v in {
        "ca": "ca.pem", "cert": "server.pem", "key": "server.key", "client_cert": "client.pem",
        "client_key": "client.key", "stranger_cert": "stranger.pem", "stranger_key": "stranger.key"}.items()}
