// validate_local, validate_global, match_messages and dag_stats on
// hand-built DAGs: each rule of graph/validate.h, one behaviour per case.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/validate.h"
#include "graph_test_dags.h"

namespace carflow {
namespace {

// The error validate_global reports, or "" when the DAG is valid.
std::string global_error(const GlobalDag& dag) {
  std::string error;
  return validate_global(dag, &error) ? "" : error;
}

std::string local_error(const LocalDag& dag, uint32_t images) {
  std::string error;
  return validate_local(dag, images, &error) ? "" : error;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Car& car_of(GlobalDag& dag, uint32_t image, CarId car) { return dag.images[image].cars[car]; }

TEST_CASE("the hand-built DAGs are valid") {
  CHECK(global_error(test_dags::one_message()) == "");
  CHECK(global_error(test_dags::three_image_mix()) == "");
}

TEST_CASE("a dependency on a CAR that does not exist is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 2).deps.push_back(after(40));
  CHECK(global_error(dag) == "image 0 car 2 (REDUCE): depends on car 40, which does not exist (4 cars)");
}

TEST_CASE("a CAR that depends on itself is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 2).deps.push_back(after(2));
  CHECK(global_error(dag) == "image 1 car 2 (SEND): depends on itself");
}

TEST_CASE("a dependency cycle inside one image is rejected and its CARs named") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 0).deps.push_back(after(2));  // 0 -> 1 -> 2 -> 0
  const std::string error = global_error(dag);
  CAPTURE(error);
  CHECK(contains(error, "image 1 car "));
  CHECK(contains(error, "dependency cycle"));
  CHECK(error == "image 1 car 0 (COPY): dependency cycle car 0 -> car 1 -> car 2 -> car 0");
}

TEST_CASE("a cycle through a million CARs is found without recursion") {
  const size_t n = 1000000;
  LocalDag dag = test_dags::join_chain(n);
  dag.cars[0].deps.push_back(after(CarId(n - 1)));
  const std::string error = local_error(dag, 1);
  CAPTURE(error.substr(0, 200));
  CHECK(contains(error, "dependency cycle"));
  CHECK(contains(error, "(1000000 nodes)"));
}

TEST_CASE("a chain of a million CARs validates without recursion") {
  CHECK(local_error(test_dags::join_chain(1000000), 1) == "");
}

TEST_CASE("a buffer range whose offset plus length overflows 64 bits is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  // offset + length wraps to 15, which a naive check would accept.
  car_of(dag, 0, 0).src = user_src(UINT64_MAX, 16);
  const std::string error = global_error(dag);
  CHECK(error == "image 0 car 0 (SEND): src: range [offset 18446744073709551615, length 16] runs "
                 "past the end of user_src (16 bytes)");
}

TEST_CASE("a buffer range past the end of its buffer is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 2, 3).dst = user_dst(8, 16);
  CHECK(contains(global_error(dag), "image 2 car 3 (COPY): dst: range [offset 8, length 16] runs past "
                                    "the end of user_dst (16 bytes)"));
  dag = test_dags::three_image_mix();
  car_of(dag, 2, 0).dst = temp(0, 0, 16);  // slot 0 holds 8 bytes
  CHECK(contains(global_error(dag), "runs past the end of temp slot 0 (8 bytes)"));
}

TEST_CASE("a temp slot the image does not have is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 2, 0).dst = temp(7, 0, 16);
  CHECK(global_error(dag) == "image 2 car 0 (RECV): dst: temp slot 7 does not exist (the image has 2)");
}

TEST_CASE("a none buffer with an offset or a length is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 3).src = BufferRef{BufferSpace::None, 0, 0, 4};
  CHECK(contains(global_error(dag), "src: a none buffer must have offset 0 and length 0"));
  car_of(dag, 1, 3).src = BufferRef{BufferSpace::None, 0, 4, 0};
  CHECK(contains(global_error(dag), "src: a none buffer must have offset 0 and length 0"));
}

TEST_CASE("a message peer outside the team is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 2, 0).peer = 9;
  CHECK(global_error(dag) == "image 2 car 0 (RECV): peer 9 is not a team rank (P = 3)");
}

TEST_CASE("a message to the image itself is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 0).peer = 0;
  CHECK(global_error(dag) == "image 0 car 0 (SEND): peer 0 is the image itself");
}

TEST_CASE("a SEND with a dst and a receive with a src are rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 0).dst = user_dst(0, 16);
  CHECK(global_error(dag) == "image 0 car 0 (SEND): dst must be none for SEND (found user_dst)");
  dag = test_dags::three_image_mix();
  car_of(dag, 0, 1).src = user_src(0, 16);
  CHECK(global_error(dag) == "image 0 car 1 (RECV): src must be none for RECV (found user_src)");
}

TEST_CASE("a RECV_REDUCE's local operand (src) must match its destination's length") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 1).src = user_src(0, 16);  // same length: dst = incoming op src
  CHECK(global_error(dag) == "");
  car_of(dag, 1, 1).src = user_src(0, 8);
  CHECK(global_error(dag) == "image 1 car 1 (RECV_REDUCE): operand lengths differ (dst 16, src 8)");
}

