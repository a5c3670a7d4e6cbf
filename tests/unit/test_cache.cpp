// The on-disk cache (lib/common/cache): where it lives, what a hit needs, and the hash.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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
  std::string entry(const std::string& key) const { return (dir_ / "trace" / content_hash(key)).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  std::filesystem::path dir_;
};

// The FNV-1a 64-bit test vectors of its authors (Fowler, Noll, Vo: "FNV hash" test suite).
TEST(ContentHash, MatchesTheFnv1aTestVectors) {
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");
  EXPECT_EQ(content_hash("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(content_hash("foobar"), "85944171f73967e8");
}

// The entries' checksum over eight-byte little-endian words, each mixed in as
// h = ((h ^ w) * 0xC4CEB9FE1A85EC53) ^ (that >> 29) from h = 0x9E3779B97F4A7C15, an empty key
// and then the text, each ending in its zero-padded tail word with the tail's length in the top
// bits: worked out apart from cache.cpp (a few lines of Python over the same definition).
// This test program holds syssim's code itself: the identity is its executable's size and
// modification time, which a rebuild changes.
TEST(BuildIdentity, IsTheSizeAndModificationTimeOfTheFileHoldingTheCode) {
  struct stat exe {};
  ASSERT_EQ(stat("/proc/self/exe", &exe), 0);
  EXPECT_EQ(build_identity(), std::to_string(exe.st_size) + " bytes, modified " + std::to_string(exe.st_mtim.tv_sec) +
                                  "." + std::to_string(exe.st_mtim.tv_nsec));
}

TEST(ContentChecksum, MixesEightByteWords) {
  EXPECT_EQ(content_checksum(""), "7054907c319dc974");
  EXPECT_EQ(content_checksum("a"), "dd5d164203985ab1");
  EXPECT_EQ(content_checksum("syssim trace"), "ac7bd6f25740dd28");
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
  cache_put("trace", "model A", "trace of A");
  std::filesystem::resize_file(entry("model A"), std::filesystem::file_size(entry("model A")) - 1);
  EXPECT_FALSE(cache_get("trace", "model A").has_value());
}

// Every single flipped byte, in the header, the key or the value, makes the entry a miss.
TEST_F(CacheTest, AnyFlippedByteIsAMiss) {
  cache_put("trace", "model A", "trace of A, long enough to span a few 8-byte words");
  const std::string good = read(entry("model A"));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    write(entry("model A"), bad);
    EXPECT_FALSE(cache_get("trace", "model A").has_value()) << "byte " << i;
  }
  write(entry("model A"), good);
  EXPECT_TRUE(cache_get("trace", "model A").has_value());
}

// The header's sizes take an entry apart (key "model A" is 7 bytes, value "xyz" 3); a flipped
// value byte leaves the parts where they were but the entry no longer intact.
TEST_F(CacheTest, SplitsAnEntryByItsSizesAndChecksIt) {
  cache_put("trace", "model A", "xyz");
  const std::string good = read(entry("model A"));
  ASSERT_EQ(good.substr(0, 19), "syssim-cache 2 7 3 ");
  std::optional<CacheEntry> parts = split_cache_entry(good);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->key, "model A");
  EXPECT_EQ(parts->value, "xyz");
  EXPECT_TRUE(parts->intact);
  std::string bad = good;
  bad.back() = 'Z';
  parts = split_cache_entry(bad);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->value, "xyZ");
  EXPECT_FALSE(parts->intact);
  EXPECT_FALSE(split_cache_entry(good.substr(0, good.size() - 1)).has_value());
}

// Headers whose sizes are huge, negative or not numbers are misses, not allocations.
TEST_F(CacheTest, ImpossibleSizesAreMisses) {
  std::filesystem::create_directories(dir_ / "trace");
  for (const std::string text :
       {"syssim-cache 2 7 18446744073709551615 0000000000000000\nmodel Ax", "syssim-cache 2 -7 1 0000000000000000\nmodel Ax",
        "syssim-cache 2 99999999999999999999999 1 0000000000000000\nmodel Ax", "syssim-cache 2 07 1 x\nmodel Ax",
        "18446744073709551615\nmodel A", "7\nmodel Avalue of the first layout"}) {
    write(entry("model A"), text);
    EXPECT_FALSE(cache_get("trace", "model A").has_value()) << text;
  }
}

// A FIFO or a folder where an entry belongs is a miss at once (opening a FIFO to read would
// wait for a writer forever).
TEST_F(CacheTest, AnEntryThatIsNoRegularFileIsAMiss) {
  std::filesystem::create_directories(dir_ / "trace");
  ASSERT_EQ(::mkfifo(entry("model A").c_str(), 0600), 0);
  EXPECT_FALSE(cache_get("trace", "model A").has_value());
  std::filesystem::create_directories(entry("model B"));
  EXPECT_FALSE(cache_get("trace", "model B").has_value());
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
