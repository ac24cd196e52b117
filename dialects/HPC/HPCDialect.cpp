//===- HPCDialect.cpp - hpc dialect registration --------------------------===//
//
// Registers the hpc ops (and their gradients) and materializes folded constants as hpc.constant.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCBuilder.h"

using namespace mlir;
using namespace hpc;

#include "HPC/HPCOpsDialect.cpp.inc"

void HPCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "HPC/HPCOps.cpp.inc"
      >();
  registerGradientModels(getContext());
}

Operation *HPCDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
