//===- AnalysisPictures.cpp - switchyard analyze's SVG pictures -----------===//

#include "tools/switchyard/AnalysisPictures.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace switchyard::driver;
namespace rt = switchyard::runtime;

namespace {
constexpr int64_t kCell = 12, kLabels = 44, kGap = 16, kTitle = 24, kBar = 64,
                  kBottom = 8;

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// White at 0, through a light blue at 0.5, to dark blue at 1.
std::string colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  static const int stops[3][3] = {
      {255, 255, 255}, {107, 174, 214}, {8, 48, 107}};
  int low = t < 0.5 ? 0 : 1;
  double f = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  int rgb[3];
  for (int i = 0; i < 3; ++i)
    rgb[i] = int(
        std::lround(stops[low][i] + f * (stops[low + 1][i] - stops[low][i])));
  return llvm::formatv("#{0:x-2}{1:x-2}{2:x-2}", rgb[0], rgb[1], rgb[2]).str();
}

/// The SVG document's start: its size, a white background, the title.
std::string begin(std::pair<int64_t, int64_t> size, const std::string &title) {
  return llvm::formatv(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
             "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"monospace\" "
             "font-size=\"10\">\n<rect width=\"{0}\" height=\"{1}\" "
             "fill=\"white\"/>\n<text x=\"4\" y=\"16\" font-size=\"13\" "
             "font-family=\"sans-serif\">{2}</text>\n",
             size.first, size.second, escape(title))
      .str();
}

/// Row labels left of a grid at (x0, y0), column labels above it.
void labels(std::string &svg, int64_t x0, int64_t y0,
            const std::vector<std::string> &rows,
            const std::vector<std::string> &columns) {
  for (size_t r = 0; r < rows.size(); ++r)
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                         "</text>\n",
                         x0 - 3, y0 + int64_t(r) * kCell + kCell - 2,
                         escape(rows[r]));
  for (size_t c = 0; c < columns.size(); ++c)
    svg += llvm::formatv("<text transform=\"translate({0},{1}) rotate(-90)\">"
                         "{2}</text>\n",
                         x0 + int64_t(c) * kCell + kCell - 2, y0 - 3,
                         escape(columns[c]));
}

void cell(std::string &svg, int64_t x, int64_t y, const std::string &fill) {
  svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{2}\" "
                       "fill=\"{3}\"/>\n",
                       x, y, kCell, fill);
}

/// The colour bar at the right edge of a picture `width` wide, from 0 at
/// the bottom to `scale` at the top of a `height`-pixel span from y0.
void colourBar(std::string &svg, int64_t width, int64_t y0, int64_t height,
               double scale) {
  int64_t x = width - kBar + 8;
  svg += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" "
         "y2=\"0\">";
  for (double t : {0.0, 0.5, 1.0})
    svg += llvm::formatv("<stop offset=\"{0}\" stop-color=\"{1}\"/>", t,
                         colour(t));
  svg += "</linearGradient></defs>\n";
  svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"{2}\" "
                       "fill=\"url(#scale)\" stroke=\"#888\"/>\n",
                       x, y0, height);
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">{2}</text>\n", x + 16, y0 + 8,
                       llvm::formatv("{0:f2}", scale).str());
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">0</text>\n", x + 16,
                       y0 + height);
}
} // namespace

std::string switchyard::driver::tokenLabel(int32_t token) {
  if (token == ' ')
    return "\u2423";
  if (token == '\n')
    return "\u21b5";
  if (token == '\t')
    return "\u2192";
  if (token > ' ' && token < 127)
    return std::string(1, char(token));
  return llvm::formatv("{0:x-2}", token).str();
}

std::pair<int64_t, int64_t>
switchyard::driver::pictureSize(const std::string &title, int64_t rows,
                                const std::vector<int64_t> &columns) {
  int64_t width = kBar;
  for (int64_t c : columns)
    width += kLabels + c * kCell;
  width += kGap * int64_t(columns.size() > 1 ? columns.size() - 1 : 0);
  width = std::max(width, 8 + 7 * int64_t(title.size()));
  return {width, kTitle + kLabels + rows * kCell + kBottom};
}

std::string switchyard::driver::heatMap(
    const std::string &title, std::span<const float> values, int64_t rows,
    int64_t columns, const std::vector<std::string> &rowLabels,
    const std::vector<std::string> &columnLabels) {
  std::pair<int64_t, int64_t> size = pictureSize(title, rows, {columns});
  std::string svg = begin(size, title);
  int64_t x0 = kLabels, y0 = kTitle + kLabels;
  labels(svg, x0, y0, rowLabels, columnLabels);
  double scale = 0;
  for (float v : values)
    scale = std::max(scale, double(v));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c) {
      double v = values[r * columns + c];
      if (v > 0)
        cell(svg, x0 + c * kCell, y0 + r * kCell,
             colour(scale > 0 ? v / scale : 0));
    }
  svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                       "height=\"{3}\" fill=\"none\" stroke=\"#888\"/>\n",
                       x0, y0, columns * kCell, rows * kCell);
  colourBar(svg, size.first, y0, rows * kCell, scale);
  return svg + "</svg>\n";
}

std::string
switchyard::driver::selectionGrid(const std::string &title,
                                  const std::vector<rt::Selection> &selections,
                                  const std::vector<std::string> &tokenLabels) {
  int64_t rows = 0;
  std::vector<int64_t> columns;
  for (const rt::Selection &s : selections) {
    rows = std::max(rows, s.tokens);
    columns.push_back(s.heads * s.experts);
  }
  std::pair<int64_t, int64_t> size = pictureSize(title, rows, columns);
  std::string svg = begin(size, title);
  int64_t x0 = kLabels, y0 = kTitle + kLabels;
  for (const rt::Selection &s : selections) {
    int64_t width = s.heads * s.experts;
    std::vector<std::string> rowLabels(
        tokenLabels.end() - std::min<size_t>(tokenLabels.size(), s.tokens),
        tokenLabels.end());
    std::vector<std::string> columnLabels;
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t e = 0; e < s.experts; ++e)
        columnLabels.push_back(s.heads > 1
                                   ? llvm::formatv("h{0}e{1}", h, e).str()
                                   : llvm::formatv("e{0}", e).str());
    labels(svg, x0, y0, rowLabels, columnLabels);
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-weight=\"bold\">{2}"
                         "</text>\n",
                         x0 - kLabels + 2, kTitle + 12, s.side);
    svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                         "height=\"{3}\" fill=\"#f2f2f2\"/>\n",
                         x0, y0, width * kCell, s.tokens * kCell);
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t j = 0; j < s.k; ++j) {
          int64_t at = (t * s.heads + h) * s.k + j;
          int64_t expert = s.chosen[at];
          if (expert >= 0 && expert < s.experts)
            cell(svg, x0 + (h * s.experts + expert) * kCell, y0 + t * kCell,
                 colour(s.gates[at]));
        }
    // Lines between the heads' experts.
    for (int64_t h = 1; h < s.heads; ++h)
      svg +=
          llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                        "stroke=\"#444\"/>\n",
                        x0 + h * s.experts * kCell, y0, y0 + s.tokens * kCell);
    x0 += width * kCell + kGap + kLabels;
  }
  colourBar(svg, size.first, kTitle + kLabels, rows * kCell, 1.0);
  return svg + "</svg>\n";
}
