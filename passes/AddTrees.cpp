//===- AddTrees.cpp - sums of many terms, regrouped ------------------------===//

#include "AddTrees.h"

#include <functional>

using namespace mlir;

namespace {

/// Whether `add` adds two values of its own type (no broadcast).
bool sameTypeAdd(hpc::AddOp add) {
  return add.getLhs().getType() == add.getType() && add.getRhs().getType() == add.getType();
}

/// Whether `v` is an inner node of an add-tree of `type`: a same-type add
/// of that type whose only user is another in the same block.
bool innerAdd(Value v, Type type) {
  auto add = v.getDefiningOp<hpc::AddOp>();
  if (!add || add.getType() != type || !sameTypeAdd(add) || !v.hasOneUse())
    return false;
  auto user = dyn_cast<hpc::AddOp>(*v.user_begin());
  return user && user.getType() == type && user->getBlock() == add->getBlock();
}

} // namespace

void hpc::forEachAddTree(Block &block, size_t minLeaves, function_ref<void(AddTree &)> fn) {
  SmallVector<AddOp> roots;
  for (Operation &op : block)
    if (auto add = dyn_cast<AddOp>(op);
        add && sameTypeAdd(add) && !innerAdd(add.getResult(), add.getType()))
      roots.push_back(add);
  for (AddOp root : roots) {
    Type type = root.getType();
    AddTree tree{root, {}, {root}};
    std::function<void(Value)> collect = [&](Value v) {
      if (!innerAdd(v, type)) {
        tree.leaves.push_back(v);
        return;
      }
      auto inner = v.getDefiningOp<AddOp>();
      tree.adds.push_back(inner);
      collect(inner.getLhs());
      collect(inner.getRhs());
    };
    collect(root.getLhs());
    collect(root.getRhs());
    if (tree.leaves.size() >= minLeaves)
      fn(tree);
  }
}

Value hpc::sumInOrder(OpBuilder &b, Location loc, Type type, ArrayRef<Value> terms) {
  Value sum;
  for (Value t : terms)
    sum = sum ? AddOp::create(b, loc, type, sum, t).getResult() : t;
  return sum;
}

void hpc::replaceAddTree(AddTree &tree, Value sum) {
  tree.root.getResult().replaceAllUsesWith(sum);
  for (Operation *op : tree.adds) // each before its operands' adds
    op->erase();
}
