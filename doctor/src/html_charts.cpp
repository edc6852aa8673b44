// The doctor's page: inline SVG charts, each with its words and its numbers.
#include "html_charts.hpp"

#include "analysis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pinfeed::html {

namespace {

/// A coordinate or value with `digits` after the point (the analysis' number format).
std::string fmt(double v, int digits = 1) { return analysis::num(v, digits); }

/// Shortened to about `n` characters (an ellipsis at the end) for a label inside a chart, never
/// inside a UTF-8 sequence.
std::string shorten(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

/// A round axis end at or above v (1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6 or 8 times a power of ten): four
/// ticks on it stay readable numbers.
double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 1.2, 1.6, 2.0, 2.4, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}

/// A tick's number: whole from 1000 up, else three significant digits at most ("0.075", "1.2").
std::string tick_text(double v) {
  char b[64];
  std::snprintf(b, sizeof b, v >= 1000 ? "%.0f" : "%.3g", v);
  return b;
}

/// Tick labels of an axis from 0 to `end` (four intervals), with their grid lines.
std::string x_ticks(double x0, double width, double end, double y_top, double y_bottom) {
  std::string out;
  for (int i = 0; i <= 4; ++i) {
    const double x = x0 + width * i / 4;
    out += "<line class=\"grid\" x1=\"" + fmt(x) + "\" y1=\"" + fmt(y_top) + "\" x2=\"" + fmt(x) + "\" y2=\"" + fmt(y_bottom) + "\"/>";
    out += "<text class=\"tick\" x=\"" + fmt(x) + "\" y=\"" + fmt(y_bottom + 14) + "\" text-anchor=\"middle\">" +
           tick_text(end * i / 4) + "</text>";
  }
  return out;
}


}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string figure(const chart& c) {
  std::string out = "<figure class=\"chart-figure\" id=\"" + escape(c.id) + "\">\n";
  out += "<svg class=\"chart\" viewBox=\"0 0 " + std::to_string(c.width) + " " + std::to_string(c.height) +
         "\" role=\"img\" aria-labelledby=\"" + escape(c.id) + "-title " + escape(c.id) + "-desc\" data-points=\"" +
         std::to_string(c.points) + "\" preserveAspectRatio=\"xMinYMin meet\">";
  out += "<title id=\"" + escape(c.id) + "-title\">" + escape(c.title) + "</title>";
  out += "<desc id=\"" + escape(c.id) + "-desc\">" + escape(c.description) + "</desc>\n" + c.svg + "</svg>\n";
  out += "<details class=\"numbers\"><summary>The numbers</summary><div class=\"scroll\"><table><thead><tr>";
  for (const auto& h : c.numbers.head) out += "<th scope=\"col\">" + escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : c.numbers.rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i)
      out += (i == 0 ? "<th scope=\"row\">" : "<td>") + escape(row[i]) + (i == 0 ? "</th>" : "</td>");
    out += "</tr>";
  }
  out += "</tbody></table></div></details>\n<figcaption>" + escape(c.title) + "</figcaption>\n</figure>\n";
  return out;
}

