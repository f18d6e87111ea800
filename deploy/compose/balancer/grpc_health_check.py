#!/usr/bin/env python3
"""The raw bytes of HAProxy's gRPC readiness check in haproxy.cfg, and what a SERVING answer contains.

HAProxy 2.6 has no gRPC health check of its own, so haproxy.cfg sends, over a fresh plaintext TCP connection, a
complete HTTP/2 exchange written out by hand (`tcp-check send-binary`): the client connection preface, an empty
SETTINGS frame, a HEADERS frame (stream 1) for POST /grpc.health.v1.Health/Check, and a DATA frame ending the stream
with the length-prefixed HealthCheckRequest{service: "readiness"}. The server answers with a DATA frame holding the
length-prefixed HealthCheckResponse: SERVING (status = 1) encodes as 08 01, NOT_SERVING (2) as 08 02. haproxy.cfg
first waits for that DATA frame (stream 1, flags 0, 7 bytes: not compressed, 2 bytes long, field 1) up to the status
byte, then requires the status byte 01; `min-recv 1` makes that second comparison final, so a NOT_SERVING replica
fails its check as soon as it answers instead of after `timeout check`.

  python3 deploy/compose/balancer/grpc_health_check.py                    # prints the haproxy.cfg lines
  python3 deploy/compose/balancer/grpc_health_check.py --check HOST:PORT  # sends it, prints SERVING/NOT_SERVING

The header block uses HPACK (RFC 7541) without Huffman coding or dynamic-table entries: :method POST and :scheme http
are static-table entries 3 and 6; :path (4), :authority (1) and content-type (31) are "literal without indexing"
fields (0000xxxx prefix) naming a static-table entry; te is a literal with a literal name.
tests/python/test_deploy_files.py checks that haproxy.cfg carries exactly these lines, and
tests/python/test_server_exit_delay.py sends the bytes to a live server, ready and leaving.
"""
import argparse
import socket
import struct
import sys

SERVICE = "readiness"
AUTHORITY = "convoy"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_DATA, FRAME_HEADERS, FRAME_SETTINGS = 0x0, 0x1, 0x4
FLAG_END_STREAM, FLAG_END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first_byte_flags):
    """RFC 7541 5.1 integer with an N-bit prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_string(text):
    data = text.encode()
    return hpack_int(len(data), 7, 0x00) + data  # H = 0: no Huffman coding


def literal_indexed_name(index, value):
    return hpack_int(index, 4, 0x00) + hpack_string(value)  # literal header field without indexing


def literal_new_name(name, value):
    return b"\x00" + hpack_string(name) + hpack_string(value)


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def health_request(service=SERVICE):
    """HealthCheckRequest{service}: field 1, wire type 2 (length-delimited)."""
    data = service.encode()
    return b"\x0a" + hpack_int(len(data), 7, 0x00) + data  # a varint below 128 is one byte, as here


def request_bytes(service=SERVICE, authority=AUTHORITY):
    headers = (b"\x83"                                                   # :method POST (static 3)
               + b"\x86"                                                 # :scheme http (static 6)
               + literal_indexed_name(4, "/grpc.health.v1.Health/Check")  # :path
               + literal_indexed_name(1, authority)                      # :authority
               + literal_indexed_name(31, "application/grpc")            # content-type
               + literal_new_name("te", "trailers"))
    return (PREFACE + frame(FRAME_SETTINGS, 0, 0, b"")
            + frame(FRAME_HEADERS, FLAG_END_HEADERS, 1, headers)
            + frame(FRAME_DATA, FLAG_END_STREAM, 1, grpc_message(health_request(service))))


SERVING_BYTES = grpc_message(b"\x08\x01")
NOT_SERVING_BYTES = grpc_message(b"\x08\x02")
# The answer's DATA frame on stream 1 (flags 0: the trailers end the stream), up to its status byte.
ANSWER_PREFIX = frame(FRAME_DATA, 0, 1, SERVING_BYTES)[:-1]


def haproxy_lines():
    """Send; wait for the answer's DATA frame, whatever the status; require SERVING (a mismatch is final)."""
    return [f"tcp-check send-binary {request_bytes().hex()}",
            f"tcp-check expect binary {ANSWER_PREFIX.hex()}",
            f"tcp-check expect min-recv 1 binary {ANSWER_PREFIX.hex()}{SERVING_BYTES[-1:].hex()}"]


def check(address, timeout=3.0):
    """Sends the check to HOST:PORT; returns the bytes received until the server closes or `timeout` passes."""
    host, _, port = address.rpartition(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request_bytes())
        try:
            while SERVING_BYTES not in received and NOT_SERVING_BYTES not in received:
                chunk = s.recv(65536)
                if not chunk:
                    break
                received += chunk
        except socket.timeout:
            pass
    return received


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", metavar="HOST:PORT", help="send the check and print the answer")
    args = parser.parse_args()
    if not args.check:
        print("\n".join(haproxy_lines()))
        return 0
    answer = check(args.check)
    status = ("SERVING" if SERVING_BYTES in answer else "NOT_SERVING" if NOT_SERVING_BYTES in answer
              else f"no answer ({len(answer)} bytes)")
    print(status)
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
