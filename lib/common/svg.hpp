// A small writer of standalone SVG documents, for the pictures syssim draws (pipeline
// schedules, sweep plots). Coordinates are in pixels, y pointing down as in SVG.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace syssim {

class SvgWriter {
 public:
  // A width x height canvas on a white background.
  SvgWriter(double width, double height);

  // A filled rectangle; a non-empty title becomes its tooltip (<title>).
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1);
  // anchor: "start", "middle" or "end" (SVG text-anchor).
  void text(double x, double y, const std::string& content, double size = 12,
            const std::string& anchor = "start");
  void circle(double cx, double cy, double r, const std::string& fill,
              const std::string& title = "");
  // An open line through the points, not filled.
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke);

  // The whole document: XML declaration, <svg> root with xmlns, the elements in call order.
  std::string str() const;

 private:
  double width_;
  double height_;
  std::string body_;
};

// Text with &, <, >, " and ' replaced by XML entities, usable in content and attributes.
std::string xml_escape(const std::string& text);

}  // namespace syssim
