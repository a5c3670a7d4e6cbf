// Input and output files (lib/common/io): UTF-8 checked on the way in; outputs all or none,
// and no temporary left behind by a failure or a signal.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"

namespace syssim {
namespace {

namespace fs = std::filesystem;

// The message of require_utf8 on `text`, empty when it passes.
std::string utf8_error(const std::string& text) {
  try {
    require_utf8(text, "f.yaml");
    return "";
  } catch (const DataError& e) {
    return e.what();
  }
}

TEST(InputTest, Utf8IsCheckedByTheRulesOfRfc3629) {
  // U+00E9, U+20AC, U+1F600 and U+10FFFF, the last code point, in their shortest forms.
  EXPECT_EQ(utf8_error("name: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\n"), "");
  EXPECT_EQ(utf8_error("a\nb\n\xFF"), "f.yaml: line 3: not UTF-8 text (byte 0xFF)");         // never in UTF-8
  EXPECT_EQ(utf8_error("caf\xE9 latin-1"), "f.yaml: line 1: not UTF-8 text (byte 0xE9)");      // lead byte, no continuation
  EXPECT_EQ(utf8_error("\x80"), "f.yaml: line 1: not UTF-8 text (byte 0x80)");                  // a continuation alone
  EXPECT_EQ(utf8_error("\xC0\x80"), "f.yaml: line 1: not UTF-8 text (byte 0xC0)");              // overlong NUL
  EXPECT_EQ(utf8_error("\xE0\x80\x80"), "f.yaml: line 1: not UTF-8 text (byte 0xE0)");          // overlong, 3 bytes
  EXPECT_EQ(utf8_error("\xED\xA0\x80"), "f.yaml: line 1: not UTF-8 text (byte 0xED)");          // U+D800, a surrogate
  EXPECT_EQ(utf8_error("\xF4\x90\x80\x80"), "f.yaml: line 1: not UTF-8 text (byte 0xF4)");      // past U+10FFFF
  EXPECT_EQ(utf8_error("\n\xE2\x82"), "f.yaml: line 2: not UTF-8 text (byte 0xE2)");            // cut short by the end
}

class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("syssim-io-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t files_in_dir() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(OutputTest, WritesEveryOutput) {
  write_outputs({{(dir_ / "report.txt").string(), "report"}, {(dir_ / "timeline.json").string(), "{}"}});
  EXPECT_EQ(read_input((dir_ / "report.txt").string()), "report");
  EXPECT_EQ(read_input((dir_ / "timeline.json").string()), "{}");
  EXPECT_EQ(files_in_dir(), 2u);
}

// The second output cannot be written: the first is not written either, and an old file at its
// path keeps its bytes.
TEST_F(OutputTest, OneUnwritableOutputWritesNone) {
  write_output((dir_ / "report.txt").string(), "old report");
  EXPECT_THROW(write_outputs({{(dir_ / "report.txt").string(), "new report"},
                              {(dir_ / "no-such-folder" / "timeline.json").string(), "{}"}}),
               DataError);
  EXPECT_EQ(read_input((dir_ / "report.txt").string()), "old report");
  EXPECT_EQ(files_in_dir(), 1u);  // no temporaries
}

// A signal while an output is being written deletes its temporary, and the process still ends
// by that signal. The child's temporary is made a FIFO beforehand, so that the child blocks
// opening it, inside write_outputs, until the signal comes.
TEST_F(OutputTest, ASignalDuringTheWriteLeavesNoTemporary) {
  const std::string target = (dir_ / "report.txt").string();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    remove_partial_outputs_on_signals();
    char go = 0;
    if (::read(ready[0], &go, 1) != 1) ::_exit(10);
    try {
      write_output(target, "report");
    } catch (...) {
    }
    ::_exit(11);  // not reached: the signal ends the child while it waits for the FIFO
  }
  const std::string temporary = target + ".tmp." + std::to_string(child);
  ASSERT_EQ(::mkfifo(temporary.c_str(), 0600), 0);
  ASSERT_EQ(::write(ready[1], "g", 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(fs::symlink_status(temporary)));
  EXPECT_FALSE(fs::exists(target));
}

}  // namespace
}  // namespace syssim
