#include "policies/learned/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kernelgym::learned {
namespace {

constexpr double kPanelWidth = 420, kPanelHeight = 260, kMargin = 48;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", x);
  return buf;
}

void RenderPanel(std::ostringstream& svg, const Panel& panel, double left, double top) {
  double lo = INFINITY, hi = -INFINITY;
  std::size_t points = 0;
  for (const Series& s : panel.series)
    for (double y : s.y)
      if (std::isfinite(y)) {
        lo = std::min(lo, y);
        hi = std::max(hi, y);
        points = std::max(points, s.y.size());
      }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double x0 = left + kMargin, x1 = left + kPanelWidth - 12, y0 = top + kPanelHeight - 32, y1 = top + 28;
  auto X = [&](std::size_t i) { return points > 1 ? x0 + (x1 - x0) * static_cast<double>(i) / static_cast<double>(points - 1) : x0; };
  auto Y = [&](double y) { return y0 - (y0 - y1) * (y - lo) / (hi - lo); };
  svg << "<text x='" << left + kPanelWidth / 2 << "' y='" << top + 16 << "' text-anchor='middle' font-size='13'>"
      << Escape(panel.title) << "</text>\n";
  svg << "<line x1='" << x0 << "' y1='" << y0 << "' x2='" << x1 << "' y2='" << y0 << "' stroke='#444'/>\n";
  svg << "<line x1='" << x0 << "' y1='" << y0 << "' x2='" << x0 << "' y2='" << y1 << "' stroke='#444'/>\n";
  for (double v : {lo, (lo + hi) / 2, hi})
    svg << "<text x='" << x0 - 4 << "' y='" << Y(v) + 4 << "' text-anchor='end' font-size='10'>" << Num(v) << "</text>\n";
  svg << "<text x='" << x0 << "' y='" << y0 + 14 << "' font-size='10'>1</text>\n";
  svg << "<text x='" << x1 << "' y='" << y0 + 14 << "' text-anchor='end' font-size='10'>" << points << "</text>\n";
  svg << "<text x='" << (x0 + x1) / 2 << "' y='" << y0 + 26 << "' text-anchor='middle' font-size='10'>iteration</text>\n";
  for (std::size_t s = 0; s < panel.series.size(); ++s) {
    const Series& series = panel.series[s];
    const char* color = kColors[s % (sizeof(kColors) / sizeof(kColors[0]))];
    svg << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='";
    for (std::size_t i = 0; i < series.y.size(); ++i)
      if (std::isfinite(series.y[i])) svg << X(i) << "," << Y(series.y[i]) << " ";
    svg << "'/>\n";
    svg << "<text x='" << x0 + 8 << "' y='" << y1 + 12 + 13 * static_cast<double>(s) << "' font-size='11' fill='" << color
        << "'>" << Escape(series.name) << "</text>\n";
  }
}

}  // namespace

std::string RenderTrainingSvg(const std::string& title, const std::vector<Panel>& panels) {
  std::ostringstream svg;
  const double width = kPanelWidth * static_cast<double>(std::max<std::size_t>(panels.size(), 1)), height = kPanelHeight + 30;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  svg << "<text x='" << width / 2 << "' y='18' text-anchor='middle' font-size='14'>" << Escape(title) << "</text>\n";
  for (std::size_t p = 0; p < panels.size(); ++p) RenderPanel(svg, panels[p], kPanelWidth * static_cast<double>(p), 30);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace kernelgym::learned
