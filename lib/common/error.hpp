// Errors raised by library code. The tools' single top-level catch maps them
// to exit codes: DataError -> 1 (bad data), UsageError -> 2 (bad usage), OutOfMemory -> 3 when
// asked, anything else (InternalError, or an exception no reader turned into one of these) ->
// 70, an internal error: a bug in syssim.
#pragma once
#include <stdexcept>
#include <string>

namespace syssim {

// Bad input data: invalid YAML or graph, impossible configuration.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad command-line usage that the flag parser cannot see by itself.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The job does not fit in GPU memory: not bad input, a verdict the tools turn into exit
// status 3 when asked to (`--fail-on-oom`), after writing their report.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken invariant inside syssim: a bug, not bad input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace syssim
