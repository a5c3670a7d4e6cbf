// The on-disk cache (lib/common/cache): where it lives, what a hit needs, and the hash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/cache.hpp"

namespace syssim {
namespace {

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("syssim-cache-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("SYSSIM_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// The FNV-1a 64-bit test vectors of its authors (Fowler, Noll, Vo: "FNV hash" test suite).
TEST(ContentHash, MatchesTheFnv1aTestVectors) {
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");
  EXPECT_EQ(content_hash("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(content_hash("foobar"), "85944171f73967e8");
}

TEST_F(CacheTest, ReturnsWhatWasStoredUnderTheSameKey) {
  EXPECT_FALSE(cache_get("trace", "model A").has_value());
  cache_put("trace", "model A", "its trace\nwith two lines");
  EXPECT_EQ(cache_get("trace", "model A").value_or("miss"), "its trace\nwith two lines");
  EXPECT_FALSE(cache_get("trace", "model B").has_value());
  EXPECT_FALSE(cache_get("point", "model A").has_value());  // kinds are separate
  EXPECT_TRUE(std::filesystem::exists(dir_ / "trace" / content_hash("model A")));
}

// Two keys with the same hash: the entry holds its key, so the other key misses.
TEST_F(CacheTest, AnEntryOfAnotherKeyUnderTheSameNameIsAMiss) {
  cache_put("trace", "model A", "trace of A");
  std::filesystem::rename(dir_ / "trace" / content_hash("model A"), dir_ / "trace" / content_hash("model B"));
  EXPECT_FALSE(cache_get("trace", "model B").has_value());
}

TEST_F(CacheTest, ATruncatedEntryIsAMiss) {
  std::filesystem::create_directories(dir_ / "trace");
  std::ofstream(dir_ / "trace" / content_hash("model A")) << "7\nmode";
  EXPECT_FALSE(cache_get("trace", "model A").has_value());
}

TEST_F(CacheTest, OffDisablesIt) {
  ::setenv("SYSSIM_CACHE_DIR", "off", 1);
  EXPECT_EQ(cache_dir(), "");
  cache_put("trace", "model A", "trace of A");
  EXPECT_FALSE(cache_get("trace", "model A").has_value());
}

TEST(CacheDir, FallsBackToXdgThenHome) {
  ::unsetenv("SYSSIM_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(cache_dir(), "/x/syssim");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(cache_dir(), "/home/u/.cache/syssim");
}

}  // namespace
}  // namespace syssim
