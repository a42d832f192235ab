// A small SVG writer for the pictures of the reports (block maps, usage over events): shapes,
// text, wrapped lines, and the shared colours and byte axis.
#pragma once

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace gmb::svg {

inline std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

// Text width at the SVG's sans-serif font sizes, roughly: enough to decide whether a label fits.
inline double text_width(const std::string& s, double font_px) { return 0.6 * font_px * double(s.size()); }

// Colours of the picture (also in the legend).
constexpr const char* kUsed = "#3b6fb6";
constexpr const char* kHole = "#f2a33a";
constexpr const char* kUnmapped = "#e6e6e6";
constexpr const char* kDeviceFree = "#d9f0d3";
constexpr const char* kRequest = "#d62728";

struct Svg {
  std::string body;
  void rect(double x, double y, double w, double h, const char* fill, const std::string& title,
            const char* stroke = "#ffffff", const char* extra = "") {
    body += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" stroke="{}" {}>)",
                        x, y, std::max(w, 1.0), h, fill, stroke, extra);
    if (!title.empty()) body += "<title>" + xml_escape(title) + "</title>";
    body += "</rect>\n";
  }
  void text(double x, double y, const std::string& s, double size = 11, const char* anchor = "start",
            const char* fill = "#222222", const char* weight = "normal") {
    body += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}" fill="{}" font-weight="{}">{}</text>)",
                        x, y, size, anchor, fill, weight, xml_escape(s));
    body += "\n";
  }
  // Text wrapped at spaces to max_width; returns the y below the last line.
  double lines(double x, double y, const std::string& s, double size, double max_width, const char* weight = "normal",
               const char* fill = "#222222") {
    const std::size_t per_line = std::max<std::size_t>(20, std::size_t(max_width / (0.6 * size)));
    std::string rest = s;
    while (!rest.empty()) {
      std::size_t cut = rest.size();
      if (cut > per_line) {
        cut = rest.rfind(' ', per_line);
        if (cut == std::string::npos || cut == 0) cut = per_line;
      }
      text(x, y, rest.substr(0, cut), size, "start", fill, weight);
      rest = cut < rest.size() ? rest.substr(rest[cut] == ' ' ? cut + 1 : cut) : "";
      y += size * 1.35;
    }
    return y;
  }
  // A label centred in a box when it fits there.
  void label_in(double x, double w, double y, const std::string& s, const char* fill = "#ffffff", double size = 10) {
    if (text_width(s, size) + 6 <= w) text(x + w / 2, y, s, size, "middle", fill);
  }
  std::string finish(double width, double height) const {
    return fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">)",
                       width, height, width, height) +
           "\n" + fmt::format(R"(<rect x="0" y="0" width="{:.0f}" height="{:.0f}" fill="#ffffff"/>)", width, height) +
           "\n" + body + "</svg>\n";
  }
};

// A round tick spacing: 1, 2, 2.5 or 5 times a power of ten, at least raw.
inline double nice_step(double raw) {
  double mag = 1;
  while (mag > raw) mag /= 10;
  while (mag * 10 <= raw) mag *= 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// A byte axis up to ymax: its unit (the largest binary unit below ymax) and its tick step.
struct ByteAxis {
  double unit = 1;
  const char* name = "B";
  double step = 1;  // in bytes
  std::string label(double bytes) const { return fmt::format("{:g} {}", bytes / unit, name); }
};
inline ByteAxis byte_axis(double ymax) {
  ByteAxis a;
  const char* names[] = {"KiB", "MiB", "GiB", "TiB"};
  double u = 1024;
  for (const char* n : names) {
    if (ymax >= u) {
      a.unit = u;
      a.name = n;
    }
    u *= 1024;
  }
  a.step = nice_step(ymax / a.unit / 5) * a.unit;
  return a;
}

}  // namespace gmb::svg