chart bar_chart(std::string id, std::string title, std::string description, const std::vector<bar>& bars,
                const std::string& unit) {
  constexpr double label_w = 170, bar_x = 175, bar_w = 360, row_h = 26, top = 8;
  chart c{std::move(id), std::move(title), std::move(description)};
  double end = 0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) end = std::max(end, b.start + b.value);
  end = nice_ceiling(end);
  const double bottom = top + row_h * static_cast<double>(bars.size());
  c.height = static_cast<int>(bottom + 36);
  c.svg += x_ticks(bar_x, bar_w, end, top, bottom);
  c.svg += "<text class=\"axis\" x=\"" + fmt(bar_x + bar_w / 2) + "\" y=\"" + fmt(bottom + 30) + "\" text-anchor=\"middle\">" +
           escape(unit) + "</text>";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const bar& b = bars[i];
    const double y = top + row_h * static_cast<double>(i);
    c.svg += "<text class=\"label\" x=\"" + fmt(label_w) + "\" y=\"" + fmt(y + 17) + "\" text-anchor=\"end\">" +
             escape(shorten(b.label, 24)) + "</text>";
    std::string shown = b.note.empty() ? b.value_text : b.note;
    if (std::isfinite(b.value)) {
      const double x = bar_x + bar_w * b.start / end, w = std::max(bar_w * b.value / end, b.value > 0 ? 1.0 : 0.0);
      c.svg += "<rect class=\"datum" + std::string(b.highlight ? " bottleneck" : "") + "\" x=\"" + fmt(x) + "\" y=\"" +
               fmt(y + 4) + "\" width=\"" + fmt(w) + "\" height=\"" + fmt(row_h - 8) + "\" data-value=\"" + fmt(b.value, 4) +
               "\"" + (b.data.empty() ? "" : " " + b.data) + "><title>" + escape(b.label + ": " + shown) + "</title></rect>";
      ++c.points;
      // After the bar where the words fit in the chart (about 6.6 units a character), else inside
      // its end, else before its start (a waterfall's floating bar).
      const std::string words = shorten(shown + (b.highlight ? " (bottleneck)" : ""), 30);
      const double len = 6.6 * static_cast<double>(words.size());
      const bool after = x + w + 4 + len <= c.width, inside = !after && w > len, before = !after && !inside && x - 4 - len >= bar_x;
      const double at = after ? x + w + 4 : inside ? x + w - 4 : before ? x - 4 : x + w + 4;
      c.svg += "<text class=\"value" + std::string(inside ? " inside" : "") + "\" x=\"" + fmt(at) + "\" y=\"" + fmt(y + 17) + "\"" +
               (inside || before ? " text-anchor=\"end\"" : "") + ">" + escape(words) + "</text>";
    } else {
      c.svg += "<text class=\"value missing\" x=\"" + fmt(bar_x + 4) + "\" y=\"" + fmt(y + 17) + "\">" +
               escape(shorten(shown.empty() ? "not measured" : shown, 40)) + "</text>";
    }
    c.numbers.rows.push_back({b.label, shown.empty() ? "not measured" : shown, b.highlight ? "bottleneck" : ""});
  }
  c.numbers.head = {"", unit, ""};
  return c;
}

namespace {

/// A series as SVG: columns (one path of rectangles) or a step line, and its markers.
std::string draw(const series& s, double x0, double w, double y0, double h, double x_end, double y_end) {
  const auto px = [&](double x) { return x0 + w * x / x_end; };
  const auto py = [&](double y) { return y0 + h - h * y / y_end; };
  std::string d;
  const double col = std::max(1.0, w / std::max<double>(1, static_cast<double>(s.x.size())) * 0.8);
  for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (s.columns) {
      if (s.y[i] <= 0) continue;
      d += "M" + fmt(std::max(x0, px(s.x[i]) - col)) + " " + fmt(py(0)) + "V" + fmt(py(s.y[i])) + "H" + fmt(px(s.x[i])) + "V" +
           fmt(py(0)) + "Z";
    } else {
      d += (i == 0 ? "M" + fmt(px(s.x[i])) + " " : "H" + fmt(px(s.x[i])) + "V") + fmt(py(s.y[i]));
      if (i + 1 == s.x.size()) d += "H" + fmt(px(x_end));
    }
  }
  std::string out = "<path class=\"datum " + s.css + (s.columns ? " columns" : " line") + "\" d=\"" + (d.empty() ? "M0 0" : d) +
                    "\" data-points=\"" + std::to_string(s.x.size()) + "\"><title>" + escape(s.name) + "</title></path>";
  for (std::size_t k = 0; k < s.marked.size(); ++k) {
    const std::size_t i = s.marked[k];
    if (i >= s.x.size()) continue;
    out += "<circle class=\"mark " + s.css + "\" cx=\"" + fmt(px(s.x[i])) + "\" cy=\"" + fmt(py(s.y[i])) + "\" r=\"4\"><title>" +
           escape(k < s.marks.size() ? s.marks[k] : s.name) + "</title></circle>";
  }
  return out;
}

}  // namespace