TEST_CASE("REDUCE operands of unequal lengths are rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 2).src2 = temp(0, 0, 8);
  CHECK(global_error(dag) == "image 0 car 2 (REDUCE): operand lengths differ (dst 16, src 16, src2 8)");
}

TEST_CASE("COPY operands of unequal lengths are rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 0).src = user_src(0, 8);
  CHECK(global_error(dag) == "image 1 car 0 (COPY): operand lengths differ (dst 16, src 8)");
}

TEST_CASE("a JOIN with a buffer is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 3).dst = user_dst(0, 4);
  CHECK(global_error(dag) == "image 0 car 3 (JOIN): dst must be none for JOIN (found user_dst)");
}

TEST_CASE("fields a CAR's kind does not use must be zero") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 2).tag = 3;
  CHECK(contains(global_error(dag), "image 0 car 2 (REDUCE): peer and tag must be 0 for a non-message CAR"));
  dag = test_dags::three_image_mix();
  car_of(dag, 2, 0).incoming_left = true;
  CHECK(contains(global_error(dag), "image 2 car 0 (RECV): incoming_left is set but only RECV_REDUCE"));
  dag = test_dags::three_image_mix();
  car_of(dag, 0, 0).src.slot = 1;
  CHECK(contains(global_error(dag), "image 0 car 0 (SEND): src: slot 1 is set but only temp buffers"));
}

TEST_CASE("an out-of-range enum value is rejected, not used as an index") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 2).kind = static_cast<CarKind>(17);
  CHECK(global_error(dag) == "image 0 car 2 (?): kind 17 is not a CAR kind");
  dag = test_dags::three_image_mix();
  car_of(dag, 0, 0).src.space = static_cast<BufferSpace>(9);
  CHECK(contains(global_error(dag), "src: space 9 is not a buffer space"));
}

TEST_CASE("the exit must exist and be a JOIN") {
  GlobalDag dag = test_dags::three_image_mix();
  dag.images[1].exit = 2;
  CHECK(global_error(dag) == "image 1 car 2 (SEND): the exit must be a JOIN");
  dag.images[1].exit = 50;
  CHECK(global_error(dag) == "image 1: exit car 50 does not exist (5 cars)");
  dag.images[1].cars.clear();
  CHECK(global_error(dag) == "image 1: exit car 50 does not exist (0 cars)");
}

TEST_CASE("every CAR must reach the exit") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 3).deps = {after(0)};  // the exit forgets the REDUCE
  CHECK(global_error(dag) == "image 0 car 1 (RECV): does not reach the exit (car 3)");
}

TEST_CASE("a CAR that depends on the exit makes a cycle with it") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 2).deps.push_back(after(3));
  CHECK(global_error(dag) == "image 0 car 2 (REDUCE): dependency cycle car 2 -> car 3 -> car 2");
}

TEST_CASE("images must be listed in rank order, one per team rank") {
  GlobalDag dag = test_dags::three_image_mix();
  std::swap(dag.images[1], dag.images[2]);
  CHECK(global_error(dag) == "images[1]: holds image 2; image i must sit at index i");
  dag = test_dags::three_image_mix();
  dag.images.pop_back();
  CHECK(global_error(dag) == "global DAG: 2 images but spec.images is 3");
  dag = test_dags::three_image_mix();
  dag.spec.root = 3;
  CHECK(global_error(dag) == "spec.root: 3 is not a team rank (P = 3)");
}

TEST_CASE("a SEND without a matching receive is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 0, 0).tag = 7;
  const std::string error = global_error(dag);
  CAPTURE(error);
  // Whichever end sorts first is reported; both are unmatched now.
  CHECK((error == "image 0 car 0 (SEND): no receive on image 1 matches (sender 0, receiver 1, tag 7)" ||
         error == "image 1 car 1 (RECV_REDUCE): no SEND on image 0 matches (sender 0, receiver 1, tag 0)"));
}

