// A graph file as the stages read it: the envelope, then every section present (trace, shard,
// cost, sim, mem) with its checks, and back to text.
#include "common/graph.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return syssim::fuzz::accept_errors([&] {
    syssim::Graph graph = syssim::read_graph(syssim::fuzz::text_of(data, size), "fuzz.json");
    (void)syssim::write_graph(graph);
  });
}
