// The training log as a self-contained SVG: one panel per group of series, iteration on x.
#pragma once

#include <string>
#include <vector>

namespace kernelgym::learned {

struct Series {
  std::string name;
  std::vector<double> y;  // y[i] at iteration i + 1
};

struct Panel {
  std::string title;
  std::vector<Series> series;
};

std::string RenderTrainingSvg(const std::string& title, const std::vector<Panel>& panels);

}  // namespace kernelgym::learned
