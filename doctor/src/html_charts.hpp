#pragma once
// The doctor's page, inside: HTML escaping and the inline SVG charts (html_charts.cpp) that
// html.cpp lays out. Each chart carries its own text: a title and a description for screen
// readers (role="img"), and a table of its numbers under the drawing.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pinfeed::html {

/// `s` with &, <, >, " and ' escaped, for text and attribute values.
[[nodiscard]] std::string escape(std::string_view s);

/// A table of numbers: a header row and body rows of cells (escaped when written).
struct table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

/// A chart ready to lay out: the SVG's inner elements (each drawn datum has class "datum"), its
/// size in user units, how many data it draws, and its words and numbers.
struct chart {
  std::string id;           ///< unique on the page (element ids derive from it)
  std::string title;        ///< what it shows, in a few words
  std::string description;  ///< what it shows and what to read from it, in sentences
  std::string svg;          ///< the inner SVG elements
  int width = 640, height = 200;
  std::size_t points = 0;   ///< data drawn
  table numbers;
};

/// The chart as a <figure>: the SVG (role="img", titled and described), a caption and the table.
[[nodiscard]] std::string figure(const chart& c);

/// One bar of a horizontal bar chart: a label, a value and, for a waterfall, where it starts.
struct bar {
  std::string label;    ///< shown left of the bar (shortened to fit; the table has it whole)
  double value = 0;     ///< the bar's length (>= 0); NaN: not measured (no bar, a note)
  double start = 0;     ///< where it starts on the axis (a waterfall's floating bars)
  std::string note;     ///< shown after the bar instead of the value (e.g. "within noise")
  std::string value_text;  ///< the value as shown
  bool highlight = false;  ///< drawn in the alarm colour (a bottleneck), and said so in words
  std::string data;     ///< extra attributes for the datum (e.g. data-stage="read")
};

/// Horizontal bars on a shared axis from 0 to the largest end; `unit` names the axis.
[[nodiscard]] chart bar_chart(std::string id, std::string title, std::string description, const std::vector<bar>& bars,
                              const std::string& unit);

/// One series of a line chart: (x, y) points, drawn as steps or as columns.
struct series {
  std::string name;
  std::vector<double> x, y;
  std::string css;          ///< its class (colour)
  bool columns = false;     ///< columns from 0 (waits), else a step line (settings)
  std::vector<std::size_t> marked;  ///< points drawn with a marker (the tuner's changes)
  std::vector<std::string> marks;   ///< each marker's words (a tooltip and its <title>)
};

/// Series over a shared x axis (`x_unit`) and y axis (`y_unit`), from 0 to their largest values.
[[nodiscard]] chart line_chart(std::string id, std::string title, std::string description, const std::vector<series>& s,
                               const std::string& x_unit, const std::string& y_unit);

}  // namespace pinfeed::html