TEST_CASE("a receive without a matching SEND is rejected") {
  GlobalDag dag = test_dags::one_message();
  car_of(dag, 0, 0) = Car{};  // the SEND becomes a JOIN
  CHECK(global_error(dag) == "image 1 car 0 (RECV): no SEND on image 0 matches (sender 0, receiver 1, tag 0)");
}

TEST_CASE("two SENDs with one tag to one receiver are rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 1, 3).tag = 5;
  CHECK(global_error(dag) ==
        "image 1 car 3 (SEND): duplicate message (sender 1, receiver 2, tag 5); car 2 uses the same tag");
}

TEST_CASE("a receive whose byte count differs from its SEND is rejected") {
  GlobalDag dag = test_dags::three_image_mix();
  car_of(dag, 2, 0).dst = temp(1, 0, 8);
  CHECK(global_error(dag) ==
        "image 2 car 0 (RECV): receives 8 bytes but its SEND image 1 car 2 (SEND) sends 16");
}

TEST_CASE("two images that each receive before sending to the other deadlock") {
  const GlobalDag dag = test_dags::crossed_receives();
  for (const LocalDag& image : dag.images) CHECK(local_error(image, 2) == "");
  std::vector<MessageEdge> edges;
  std::string error;
  CHECK(match_messages(dag, &edges, &error));
  CHECK(edges.size() == 2);
  error = global_error(dag);
  CAPTURE(error);
  CHECK(contains(error, "deadlock"));
  CHECK(contains(error, "cycle"));
  CHECK(contains(error, "image 0 car 1 (SEND) = image 1 car 0 (RECV)"));
}

TEST_CASE("the same exchange is deadlock-free when no SEND waits for a receive") {
  GlobalDag dag = test_dags::crossed_receives();
  for (LocalDag& image : dag.images) {
    image.cars[1].deps.clear();               // the SEND no longer waits for the RECV
    image.cars[2].deps = {after(0), after(1)};  // so both must feed the exit
  }
  CHECK(global_error(dag) == "");
}

TEST_CASE("two images that each SEND before they receive deadlock under rendezvous") {
  GlobalDag dag = test_dags::crossed_receives();
  for (LocalDag& image : dag.images) {
    std::swap(image.cars[0], image.cars[1]);  // SEND first, then the RECV after it
    image.cars[0].deps.clear();
    image.cars[1].deps = {after(0)};
  }
  const std::string error = global_error(dag);
  CAPTURE(error);
  CHECK(error.rfind("deadlock: ", 0) == 0);
}

TEST_CASE("match_messages pairs each SEND with its receive, ordered by sender") {
  std::vector<MessageEdge> edges;
  std::string error;
  REQUIRE(match_messages(test_dags::three_image_mix(), &edges, &error));
  const std::vector<MessageEdge> expected = {{0, 0, 1, 1}, {1, 2, 2, 0}, {1, 3, 2, 1}, {2, 2, 0, 1}};
  CHECK(edges == expected);
}

TEST_CASE("dag_stats counts CARs, messages, bytes, sends and the critical path of one message") {
  const DagStats stats = dag_stats(test_dags::one_message());
  CHECK(stats.cars == 4);
  CHECK(stats.messages == 1);
  CHECK(stats.message_bytes == 8);
  CHECK(stats.max_sends_per_image == 1);
  CHECK(stats.critical_path == 3);  // SEND, RECV, image 1's exit
}

TEST_CASE("dag_stats counts messages, zero-byte ones included, across three images") {
  const DagStats stats = dag_stats(test_dags::three_image_mix());
  CHECK(stats.cars == 14);
  CHECK(stats.messages == 4);
  CHECK(stats.message_bytes == 48);
  CHECK(stats.max_sends_per_image == 2);
  CHECK(stats.critical_path == 6);
}

TEST_CASE("dag_stats of a DAG with no messages counts only CARs") {
  GlobalDag dag;
  dag.spec.images = 1;
  dag.images.push_back(test_dags::join_chain(5));
  const DagStats stats = dag_stats(dag);
  CHECK(stats.cars == 5);
  CHECK(stats.messages == 0);
  CHECK(stats.message_bytes == 0);
  CHECK(stats.critical_path == 5);
}

}  // namespace
}  // namespace carflow
