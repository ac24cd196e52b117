//===- Bf16Data.cpp - f32 weights and constants stored as bf16 ------------===//
//
// The compile-time f32 -> bf16 conversion of weights and constants that
// hpc-autocast and hpc-fuse-epilogues share (Bf16Data.h).
//
//===----------------------------------------------------------------------===//

#include "Bf16Data.h"

#include "hpc/Target/ProgramPlan.h"

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cstring>

using namespace mlir;

uint16_t hpc::bf16Bits(uint32_t f32) {
  if ((f32 & 0x7fffffffu) > 0x7f800000u)
    return uint16_t(((f32 >> 16) & 0x8000u) | 0x7fc0u);
  return uint16_t((f32 + 0x7fffu + ((f32 >> 16) & 1u)) >> 16);
}

/// f32 data as bf16 data of `type`; null when the data cannot be read.
static ElementsAttr bf16Data(ElementsAttr value, RankedTensorType type, StringRef name) {
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat()) {
    float f = dense.getSplatValue<APFloat>().convertToFloat();
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    APFloat b(APFloat::BFloat(), APInt(16, hpc::bf16Bits(bits)));
    return DenseElementsAttr::get(type, b);
  }
  FailureOr<std::string> bytes = hpc::elementBytesOf(value);
  if (failed(bytes) || int64_t(bytes->size()) != type.getNumElements() * 4)
    return {};
  std::string out(bytes->size() / 2, '\0');
  for (size_t i = 0, n = bytes->size() / 4; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes->data() + 4 * i, 4);
    uint16_t half = hpc::bf16Bits(bits);
    std::memcpy(out.data() + 2 * i, &half, 2);
  }
  return hpc::elementsFromBytes(type, name, ArrayRef<char>(out.data(), out.size()));
}

Value hpc::storeAsBf16(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType())
                  .clone(BFloat16Type::get(op->getContext()));
  OpBuilder b(op->getContext());
  b.setInsertionPointAfter(op);
  Operation *made = nullptr;
  if (auto w = dyn_cast<hpc::WeightOp>(op)) {
    ElementsAttr data;
    if (std::optional<ElementsAttr> value = w.getValue())
      if (!(data = bf16Data(*value, type, w.getName())))
        return {};
    made = hpc::WeightOp::create(b, w.getLoc(), type, w.getNameAttr(), data);
  } else {
    auto c = cast<hpc::ConstantOp>(op);
    ElementsAttr data = bf16Data(c.getValue(), type, "constant");
    if (!data)
      return {};
    made = hpc::ConstantOp::create(b, c.getLoc(), data);
  }
  for (NamedAttribute attr : op->getDiscardableAttrs())
    made->setAttr(attr.getName(), attr.getValue());
  return made->getResult(0);
}

bool hpc::movesDataOnly(Operation *op) {
  return isa<ReshapeOp, TransposeOp, SqueezeOp, UnsqueezeOp, SliceOp, ExpandOp, SplitOp,
             dist::AllSliceOp>(op);
}
