"""tests/load/load_test.py reads ThreadSanitizer reports of a TSan server build: a report whose every access was
made by the prebuilt libraries (gRPC, protobuf, Abseil: not instrumented, so their thread hand-offs are invisible to
TSan) is counted apart; one where Convoy's code made an access, or with a stack TSan could not restore, fails the
run. These cases are shaped like the reports the TSan overload run printed."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "load"))
import load_test  # noqa: E402

THREADS = """
  Thread T13 (tid=1712, running) created by main thread at:
    #0 pthread_create ../../../../src/libsanitizer/tsan/tsan_interceptors_posix.cpp:1001 (libtsan.so.2+0x5e686)
    #1 grpc_core::Thread::Thread(char const*) <null> (libgpr.so.29+0xb0cb)
    #2 Run server/main.cc:293 (convoy_server+0x5a693)
"""
GRPC_ACCESS = """    #0 std::_Function_base::~_Function_base() /usr/include/c++/12/bits/std_function.h:243 (convoy_server+0x5c9a7)
    #1 std::_Function_handler<void (), grpc::Server::CallbackRequest>::_M_invoke() <null> (libgrpc++.so.1.51+0xad3f4)
    #2 grpc::internal::ServerCallbackCall::MaybeDone(bool) /usr/include/grpcpp/support/server_callback.h:102 (convoy_server+0x8fe9f)
    #3 operator() server/grpc/inference_service.cc:44 (convoy_server+0x8069a)
"""
LIBRARY_ACCESS = """    #0 sendmsg ../../../../src/libsanitizer/sanitizer_common/sanitizer_common_interceptors.inc:3160 (libtsan.so.2+0x55518)
    #1 tcp_send(int, msghdr const*, int*, int) <null> (libgrpc.so.29+0x4225c1)
"""
CONVOY_ACCESS = """    #0 convoy::batching::BatchQueue::Push(convoy::batching::BatchRequest) server/batching/batch_queue.cc:88 (convoy_server+0x1234)
    #1 grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>::RunHandler() /usr/include/grpcpp/impl/codegen/server_callback_handlers.h:53 (convoy_server+0x6e392)
"""


def report(first, second):
    return (f"\nWARNING: ThreadSanitizer: data race (pid=1)\n  Read of size 8 at 0x7b68 by thread T13:\n{first}\n"
            f"  Previous write of size 8 at 0x7b68 by thread T6:\n{second}\n{THREADS}\nSUMMARY: ThreadSanitizer: data race\n")


def test_a_race_inside_grpc_and_its_send_is_library_internal():
    assert load_test.tsan_report_is_grpc_internal(report(GRPC_ACCESS, LIBRARY_ACCESS))


def test_an_access_by_convoy_code_counts_against_the_run():
    assert not load_test.tsan_report_is_grpc_internal(report(GRPC_ACCESS, CONVOY_ACCESS))
    assert not load_test.tsan_report_is_grpc_internal(report(CONVOY_ACCESS, LIBRARY_ACCESS))


def test_an_unrestored_stack_counts_against_the_run():
    assert not load_test.tsan_report_is_grpc_internal(report(GRPC_ACCESS, "    [failed to restore the stack]\n"))


def test_the_thread_creation_stacks_are_not_read_as_accesses():
    # Both access stacks are gRPC's; the project frame in "created by main thread at" must not count.
    assert "server/main.cc" in THREADS
    assert load_test.tsan_report_is_grpc_internal(report(LIBRARY_ACCESS, LIBRARY_ACCESS))


def test_sanitizer_checks_count_both_kinds(tmp_path):
    class Server:
        log_path = tmp_path / "server.log"
    Server.log_path.write_text("=================="
                               + report(GRPC_ACCESS, LIBRARY_ACCESS) + "=================="
                               + report(CONVOY_ACCESS, LIBRARY_ACCESS) + "==================\n")
    checks, figures = {}, {}
    load_test.sanitizer_checks(Server, checks, figures)
    assert figures["tsan_reports_within_grpc"] == 1
    failing = [k for k, ok in checks.items() if not ok]
    assert len(failing) == 1 and "(1)" in failing[0] and "Convoy's code" in failing[0], checks
