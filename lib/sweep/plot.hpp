// `syssim sweep --plot`: standalone SVG pictures of a sweep and of a search.
#pragma once
#include <string>
#include <vector>

#include "sweep/sweep.hpp"

namespace syssim {

// One horizontal bar per point, in sweep order, as long as its metric; the best point in a
// darker color, oom and invalid points as labelled gaps.
std::string plot_sweep(const std::vector<SweepRow>& rows, const std::string& metric);

// The Pareto front: step time against peak memory, one labelled dot per layout.
std::string plot_search(const SearchResult& result);

}  // namespace syssim
