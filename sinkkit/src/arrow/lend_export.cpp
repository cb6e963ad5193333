// lend_export (picomq/kit/arrow_export.hpp): one export, handed to a consumer more than once.
#include <memory>
#include <vector>

#include "picomq/kit/arrow_export.hpp"

namespace picomq::arrow {
namespace {

// What one lent node owns: its children's and dictionary's structs (the buffers and strings
// belong to the held export, kept alive by `keep`).
template <class Node>
struct Lent {
  std::shared_ptr<const HeldExport> keep;
  std::vector<std::unique_ptr<Node>> children;
  std::vector<Node*> child_pointers;
  std::unique_ptr<Node> dictionary;
};

template <class Node>
void release_lent(Node* node) {
  auto* lent = static_cast<Lent<Node>*>(node->private_data);
  for (Node* child : lent->child_pointers)
    if (child->release) child->release(child);  // a child the consumer moved out is released there
  if (lent->dictionary && lent->dictionary->release) lent->dictionary->release(lent->dictionary.get());
  delete lent;
  node->release = nullptr;
}

template <class Node>
void lend(const Node& source, const std::shared_ptr<const HeldExport>& keep, Node* out) {
  auto lent = std::make_unique<Lent<Node>>();
  lent->keep = keep;
  *out = source;
  for (int64_t i = 0; i < source.n_children; ++i) {
    lent->children.push_back(std::make_unique<Node>());
    lend(*source.children[i], keep, lent->children.back().get());
    lent->child_pointers.push_back(lent->children.back().get());
  }
  out->children = lent->child_pointers.empty() ? nullptr : lent->child_pointers.data();
  if (source.dictionary) {
    lent->dictionary = std::make_unique<Node>();
    lend(*source.dictionary, keep, lent->dictionary.get());
    out->dictionary = lent->dictionary.get();
  }
  out->release = &release_lent<Node>;
  out->private_data = lent.release();
}

}  // namespace

void lend_export(const std::shared_ptr<const HeldExport>& held, ArrowSchema* schema, ArrowArray* array) {
  lend(held->schema, held, schema);
  lend(held->array, held, array);
}

}  // namespace picomq::arrow
