// Aggregation as a DAG merge (GASNet collectives notes v1.7, "CURRENT PROPOSAL": AGGREGATE).
//
// Consecutive initiations on one team with CF_COLL_AGGREGATE, closed by one
// without it, form one aggregate: one DAG per image, one handle, one entry
// and one exit synchronization (the sync transform is applied once, to the
// merged DAG). Each CAR keeps its member index (Car::member), which picks
// the member's user buffers and reduction op and the sequence number its
// messages travel under, so members' messages never meet by accident.
//
// Members in one group have equal specs (same kind, algorithm, sizes, root,
// team), so every image generated the same messages for each of them.
// Their messages between the same pair of images at the same point (same
// peer and tag) are coalesced into one: COPY CARs pack the members' bytes
// into a temp slot, one SEND moves it, and COPY (or, for RECV_REDUCE,
// REDUCE) CARs unpack it. Because the group's DAGs are isomorphic, merging
// corresponding CARs cannot create a cycle.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/car.h"

namespace carflow {

struct AggregateMember {
  LocalDag dag;            // this image's DAG of the member, without a sync transform
  uint32_t group = 0;      // the index of the first member with an equal spec
  uint32_t elem_size = 1;  // the member's element size (REDUCE shapes)
};

// The merged DAG of `members` (at least one, at most kMaxAggregateMembers,
// all for the same image and team). Returns the merged DAG with
// LocalDag::members filled; it has no sync CARs of its own.
LocalDag merge_aggregate(std::vector<AggregateMember> members);

}  // namespace carflow
