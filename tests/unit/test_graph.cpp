// The graph format: axis expressions, version checks, errors that name the JSON path,
// and deterministic output.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "common/graph.hpp"

namespace syssim {
namespace {

TEST(AxisExpression, ParsesEvaluatesAndPrintsCanonically) {
  Poly p = Poly::parse("b*s*2*f + s^2 * b", "test");
  EXPECT_EQ(p.to_string(), "2*b*f*s + b*s^2");
  EXPECT_DOUBLE_EQ(p.evaluate({{"b", 3}, {"s", 10}, {"f", 7}}, "test"), 2 * 3 * 7 * 10 + 3 * 100);
  EXPECT_TRUE(p.contains_axis("f"));
  EXPECT_FALSE(p.contains_axis("h"));
  EXPECT_EQ((Poly::axis("h") * Poly::axis("h") + Poly::constant(0)).to_string(), "h^2");
  EXPECT_EQ(Poly::parse("0", "test").to_string(), "0");
}

TEST(AxisExpression, ErrorsNameThePlaceAndTheText) {
  try {
    Poly::parse("2*s+", "/trace/ops/4/flops");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/trace/ops/4/flops: bad axis expression '2*s+': unexpected end");
  }
  try {
    Poly::parse("s*b", "x").evaluate({{"s", 1}}, "/shard");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard: axis 'b' has no value");
  }
}

TEST(GraphDocument, RoundTripsByteForByte) {
  Graph g;
  g.provenance.push_back(Provenance{"syssim-trace", "0.1.0", {"m.yaml"}});
  g.other_sections["mine"] = {{"x", 1}};
  std::string text = write_graph(g);
  EXPECT_EQ(write_graph(read_graph(text, "<stdin>")), text);
  EXPECT_NE(text.find("\"format\":\"syssim-graph\""), std::string::npos);
  EXPECT_NE(text.find("\"mine\":{\"x\":1}"), std::string::npos);
}

std::string error_of(const std::string& text) {
  try {
    read_graph(text, "<stdin>");
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GraphDocument, RefusesBadInputWithOneLine) {
  EXPECT_EQ(error_of(""), "<stdin>: empty input, expected a syssim graph");
  EXPECT_EQ(error_of("{\"format\": \"syssim-gr"), "<stdin>: truncated JSON: input ends after 21 bytes");
  EXPECT_EQ(error_of("{\"format\" = 1}"), "<stdin>: not valid JSON at byte 11");
  EXPECT_EQ(error_of("{\"format\": \"other\"}"), "<stdin>: /format: expected \"syssim-graph\", got \"other\"");
  EXPECT_EQ(error_of("{\"format\": \"syssim-graph\", \"version\": \"2.0\", \"provenance\": []}"),
            "<stdin>: /version: graph format 2.0 is not supported (this syssim reads 1.x)");
  EXPECT_EQ(error_of("{\"format\": \"syssim-graph\", \"version\": \"1.7\", \"provenance\": [], \"sim\": {}}"),
            "<stdin>: graph: /sim: missing key 'step_time_ms'");
}

TEST(GraphDocument, MissingSectionTellsWhichStageToRun) {
  Graph g;
  try {
    need_section(g.shard, "shard", "syssim-shard");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "graph has no 'shard' section: run syssim-shard first");
  }
}

}  // namespace
}  // namespace syssim
