//===- AnalysisPictures.h - switchyard analyze's SVG pictures ---*- C++ -*-===//
//
// The pictures `switchyard analyze` writes, as self-contained SVG text a
// browser shows: attention maps as heat maps (queries down, keys across,
// tokens on both axes, a colour bar), expert selections as grids (tokens
// down, each head's experts across, the chosen ones coloured by their
// gate). The sizes follow from the grid: see pictureSize().
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TOOLS_SWITCHYARD_ANALYSISPICTURES_H
#define SWITCHYARD_TOOLS_SWITCHYARD_ANALYSISPICTURES_H

#include "runtime/Analysis.h"

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace switchyard::driver {

/// A byte-level token as an axis label: printable ASCII as itself, a space
/// as ␣, a newline as ↵, a tab as →, any other byte as its hex value.
std::string tokenLabel(int32_t token);

/// The width and height in pixels of a picture whose panels hold grids of
/// `rows` rows and the given numbers of columns (heatMap: one panel):
/// 12-pixel cells, 44 pixels of labels left of and above each panel, 16
/// between panels, a 24-pixel title line, 8 pixels below, and a colour bar
/// of 64 pixels on the right; at least 8 + 7 pixels per character of the
/// title wide.
std::pair<int64_t, int64_t> pictureSize(const std::string &title, int64_t rows,
                                        const std::vector<int64_t> &columns);

/// A heat map of `values` [rows, columns], white at 0 to dark blue at the
/// largest value (the colour bar's scale).
std::string heatMap(const std::string &title, std::span<const float> values,
                    int64_t rows, int64_t columns,
                    const std::vector<std::string> &rowLabels,
                    const std::vector<std::string> &columnLabels);

/// The selections of one block, a panel each: rows are tokens (labelled by
/// `tokenLabels`, the last `selection.tokens` of which each panel shows:
/// the value side also covers memory tokens), columns each head's experts,
/// a chosen expert's cell coloured by its gate (0 to 1).
std::string selectionGrid(const std::string &title,
                          const std::vector<runtime::Selection> &selections,
                          const std::vector<std::string> &tokenLabels);

} // namespace switchyard::driver

#endif // SWITCHYARD_TOOLS_SWITCHYARD_ANALYSISPICTURES_H
