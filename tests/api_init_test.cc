// The lifecycle calls under misuse: cf_coll_init with images NULL names a
// wrong my_image, and cf_finalize refuses while cf_run_images still runs
// (it used to tear the engine down under the running images). Its own
// binary (api_main.cc initializes): cf_coll_init attaches a thread for good.
#include <doctest/doctest.h>

#include <carflow/carflow.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

TEST_CASE("cf_finalize from an image while cf_run_images runs is refused, and the images go on") {
  std::atomic<int> refused{0}, named{0}, right{0};
  struct Ctx {
    std::atomic<int>*refused, *named, *right;
  } ctx{&refused, &named, &right};
  const int status = cf_run_images(
      3, nullptr, 0,
      [](cf_image_t me, void* arg) {
        auto& c = *static_cast<Ctx*>(arg);
        if (me == 0) {
          const int rc = cf_finalize();
          if (rc == CF_ERR_BAD_ARG) c.refused->fetch_add(1);
          if (std::string(cf_last_error()).find("cf_run_images is still running") != std::string::npos) {
            c.named->fetch_add(1);
          }
        }
        uint64_t v = me == 2 ? 99 : 0;
        if (cf_coll_broadcast(CF_TEAM_ALL, &v, 2, &v, sizeof v, CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC |
                                                                     CF_COLL_LOCAL | CF_COLL_ALL_THREADS) == CF_OK &&
            v == 99 && cf_myimage() == me) {
          c.right->fetch_add(1);
        }
      },
      &ctx);
  CHECK(status == CF_OK);
  CHECK(refused == 1);
  CHECK(named == 1);
  CHECK(right == 3);
}

TEST_CASE("cf_run_images with more images than memory holds is CF_ERR_NO_MEM naming n, and starts nothing") {
  std::atomic<int> calls{0};  // image threads count their calls
  const auto count = [](cf_image_t, void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); };
  const int rc = cf_run_images(1u << 20, nullptr, 0, count, &calls);
  const std::string message = cf_last_error();
  CHECK(rc == CF_ERR_NO_MEM);
  CHECK(message.rfind("n: 1048576 images on this node (of 1048576) need about ", 0) == 0);
  CHECK(calls == 0);
  // The node is free for a run that fits.
  CHECK(cf_run_images(2, nullptr, 0, count, &calls) == CF_OK);
  CHECK(calls == 2);
}

TEST_CASE("cf_coll_init with images NULL takes only this node's image, naming my_image otherwise") {
  int rc = 0;
  std::string message;
  cf_image_t image = 0;
  std::thread([&] {
    rc = cf_coll_init(nullptr, 5, nullptr, 0, 0);
    message = cf_last_error();
    image = cf_myimage();
  }).join();
  CHECK(rc == CF_ERR_BAD_ARG);
  CHECK(message == "my_image: 5 with images NULL (one image per node), where this node's image is 0");
  CHECK(image == static_cast<cf_image_t>(-1));  // the thread did not become an image
  // The right call attaches it: image 0 of 1.
  int barrier = -1;
  std::thread([&] {
    rc = cf_coll_init(nullptr, 0, nullptr, 0, 0);
    image = cf_myimage();
    barrier = cf_coll_barrier(CF_TEAM_ALL, CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL |
                                               CF_COLL_ALL_THREADS);
  }).join();
  CHECK(rc == CF_OK);
  CHECK(image == 0);
  CHECK(barrier == CF_OK);
}
