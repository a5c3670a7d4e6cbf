// The tools' one top-level catch (tools/common/tool.cpp): each kind of error, its exit status
// and its one line on stderr.
#include <gtest/gtest.h>

#include <iostream>
#include <new>
#include <sstream>
#include <stdexcept>

#include "common/error.hpp"
#include "tool.hpp"

namespace syssim::tool {
namespace {

struct Outcome {
  int status = 0;
  std::string stderr_text;
};

// Runs guarded_main on a body that throws `error`, with no flags, capturing stderr.
template <typename Throw>
Outcome outcome_of(Throw error) {
  CLI::App app("test", "syssim-test");
  char name[] = "syssim-test";
  char* argv[] = {name};
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  const int status = guarded_main("syssim-test", app, 1, argv, [&] { error(); });
  std::cerr.rdbuf(old);
  return {status, captured.str()};
}

TEST(GuardedMain, EachErrorKindHasItsStatusAndOneLine) {
  Outcome ok = outcome_of([] {});
  EXPECT_EQ(ok.status, 0);
  EXPECT_EQ(ok.stderr_text, "");
  Outcome data = outcome_of([] { throw DataError("m.yaml: key 'x' must be positive, got 0"); });
  EXPECT_EQ(data.status, 1);
  EXPECT_EQ(data.stderr_text, "syssim-test: error: m.yaml: key 'x' must be positive, got 0\n");
  Outcome usage = outcome_of([] { throw UsageError("--tp: must be positive, got '0'"); });
  EXPECT_EQ(usage.status, 2);
  Outcome oom = outcome_of([] { throw OutOfMemory("capacity 80 GB, required 90 GB"); });
  EXPECT_EQ(oom.status, 3);
  EXPECT_EQ(oom.stderr_text, "syssim-test: out of memory: capacity 80 GB, required 90 GB\n");
}

// A bug is told apart from bad data: its own status (sysexits.h's EX_SOFTWARE) and words.
TEST(GuardedMain, AnythingElseIsAnInternalError) {
  for (Outcome bug : {outcome_of([] { throw InternalError("plan: queue of op 7 unset"); }),
                      outcome_of([] { throw std::out_of_range("map::at"); })}) {
    EXPECT_EQ(bug.status, 70);
    EXPECT_EQ(bug.stderr_text.rfind("syssim-test: internal error (a bug in syssim; please report it with the command): ", 0),
              0u)
        << bug.stderr_text;
  }
  Outcome memory = outcome_of([] { throw std::bad_alloc(); });
  EXPECT_EQ(memory.status, 1);
  EXPECT_EQ(memory.stderr_text, "syssim-test: error: not enough memory on this machine\n");
}

}  // namespace
}  // namespace syssim::tool
