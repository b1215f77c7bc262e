// An intrusive hash table of pending messages keyed by (source image, MsgKey).
//
// Nodes carry their own `next` link, so inserting and taking allocate
// nothing. Keys are unique per message (exact tags), but equal keys are kept
// in arrival order anyway, as MPI's matching order requires.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transports/transport.h"

namespace carflow {

inline uint64_t hash_msg_key(uint32_t src, const MsgKey& key) {
  uint64_t h = (uint64_t{key.team} << 32 | key.seq) * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t{src} << 32 | key.tag) * 0xC2B2AE3D27D4EB4Full;
  return h ^ (h >> 29);
}

// Node needs: Node* next; and KeyOf{}(node) -> std::pair<uint32_t, MsgKey>.
template <typename Node, typename KeyOf>
class KeyTable {
 public:
  explicit KeyTable(uint32_t buckets_log2 = 10) : buckets_(size_t{1} << buckets_log2) {}

  void insert(Node* node) {
    auto [src, key] = KeyOf{}(node);
    Node** link = &buckets_[bucket(src, key)];
    while (*link != nullptr) link = &(*link)->next;
    node->next = nullptr;
    *link = node;
    ++size_;
  }

  Node* take(uint32_t src, const MsgKey& key) {
    for (Node** link = &buckets_[bucket(src, key)]; *link != nullptr; link = &(*link)->next) {
      auto [node_src, node_key] = KeyOf{}(*link);
      if (node_src == src && node_key == key) {
        Node* found = *link;
        *link = found->next;
        found->next = nullptr;
        --size_;
        return found;
      }
    }
    return nullptr;
  }

  // The node with this key (it stays in the table), or nullptr.
  Node* find(uint32_t src, const MsgKey& key) const {
    for (Node* n = buckets_[bucket(src, key)]; n != nullptr; n = n->next) {
      auto [node_src, node_key] = KeyOf{}(n);
      if (node_src == src && node_key == key) return n;
    }
    return nullptr;
  }
  bool contains(uint32_t src, const MsgKey& key) const { return find(src, key) != nullptr; }

  // Takes out every node for which pred(node) is true, appending it to *taken.
  template <typename Pred>
  void take_if(Pred pred, std::vector<Node*>* taken) {
    for (Node*& head : buckets_) {
      for (Node** link = &head; *link != nullptr;) {
        if (!pred(*link)) {
          link = &(*link)->next;
          continue;
        }
        Node* found = *link;
        *link = found->next;
        found->next = nullptr;
        --size_;
        taken->push_back(found);
      }
    }
  }

  size_t size() const { return size_; }
  // Forgets every node (the nodes are not owned).
  void clear() {
    std::fill(buckets_.begin(), buckets_.end(), nullptr);
    size_ = 0;
  }

 private:
  size_t bucket(uint32_t src, const MsgKey& key) const {
    return hash_msg_key(src, key) & (buckets_.size() - 1);
  }
  std::vector<Node*> buckets_;
  size_t size_ = 0;
};

}  // namespace carflow
