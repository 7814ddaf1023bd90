# Extra CTest registrations (included from tests/CMakeLists.txt).
#
# The SSD crash test kills a real writer process: the writer is its own
# program, and the same test binary runs twice: 20 kills in the default
# suite (ssd.crash, registered by the glob) and 200 under the `soak` label.
add_executable(ssd_crash_writer
  ${CMAKE_CURRENT_SOURCE_DIR}/ssd/crash_writer.cpp)
target_link_libraries(ssd_crash_writer PRIVATE kvtier_internal)
set_target_properties(ssd_crash_writer PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_compile_definitions(test_ssd_crash_test PRIVATE
  KVTIER_CRASH_WRITER="$<TARGET_FILE:ssd_crash_writer>")
add_dependencies(test_ssd_crash_test ssd_crash_writer)
add_test(NAME ssd.crash_soak COMMAND test_ssd_crash_test -- 200)
set_tests_properties(ssd.crash_soak PROPERTIES LABELS soak)

# The expected-state crash loop (RocksDB style): its writer is its own
# program, killed at kill points (KVTIER_KILL_AT) and by SIGKILL; 10 + 6
# rounds in the default suite (ssd.expected_state, registered by the glob),
# 200 per case under the `soak` label. The in-process torn-write loop over
# the in-memory file system: 40 seeds by default (ssd.torn), 2000 under
# soak.
add_executable(ssd_expected_writer
  ${CMAKE_CURRENT_SOURCE_DIR}/ssd/expected_writer.cpp)
target_link_libraries(ssd_expected_writer PRIVATE kvtier_internal)
set_target_properties(ssd_expected_writer PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_compile_definitions(test_ssd_expected_state_test PRIVATE
  KVTIER_EXPECTED_WRITER="$<TARGET_FILE:ssd_expected_writer>")
add_dependencies(test_ssd_expected_state_test ssd_expected_writer)
add_test(NAME ssd.expected_state_soak
  COMMAND test_ssd_expected_state_test -- 200)
set_tests_properties(ssd.expected_state_soak PROPERTIES LABELS soak)
add_test(NAME ssd.torn_soak COMMAND test_ssd_torn_test -- 2000)
set_tests_properties(ssd.torn_soak PROPERTIES LABELS soak)

# The randomized state-identity test: 4 seeds x 250 steps by default
# (runtime.identity_random, registered by the glob), 12 x 3000 under soak.
add_test(NAME runtime.identity_random_soak
  COMMAND test_runtime_identity_random_test -- 3000)
set_tests_properties(runtime.identity_random_soak PROPERTIES LABELS soak)

# kill -9 of a service with write-behind on: the writer is its own program;
# 8 kills in the default suite (runtime.service_crash, registered by the
# glob), 100 under the `soak` label.
add_executable(service_crash_writer
  ${CMAKE_CURRENT_SOURCE_DIR}/runtime/service_crash_writer.cpp)
target_link_libraries(service_crash_writer PRIVATE kvtier_internal)
set_target_properties(service_crash_writer PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_compile_definitions(test_runtime_service_crash_test PRIVATE
  KVTIER_SERVICE_CRASH_WRITER="$<TARGET_FILE:service_crash_writer>")
add_dependencies(test_runtime_service_crash_test service_crash_writer)
add_test(NAME runtime.service_crash_soak
  COMMAND test_runtime_service_crash_test -- 100)
set_tests_properties(runtime.service_crash_soak PROPERTIES LABELS soak)

# Multi-process cluster tests start the built `kvtier` program
# (tests/cluster/node_process.hpp); labelled `cluster`, in the default suite.
# A sanitizer build (Debug, -O0, ASan + UBSan) runs them about 8x slower:
# replay_nodes' first case took 88 s there against 11 s for the whole suite
# in the release build, so its bound is wider (a hang still fails).
if(KVTIER_SANITIZE)
  set(KVTIER_CLUSTER_TIMEOUT 400)
else()
  set(KVTIER_CLUSTER_TIMEOUT 90)
endif()
foreach(name nodes embedded feed_follower peer_nodes security replay_nodes
    port_guard
    http_node)
  target_compile_definitions(test_cluster_${name}_test PRIVATE
    KVTIER_PROGRAM="$<TARGET_FILE:kvtier_program>")
  add_dependencies(test_cluster_${name}_test kvtier_program)
  set_tests_properties(cluster.${name} PROPERTIES LABELS cluster
    TIMEOUT ${KVTIER_CLUSTER_TIMEOUT})
endforeach()

# A `kvtier node` that publishes oracle entries before it listens, so the
# SIGTERM test finds them flushed to its SSD directory.
add_executable(cluster_node_writer
  ${CMAKE_CURRENT_SOURCE_DIR}/cluster/node_writer.cpp)
target_link_libraries(cluster_node_writer PRIVATE kvtier_internal)
set_target_properties(cluster_node_writer PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
# (and, for the peer tests, state to fetch and a feed gap on SIGUSR1).
foreach(name nodes peer_nodes security)
  target_compile_definitions(test_cluster_${name}_test PRIVATE
    KVTIER_NODE_WRITER="$<TARGET_FILE:cluster_node_writer>")
  add_dependencies(test_cluster_${name}_test cluster_node_writer)
endforeach()

# The mutation run of peer messages against a live node: 600 inputs per
# message root (4200) in the default suite (cluster.security, registered by
# the glob), 6000 per root (42000) under the `soak` label.
add_test(NAME cluster.security_soak COMMAND test_cluster_security_test
  --run_test=mutated_peer_messages_are_refused_and_counted -- 6000)
set_tests_properties(cluster.security_soak PROPERTIES LABELS "soak;cluster"
  TIMEOUT 600)

# `kvtier config` prints every option but never a secret: a passphrase set
# on the command line is said to be set, not shown.
add_test(NAME program.config_hides_the_tls_passphrase
  COMMAND kvtier_program config --cluster.tls-passphrase=hunter2)
set_tests_properties(program.config_hides_the_tls_passphrase PROPERTIES
  PASS_REGULAR_EXPRESSION "tls-passphrase=\"\\(set, not shown\\)\""
  FAIL_REGULAR_EXPRESSION "hunter2"
  TIMEOUT 30)

# The program as a user meets it: stray arguments and unknown options of
# every command refused, messages with one `kvtier` prefix
# (tests/program/commands_test.cpp runs the built binary).
target_compile_definitions(test_program_commands_test PRIVATE
  KVTIER_PROGRAM="$<TARGET_FILE:kvtier_program>")
add_dependencies(test_program_commands_test kvtier_program)
set_tests_properties(program.commands PROPERTIES TIMEOUT 120)

# The fuzz targets' entry functions (tests/fuzz/targets.cpp) replayed over
# their corpora in the default suite (fuzz.corpus, registered by the glob);
# the libFuzzer programs are the clang build's (`make fuzz`, KVTIER_FUZZ).
target_sources(test_fuzz_corpus_test PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/targets.cpp)