chart line_chart(std::string id, std::string title, std::string description, const std::vector<series>& all,
                 const std::string& x_unit, const std::string& y_unit) {
  constexpr double x0 = 56, w = 560, y0 = 10, h = 150;
  chart c{std::move(id), std::move(title), std::move(description)};
  double x_end = 0, y_end = 0;
  for (const auto& s : all) {
    for (double x : s.x) x_end = std::max(x_end, x);
    for (double y : s.y) y_end = std::max(y_end, y);
    c.points += s.x.size();
  }
  x_end = nice_ceiling(x_end);
  y_end = nice_ceiling(y_end);
  c.height = static_cast<int>(y0 + h + 44 + 18 * static_cast<double>(all.size() > 1 ? 1 : 0));
  c.svg += x_ticks(x0, w, x_end, y0, y0 + h);
  for (int i = 0; i <= 2; ++i) {  // the y axis: 0, half, end
    const double y = y0 + h - h * i / 2;
    c.svg += "<line class=\"grid\" x1=\"" + fmt(x0) + "\" y1=\"" + fmt(y) + "\" x2=\"" + fmt(x0 + w) + "\" y2=\"" + fmt(y) + "\"/>";
    c.svg += "<text class=\"tick\" x=\"" + fmt(x0 - 6) + "\" y=\"" + fmt(y + 4) + "\" text-anchor=\"end\">" +
             tick_text(y_end * i / 2) + "</text>";
  }
  c.svg += "<text class=\"axis\" x=\"" + fmt(x0 + w / 2) + "\" y=\"" + fmt(y0 + h + 30) + "\" text-anchor=\"middle\">" + escape(x_unit) +
           "</text>";
  c.svg += "<text class=\"axis\" transform=\"rotate(-90)\" x=\"" + fmt(-(y0 + h / 2)) + "\" y=\"14\" text-anchor=\"middle\">" +
           escape(y_unit) + "</text>";
  if (y_end == 1 && std::all_of(all.begin(), all.end(), [](const series& s) {
        return std::all_of(s.y.begin(), s.y.end(), [](double y) { return y <= 0; });
      }))
    c.svg += "<text class=\"label\" x=\"" + fmt(x0 + w / 2) + "\" y=\"" + fmt(y0 + h / 2) +
             "\" text-anchor=\"middle\">every value is 0 (" + std::to_string(c.points) + " points)</text>";
  double legend_x = x0;
  for (const auto& s : all) {
    c.svg += draw(s, x0, w, y0, h, x_end, y_end);
    if (all.size() > 1) {
      c.svg += "<rect class=\"key " + s.css + "\" x=\"" + fmt(legend_x) + "\" y=\"" + fmt(y0 + h + 40) + "\" width=\"12\" height=\"12\"/>";
      c.svg += "<text class=\"label\" x=\"" + fmt(legend_x + 16) + "\" y=\"" + fmt(y0 + h + 50) + "\">" + escape(shorten(s.name, 34)) + "</text>";
      legend_x += 280;
    }
  }
  c.numbers.head = {x_unit};
  for (const auto& s : all) c.numbers.head.push_back(s.name + " (" + y_unit + ")");
  // One row per x of the first series (the others share the axis where they have the point).
  if (!all.empty())
    for (std::size_t i = 0; i < all.front().x.size(); ++i) {
      std::vector<std::string> row{fmt(all.front().x[i], 3)};
      for (const auto& s : all) row.push_back(i < s.y.size() ? fmt(s.y[i], 2) : "");
      c.numbers.rows.push_back(std::move(row));
    }
  return c;
}

}  // namespace pinfeed::html
