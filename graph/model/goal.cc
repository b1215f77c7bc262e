#include "graph/model/goal.h"

#include <cmath>

namespace carflow {
namespace {

unsigned long long ns(double value) { return static_cast<unsigned long long>(std::llround(value)); }

// The label that stands for CAR c's completion.
std::string done_label(const LocalDag& image, CarId c) {
  return "l" + std::to_string(c) + (image.cars[c].kind == CarKind::RecvReduce ? "r" : "");
}

void write_image(const LocalDag& image, const LogGPModel& model, std::ostream& out) {
  const auto gamma = [&](uint64_t s) { return static_cast<double>(s) * model.for_local(s).gamma; };
  out << "rank " << image.image << " {\n";
  for (CarId c = 0; c < image.cars.size(); ++c) {
    const Car& car = image.cars[c];
    out << "l" << c << ": ";
    switch (car.kind) {
      case CarKind::Send:
        out << "send " << car.src.length << "b to " << car.peer << " tag " << car.tag << "\n";
        break;
      case CarKind::Recv:
        out << "recv " << car.dst.length << "b from " << car.peer << " tag " << car.tag << "\n";
        break;
      case CarKind::RecvReduce:
        out << "recv " << car.dst.length << "b from " << car.peer << " tag " << car.tag << "\n";
        out << "l" << c << "r: calc " << ns(gamma(car.dst.length)) << "\n";
        break;
      case CarKind::Reduce:
        out << "calc " << ns(gamma(car.src.length)) << "\n";
        break;
      case CarKind::Copy:
        out << "calc " << ns(static_cast<double>(car.dst.length) * model.for_local(car.dst.length).beta) << "\n";
        break;
      case CarKind::Join:
        out << "calc 0\n";
        break;
    }
  }
  for (CarId c = 0; c < image.cars.size(); ++c) {
    if (image.cars[c].kind == CarKind::RecvReduce) out << "l" << c << "r requires l" << c << "\n";
    for (const Dep& d : image.cars[c].deps) {
      out << "l" << c << " requires " << done_label(image, d.car) << "\n";
    }
  }
  out << "}\n";
}

}  // namespace

void write_goal(const GlobalDag& dag, const LogGPModel& model, std::ostream& out) {
  out << "num_ranks " << dag.images.size() << "\n";
  for (const LocalDag& image : dag.images) {
    out << "\n";
    write_image(image, model, out);
  }
}

void write_goal(const GlobalDag& dag, const LogGPParams& costs, std::ostream& out) {
  LogGPModel model;
  model.inter = model.intra = costs;
  write_goal(dag, model, out);
}

}  // namespace carflow
