#include "common/symbol.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace syssim {
namespace {

struct Table {
  std::mutex lock;
  // Keyed by a view of the owned text, so a lookup allocates nothing; the texts never move.
  std::unordered_map<std::string_view, std::unique_ptr<const Symbol::Entry>> texts;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: symbols may be used by static destructors
  return *t;
}

const Symbol::Entry* intern(std::string_view text) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.lock);
  auto it = t.texts.find(text);
  if (it != t.texts.end()) return it->second.get();
  auto owned = std::make_unique<const Symbol::Entry>(
      Symbol::Entry{std::string(text), parse_enum<NamedOp>(text).value_or(NamedOp::other), parse_module_path(text)});
  const Symbol::Entry* interned = owned.get();
  t.texts.emplace(interned->text, std::move(owned));
  return interned;
}

}  // namespace

Symbol::Symbol() {
  static const Entry* const empty = intern("");
  entry_ = empty;
}

Symbol::Symbol(std::string_view text) : entry_(intern(text)) {}

}  // namespace syssim
