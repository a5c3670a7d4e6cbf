#include "common/svg.hpp"

#include <cmath>
#include <cstdio>

namespace syssim {

namespace {

// Two decimals (a hundredth of a pixel), trailing zeros dropped, never "-0": deterministic and short.
std::string num(double value) {
  if (std::fabs(value) < 0.005) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text(buffer);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

std::string title_element(const std::string& title) {
  return title.empty() ? "" : "<title>" + xml_escape(title) + "</title>";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {}

void SvgWriter::rect(double x, double y, double w, double h, const std::string& fill,
                     const std::string& title) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
           num(h) + "\" fill=\"" + xml_escape(fill) + "\">" + title_element(title) + "</rect>\n";
}

void SvgWriter::line(double x1, double y1, double x2, double y2, const std::string& stroke,
                     double width) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\" stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"" + num(width) +
           "\"/>\n";
}

void SvgWriter::text(double x, double y, const std::string& content, double size,
                     const std::string& anchor) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) +
           "\" text-anchor=\"" + xml_escape(anchor) + "\">" + xml_escape(content) + "</text>\n";
}

void SvgWriter::circle(double cx, double cy, double r, const std::string& fill,
                       const std::string& title) {
  body_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" +
           xml_escape(fill) + "\">" + title_element(title) + "</circle>\n";
}

void SvgWriter::polyline(const std::vector<std::pair<double, double>>& points,
                         const std::string& stroke) {
  std::string coordinates;
  for (const auto& [x, y] : points) {
    if (!coordinates.empty()) coordinates += ' ';
    coordinates += num(x) + "," + num(y);
  }
  body_ += "<polyline points=\"" + coordinates + "\" fill=\"none\" stroke=\"" +
           xml_escape(stroke) + "\"/>\n";
}

std::string SvgWriter::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width_) + "\" height=\"" +
         num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
         "\" font-family=\"sans-serif\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         body_ + "</svg>\n";
}

}  // namespace syssim
