// A global DAG as a GOAL schedule, the text LogGOPSim reads (Hoefler,
// Siebert, Lumsdaine, "Group Operation Assembly Language - a flexible way to
// express collective communication", ICPP 2009; LogGOPSim's txt2bin):
//
//   num_ranks P
//   rank r {
//   l0: send 8b to 1 tag 0
//   l1: recv 8b from 1 tag 0
//   l2: calc 0
//   l2 requires l0
//   }
//
// CAR c of an image is label l<c>: SEND and RECV as send / recv, REDUCE,
// COPY and JOIN as calc of their cost in ns (s * gamma, s * beta, 0;
// rounded), and RECV_REDUCE as a recv l<c> and a calc l<c>r that requires
// it (what depends on the CAR requires l<c>r). Dependencies become
// "requires" lines after the operations.
#pragma once

#include <ostream>

#include "graph/car.h"
#include "graph/model/loggp.h"

namespace carflow {

// Writes `dag` with calc costs from the model's gamma and beta (each CAR's
// band). Aggregates' member numbers are not written: GOAL matches by
// (sender, tag) alone.
void write_goal(const GlobalDag& dag, const LogGPModel& model, std::ostream& out);
// The same with one set of costs for every size.
void write_goal(const GlobalDag& dag, const LogGPParams& costs, std::ostream& out);

}  // namespace carflow
