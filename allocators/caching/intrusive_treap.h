// An intrusive ordered set (a treap with parent links): the nodes carry their own links, so
// insert and erase never allocate. Iteration order is the order of Less, exactly like a
// std::set<Node*, Less>; only the shape of the tree is randomized (deterministically).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gmb::caching {

// Node must have: Node* t_left; Node* t_right; Node* t_parent; std::uint32_t t_prio;
// Less must provide bool operator()(const Node*, const Node*) and
// bool operator()(const Node*, const Key&) for lower_bound.
template <class Node, class Less>
class IntrusiveTreap {
 public:
  bool empty() const { return root_ == nullptr; }
  std::size_t size() const { return size_; }

  Node* first() const { return root_ ? leftmost(root_) : nullptr; }
  Node* last() const {
    Node* n = root_;
    if (n)
      while (n->t_right) n = n->t_right;
    return n;
  }

  static Node* next(Node* n) {
    if (n->t_right) return leftmost(n->t_right);
    while (n->t_parent && n == n->t_parent->t_right) n = n->t_parent;
    return n->t_parent;
  }
  static Node* prev(Node* n) {
    if (n->t_left) {
      n = n->t_left;
      while (n->t_right) n = n->t_right;
      return n;
    }
    while (n->t_parent && n == n->t_parent->t_left) n = n->t_parent;
    return n->t_parent;
  }

  // First node not less than key (nullptr: none).
  template <class Key>
  Node* lower_bound(const Key& key) const {
    Node* result = nullptr;
    Node* cur = root_;
    Less less;
    while (cur) {
      if (less(cur, key)) {
        cur = cur->t_right;
      } else {
        result = cur;
        cur = cur->t_left;
      }
    }
    return result;
  }

  void insert(Node* n) {
    n->t_left = n->t_right = nullptr;
    seed_ ^= seed_ << 13;
    seed_ ^= seed_ >> 17;
    seed_ ^= seed_ << 5;
    n->t_prio = seed_;
    Node* parent = nullptr;
    Node** link = &root_;
    Less less;
    while (*link) {
      parent = *link;
      link = less(n, parent) ? &parent->t_left : &parent->t_right;
    }
    *link = n;
    n->t_parent = parent;
    while (n->t_parent && n->t_parent->t_prio < n->t_prio) rotate_up(n);
    ++size_;
  }

  void erase(Node* n) {
    // Rotate n down until it has at most one child, then splice it out.
    while (n->t_left && n->t_right)
      rotate_up(n->t_left->t_prio > n->t_right->t_prio ? n->t_left : n->t_right);
    Node* child = n->t_left ? n->t_left : n->t_right;
    Node* parent = n->t_parent;
    if (child) child->t_parent = parent;
    if (!parent)
      root_ = child;
    else if (parent->t_left == n)
      parent->t_left = child;
    else
      parent->t_right = child;
    n->t_left = n->t_right = n->t_parent = nullptr;
    --size_;
  }

 private:
  static Node* leftmost(Node* n) {
    while (n->t_left) n = n->t_left;
    return n;
  }

  void rotate_up(Node* x) {
    Node* p = x->t_parent;
    Node* g = p->t_parent;
    if (x == p->t_left) {
      p->t_left = x->t_right;
      if (x->t_right) x->t_right->t_parent = p;
      x->t_right = p;
    } else {
      p->t_right = x->t_left;
      if (x->t_left) x->t_left->t_parent = p;
      x->t_left = p;
    }
    p->t_parent = x;
    x->t_parent = g;
    if (!g)
      root_ = x;
    else if (g->t_left == p)
      g->t_left = x;
    else
      g->t_right = x;
  }

  Node* root_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t seed_ = 0x9e3779b9u;
};

}  // namespace gmb::caching
